"""Checks of the project's G1 MJCF (assets/robots/g1) with MuJoCo C only.

Figures are compared against an independently compiled copy of the public reference MJCF
(/work/shared/reference/g1, skipped when absent) and against NumPy re-derivations of the PD
gains, so a transcription error in g1.xml fails here.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCENE_XML = REPO_ROOT / "assets" / "robots" / "g1" / "scene.xml"
REFERENCE_XML = REPO_ROOT.parent / "shared" / "reference" / "g1" / "g1_29dof_reference.xml"

SIDE_LEG = ["hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll"]
SIDE_ARM = [
    "shoulder_pitch",
    "shoulder_roll",
    "shoulder_yaw",
    "elbow",
    "wrist_roll",
    "wrist_pitch",
    "wrist_yaw",
]
JOINT_NAMES = (
    [f"left_{n}_joint" for n in SIDE_LEG]
    + [f"right_{n}_joint" for n in SIDE_LEG]
    + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
    + [f"left_{n}_joint" for n in SIDE_ARM]
    + [f"right_{n}_joint" for n in SIDE_ARM]
)
BODY_NAMES = (
    ["pelvis"]
    + [f"left_{n}_link" for n in SIDE_LEG]
    + [f"right_{n}_link" for n in SIDE_LEG]
    + ["waist_yaw_link", "waist_roll_link", "torso_link"]
    + [f"left_{n}_link" for n in SIDE_ARM]
    + [f"right_{n}_link" for n in SIDE_ARM]
)
OMEGA = 2.0 * np.pi * 10.0  # PD natural frequency (rad/s)
ZETA = 2.0  # PD damping ratio


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(SCENE_XML))


@pytest.fixture(scope="module")
def reference() -> mujoco.MjModel:
    if not REFERENCE_XML.is_file():
        pytest.skip(f"reference MJCF not found at {REFERENCE_XML} (shared data absent)")
    return _compile_reference_without_meshes(REFERENCE_XML)


def _compile_reference_without_meshes(path: Path) -> mujoco.MjModel:
    """Compile the reference after dropping what needs its (unshipped) mesh files.

    Mesh assets and mesh geoms go; so do contact pairs, which name a floor the file lacks.
    Every reference body has an explicit <inertial>, so removing geoms leaves inertia intact.
    """
    root = ET.parse(path).getroot()
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag == "mesh" or (child.tag == "geom" and "mesh" in child.attrib):
                parent.remove(child)
            elif child.tag == "contact":
                parent.remove(child)
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))


def _names(m: mujoco.MjModel, obj: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(m, obj, i) for i in range(count)]


def _floor_id(m: mujoco.MjModel) -> int:
    return mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")


def _robot_geoms(m: mujoco.MjModel) -> list[int]:
    return [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0]


def _foot_geoms(m: mujoco.MjModel) -> list[int]:
    foot_bodies = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{s}_ankle_roll_link") for s in ("left", "right")}
    return [g for g in _robot_geoms(m) if m.geom_bodyid[g] in foot_bodies]


def _stand_data(m: mujoco.MjModel) -> mujoco.MjData:
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "stand"))
    mujoco.mj_forward(m, d)
    return d


def test_scene_options(model: mujoco.MjModel) -> None:
    opt = model.opt
    assert opt.timestep == pytest.approx(0.005)
    assert opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert opt.iterations == 10
    assert opt.ls_iterations == 20


def test_no_meshes(model: mujoco.MjModel) -> None:
    assert model.nmesh == 0
    assert not np.any(model.geom_type == mujoco.mjtGeom.mjGEOM_MESH)
    allowed = {mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_BOX}
    for g in _robot_geoms(model):
        assert mujoco.mjtGeom(model.geom_type[g]) in allowed, mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g)


def test_dimensions(model: mujoco.MjModel) -> None:
    assert (model.nq, model.nv, model.nu) == (36, 35, 29)
    assert model.nbody == 31  # world + pelvis + 29 links


def test_names_in_standard_order(model: mujoco.MjModel) -> None:
    assert _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody) == ["world"] + BODY_NAMES
    assert _names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt) == ["floating_base_joint"] + JOINT_NAMES
    assert _names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu) == JOINT_NAMES
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert np.all(model.jnt_type[1:] == mujoco.mjtJoint.mjJNT_HINGE)
    # Each actuator drives the joint of the same name, and each hinge belongs to its link.
    np.testing.assert_array_equal(model.actuator_trntype, mujoco.mjtTrn.mjTRN_JOINT)
    np.testing.assert_array_equal(model.actuator_trnid[:, 0], np.arange(1, 30))
    np.testing.assert_array_equal(model.jnt_bodyid[1:], np.arange(2, 31))


def test_pd_gains_follow_armature(model: mujoco.MjModel) -> None:
    armature = model.dof_armature[model.jnt_dofadr[model.actuator_trnid[:, 0]]]
    assert np.all(armature > 0)
    kp = armature * OMEGA**2
    kd = 2.0 * ZETA * armature * OMEGA
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], kp, rtol=1e-10)
    np.testing.assert_allclose(model.actuator_biasprm[:, :3], np.stack([0 * kp, -kp, -kd], 1), rtol=1e-10)
    np.testing.assert_allclose(model.actuator_gainprm[:4, 0], [40.1792, 99.0984, 40.1792, 99.0984], atol=1e-4)
    assert np.all(model.actuator_forcelimited)
    assert not np.any(model.actuator_ctrllimited)  # the action manager clips, not the model


def test_figures_match_reference(model: mujoco.MjModel, reference: mujoco.MjModel) -> None:
    ref_names = set(_names(reference, mujoco.mjtObj.mjOBJ_BODY, reference.nbody))
    assert set(BODY_NAMES) <= ref_names
    for name in BODY_NAMES:
        b = model.body(name).id
        r = reference.body(name).id
        if name != "pelvis":  # the free root's pos is only its initial height
            np.testing.assert_allclose(model.body_pos[b], reference.body_pos[r], atol=1e-9, err_msg=name)
        np.testing.assert_allclose(model.body_quat[b], reference.body_quat[r], atol=1e-9, err_msg=name)
        assert model.body_mass[b] == pytest.approx(reference.body_mass[r], abs=1e-12), name
        np.testing.assert_allclose(model.body_ipos[b], reference.body_ipos[r], atol=1e-9, err_msg=name)
        iquat, ref_iquat = model.body_iquat[b], reference.body_iquat[r]
        sign = 1.0 if np.dot(iquat, ref_iquat) >= 0 else -1.0
        np.testing.assert_allclose(iquat, sign * ref_iquat, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(model.body_inertia[b], reference.body_inertia[r], rtol=1e-9, err_msg=name)
    assert mujoco.mj_getTotalmass(model) == pytest.approx(sum(reference.body(n).mass[0] for n in BODY_NAMES), abs=1e-9)
    for name in JOINT_NAMES:
        j = model.joint(name).id
        r = reference.joint(name).id
        np.testing.assert_allclose(model.jnt_axis[j], reference.jnt_axis[r], atol=1e-12, err_msg=name)
        np.testing.assert_allclose(model.jnt_range[j], reference.jnt_range[r], atol=1e-12, err_msg=name)
        assert model.jnt_limited[j], name
        assert model.dof_armature[model.jnt_dofadr[j]] == pytest.approx(
            reference.dof_armature[reference.jnt_dofadr[r]], rel=1e-12
        ), name
        a = model.actuator(name).id
        np.testing.assert_allclose(model.actuator_forcerange[a], reference.jnt_actfrcrange[r], err_msg=name)
    for site in ("imu_in_pelvis", "imu_in_torso"):
        np.testing.assert_allclose(model.site(site).pos, reference.site(site).pos, atol=1e-12)
        assert model.body(model.site(site).bodyid[0]).name == reference.body(reference.site(site).bodyid[0]).name


def test_sites_and_sensors(model: mujoco.MjModel) -> None:
    expected = {
        "imu_pelvis_gyro": (mujoco.mjtSensor.mjSENS_GYRO, "imu_in_pelvis"),
        "imu_pelvis_linvel": (mujoco.mjtSensor.mjSENS_VELOCIMETER, "imu_in_pelvis"),
        "imu_torso_gyro": (mujoco.mjtSensor.mjSENS_GYRO, "imu_in_torso"),
        "imu_torso_linvel": (mujoco.mjtSensor.mjSENS_VELOCIMETER, "imu_in_torso"),
    }
    assert _names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor) == list(expected)
    for name, (kind, site) in expected.items():
        s = model.sensor(name)
        assert s.type[0] == kind and s.objid[0] == model.site(site).id, name
    assert model.body(model.site("imu_in_torso").bodyid[0]).name == "torso_link"
    for side in ("left", "right"):
        site = model.site(f"{side}_foot")
        assert model.body(site.bodyid[0]).name == f"{side}_ankle_roll_link"


def test_stand_keyframe_rests_on_floor(model: mujoco.MjModel) -> None:
    d = _stand_data(model)
    key = model.key("stand")
    # Upright within a tenth of a degree (the equilibrium solve tilts the pelvis a hair).
    np.testing.assert_allclose(key.qpos[3:7], [1, 0, 0, 0], atol=2e-3)
    assert 0.74 <= d.qpos[2] <= 0.80
    feet = _foot_geoms(model)
    assert all(model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE for g in feet)
    lowest = min(d.geom_xpos[g, 2] - model.geom_size[g, 0] for g in feet)
    assert abs(lowest) <= 0.005
    floor = _floor_id(model)
    fromto = np.zeros(6)
    for g in set(_robot_geoms(model)) - set(feet):
        gap = mujoco.mj_geomDistance(model, d, g, floor, 1.0, fromto)
        assert gap > 0.01, mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g)


def _rollout(m: mujoco.MjModel, seconds: float) -> np.ndarray:
    """Pelvis height after every step, holding the keyframe targets. Shape: (steps,)."""
    d = _stand_data(m)
    heights = np.empty(int(round(seconds / m.opt.timestep)))
    for i in range(heights.size):
        mujoco.mj_step(m, d)
        assert np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel)), f"NaN at step {i}"
        heights[i] = d.qpos[2]
    return heights


def test_stand_keyframe_is_a_static_equilibrium(model: mujoco.MjModel) -> None:
    # The keyframe's ctrl adds gravity-compensating offsets to the joint targets; at rest the
    # shipped gains then produce exactly the torques that hold the pose (independent check:
    # MuJoCo's forward dynamics gives zero acceleration).
    d = _stand_data(model)
    mujoco.mj_forward(model, d)
    assert np.abs(d.qacc).max() < 1e-3
    offset = model.key("stand").ctrl - model.key("stand").qpos[7:]
    assert 0.01 < np.abs(offset).max() < 0.3  # real offsets, bounded by effort/kp


def test_rollout_with_shipped_gains_stands_for_two_seconds() -> None:
    m = mujoco.MjModel.from_xml_path(str(SCENE_XML))
    heights = _rollout(m, 2.0)
    assert np.all(np.abs(heights - m.key("stand").qpos[2]) < 0.05)


def test_plain_joint_targets_do_not_hold_the_stance() -> None:
    # Why the keyframe carries compensated targets: holding ctrl = pose, the 10 Hz ankles
    # (2 kp ~ 57 Nm/rad << m g h ~ 220 Nm/rad) let the body topple within 2 s.
    m = mujoco.MjModel.from_xml_path(str(SCENE_XML))
    m.key("stand").ctrl[:] = m.key("stand").qpos[7:]
    heights = _rollout(m, 2.0)
    assert np.abs(heights - m.key("stand").qpos[2]).max() > 0.05


def test_contact_filtering(model: mujoco.MjModel) -> None:
    ct, ca = model.geom_contype, model.geom_conaffinity
    robot = _robot_geoms(model)
    for a, b in itertools.combinations(robot, 2):
        assert (ct[a] & ca[b]) | (ct[b] & ca[a]) == 0, (a, b)
    floor = _floor_id(model)
    for g in robot:
        assert (ct[g] & ca[floor]) | (ct[floor] & ca[g]), g
    feet = set(_foot_geoms(model))
    assert len(feet) == 8
    for g in robot:
        assert model.geom_condim[g] == (3 if g in feet else 1), g
    # The contact takes the larger condim of the pair, so the floor must not raise it.
    assert model.geom_condim[floor] == 1
