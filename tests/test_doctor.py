"""unilab-doctor on a CPU: what it checks there, what it says it could not, that it can fail, and
that its report survives a cut run and a capture that ends the process's use of CUDA."""

from __future__ import annotations

import json

import pytest
import torch

from unilab_gpu.cli.doctor import main
from unilab_gpu.doctor import checks as doctor_checks
from unilab_gpu.doctor import report as report_module
from unilab_gpu.doctor.captured_step import compare_rollouts
from unilab_gpu.doctor.checks import CUDA_CHECKS, run_checks
from unilab_gpu.doctor.report import Check, DoctorReport
from unilab_gpu.doctor.sync_audits import check_task_step, missed_captures
from unilab_gpu.profiling.solver_ab import SPLIT_THRESHOLD, solver_early_exit_ab, split_capture_worth_it
from unilab_gpu.sim.capture import CaptureAbortedError
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE


def test_cpu_run_audits_every_requested_task_and_the_training_loop(tmp_path, capsys) -> None:
    out = tmp_path / "doctor.json"
    # --capture-task: the task of the CUDA physics, capture and replay checks (gpu_check.sh's ROUGH
    # block: go2_velocity_rough) and of the throughput check a CPU runs (here the cheapest task).
    args = ["--device", "cpu", "--out", str(out), "--tasks", "pendulum", "g1_stand"]
    assert main([*args, "--capture-task", "pendulum"]) == 0
    report = json.loads(out.read_text())
    checks = {c["name"]: c for c in report["checks"]}
    assert report["verdict"] == "pass" and report["device"] == "cpu" and report["complete"] is True
    for task in ("pendulum", "g1_stand"):
        data = checks[f"step audit: {task}"]["data"]
        assert data["host_sync_ops_per_step"] == 0 and data["host_to_device_copies_per_step"] == 0
        assert data["episodes_ended"] > 0  # the audited steps included resets
    for algo in ("sac", "flashsac"):
        loop = checks[f"training loop audit: {algo}"]["data"]
        assert loop["per_iteration_syncs"] == 0
        assert loop["update_captured"] is False and loop["env_step_captured"] is False  # CUDA only
    for name in CUDA_CHECKS:
        if name != "throughput and phases":
            assert checks[name]["status"] == "skip" and "no CUDA device" in checks[name]["detail"]
    assert checks["throughput and phases"]["data"]["env_steps_per_s"] > 0
    assert checks["throughput and phases"]["data"]["task"] == "pendulum"
    printed = capsys.readouterr().out
    assert "SKIP   whole step captures" in printed and "PASS in" in printed


def test_an_unknown_capture_task_is_refused(tmp_path) -> None:
    with pytest.raises(SystemExit, match=r"--capture-task: unknown 'go3'; available: \["):
        main(["--device", "cpu", "--out", str(tmp_path / "doctor.json"), "--capture-task", "go3"])


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


def test_a_cut_run_keeps_the_checks_it_finished_and_names_the_one_it_was_in(tmp_path, monkeypatch, capsys) -> None:
    """SIGINT (a budget's cut) during the training-loop audit: the step audit finished before it is
    in the report, which says where it was stopped; the exit status says it was interrupted."""

    def cut(algo, device):
        raise KeyboardInterrupt("SIGINT")

    monkeypatch.setattr(doctor_checks, "check_training_loop", cut)
    out = tmp_path / "doctor.json"
    assert main(["--device", "cpu", "--out", str(out), "--tasks", "pendulum"]) == INTERRUPTED_EXIT_CODE
    report = json.loads(out.read_text())
    assert [c["name"] for c in report["checks"]] == ["step audit: pendulum"]
    assert report["checks"][0]["status"] == "pass"
    assert report["complete"] is False and report["verdict"] == "fail"
    assert report["interrupted"] == "SIGINT during 'training loop audit: sac'"
    assert "INTERRUPTED" in capsys.readouterr().out


def test_the_report_is_on_disk_after_every_check(tmp_path) -> None:
    """Each finished check is in the file before the next one starts (a SIGKILL loses only the
    running one)."""
    out = tmp_path / "doctor.json"
    report = DoctorReport(out, torch.device("cpu"))
    assert json.loads(out.read_text())["checks"] == [] and json.loads(out.read_text())["complete"] is False
    seen = []

    def done(check: Check) -> None:
        report.add(check)
        seen.append([c["name"] for c in json.loads(out.read_text())["checks"]])

    run_checks(torch.device("cpu"), ["pendulum"], 4, compile=False, done=done, starting=report.starting)
    assert seen[0] == ["step audit: pendulum"] and seen[-1][-1] == "throughput and phases"
    assert all(len(later) == len(earlier) + 1 for earlier, later in zip(seen[:-1], seen[1:], strict=True))


def test_a_capture_that_aborts_cuda_fails_its_check_skips_the_rest_and_is_reported(tmp_path, monkeypatch) -> None:
    """CaptureAbortedError is a SystemExit (so no fallback runs on the CUDA state it leaves): the
    doctor records it as the capture check's failure, skips the other CUDA checks and the audits,
    and its report is written with everything measured before."""
    physics = Check("physics only", "info", "1 ms", {"physics_only_env_steps_per_s": 4.0e6})
    monkeypatch.setattr(doctor_checks, "check_physics_only", lambda *args: physics)
    monkeypatch.setattr(doctor_checks, "capture_unsupported_reason", lambda device: None)

    def aborted(*args):
        raise CaptureAbortedError("unilab-gpu: CUDA graph capture failed inside CUDA on cuda:0 (RuntimeError: x)")

    monkeypatch.setattr(doctor_checks, "check_capture", aborted)
    monkeypatch.setattr(report_module, "machine_info", lambda device: {"device": device})  # no CUDA to describe
    out = tmp_path / "doctor.json"
    report = DoctorReport(out, torch.device("cuda", 0))
    checks = run_checks(torch.device("cuda", 0), ["pendulum"], 4096, False, done=report.add)
    written = json.loads(out.read_text())
    assert [c["name"] for c in written["checks"]] == list(CUDA_CHECKS) == [c.name for c in checks]
    by_name = {c["name"]: c for c in written["checks"]}
    assert by_name["physics only"]["data"]["physics_only_env_steps_per_s"] == 4.0e6
    assert by_name["whole step captures"]["status"] == "fail"
    assert "capture failed inside CUDA" in by_name["whole step captures"]["detail"]
    assert all(by_name[name]["status"] == "skip" for name in CUDA_CHECKS[2:])
    assert written["verdict"] == "fail" and written["failed"] == ["whole step captures"]


def _rollout(ended_at: list[int], steps: int = 6, envs: int = 3) -> dict[str, torch.Tensor]:
    ended = torch.zeros(steps, envs)
    for step in ended_at:
        ended[step, 1] = 1.0
    return {"reward": torch.arange(steps * envs, dtype=torch.float32).reshape(steps, envs), "ended": ended}


def test_replay_equals_eager_needs_resets_inside_the_compared_steps() -> None:
    equal = compare_rollouts(_rollout([2, 4]), _rollout([2, 4]))
    assert equal.status == "pass" and equal.data["steps_with_resets"] == 2 and equal.data["episode_ends"] == 2
    no_resets = compare_rollouts(_rollout([]), _rollout([]))
    assert no_resets.status == "fail" and "no step of the comparison reset a row" in no_resets.detail
    differ = _rollout([2, 4])
    differ["reward"][3, 0] += 1e-3
    worse = compare_rollouts(_rollout([2, 4]), differ)
    assert worse.status == "fail" and worse.data["max_abs_diff"]["reward"] == pytest.approx(1e-3, rel=1e-3)


def test_a_relative_tolerance_scales_with_the_eager_value() -> None:
    # compiled == eager: |compiled - eager| <= 1e-4 + 1e-4 |eager|. The reward at [5, 2] is 17:
    # 1.5e-3 off is within 1e-4 + 1.7e-3; the same offset on the reward 1 at [0, 1] is not.
    eager = _rollout([2, 4])
    near = _rollout([2, 4])
    near["reward"][5, 2] += 1.5e-3
    check = compare_rollouts(eager, near, name="compiled equals eager: x", tolerance=1e-4, rtol=1e-4)
    assert check.status == "pass" and check.name == "compiled equals eager: x"
    assert check.detail.startswith("max |compiled - eager| over 6 steps")
    far = _rollout([2, 4])
    far["reward"][0, 1] += 1.5e-3
    assert compare_rollouts(eager, far, tolerance=1e-4, rtol=1e-4).status == "fail"
    assert compare_rollouts(eager, near).status == "fail"  # the replay check stays absolute, 1e-5


def test_split_capture_verdict_follows_the_five_percent_bar() -> None:
    assert SPLIT_THRESHOLD == 0.05
    saving, split = split_capture_worth_it(9.0, 10.0)
    assert saving == pytest.approx(0.1) and split
    saving, split = split_capture_worth_it(9.8, 10.0)
    assert saving == pytest.approx(0.02) and not split


def test_solver_ab_times_both_loops_on_the_same_walking_and_resetting_worlds_on_cpu() -> None:
    """On CPU MJWarp ignores graph_conditional, so both arms run the same loop from the same seeded
    start with the same random actions: their final states agree bit for bit, rows were forced to
    end every timed step, and the mechanics (timing, iterations) are real. The task (and so the
    robot and its substeps) is the one asked for, not a fixed G1."""
    result = solver_early_exit_ab("pendulum", 4, "cpu", steps=3, warmup=1)
    assert result["skipped"] is None and result["device"] == "cpu" and result["task"] == "pendulum"
    assert result["substeps"] == 5  # configs/task/pendulum.yaml: decimation 5 (the G1 tasks have 4)
    assert result["early_exit_ms"] > 0 and result["fixed_ms"] > 0
    assert 1 <= result["fixed_mean_iterations"] <= result["max_iterations"]
    assert result["early_exit_mean_iterations"] == result["fixed_mean_iterations"]
    assert result["resets_per_step"] == 1
    assert result["fixed_episodes_ended"] >= 4  # one forced end per step, warm-up included
    assert result["early_exit_episodes_ended"] == result["fixed_episodes_ended"]
    assert result["qpos_max_diff"] == 0.0
    assert result["saving"] == pytest.approx(1 - result["early_exit_ms"] / result["fixed_ms"])


def test_the_solver_ab_and_its_warm_walk_run_on_the_capture_task(monkeypatch) -> None:
    """The A/B follows --capture-task (gpu_check's ROUGH block: go2_velocity_rough), and the warm
    tool walks the same env, forced resets and solver setting included."""
    from unilab_gpu.doctor import checks, warm

    seen = []
    monkeypatch.setattr(checks, "check_solver_ab", lambda task, n, device: seen.append(task) or Check("s", "info", ""))
    monkeypatch.setattr(checks, "check_physics_only", lambda task, n, device: Check("physics only", "info", ""))
    recorded: list = []
    checks._run_cuda_checks(  # on the CPU capture is unsupported: physics, then straight to the A/B
        "go2_velocity_rough", torch.device("cpu"), 8, False, lambda name, fn: recorded.append(fn()), recorded.append
    )
    assert seen == ["go2_velocity_rough"]

    import unilab_gpu.profiling.solver_ab as solver_ab

    built = []
    original = solver_ab.solver_arm_env

    def spy(task, num_envs, device, arm, seed=0):
        env = original(task, num_envs, device, arm, seed)
        built.append((task, arm, bool(env.sim.model.opt.graph_conditional), "forced_resets" in env.cfg.terminations))
        return env

    monkeypatch.setattr(solver_ab, "solver_arm_env", spy)
    for name in ("solver_early_exit", "solver_fixed"):
        warm.walk(name, "cpu", "pendulum", 2)
    assert built == [("pendulum", "early_exit", True, True), ("pendulum", "fixed", False, True)]


def test_a_training_loop_audit_fails_when_a_requested_capture_did_not_happen() -> None:
    # On CUDA the audit asks for the captured env step and update: an uncaptured loop is not what it
    # vouches for, however few syncs it had.
    assert missed_captures({"env_step_captured": True, "update_captured": True}) == []
    assert missed_captures({"env_step_captured": True, "update_captured": False}) == ["update"]
    assert missed_captures({"env_step_captured": False, "update_captured": False}) == [
        "env step",
        "update",
    ]
