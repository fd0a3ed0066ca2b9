"""The main job's demo: it steps the G1 and accounts for every millisecond it reports."""

from __future__ import annotations

from unilab_gpu.cli.demo import run


def test_demo_reports_phases_and_keeps_robots_upright(capsys) -> None:
    phases = run("cpu", num_envs=2, steps=5)
    out = capsys.readouterr().out
    assert set(phases) == {"actions", "physics", "refresh"}
    assert all(ms > 0 for ms in phases.values())
    # Physics (4 MJWarp substeps) must dominate a kinematics-only refresh and a tensor copy.
    assert phases["physics"] > phases["refresh"] and phases["physics"] > phases["actions"]
    assert "env-steps/s" in out
    assert "pelvis below 0.5 m in 0 of 2 worlds" in out
