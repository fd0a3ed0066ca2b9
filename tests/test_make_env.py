"""Task configs compose, override and validate as documented."""

from __future__ import annotations

import pytest

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.managers.term_cfg import ObservationTermCfg, RewardTermCfg
from unilab_gpu.paths import list_tasks


def test_tasks_are_listed() -> None:
    assert {"pendulum", "g1_stand"} <= set(list_tasks())
    with pytest.raises(ValueError, match="unknown task 'pendulm'; available: .*'pendulum'"):
        load_task_cfg("pendulm")


def test_overrides_null_and_added_terms() -> None:
    cfg = load_task_cfg(
        "pendulum",
        [
            "rewards.torque=null",
            "rewards.angle.weight=-1.5",
            "+rewards.alive={func: unilab_gpu.envs.mdp.rewards.alive}",
        ],
    )
    assert cfg.rewards["torque"] is None
    assert cfg.rewards["angle"] == RewardTermCfg(
        func="unilab_gpu.tasks.pendulum.terms.angle_from_upright_sq", weight=-1.5
    )
    assert cfg.rewards["alive"].weight == 1.0  # default from the schema
    assert isinstance(cfg.observations["policy"].terms["velocity"], ObservationTermCfg)
    env = make_env("pendulum", num_envs=2, compile=False, overrides=["rewards.torque=null"])
    assert env.reward_manager.term_names == ["angle", "velocity"]


@pytest.mark.parametrize(
    "override,key",
    [
        ("decimaton=3", "decimaton"),
        ("num_envs=many", "num_envs"),
        ("rewards.angle.wieght=1", "rewards.angle.wieght"),
        ("+rewards.extra={func: x, weight: heavy}", "rewards.extra.weight"),
        ("+observations.policy.terms.angle.nosie=1", "observations.policy.terms.angle.nosie"),
    ],
)
def test_bad_overrides_name_the_key(override: str, key: str) -> None:
    with pytest.raises(ValueError, match=f"bad config at '{key}'"):
        load_task_cfg("pendulum", [override])


def test_make_env_arguments_win_over_the_config() -> None:
    env = make_env("pendulum", num_envs=3, compile=False, overrides=["num_envs=7"])
    assert env.num_envs == 3
    env = make_env("pendulum", compile=False, overrides=["num_envs=5"])
    assert env.num_envs == 5


@pytest.mark.parametrize(
    "override,hint",
    [
        ("rewards.angle.params.std=2", "prefix the override with '+': '+rewards.angle.params.std=2'"),
        ("rewards.angle.wieght=1", "did you mean 'rewards.angle.weight'?"),
        ("decimaton=3", "did you mean 'decimation'?"),
        ("+rewards.angle.weight=2", "'rewards.angle.weight' is in the config already: set it without the '+'"),
    ],
)
def test_refused_overrides_say_how_to_fix_them(override: str, hint: str) -> None:
    with pytest.raises(ValueError) as error:
        load_task_cfg("pendulum", [override])
    assert hint in str(error.value)


def test_a_schema_field_gets_no_plus_hint() -> None:
    """``+`` cannot add a field to a typed section, so the hint must not suggest it."""
    with pytest.raises(ValueError) as error:
        load_task_cfg("pendulum", ["sim.modle=x"])
    assert "did you mean 'sim.model'?" in str(error.value) and "prefix" not in str(error.value)
