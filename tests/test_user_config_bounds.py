"""Every YAML a user supplies is read within bounds, Hydra's inputs included: a ``UNILAB_PATH``
robot or task config of nested YAML aliases fails at once in one line, in ``unilab-train`` and in
the keyframe tool, instead of hanging them (issue 60, "Nothing lost" 4)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from script_helpers import SCRIPTS
from test_terrain_deploy import ALIAS_BOMB

from unilab_gpu.paths import USER_PATH_ENV

TIMEOUT_S = 120
"""Far beyond the few seconds a refusal takes; a hang (the defect) fails the test here."""


@pytest.fixture
def bomb_folder(tmp_path):
    """A UNILAB_PATH folder whose robot config ``bomb`` and task config ``bomb_task`` are alias bombs."""
    (tmp_path / "configs" / "robot").mkdir(parents=True)
    (tmp_path / "configs" / "task").mkdir(parents=True)
    (tmp_path / "configs" / "robot" / "bomb.yaml").write_text("model: go2\n" + ALIAS_BOMB)
    return tmp_path


def _run(argv: list[str], user_path) -> subprocess.CompletedProcess:
    env = {**os.environ, USER_PATH_ENV: str(user_path), "OMP_NUM_THREADS": "1"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


def test_unilab_train_refuses_a_bomb_on_the_user_path(bomb_folder) -> None:
    run = _run([sys.executable, "-m", "unilab_gpu.cli.train", "task=go2_velocity", "env.num_envs=1"], bomb_folder)
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert "robot/bomb.yaml expands to" in last and "values through YAML aliases" in last, run.stderr
    assert "Traceback" not in run.stderr


def test_a_task_config_bomb_is_refused_too(tmp_path) -> None:
    (tmp_path / "configs" / "task").mkdir(parents=True)
    (tmp_path / "configs" / "task" / "bomb_task.yaml").write_text("defaults: [go2_velocity]\n" + ALIAS_BOMB)
    run = _run([sys.executable, "-m", "unilab_gpu.cli.train", "task=bomb_task", "env.num_envs=1"], tmp_path)
    assert run.returncode == 2, run.stderr
    assert "task/bomb_task.yaml expands to" in run.stderr.strip().splitlines()[-1], run.stderr


def test_the_keyframe_tool_refuses_a_bomb_robot_config(bomb_folder) -> None:
    run = _run([sys.executable, str(SCRIPTS / "stand_keyframe.py"), "go2", "--config", "bomb"], bomb_folder)
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    err = run.stderr.strip()
    assert "\n" not in err and "bomb.yaml expands to" in err, err


def test_a_user_config_the_projects_hides_is_named(tmp_path, monkeypatch) -> None:
    """The poor-answer class "nonsense accepted": a user's ``go2.yaml`` silently lost to the project's."""
    from unilab_gpu.envs.make_env import load_task_cfg

    (tmp_path / "configs" / "robot").mkdir(parents=True)
    mine = tmp_path / "configs" / "robot" / "go2.yaml"
    mine.write_text("model: go2\nbase_height: 9.0\n")
    monkeypatch.setenv(USER_PATH_ENV, str(tmp_path))
    with pytest.warns(UserWarning, match=r"robot/go2.yaml is not used: .*configs/robot/go2.yaml has the same name"):
        cfg = load_task_cfg("go2_velocity")
    assert cfg.robot.base_height != 9.0  # the project's file is the one read, as the warning says
