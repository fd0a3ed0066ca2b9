"""``env.describe()``: the headline and the term table, printed at construction when verbose."""

from __future__ import annotations

import pytest

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.sim.device import set_warp_verbose

OVERRIDES = [
    "+observations.policy.terms.velocity.history=3",
    "+observations.policy.terms.velocity.noise={kind: uniform, low: -0.1, high: 0.2}",
    "+observations.policy.terms.velocity.clip=[-4.0,4.0]",
    "+events.kick={func: env_test_terms.record_staged, mode: interval, interval_range_s: [1.0, 2.5]}",
]


def _rows(text: str, title: str) -> dict[str, list[str]]:
    """The rows of the table under ``title``: first cell -> the other cells."""
    lines = text.splitlines()
    start = lines.index(title) + 2  # skip the title and the header
    rows = {}
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        name, *cells = line.split()
        rows[name] = cells
    return rows


@pytest.fixture
def verbose_env(monkeypatch, capsys):
    monkeypatch.setenv("UNILAB_VERBOSE", "1")
    try:
        env = make_env("pendulum", num_envs=2, compile=False, overrides=OVERRIDES)
    finally:
        set_warp_verbose(False)  # Warp's log level is process-wide
    return env, capsys.readouterr().out


def test_verbose_construction_prints_the_term_table_that_matches_the_config(verbose_env) -> None:
    env, printed = verbose_env
    text = env.describe()
    assert printed.strip().endswith(text) and text.splitlines()[0] == env.headline()
    cfg = env.cfg
    width = env.observation_manager.obs["policy"].shape[1]  # 2 (cos, sin) + 3 x 1 (velocity history)
    assert width == 5 and f"observations.policy ({width})" in text.splitlines()
    obs = _rows(text, f"observations.policy ({width})")
    assert obs["angle"] == ["2", "1", "-", "-", "1", cfg.observations["policy"].terms["angle"].func]
    func = "unilab_gpu.envs.mdp.observations.joint_vel"
    assert obs["velocity"] == ["1", "3", "U[-0.1,", "0.2]", "[-4,", "4]", "0.125", func]
    rewards = _rows(text, "rewards (weight x term x step_dt)")
    assert {name: float(cells[0]) for name, cells in rewards.items()} == {
        name: term.weight for name, term in cfg.rewards.items()
    }
    assert _rows(text, "terminations")["time_out"][:2] == ["time-out", "unilab_gpu.envs.mdp.terminations.time_out"]
    events = _rows(text, "events")
    assert events["random_start"][0] == "reset" and events["kick"][:3] == ["interval", "1-2.5", "s"]
    assert "commands: none" in text.splitlines()
    func = "unilab_gpu.envs.mdp.actions.ActuatorCtrlAction"
    assert _rows(text, f"actions ({env.action_dim})")["action"] == ["actuator_ctrl", "[-1,", "1]", func]


def test_quiet_construction_prints_the_headline_only(capsys) -> None:
    env = make_env("pendulum", num_envs=2, compile=False)
    assert capsys.readouterr().out.strip().splitlines() == [env.headline()]
    env = make_env("pendulum", num_envs=2, compile=False, announce=False)
    assert capsys.readouterr().out == ""
