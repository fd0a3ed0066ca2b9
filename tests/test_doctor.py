"""unilab-doctor on a CPU: what it checks there, what it says it could not, and that it can fail."""

from __future__ import annotations

import json

import pytest

from unilab_gpu.cli.doctor import check_task_step, main
from unilab_gpu.sim.device import resolve_device


def test_cpu_run_audits_every_requested_task_and_the_training_loop(tmp_path, capsys) -> None:
    out = tmp_path / "doctor.json"
    assert main(["--device", "cpu", "--out", str(out), "--tasks", "pendulum", "g1_stand"]) == 0
    report = json.loads(out.read_text())
    checks = {c["name"]: c for c in report["checks"]}
    assert report["verdict"] == "pass" and report["device"] == "cpu"
    for task in ("pendulum", "g1_stand"):
        data = checks[f"step audit: {task}"]["data"]
        assert data["host_sync_ops_per_step"] == 0 and data["host_to_device_copies_per_step"] == 0
        assert data["episodes_ended"] > 0  # the audited steps included resets
    for algo in ("sac", "flashsac"):
        assert checks[f"training loop audit: {algo}"]["data"]["per_iteration_syncs"] == 0
    for name in ("whole step captures", "replay equals eager (deterministic)", "no host sync during replay"):
        assert checks[name]["status"] == "skip" and "no CUDA device" in checks[name]["detail"]
    assert checks["throughput and phases"]["data"]["env_steps_per_s"] > 0
    printed = capsys.readouterr().out
    assert "SKIP   whole step captures" in printed and "PASS in" in printed


@pytest.mark.parametrize(
    "term,kind",
    [
        ("env_test_terms.constant_from_python", "host_to_device_copies_per_step"),
        ("env_test_terms.reads_back", "host_sync_ops_per_step"),
    ],
)
def test_a_term_that_syncs_or_copies_fails_the_step_audit(term: str, kind: str) -> None:
    check = check_task_step("pendulum", resolve_device("cpu"), [f"+rewards.bad={{func: {term}, weight: 1.0}}"])
    assert check.status == "fail"
    assert check.data[kind] == 1.0  # once per step
    assert "env_test_terms.py" in check.data["first_violations"][0]


def test_bad_arguments_are_one_line_errors(tmp_path) -> None:
    with pytest.raises(SystemExit, match="--tasks: unknown \\['nope'\\]"):
        main(["--device", "cpu", "--tasks", "nope"])
    with pytest.raises(SystemExit, match="--out: folder .* does not exist"):
        main(["--device", "cpu", "--out", str(tmp_path / "missing" / "d.json")])
    with pytest.raises(SystemExit, match="--device: device must be"):
        main(["--device", "tpu"])
