"""A concise progress display: responses, reward, accuracy, learning rate, responses/s.

A live ``rich`` bar on a terminal; plain lines (one per evaluation) when the output is a file, as under
SLURM or a multirun, so logs stay readable.
"""

from __future__ import annotations

import sys
from typing import Any


class ProgressDisplay:
    def __init__(self, total_responses: int, enabled: bool = True, log=print):
        self.log = log
        self.total = total_responses
        self.bar = None
        self.live = enabled and sys.stdout.isatty()
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("[bold]responses"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                transient=False,
            )
            self.task = self.bar.add_task("train", total=total_responses, stats="")
            self.bar.start()
        self.fields: dict[str, Any] = {}

    def update(self, responses: int, **fields: Any) -> None:
        self.fields.update({k: v for k, v in fields.items() if v is not None})
        if self.bar is not None:
            f = self.fields
            stats = " ".join(
                part
                for part in (
                    f"reward {f['reward']:.3f}" if "reward" in f else "",
                    f"acc {f['accuracy']:.3f}" if "accuracy" in f else "",
                    f"lr {f['lr']:.2g}" if "lr" in f else "",
                    f"{f['rate']:.0f} resp/s" if "rate" in f else "",
                )
                if part
            )
            self.bar.update(self.task, completed=min(responses, self.total), stats=stats)

    def line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text)
        else:
            self.log(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
