"""The MJCF contract (unilab_gpu.sim.robot_contract, docs/robots.md): every robot folder under
assets/robots/, and under each UNILAB_PATH folder's assets/robots/, keeps it (built as the env
builds it: with the robot config of its name), and a model that breaks one rule is told which, in
one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mujoco
import pytest
from robot_models import BIPED_POSE, biped_xml
from script_helpers import SCRIPTS

from unilab_gpu.envs.robot_model import load_robot_cfg, robot_edit
from unilab_gpu.paths import ASSETS_DIR, USER_PATH_ENV, user_folders
from unilab_gpu.sim.robot_contract import contract_errors

NOT_ROBOTS = {"pendulum": "a torque-driven, fixed-base toy for the RL tests (task actions: actuator_ctrl)"}
"""Model folders that are no legged robot, and why; they must break the contract (below)."""


def robot_folders() -> list[Path]:
    """The robot folders of the project and of every ``UNILAB_PATH`` folder (docs/robots.md step 1)."""
    roots = [ASSETS_DIR / "robots", *(folder / "assets" / "robots" for folder in user_folders())]
    return sorted((p for root in roots if root.is_dir() for p in root.iterdir() if p.is_dir()), key=str)


def robot_contract_errors(folder: Path) -> list[str]:
    """The contract's lines for a robot folder's ``scene.xml``, with the physics options and MJCF
    edits of the robot config of the folder's name applied, as the env applies them."""
    spec = mujoco.MjSpec.from_file(str(folder / "scene.xml"))
    loaded = load_robot_cfg(folder.name)
    if loaded is not None:
        robot_edit(loaded[0])(spec)
    return contract_errors(spec.compile(), loaded[0].keyframe if loaded is not None else "stand")


@pytest.mark.parametrize("folder", robot_folders(), ids=lambda p: f"{p.parents[2].name}/{p.name}")
def test_every_robot_folder_keeps_the_contract(folder: Path) -> None:
    errors = robot_contract_errors(folder)
    if folder.name in NOT_ROBOTS and folder.parent == ASSETS_DIR / "robots":
        assert errors, f"{folder.name} keeps the contract: it is a robot, remove it from NOT_ROBOTS"
    else:
        assert errors == []


def test_the_walk_takes_the_robots_of_unilab_path_and_their_configs(tmp_path, monkeypatch, biped_key: str) -> None:
    robots = tmp_path / "assets" / "robots"
    (robots / "biped").mkdir(parents=True)
    (robots / "biped" / "scene.xml").write_text(biped_xml(biped_key))
    (robots / "crouched").mkdir()
    (robots / "crouched" / "scene.xml").write_text(biped_xml(biped_key.replace('"stand"', '"crouch"')))
    monkeypatch.setenv(USER_PATH_ENV, str(tmp_path))
    found = {p: p.name for p in robot_folders() if p.parent == robots}
    assert sorted(found.values()) == ["biped", "crouched"]
    assert robot_contract_errors(robots / "biped") == []
    assert robot_contract_errors(robots / "crouched")[0].startswith("keyframe: no keyframe named 'stand'")
    # Its robot config names another keyframe, and an option the contract then checks the key under.
    (tmp_path / "configs" / "robot").mkdir(parents=True)
    config = (
        "model: crouched\nkeyframe: crouch\ntorso_body: torso\nimu: {gyro: imu_gyro, velocimeter: imu_linvel}\n"
        "base_height: 0.45\nfall_height: 0.25\n"
    )
    (tmp_path / "configs" / "robot" / "crouched.yaml").write_text(config)
    assert robot_contract_errors(robots / "crouched") == []
    (tmp_path / "configs" / "robot" / "crouched.yaml").write_text(config + "physics: {impratio: 50}\n")
    assert robot_contract_errors(robots / "crouched")[0].startswith("keyframe: 'crouch' does not hold its pose")


def test_an_unnamed_free_joint_is_named_by_its_body(biped_key: str) -> None:
    model = mujoco.MjModel.from_xml_string(biped_xml(biped_key).replace('<freejoint name="root"/>', "<freejoint/>"))
    model.key_qpos[0, 2] += 1.0  # the key 1 m up in the air, its targets the pose: only the base accelerates, at -g
    model.key_ctrl[0] = model.key_qpos[0, 7:]
    (error,) = contract_errors(model)
    assert "'#0'" not in error
    assert error.startswith(
        "keyframe: 'stand' does not hold its pose (|qacc| 9.81 at joint 'free joint of body 'torso', z'"
    )


@pytest.fixture(scope="module")
def biped_key(tmp_path_factory) -> str:
    """The biped's stand keyframe, from the keyframe tool."""
    path = tmp_path_factory.mktemp("biped") / "biped.xml"
    path.write_text(biped_xml())
    tool = [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), "--pose", *BIPED_POSE]
    return subprocess.run(tool, capture_output=True, text=True, check=True).stdout


def test_the_tests_biped_keeps_the_contract(biped_key: str) -> None:
    assert contract_errors(mujoco.MjModel.from_xml_string(biped_xml(biped_key))) == []


def _velocity_actuators(xml: str) -> str:
    return xml.replace('kp="30" kv="1" forcerange="-15 15"', 'kv="1"').replace("<position ", "<velocity ")


def _drop_actuators(xml: str) -> str:
    start, end = xml.index("<actuator>"), xml.index("</actuator>") + len("</actuator>")
    return xml[:start] + xml[end:]


BROKEN = {
    # rule broken: (edit of the biped's MJCF, the line the contract gives)
    "no free base": (
        lambda x: x.replace('<freejoint name="root"/>', ""),
        "joints: the first joint must be the floating base's free joint",
    ),
    "slide joint": (
        lambda x: x.replace(
            '<joint name="right_knee" axis="0 1 0" range="0 2.5"/>',
            '<joint name="right_knee" type="slide" axis="0 0 1" range="-0.1 0.1"/>',
        ),
        "joints: joint 'right_knee' is a slide joint; every joint after the floating base must be a hinge",
    ),
    "no actuators": (_drop_actuators, "actuators: none; the contract needs one <position> actuator per hinge joint"),
    "actuator missing": (
        lambda x: x.replace(
            '<position name="right_ankle" joint="right_ankle" kp="30" kv="1" forcerange="-15 15"/>', ""
        ),
        "actuators: 5 actuators for 6 hinge joints",
    ),
    "actuators out of joint order": (
        lambda x: x.replace('name="left_hip" joint="left_hip"', 'name="left_hip" joint="left_knee"'),
        "actuators: actuator 'left_hip' must drive joint 'left_hip' (one actuator per hinge, in joint order)",
    ),
    "velocity actuators": (
        _velocity_actuators,
        "actuators: actuator 'left_hip' is a velocity actuator; the contract needs position actuators",
    ),
    "motors": (
        lambda x: x.replace('kp="30" kv="1" forcerange="-15 15"', 'forcerange="-15 15"').replace(
            "<position ", "<motor "
        ),
        "actuators: actuator 'left_hip' is a motor (torque) actuator; the contract needs position actuators",
    ),
    "no forcerange": (
        lambda x: x.replace(
            'name="left_knee" joint="left_knee" kp="30" kv="1" forcerange="-15 15"',
            'name="left_knee" joint="left_knee" kp="30" kv="1"',
        ),
        "actuators: actuator 'left_knee' has no forcerange",
    ),
    "no velocimeter": (
        lambda x: x.replace('<velocimeter name="imu_linvel" site="imu"/>', ""),
        "sensors: no site carries both a <gyro> and a <velocimeter> sensor",
    ),
    "IMU split over two sites": (
        lambda x: x.replace('<site name="imu"/>', '<site name="imu"/><site name="imu2"/>').replace(
            '<velocimeter name="imu_linvel" site="imu"/>', '<velocimeter name="imu_linvel" site="imu2"/>'
        ),
        "sensors: no site carries both a <gyro> and a <velocimeter> sensor",
    ),
    "no stand keyframe": (
        lambda x: x.replace('<key name="stand"', '<key name="crouch"'),
        "keyframe: no keyframe named 'stand'",
    ),
    "keyframe ctrl is the pose": (
        lambda x: x[: x.index('ctrl="')] + "/>" + x[x.index('"/>', x.index('ctrl="')) + 3 :],
        "keyframe: 'stand' does not hold its pose",
    ),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_broken_mjcf_is_told_the_rule_it_broke(biped_key: str, broken: str) -> None:
    edit, message = BROKEN[broken]
    # Without the free joint or actuators the keyframe has the wrong size: MuJoCo's
    # compiler refuses it before the contract is asked (make_env names the file, see
    # test_robot_configs.py), so those edits start from the biped without its keyframe.
    key = "" if broken in ("no free base", "no actuators", "actuator missing") else biped_key
    xml = edit(biped_xml(key))
    assert xml != biped_xml(key)
    errors = contract_errors(mujoco.MjModel.from_xml_string(xml))
    # The rule broken comes first (make_env reports the first line); a broken structure also
    # keeps the keyframe from holding, which may follow.
    assert errors and errors[0].startswith(message), errors
    assert all("\n" not in error for error in errors)
