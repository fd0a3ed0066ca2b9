"""scripts/gpu_check.sh fails loudly where CUDA is unusable, and so does ``pytest -m gpu`` under it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def test_gpu_check_stops_with_an_error_before_running_anything_without_cuda(tmp_path) -> None:
    env = {**CPU_ONLY, "OUT": str(tmp_path), "PYTHON": sys.executable}
    run = subprocess.run(
        ["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "sees no CUDA device" in run.stdout + run.stderr
    assert "CUDA is not usable here; nothing else was run" in (tmp_path / "summary.txt").read_text()
    assert not (tmp_path / "doctor.json").exists()


def test_required_gpu_tests_error_instead_of_skipping_without_cuda() -> None:
    args = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/test_capture.py"]
    run = subprocess.run(args, cwd=ROOT, env={**CPU_ONLY, "UNILAB_REQUIRE_GPU": "1"}, capture_output=True, text=True)
    assert (
        run.returncode != 0 and "UNILAB_REQUIRE_GPU=1 but torch sees no usable CUDA device" in run.stderr + run.stdout
    )
    run = subprocess.run(args, cwd=ROOT, env=CPU_ONLY, capture_output=True, text=True)
    assert run.returncode == 0 and "skipped" in run.stdout  # without the flag: skips, as on CI
