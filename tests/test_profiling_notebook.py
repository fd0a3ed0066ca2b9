"""``docs/profiling.ipynb`` runs end to end on CPU (small sizes), so it cannot rot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extra")
nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "profiling.ipynb"
SMALL = 'TASK = "g1_stand"\nNUM_ENVS = 4\nSIZES = [2, 4]\nSTEPS = 4\nWARMUP = 1\nMODES = ["eager"]\n'


@pytest.mark.slow  # about 20 s, most of it the kernel importing torch and Warp
def test_notebook_executes_on_cpu(monkeypatch) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    params[0].source = SMALL
    # The kernel inherits the environment: find the package, stay off any GPU, one thread.
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": ROOT}})
    client.execute()

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "task g1_stand on cpu, modes ['eager']" in text
    assert "4 envs on cpu (eager), 4 steps" in text  # the phase table
    for phase in ("actions", "physics", "refresh", "evaluate", "reset", "observe", "overhead ratio"):
        assert phase in text
    assert text.count("env-steps/s, overhead ratio") == 2  # one line per size of the sweep
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(images) == 2  # the phase breakdown and the throughput chart
