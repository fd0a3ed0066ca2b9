"""``docs/profiling.ipynb`` runs end to end on CPU (small sizes), so it cannot rot."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_helpers import load_script

pytest.importorskip("nbclient", reason="nbclient is in the dev extra")
nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "profiling.ipynb"


def test_the_committed_notebook_shows_a_cpu_run() -> None:
    """A reader of the committed file sees the outputs of a full CPU run: machine, sizes, plots."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "on cpu, modes ['eager', 'compiled']" in text and "machine: " in text and "sizes: " in text
    assert all(o.output_type != "error" for o in outputs) and "Traceback" not in text
    assert sum(o.output_type == "display_data" and "image/png" in o.data for o in outputs) == 2


@pytest.mark.slow  # about 20 s, most of it the kernel importing torch and Warp
def test_notebook_executes_on_cpu(monkeypatch) -> None:
    # The kernel inherits the environment: stay off any GPU, one thread. --small's sizes.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    script = load_script("execute_notebook")
    nb = script.execute(nbformat.read(NOTEBOOK, as_version=4), timeout=120, small=True)

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "task g1_stand on cpu, modes ['eager']" in text
    assert "machine: " in text and "sizes: 4 envs for the phase breakdown, [2, 4] envs for the throughput" in text
    assert "4 envs on cpu (eager), 4 steps" in text  # the phase table
    for phase in ("actions", "physics", "refresh", "evaluate", "reset", "observe", "overhead ratio"):
        assert phase in text
    assert text.count("env-steps/s, overhead ratio") == 2  # one line per size of the sweep
    images = script.plots(nb)  # what --images writes for the README
    assert len(images) == 2  # the phase breakdown and the throughput chart
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in images)
