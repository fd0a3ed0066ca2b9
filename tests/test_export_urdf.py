"""``urdf_of``: the URDF's kinematics, composed here from its text by the URDF rules, put every body
where MuJoCo does for random joint angles."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from unilab_gpu.export.urdf import urdf_of
from unilab_gpu.paths import robot_asset


def _rot_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


def _rot_axis(axis: np.ndarray, angle: float) -> np.ndarray:
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def _urdf_fk(text: str, angles: dict[str, float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """World pose of every link, the root link at the origin (URDF: child = parent * origin * joint motion)."""
    robot = ET.fromstring(text)
    joints = {j.find("child").get("link"): j for j in robot.findall("joint")}
    poses: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def pose(link: str) -> tuple[np.ndarray, np.ndarray]:
        if link not in poses:
            if link not in joints:
                poses[link] = (np.zeros(3), np.eye(3))
            else:
                joint = joints[link]
                p_pos, p_rot = pose(joint.find("parent").get("link"))
                origin = joint.find("origin")
                xyz = np.array(origin.get("xyz").split(), dtype=float)
                rot = p_rot @ _rot_rpy(*np.array(origin.get("rpy").split(), dtype=float))
                if joint.get("type") != "fixed":
                    rot = rot @ _rot_axis(np.array(joint.find("axis").get("xyz").split(), dtype=float),
                                          angles[joint.get("name")])  # fmt: skip
                poses[link] = (p_pos + p_rot @ xyz, rot)
        return poses[link]

    return {link.get("name"): pose(link.get("name")) for link in robot.findall("link")}


def test_g1_urdf_puts_every_body_where_mujoco_does():
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    data = mujoco.MjData(model)
    text = urdf_of(model, "g1")
    robot = ET.fromstring(text)
    assert len(robot.findall("link")) == model.nbody - 1
    assert sorted(j.get("name") for j in robot.findall("joint")) == sorted(
        model.joint(j).name for j in range(1, model.njnt)
    )
    rng = np.random.default_rng(0)
    for _ in range(3):
        low, high = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
        data.qpos[:] = 0.0
        data.qpos[3] = 1.0
        data.qpos[7:] = rng.uniform(low, high)
        mujoco.mj_kinematics(model, data)
        fk = _urdf_fk(text, {model.joint(j).name: data.qpos[6 + j] for j in range(1, model.njnt)})
        for b in range(1, model.nbody):
            pos, rot = fk[model.body(b).name]
            np.testing.assert_allclose(pos, data.xpos[b], atol=1e-7)
            np.testing.assert_allclose(rot, data.xmat[b].reshape(3, 3), atol=1e-7)
    masses = {link.get("name"): float(link.find("inertial/mass").get("value")) for link in robot.findall("link")}
    assert masses["torso_link"] == pytest.approx(model.body_mass[model.body("torso_link").id], rel=1e-8)


def test_a_model_without_a_free_root_is_refused():
    model = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><joint type="hinge"/><geom size="0.1"/></body>'
                                           "</worldbody></mujoco>")  # fmt: skip
    with pytest.raises(ValueError, match="free joint"):
        urdf_of(model)
