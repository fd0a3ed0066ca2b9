"""Checks of the project's Go2 MJCF (assets/robots/go2) with MuJoCo C only.

Figures are compared against an independently compiled copy of Unitree's public Go2 MJCF
(/work/shared/reference/go2, skipped when absent), against the figures cited in docs/robots.md
written out here by hand, and against NumPy re-derivations of the PD gains, so a transcription
error in go2.xml fails here.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCENE_XML = REPO_ROOT / "assets" / "robots" / "go2" / "scene.xml"
REFERENCE_XML = REPO_ROOT.parent / "shared" / "reference" / "go2" / "go2_reference.xml"

LEGS = ["FL", "FR", "RL", "RR"]
JOINT_NAMES = [f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf")]
BODY_NAMES = ["base"] + [f"{leg}_{part}" for leg in LEGS for part in ("hip", "thigh", "calf")]
FOOT_SITES = [f"{leg}_foot" for leg in LEGS]
OMEGA = 2.0 * np.pi * 10.0  # PD natural frequency (rad/s)
ZETA = 2.0  # PD damping ratio

# The figures docs/robots.md cites (Unitree's Go2 MJCF), by hand: masses (kg), ranges (rad),
# peak torques (N m), armature (kg m^2).
MASS = {"base": 6.921, "hip": 0.678, "thigh": 1.152, "calf": 0.241352}
RANGE = {
    "hip": (-1.0472, 1.0472),
    "front_thigh": (-1.5708, 3.4907),
    "rear_thigh": (-0.5236, 4.5379),
    "calf": (-2.7227, -0.83776),
}
EFFORT = {"hip": 23.7, "thigh": 23.7, "calf": 45.43}
ARMATURE = 0.01


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(SCENE_XML))


@pytest.fixture(scope="module")
def reference() -> mujoco.MjModel:
    if not REFERENCE_XML.is_file():
        pytest.skip(f"reference MJCF not found at {REFERENCE_XML} (shared data absent)")
    root = ET.parse(REFERENCE_XML).getroot()
    # Drop what needs the reference's (unshipped) mesh files; every body has an explicit
    # <inertial>, so removing geoms leaves the inertia intact.
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag == "mesh" or (child.tag == "geom" and "mesh" in child.attrib):
                parent.remove(child)
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))


def _names(m: mujoco.MjModel, obj: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(m, obj, i) for i in range(count)]


def _robot_geoms(m: mujoco.MjModel) -> list[int]:
    return [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0]


def _foot_geoms(m: mujoco.MjModel) -> list[int]:
    return [m.geom(f"{leg}_foot_collision").id for leg in LEGS]


def _stand_data(m: mujoco.MjModel) -> mujoco.MjData:
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("stand").id)
    mujoco.mj_forward(m, d)
    return d


def test_scene_options_match_the_g1(model: mujoco.MjModel) -> None:
    opt = model.opt
    assert opt.timestep == pytest.approx(0.005)
    assert opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert (opt.iterations, opt.ls_iterations) == (10, 20)
    assert model.geom("floor").condim[0] == 1


def test_primitive_geoms_only(model: mujoco.MjModel) -> None:
    assert model.nmesh == 0
    allowed = {mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_BOX}
    for g in _robot_geoms(model):
        assert mujoco.mjtGeom(model.geom_type[g]) in allowed, model.geom(g).name


def test_names_and_contiguous_hinges(model: mujoco.MjModel) -> None:
    assert (model.nq, model.nv, model.nu) == (19, 18, 12)
    assert _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody) == ["world"] + BODY_NAMES
    assert _names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt) == ["floating_base_joint"] + JOINT_NAMES
    assert _names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu) == JOINT_NAMES
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert np.all(model.jnt_type[1:] == mujoco.mjtJoint.mjJNT_HINGE)
    np.testing.assert_array_equal(model.jnt_qposadr[1:], np.arange(7, 19))
    np.testing.assert_array_equal(model.actuator_trnid[:, 0], np.arange(1, 13))
    np.testing.assert_array_equal(model.actuator_dyntype, mujoco.mjtDyn.mjDYN_NONE)


def test_cited_figures(model: mujoco.MjModel) -> None:
    for leg in LEGS:
        for part in ("hip", "thigh", "calf"):
            assert model.body(f"{leg}_{part}").mass[0] == pytest.approx(MASS[part], abs=1e-12)
            joint = model.joint(f"{leg}_{part}_joint")
            kind = f"{'front' if leg[0] == 'F' else 'rear'}_thigh" if part == "thigh" else part
            np.testing.assert_allclose(joint.range, RANGE[kind], atol=1e-12, err_msg=joint.name)
            assert model.dof_armature[joint.dofadr[0]] == pytest.approx(ARMATURE)
            actuator = model.actuator(f"{leg}_{part}_joint")
            np.testing.assert_allclose(actuator.forcerange, [-EFFORT[part], EFFORT[part]], err_msg=actuator.name)
    assert model.body("base").mass[0] == pytest.approx(MASS["base"], abs=1e-12)
    # Unitree quotes about 15 kg for the Go2 with its battery.
    legs = 4 * sum(MASS[p] for p in ("hip", "thigh", "calf"))
    assert mujoco.mj_getTotalmass(model) == pytest.approx(MASS["base"] + legs)
    assert 14.5 < mujoco.mj_getTotalmass(model) < 16.0
    # Hip joints roll about x, thighs and calves pitch about y.
    for j in JOINT_NAMES:
        axis = [1, 0, 0] if "_hip_" in j else [0, 1, 0]
        np.testing.assert_array_equal(model.joint(j).axis, axis, err_msg=j)


def test_pd_gains_follow_armature(model: mujoco.MjModel) -> None:
    armature = model.dof_armature[model.jnt_dofadr[model.actuator_trnid[:, 0]]]
    kp, kd = armature * OMEGA**2, 2.0 * ZETA * armature * OMEGA
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], kp, rtol=1e-10)
    np.testing.assert_allclose(model.actuator_biasprm[:, :3], np.stack([0 * kp, -kp, -kd], 1), rtol=1e-10)
    np.testing.assert_allclose(model.actuator_gainprm[0, 0], 39.4784, atol=1e-4)
    assert np.all(model.actuator_forcelimited)
    assert not np.any(model.actuator_ctrllimited)  # the action manager clips, not the model


def test_figures_match_reference(model: mujoco.MjModel, reference: mujoco.MjModel) -> None:
    for name in BODY_NAMES:
        b, r = model.body(name).id, reference.body(name).id
        if name != "base":  # the free root's pos is only its initial height
            np.testing.assert_allclose(model.body_pos[b], reference.body_pos[r], atol=1e-9, err_msg=name)
        np.testing.assert_allclose(model.body_quat[b], reference.body_quat[r], atol=1e-9, err_msg=name)
        assert model.body_mass[b] == pytest.approx(reference.body_mass[r], abs=1e-12), name
        np.testing.assert_allclose(model.body_ipos[b], reference.body_ipos[r], atol=1e-9, err_msg=name)
        iquat, ref_iquat = model.body_iquat[b], reference.body_iquat[r]
        sign = 1.0 if np.dot(iquat, ref_iquat) >= 0 else -1.0
        np.testing.assert_allclose(iquat, sign * ref_iquat, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(model.body_inertia[b], reference.body_inertia[r], rtol=1e-9, err_msg=name)
    for name in JOINT_NAMES:
        j, r = model.joint(name).id, reference.joint(name).id
        np.testing.assert_allclose(model.jnt_axis[j], reference.jnt_axis[r], atol=1e-12, err_msg=name)
        np.testing.assert_allclose(model.jnt_range[j], reference.jnt_range[r], atol=1e-12, err_msg=name)
        assert model.dof_armature[model.jnt_dofadr[j]] == pytest.approx(reference.dof_armature[reference.jnt_dofadr[r]])
        # The reference drives torque motors; their ctrlrange is the motor's peak torque.
        motor = reference.actuator(int(np.flatnonzero(reference.actuator_trnid[:, 0] == r)[0]))
        np.testing.assert_allclose(model.actuator(name).forcerange, motor.ctrlrange, err_msg=name)
    np.testing.assert_allclose(model.site("imu").pos, reference.site("imu").pos, atol=1e-12)
    for leg in LEGS:  # foot sphere: the reference's radius and centre
        ours, theirs = model.geom(f"{leg}_foot_collision"), reference.geom(leg)
        assert ours.size[0] == pytest.approx(theirs.size[0])
        np.testing.assert_allclose(ours.pos, theirs.pos, atol=1e-12)
        assert ours.bodyid[0] == model.body(reference.body(theirs.bodyid[0]).name).id


def test_sites_and_sensors(model: mujoco.MjModel) -> None:
    assert _names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor) == ["imu_gyro", "imu_linvel"]
    assert model.sensor("imu_gyro").type[0] == mujoco.mjtSensor.mjSENS_GYRO
    assert model.sensor("imu_linvel").type[0] == mujoco.mjtSensor.mjSENS_VELOCIMETER
    assert model.sensor("imu_gyro").objid[0] == model.sensor("imu_linvel").objid[0] == model.site("imu").id
    assert model.body(model.site("imu").bodyid[0]).name == "base"
    for leg in LEGS:  # foot sites sit at the foot sphere's centre, on the calf
        site, foot = model.site(f"{leg}_foot"), model.geom(f"{leg}_foot_collision")
        assert site.bodyid[0] == foot.bodyid[0] == model.body(f"{leg}_calf").id
        np.testing.assert_allclose(site.pos, foot.pos)


def test_stand_keyframe_rests_on_its_feet(model: mujoco.MjModel) -> None:
    d = _stand_data(model)
    key = model.key("stand")
    np.testing.assert_allclose(key.qpos[7:], [0.0, 0.9, -1.8] * 4)
    np.testing.assert_allclose(key.qpos[3:7], [1, 0, 0, 0], atol=1e-4)
    assert 0.27 <= d.qpos[2] <= 0.30
    feet = _foot_geoms(model)
    lowest = [d.geom_xpos[g, 2] - model.geom_size[g, 0] for g in feet]
    np.testing.assert_allclose(lowest, 0.0, atol=0.003)
    fromto = np.zeros(6)
    for g in set(_robot_geoms(model)) - set(feet):
        assert mujoco.mj_geomDistance(model, d, g, model.geom("floor").id, 1.0, fromto) > 0.02, model.geom(g).name


def test_stand_keyframe_is_a_static_equilibrium(model: mujoco.MjModel) -> None:
    d = _stand_data(model)
    assert np.abs(d.qacc).max() < 1e-3
    # ctrl = q + tau / kp: the offsets times kp are the holding torques, which MuJoCo's inverse
    # dynamics at rest (qacc = 0, same contacts) must reproduce on the 12 joints.
    key = model.key("stand")
    holding = (key.ctrl - key.qpos[7:]) * model.actuator_gainprm[:, 0]
    d.qacc[:] = 0.0
    mujoco.mj_inverse(model, d)
    np.testing.assert_allclose(d.qfrc_inverse[6:], holding, atol=1e-4)
    np.testing.assert_allclose(d.qfrc_inverse[:6], 0.0, atol=1e-3)  # the base needs no help (weight 149 N)
    # The calves carry the body: the largest torques, well within the motors.
    assert np.all(np.abs(holding[2::3]) > np.abs(holding[1::3]))
    assert np.abs(holding).max() < 0.5 * 45.43


def test_stands_for_two_seconds_on_the_shipped_gains(model: mujoco.MjModel) -> None:
    d = _stand_data(model)
    start = d.qpos.copy()
    for _ in range(400):
        mujoco.mj_step(model, d)
    np.testing.assert_allclose(d.qpos, start, atol=1e-4)


def test_contact_filtering(model: mujoco.MjModel) -> None:
    ct, ca = model.geom_contype, model.geom_conaffinity
    robot = _robot_geoms(model)
    for a, b in itertools.combinations(robot, 2):
        assert (ct[a] & ca[b]) | (ct[b] & ca[a]) == 0, (a, b)
    floor = model.geom("floor").id
    feet = set(_foot_geoms(model))
    for g in robot:
        assert (ct[g] & ca[floor]) | (ct[floor] & ca[g]), g
        assert model.geom_condim[g] == (3 if g in feet else 1), model.geom(g).name
