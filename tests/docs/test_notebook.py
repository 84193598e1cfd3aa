"""``docs/analysis_api.ipynb`` is executed (nbclient, a real IPython kernel) so it cannot rot.

With no study folder (``RLVR_STUDY`` pointing nowhere) the notebook writes its own small synthetic sweep
and redoes the α/γ against η_ref figure from :mod:`analysis.api`. The kernel is this interpreter: a
kernel spec written for the test and found first on ``JUPYTER_PATH``, so a ``python3`` kernel of
another environment on the machine cannot be picked up instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "analysis_api.ipynb"


def test_the_stored_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.timeout(300)
def test_the_api_notebook_runs_and_draws_the_main_figure(tmp_path: Path, monkeypatch):
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "test", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("RLVR_STUDY", str(tmp_path / "no-study-here"))
    monkeypatch.setenv("RLVR_NOTEBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=240, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "24 runs read, 0 skipped" in text and str(tmp_path / "out" / "synthetic-study") in text
    # the exponents table lists both conditions and all three clocks
    tables = [o.data["text/plain"] for o in outputs if o.output_type == "execute_result"]
    assert any("lr.ref_lr=3e-06" in t and "lr.ref_lr=3e-05" in t and "failure" in t for t in tables)
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(images) == 1
    assert (tmp_path / "out" / "alpha_gamma_vs_eta_ref.png").is_file()
