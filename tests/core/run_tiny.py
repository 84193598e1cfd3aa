"""Run the tiny test configuration in a child process: python tests/core/run_tiny.py RUN_DIR CACHE_DIR [key=value ...]."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rlvr_scaling.run import train  # noqa: E402
from tests.conftest import tiny_config  # noqa: E402

if __name__ == "__main__":
    overrides = dict(arg.split("=", 1) for arg in sys.argv[3:])
    cfg = tiny_config(sys.argv[2], **{k: int(v) for k, v in overrides.items()})
    print(train(cfg, Path(sys.argv[1]), log=lambda *_: None))
