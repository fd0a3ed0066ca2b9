"""unilab_gpu.doctor.compiled_eager (gpu_check's block before the compiled training run): the
compiled step against the eager one, on the CPU here; its report, its refusals."""

from __future__ import annotations

import json

import pytest

from unilab_gpu.doctor import compiled_eager


@pytest.mark.slow
def test_the_compiled_pendulum_step_equals_the_eager_one_over_steps_with_resets(tmp_path) -> None:
    out = tmp_path / "compiled_eager.json"
    args = ["--device", "cpu", "--tasks", "pendulum", "--num-envs", "4", "--steps", "24", "--out", str(out)]
    assert compiled_eager.main(args) == 0
    report = json.loads(out.read_text())
    (check,) = report["checks"]
    assert report["complete"] is True and report["interrupted"] is None
    assert check["name"] == "compiled equals eager: pendulum" and check["status"] == "pass", check["detail"]
    # 0.5 s episodes of 50 ms steps: every row ends twice in 24 steps
    assert check["data"]["episode_ends"] >= 8 and check["data"]["steps_with_resets"] >= 2
    assert all(diff <= 1e-4 for diff in check["data"]["max_abs_diff"].values())
    assert check["data"]["captured"] == {"eager": False, "compiled": False}  # no CUDA graph on a CPU


def test_unknown_tasks_and_empty_runs_are_refused_in_one_line(tmp_path) -> None:
    out = str(tmp_path / "r.json")
    with pytest.raises(SystemExit, match=r"--tasks: unknown \['go3'\]; available: \["):
        compiled_eager.main(["--device", "cpu", "--tasks", "go3", "--out", out])
    with pytest.raises(SystemExit, match="--num-envs and --steps must be >= 1, got 4 and 0"):
        compiled_eager.main(["--device", "cpu", "--num-envs", "4", "--steps", "0", "--out", out])
    assert not (tmp_path / "r.json").exists()
