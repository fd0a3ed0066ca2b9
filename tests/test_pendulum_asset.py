"""Pendulum task model: structure, torque limit vs gravity, energy, swing-up, MJWarp vs MuJoCo C.

References are hand formulas for a point mass ``m`` on a massless rod of length ``l`` with the
hinge angle ``q`` measured from upright: gravity torque ``m g l sin q``, energy
``1/2 I qdot^2 + m g l cos q`` with ``I = m l^2 + I_yy``.
"""

import mujoco
import numpy as np
import pytest

from unilab_gpu.paths import robot_asset

MASS, LENGTH, GEAR, G = 1.0, 1.0, 2.0, 9.81
PIVOT = np.array([0.0, 0.0, 1.2])


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(robot_asset("pendulum")))


def _hinge_inertia(model):
    return MASS * LENGTH**2 + model.body_inertia[model.body("pole").id][1]


def test_structure(model):
    assert (model.nq, model.nv, model.nu) == (1, 1, 1)
    assert model.joint("hinge").type[0] == mujoco.mjtJoint.mjJNT_HINGE
    assert model.actuator("torque").trntype[0] == mujoco.mjtTrn.mjTRN_JOINT
    np.testing.assert_array_equal(model.actuator("torque").ctrlrange, [-1.0, 1.0])
    assert model.site("tip").id >= 0
    assert [model.sensor(i).type[0] for i in range(model.nsensor)] == [
        mujoco.mjtSensor.mjSENS_JOINTPOS,
        mujoco.mjtSensor.mjSENS_JOINTVEL,
    ]
    assert model.opt.timestep == pytest.approx(0.01)
    assert model.dof_damping[0] == 0.0
    # No contacts: nothing can collide and the contact pass is off.
    assert not model.geom_contype.any() and not model.geom_conaffinity.any()
    assert model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
    np.testing.assert_allclose(model.keyframe("down").qpos, [np.pi])


def test_mass_and_geometry_are_the_documented_ones(model):
    pole = model.body("pole").id
    assert model.body_mass[pole] == pytest.approx(MASS)
    assert np.linalg.norm(model.body_ipos[pole]) == pytest.approx(LENGTH)
    assert model.actuator_gear[0, 0] == pytest.approx(GEAR)
    assert -model.opt.gravity[2] == pytest.approx(G)
    data = mujoco.MjData(model)
    data.qpos[0] = np.pi / 2
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(data.site("tip").xpos, PIVOT + [LENGTH, 0.0, 0.0], atol=1e-12)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("down").id)
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(data.site("tip").xpos, PIVOT - [0.0, 0.0, LENGTH], atol=1e-12)


def test_max_torque_cannot_hold_the_rod_horizontal(model):
    max_torque = GEAR * model.actuator_ctrlrange[0, 1]
    gravity_torque = MASS * G * LENGTH
    assert gravity_torque > 4.0 * max_torque  # 9.81 vs 2 N m, as in Gymnasium's Pendulum (10 vs 2)
    data = mujoco.MjData(model)
    data.qpos[0] = np.pi / 2  # horizontal, gravity pulls towards q = pi
    data.ctrl[0] = -1.0  # full torque towards upright
    mujoco.mj_forward(model, data)
    assert data.qfrc_bias[0] == pytest.approx(-gravity_torque, rel=1e-9)
    assert data.qfrc_actuator[0] == pytest.approx(-max_torque, rel=1e-9)
    assert data.qacc[0] == pytest.approx((gravity_torque - max_torque) / _hinge_inertia(model), rel=1e-9)


def _energy(model, data):
    return 0.5 * _hinge_inertia(model) * data.qvel[0] ** 2 + MASS * G * LENGTH * np.cos(data.qpos[0])


@pytest.mark.parametrize("timestep,tolerance", [(None, 0.02), (0.001, 0.002)])
def test_energy_is_conserved_without_damping(model, timestep, tolerance):
    """Semi-implicit Euler keeps energy within O(dt): < 2 % of m g l at the model's 0.01 s step
    over 10 s, and ten times less at a ten times smaller step (so the error is the integrator's)."""
    model = mujoco.MjModel.from_xml_path(str(robot_asset("pendulum")))
    if timestep is not None:
        model.opt.timestep = timestep
    data = mujoco.MjData(model)
    data.qpos[0] = np.pi / 2
    e0 = _energy(model, data)
    steps = int(round(10.0 / model.opt.timestep))
    error = 0.0
    for _ in range(steps):
        mujoco.mj_step(model, data)
        error = max(error, abs(_energy(model, data) - e0))
    assert error < tolerance * MASS * G * LENGTH


def test_constant_max_torque_swings_only_to_the_energy_limit(model):
    """From rest hanging, constant torque tau reaches the deflection where tau * d = m g l (1 - cos d)."""
    ratio = GEAR / (MASS * G * LENGTH)
    lo, hi = 1e-6, np.pi
    for _ in range(100):  # bisection on f(d) = ratio * d - (1 - cos d), positive below the root
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ratio * mid - (1.0 - np.cos(mid)) > 0 else (lo, mid)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("down").id)
    data.ctrl[0] = 1.0
    deflection = 0.0
    for _ in range(500):
        mujoco.mj_step(model, data)
        deflection = max(deflection, abs(data.qpos[0] - np.pi))
    assert deflection == pytest.approx(lo, abs=0.01)
    assert deflection < np.pi / 4


def test_energy_pumping_swings_up_after_several_pumps(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("down").id)
    reversals, previous = 0, 0.0
    for _ in range(1000):
        push = 1.0 if data.qvel[0] >= 0 else -1.0  # torque along the velocity adds energy
        reversals += previous not in (0.0, push)
        previous = push
        data.ctrl[0] = push
        mujoco.mj_step(model, data)
        if abs(np.angle(np.exp(1j * data.qpos[0]))) < 0.1:
            break
    else:
        pytest.fail("bang-bang energy pumping did not reach upright within 10 s")
    assert reversals >= 2


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
def test_mjwarp_rollout_matches_mujoco_c(model, device):
    wp = pytest.importorskip("warp")
    mjw = pytest.importorskip("mujoco_warp")
    wp.config.quiet = True
    if device.startswith("cuda") and not wp.is_cuda_available():
        pytest.skip("needs a CUDA device")
    starts = [(np.pi - 0.3, 0.0, 0.0), (1.0, -2.0, 0.7)]  # (qpos, qvel, ctrl) per world
    data = mujoco.MjData(model)
    expected = []
    for qpos, qvel, ctrl in starts:
        mujoco.mj_resetData(model, data)
        data.qpos[0], data.qvel[0], data.ctrl[0] = qpos, qvel, ctrl
        for _ in range(50):
            mujoco.mj_step(model, data)
        expected.append((data.qpos[0], data.qvel[0]))
    mujoco.mj_resetData(model, data)
    with wp.ScopedDevice(device):
        m = mjw.put_model(model)
        d = mjw.put_data(model, data, nworld=len(starts))
        d.qpos.assign(np.array([[s[0]] for s in starts], dtype=np.float32))
        d.qvel.assign(np.array([[s[1]] for s in starts], dtype=np.float32))
        d.ctrl.assign(np.array([[s[2]] for s in starts], dtype=np.float32))
        for _ in range(50):
            mjw.step(m, d)
        qpos, qvel = d.qpos.numpy()[:, 0], d.qvel.numpy()[:, 0]
    expected = np.array(expected)
    assert np.all(np.abs(expected[:, 0] - [s[0] for s in starts]) > 0.1)  # both rollouts moved
    np.testing.assert_allclose(qpos, expected[:, 0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(qvel, expected[:, 1], atol=1e-4, rtol=0)
