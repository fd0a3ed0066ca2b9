"""Overrides that name a key no config defines (issue 46, defect 1): refused in one line naming the
key, with a close match, at the train level and inside ``env.overrides``, ``+`` or not; Hydra's
``+`` would otherwise add a key nothing reads and the run would go on with the default."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from omegaconf import open_dict
from test_cli_train import TINY

from unilab_gpu.cli.train import main
from unilab_gpu.envs.make_env import load_task_cfg
from unilab_gpu.rl.agents import algo_config
from unilab_gpu.training.config import ConfigError, compose_train_config

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "+commands.motion.params.motion_files=[no/such.npz]",
            "names 'commands', which no key of the train config defines (task settings go in env.overrides: "
            "\"env.overrides=['commands.motion.params.motion_files=[no/such.npz]']\")",
        ),
        ("commands.motion.params.motion_files=[a.npz]", "names 'commands', which no key of the train config"),
        ("+terrain.num_levels=0", "names 'terrain', which no key of the train config defines"),
        ("terrain=rough", "\"env.overrides=['terrain=rough']\""),
        (
            "+tota_env_steps=5",
            "names 'tota_env_steps', which no key of the train config defines (did you mean 'total_env_steps'?",
        ),
        ("eval.evry=0", "(did you mean 'eval.every'?"),
    ],
)
def test_train_override_of_an_unknown_key_is_refused_naming_it(tmp_path, capsys, override, message):
    assert main([*TINY, "total_env_steps=8", f"run_root={tmp_path}", override]) == 2
    assert message in _error(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("task", "override", "message"),
    [
        (
            "g1_tracking",
            "+episode_lenght_s=5",
            "adds 'episode_lenght_s', which no field of the task config defines (did you mean 'episode_length_s'?",
        ),
        ("go2_velocity_rough", "+terrain.num_level=0", "(did you mean 'terrain.num_levels'?"),
        ("g1_tracking", "+sim.foo=1", "adds 'sim.foo', which no field of the task config defines"),
        ("g1_tracking", "+robot.bas_height=1", "(did you mean 'robot.base_height'"),
        ("g1_tracking", "+actions.kind=joint_position", "'actions.kind' is the old form of the action config"),
        (
            "go2_velocity",
            "+terrain.num_levels=0",
            "sets a key of 'terrain', which is null in this task: pick one first, e.g. 'terrain=rough'",
        ),
    ],
)
def test_task_override_adding_a_key_no_field_defines_is_refused(task, override, message):
    with pytest.raises(ValueError) as error:
        load_task_cfg(task, [override])
    assert message in str(error.value) and "\n" not in str(error.value)


def test_task_override_adding_a_term_or_setting_a_known_key_still_works():
    cfg = load_task_cfg(
        "g1_tracking",
        ["+rewards.extra={func: unilab_gpu.envs.mdp.rewards.alive, weight: 2.0}", "++episode_length_s=3"],
    )
    assert cfg.rewards["extra"].weight == 2.0 and cfg.episode_length_s == 3.0


def test_unknown_train_key_inside_env_overrides_is_refused_through_unilab_train(tmp_path, capsys):
    assert main([*TINY, "total_env_steps=8", f"run_root={tmp_path}", "env.overrides=['+episode_lenght_s=5']"]) == 2
    assert "(did you mean 'episode_length_s'?" in _error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_motion_set_command_of_the_tracking_docs_reaches_the_motion_command():
    """The command in docs/tasks/tracking.md, as written, sets the motion set of the env it trains."""
    text = (DOCS / "tasks" / "tracking.md").read_text()
    command = next(c for c in re.findall(r"`(unilab-train [^`]+)`", text) if "motion_files" in c)
    cfg = compose_train_config(shlex.split(command)[1:])
    env_cfg = load_task_cfg(cfg.task, list(cfg.env.overrides))
    params = env_cfg.commands["motion"].params
    assert list(params["motion_files"]) == ["/data/g1/walks", "/data/g1/dances/**/*.npz"]
    assert list(params["motion_weights"]) == [1, 2]


@pytest.mark.parametrize("override", ["algo.batch_sise=8", "+algo.batch_sise=8"])
def test_an_algo_key_typo_is_refused_by_name_with_or_without_plus(override):
    """Composing names the close key (not Hydra's "use +key" hint); the agent's config refuses an
    unknown key that reaches it another way (a hand-edited config.yaml)."""
    expected = "names 'algo.batch_sise', which the sac algorithm has no key for (did you mean 'algo.batch_size'?"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        compose_train_config(["algo=sac", override])
    cfg = compose_train_config(["algo=sac"])
    with open_dict(cfg):
        cfg.algo.batch_sise = 8
    with pytest.raises(ValueError, match=r"unknown keys \['batch_sise'\]"):
        algo_config(cfg.algo)
    with pytest.raises(ConfigError, match="tota_env_steps"):
        compose_train_config(["+tota_env_steps=5"])


def test_a_name_the_env_does_not_know_is_one_line_without_a_traceback(tmp_path, capsys):
    """The env raises ``KeyError`` for an unknown name; ``unilab-train`` answers it like any bad input."""
    override = "env.overrides=['actions.params.actuator_names=[motor]']"
    assert main([*TINY, "total_env_steps=8", f"run_root={tmp_path}", override]) == 2
    err = _error(capsys)
    assert err.startswith("unilab-train: error: actions.params.actuator_names: unknown actuator name 'motor'"), err
    assert list(tmp_path.iterdir()) == []
