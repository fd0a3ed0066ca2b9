"""Robot configs (configs/robot/<name>.yaml, docs/robots.md): choosing a robot replaces the whole
``robot`` section, so nothing of another robot survives Hydra's merge; a robot config that does not
fit its MJCF or its task fails in one line naming the key and the file, before anything is built."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from robot_models import BIPED_POSE, biped_xml
from script_helpers import SCRIPTS

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.paths import USER_PATH_ENV

BIPED = {
    "model": "biped",
    "torso_body": "torso",
    "imu": {"gyro": "imu_gyro", "velocimeter": "imu_linvel"},
    "base_height": 0.45,
    "fall_height": 0.25,
    "pose_weights": {".*_hip": 0.1, ".*_knee": 0.1, ".*_ankle": 1.0},
    "feet": {
        "sites": ["left_sole", "right_sole"],
        "bodies": ["left_foot", "right_foot"],
        "geoms": [".*_(heel|toe)"],
        "swing_height": 0.05,
    },
}
G1_NAMES = ("g1", "pelvis", "torso_link", "ankle_roll", "shoulder", "waist", "_foot_")


@pytest.fixture(scope="module")
def biped_mjcf(tmp_path_factory) -> str:
    """The biped's MJCF with the stand keyframe the keyframe tool computes."""
    path = tmp_path_factory.mktemp("biped") / "scene.xml"
    path.write_text(biped_xml())
    tool = [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), "--pose", *BIPED_POSE]
    return biped_xml(subprocess.run(tool, capture_output=True, text=True, check=True).stdout)


@pytest.fixture
def user_folder(tmp_path, monkeypatch, biped_mjcf) -> Path:
    """A UNILAB_PATH folder with the biped (MJCF, robot config) and a task inheriting g1_velocity."""
    (tmp_path / "assets" / "robots" / "biped").mkdir(parents=True)
    (tmp_path / "assets" / "robots" / "biped" / "scene.xml").write_text(biped_mjcf)
    (tmp_path / "configs" / "robot").mkdir(parents=True)
    (tmp_path / "configs" / "task").mkdir()
    (tmp_path / "configs" / "robot" / "biped.yaml").write_text(yaml.safe_dump(BIPED))
    (tmp_path / "configs" / "task" / "biped_from_g1.yaml").write_text(
        "defaults:\n  - g1_velocity\n  - override /robot@robot: biped\n  - _self_\n"
    )
    monkeypatch.setenv(USER_PATH_ENV, str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(("task", "overrides"), [("biped_from_g1", []), ("g1_velocity", ["robot=biped"])])
def test_another_robot_leaves_nothing_of_the_g1(user_folder, task: str, overrides: list[str]) -> None:
    cfg = load_task_cfg(task, overrides)
    # The pose weights are the biped's alone (a recursive merge of dicts would keep the G1's next to them).
    assert cfg.rewards["pose"].params["weights"] == BIPED["pose_weights"]
    robot = dataclasses.asdict(cfg.robot)
    assert robot.pop("keyframe") == "stand" and robot.pop("tracking") is None and robot.pop("mirror_name_pairs") is None
    assert robot.pop("stand") is None  # the MJCF's own key
    assert robot.pop("physics") == dict.fromkeys(("timestep", "iterations", "ls_iterations", "cone", "impratio"))
    assert robot["imu"].pop("site") is robot["imu"].pop("body") is None and robot["imu"].pop("pos") == [0.0] * 3
    assert robot["feet"].pop("condim") is robot["feet"].pop("friction") is None  # the MJCF edits' defaults: none
    assert robot == BIPED
    assert cfg.sim.model == "biped"
    assert cfg.rewards["feet_phase"].params["site_names"] == ["left_sole", "right_sole"]
    assert cfg.terminations["fell"].params["min_height"] == 0.25
    resolved = str(dataclasses.asdict(cfg))
    assert not [name for name in G1_NAMES if name in resolved]


def test_the_g1_tasks_read_the_g1_robot_config() -> None:
    g1 = yaml.safe_load((Path(__file__).parents[1] / "configs" / "robot" / "g1.yaml").read_text())
    for task in ("g1_velocity", "g1_stand", "g1_tracking", "g1_velocity_play", "g1_tracking_play"):
        robot = dataclasses.asdict(load_task_cfg(task).robot)
        assert not any(robot.pop("physics").values())  # the G1 runs its MJCF's options
        assert robot.pop("stand") is None  # the MJCF's own key
        assert [robot["imu"].pop(k) for k in ("site", "body", "pos")] == [None, None, [0.0] * 3]
        assert [robot["feet"].pop(k) for k in ("condim", "friction")] == [None, None]
        assert robot == g1, task


def _write_robot(folder: Path, **changes) -> None:
    robot = {**BIPED, **changes}
    robot = {key: value for key, value in robot.items() if value is not None}
    (folder / "configs" / "robot" / "biped.yaml").write_text(yaml.safe_dump(robot))


def _edit_mjcf(folder: Path, old: str, new: str) -> None:
    path = folder / "assets" / "robots" / "biped" / "scene.xml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


ROBOT_FILE = "configs/robot/biped.yaml"
MJCF_FILE = "assets/robots/biped/scene.xml"

BAD_ROBOT_CONFIGS = {
    # case: (robot config changes, (file named, the rest of the line))
    "body": ({"torso_body": "chest"}, (ROBOT_FILE, "'torso_body': {mjcf} has no body 'chest'")),
    "site": (
        {"feet": {**BIPED["feet"], "sites": ["left_sole", "right_foot"]}},
        (ROBOT_FILE, "'feet.sites': {mjcf} has no site 'right_foot'; close: right_sole"),
    ),
    "sensor": (
        {"imu": {"gyro": "gyro", "velocimeter": "imu_linvel"}},
        (ROBOT_FILE, "'imu.gyro': {mjcf} has no sensor 'gyro'; close: imu_gyro"),
    ),
    "sensor kind": (
        {"imu": {"gyro": "imu_linvel", "velocimeter": "imu_linvel"}},
        (ROBOT_FILE, "'imu.gyro': sensor 'imu_linvel' of {mjcf} is not a <gyro>"),
    ),
    "joint": (
        {"pose_weights": {".*_hip": 0.1, ".*_elbow": 1.0}},
        (ROBOT_FILE, "'pose_weights': {mjcf} has pattern '.*_elbow' matches no joint"),
    ),
    "feet the task needs": (
        {"feet": None},
        (ROBOT_FILE, "gives no 'feet.bodies', which the task reads at 'rewards.feet_orientation.params.body_names'"),
    ),
    "unknown key": ({"torso_bdy": "torso"}, (ROBOT_FILE, "bad key 'torso_bdy': Key 'torso_bdy' not in 'RobotCfg'")),
    "mandatory key left out": (
        {"fall_height": None},
        (ROBOT_FILE, "bad key 'fall_height': Structured config of type `RobotCfg` has missing mandatory value"),
    ),
    "wrong type": (
        {"base_height": "tall"},
        (ROBOT_FILE, "bad key 'base_height': Value 'tall' of type 'str' could not"),
    ),
    "negative base height": (
        {"base_height": -0.5},
        (ROBOT_FILE, "'base_height' must be in (0, 10] m (the root body's height standing), got -0.5"),
    ),
    "fall height above the base": ({"fall_height": 2.0}, (ROBOT_FILE, "'fall_height' must be in [0, base_height = ")),
    "missing MJCF": (
        {"model": "no_such_robot"},
        (ROBOT_FILE, "'model': robot asset 'no_such_robot/scene.xml' not found"),
    ),
    "missing MJCF file": (
        {"model": "/no/such/robot.xml"},
        (ROBOT_FILE, "'model': model file not found: /no/such/robot.xml"),
    ),
}


@pytest.mark.parametrize("case", BAD_ROBOT_CONFIGS)
def test_a_robot_config_that_does_not_fit_fails_naming_key_and_file(user_folder, case: str) -> None:
    changes, (file, message) = BAD_ROBOT_CONFIGS[case]
    _write_robot(user_folder, **changes)
    _fails(user_folder, file, message.format(mjcf=user_folder / MJCF_FILE))


BAD_MJCFS = {
    "no actuators": (
        lambda f: (
            _edit_mjcf(f, "<actuator>", "<!--"),
            _edit_mjcf(f, "</actuator>", "-->"),
            _edit_mjcf(f, "<keyframe>", "<!--"),
            _edit_mjcf(f, "</keyframe>", "-->"),
        ),
        "breaks the robot contract (docs/robots.md), actuators: none",
    ),
    "velocity actuators": (
        lambda f: [
            _edit_mjcf(f, f'<position name="{a}" joint="{a}" kp="30"', f'<velocity name="{a}" joint="{a}"')
            for a in ("left_hip", "left_knee", "left_ankle", "right_hip", "right_knee", "right_ankle")
        ],
        "breaks the robot contract (docs/robots.md), actuators: actuator 'left_hip' is a velocity actuator",
    ),
    "keyframe of the wrong size": (
        lambda f: _edit_mjcf(f, 'ctrl="', 'ctrl="0 '),
        "keyframe 0: invalid ctrl size, expected length 6",
    ),
}


@pytest.mark.parametrize("case", BAD_MJCFS)
def test_an_mjcf_that_breaks_the_contract_fails_naming_the_file(user_folder, case: str) -> None:
    edit, message = BAD_MJCFS[case]
    edit(user_folder)
    _fails(user_folder, MJCF_FILE, message)


def _fails(folder: Path, file: str, message: str) -> None:
    before = sorted(folder.rglob("*"))
    with pytest.raises(ValueError) as error:
        make_env("biped_from_g1", num_envs=2, compile=False)
    line = str(error.value)
    assert "\n" not in line
    assert line.startswith("task 'biped_from_g1': ") and str(folder / file) in line and message in line, line
    assert sorted(folder.rglob("*")) == before  # nothing written


def test_a_user_path_that_is_no_folder_is_named(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(USER_PATH_ENV, str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match=f"^{USER_PATH_ENV}: '{tmp_path / 'nope'}' is not a folder$"):
        load_task_cfg("g1_stand")


def test_a_user_path_without_tasks_composes_without_warnings(tmp_path, monkeypatch) -> None:
    # A folder that adds only a robot config (no configs/task/), and one that adds only MJCFs.
    (tmp_path / "robots_only" / "configs" / "robot").mkdir(parents=True)
    (tmp_path / "robots_only" / "configs" / "robot" / "biped.yaml").write_text(yaml.safe_dump(BIPED))
    (tmp_path / "assets_only" / "assets" / "robots").mkdir(parents=True)
    project_only = load_task_cfg("g1_stand")
    monkeypatch.setenv(USER_PATH_ENV, f"{tmp_path / 'robots_only'}{os.pathsep}{tmp_path / 'assets_only'}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Hydra's "path=... is not available" fails the test
        cfg = load_task_cfg("g1_stand")
    assert cfg == project_only  # the folders add no task, so the task is the project's own


def test_an_unknown_robot_lists_the_robot_configs(user_folder) -> None:
    with pytest.raises(ValueError) as error:
        load_task_cfg("g1_stand", ["robot=bipedal"])
    line = str(error.value)
    assert line.startswith("task 'g1_stand': no robot config 'bipedal.yaml' in ") and "\n" not in line
    assert str(user_folder / "configs" / "robot") in line and "robots: ['biped', 'g1'" in line
