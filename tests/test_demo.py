"""The main job's demo: it steps the G1 and reports numbers that add up."""

from __future__ import annotations

import re

from unilab_gpu.cli.demo import run


def test_demo_reports_consistent_phases_and_keeps_robots_upright(capsys) -> None:
    num_envs, steps = 2, 5
    phases = run("cpu", num_envs=num_envs, steps=steps)
    out = capsys.readouterr().out
    assert set(phases) == {"actions", "physics", "refresh"}
    assert all(ms > 0 for ms in phases.values())
    total_ms = sum(phases.values())
    rate = float(re.search(r"([\d,]+) env-steps/s", out).group(1).replace(",", ""))
    assert abs(rate - num_envs * 1e3 / total_ms) <= 1.0  # printed rounded to 1 env-step/s
    shares = [float(x) for x in re.findall(r"ms/step\s+([\d.]+) %", out)]
    assert len(shares) == 3 and abs(sum(shares) - 100.0) < 0.3
    assert f"pelvis below 0.5 m in 0 of {num_envs} worlds" in out
