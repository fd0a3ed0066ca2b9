"""``scripts/gpu_train_check.py`` (run by gpu_check.sh on CUDA) works end to end on CPU."""

from __future__ import annotations

import json

import pytest
from script_helpers import load_script


def test_cpu_run_writes_a_consistent_report(tmp_path):
    out = tmp_path / "train_check.json"
    tiny = [
        "algo.warmup_steps=2",
        "algo.batch_size=8",
        "algo.updates_per_step=2",
        "algo.buffer_capacity_per_env=16",
        "algo.actor_hidden_dim=8",
        "algo.critic_hidden_dim=8",
        "algo.actor_num_blocks=1",
        "algo.critic_num_blocks=1",
        "algo.num_atoms=11",
    ]
    args = ["--device", "cpu", "--seconds", "5", "--num-envs", "2", "--log-every", "2", "--out", str(out), "--", *tiny]
    returned = load_script("gpu_train_check").main(args)
    report = json.loads(out.read_text())
    assert report == json.loads(json.dumps(returned))
    assert report["device"] == "cpu" and report["algo"] == "flashsac" and report["task"].startswith("g1_")
    assert report["env_steps"] == 2 * report["iterations"] and report["failures"] == []
    assert report["compile"] is False and report["update_mode"] == "eager"  # compile=auto: eager on a CPU
    trend = report["reward_trend"]
    # One point per logging window; the run continued about 5 s past the first one.
    assert len(trend) == report["iterations"] // 2 >= 2
    assert [s for s, _ in trend] == [4 * (i + 1) for i in range(len(trend))]
    assert 5.0 <= report["train_s"] < 5.0 + 30.0
    assert report["env_steps_per_s"] > 0 and report["update_ms"] > 0
    assert set(report["phase_ms"]) == {"act", "env", "replay", "update"}
    # Two updates per iteration fit in the timed iterations' update phase (medians of the same windows).
    assert report["update_ms"] * 2 <= 1.5 * max(report["phase_ms"]["update"], 1e-9) + 1.0


def test_a_run_without_updates_fails_the_check(tmp_path):
    out = tmp_path / "train_check.json"
    never = ["algo.warmup_steps=100000", "algo.batch_size=8", "algo.actor_hidden_dim=8", "algo.critic_hidden_dim=8"]
    never += ["algo.actor_num_blocks=1", "algo.critic_num_blocks=1", "algo.num_atoms=11"]
    args = ["--device", "cpu", "--seconds", "1", "--num-envs", "2", "--log-every", "2", "--out", str(out), "--", *never]
    with pytest.raises(SystemExit, match="FAILED: no update ran"):
        load_script("gpu_train_check").main(args)
    assert json.loads(out.read_text())["failures"][0].startswith("no update ran")


def test_an_existing_report_is_refused_before_the_run(tmp_path, monkeypatch):
    script = load_script("gpu_train_check")
    monkeypatch.setattr(script, "run_check", lambda args: pytest.fail("ran before checking --out"))
    out = tmp_path / "train_check.json"
    out.write_text("kept")
    with pytest.raises(SystemExit, match=rf"^gpu_train_check: error: --out: {out} exists; pass --force to replace it$"):
        script.main(["--device", "cpu", "--out", str(out)])
    assert out.read_text() == "kept"


def test_a_cut_run_keeps_the_logging_points_it_reached(tmp_path, monkeypatch):
    """SIGINT (a budget's cut) after the third logging point: the report of what was measured is
    written (it was on disk after every point already), marked interrupted, exit status 130."""
    script = load_script("gpu_train_check")
    original_log = script.RecordingLogger.log

    def log_then_cut(self, iteration, env_steps, scalars):
        original_log(self, iteration, env_steps, scalars)
        if len(self.points) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(script.RecordingLogger, "log", log_then_cut)
    out = tmp_path / "train_check.json"
    tiny = ["algo.warmup_steps=2", "algo.batch_size=8", "algo.buffer_capacity_per_env=16", "algo.actor_hidden_dim=8"]
    tiny += ["algo.critic_hidden_dim=8", "algo.actor_num_blocks=1", "algo.critic_num_blocks=1", "algo.num_atoms=11"]
    args = [
        "--device",
        "cpu",
        "--seconds",
        "600",
        "--num-envs",
        "2",
        "--log-every",
        "2",
        "--out",
        str(out),
    ]
    with pytest.raises(SystemExit) as stopped:
        script.main([*args, "--", *tiny])
    assert stopped.value.code == 130
    report = json.loads(out.read_text())
    assert report["interrupted"] is True and report["complete"] is True
    assert [step for step, _ in report["reward_trend"]] == [4, 8, 12]


def test_a_run_stopped_before_a_steady_window_is_cut_not_failed(tmp_path):
    """Stopped before its first logging point (``--max-seconds`` spent on the build): no
    throughput (one window's rate would be the compile's), no "no update ran" failure, exit 75."""
    out = tmp_path / "train_check.json"
    tiny = ["algo.batch_size=8", "algo.actor_hidden_dim=8", "algo.critic_hidden_dim=8", "algo.num_atoms=11"]
    args = ["--device", "cpu", "--seconds", "5", "--max-seconds", "0", "--num-envs", "2", "--out", str(out)]
    with pytest.raises(SystemExit) as stopped:
        load_script("gpu_train_check").main([*args, "--", *tiny])
    assert stopped.value.code == load_script("gpu_train_check").CUT_EXIT == 75
    report = json.loads(out.read_text())
    assert report["cut"] is True and report["failures"] == [] and report["steady_windows"] == 0
    assert report["env_steps_per_s"] is None and report["env_steps"] == 0


def test_only_windows_without_a_compile_or_capture_count_for_the_throughput():
    """A window is steady when the capture state at its start equals its end's, and it is not the
    first; the capture of the update (state 1 -> 2 graphs) in window 3 leaves it out."""
    script = load_script("gpu_train_check")
    points = [(k * 10, float(k), {"perf/env_steps_per_s": float(k)}) for k in range(6)]
    states = [(True, False, 0), (True, True, 1), (True, True, 1), (True, True, 2), (True, True, 2), (True, True, 2)]
    assert [s["perf/env_steps_per_s"] for s in script.steady_windows(points, states)] == [2.0, 4.0, 5.0]
    assert script.steady_windows(points[:1], states[:1]) == []  # one point: the compile's window only
