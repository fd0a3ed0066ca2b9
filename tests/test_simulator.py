"""Simulator tests against MuJoCo C (an independent reference implementation)."""

from __future__ import annotations

import copy

import mujoco
import mujoco_warp as mjw
import numpy as np
import pytest
import torch
import warp as wp

from unilab_gpu.sim.overflow import SimulationOverflowError
from unilab_gpu.sim.simulator import Simulator

NUM_ENVS = 4


@pytest.fixture(scope="module")
def sim() -> Simulator:
    return Simulator.from_file("g1", NUM_ENVS, keyframe="stand", refresh_capacity=3)


def _perturbed_states(model: mujoco.MjModel, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Keyframe pose plus random joint offsets and velocities, ``(count, nq)``, ``(count, nv)``."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(model.key("stand").qpos, (count, 1))
    qpos[:, 7:] += rng.uniform(-0.1, 0.1, (count, model.nu))
    qpos[:, 2] += 0.02  # start just above the floor so contacts form during the rollout
    qvel = rng.uniform(-0.3, 0.3, (count, model.nv))
    return qpos.astype(np.float32), qvel.astype(np.float32)


def _reference(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, ctrl: np.ndarray) -> mujoco.MjData:
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(model, data)
    return data


def _reset_all(sim: Simulator, qpos: np.ndarray, qvel: np.ndarray) -> None:
    ids = torch.arange(sim.num_envs, dtype=torch.int64)
    sim.write_rows(ids, torch.from_numpy(qpos), torch.from_numpy(qvel))
    sim.refresh()


def test_views_share_memory_both_ways(sim: Simulator) -> None:
    sim.state.qpos[1, 9] = 0.25
    assert sim.data.qpos.numpy()[1, 9] == np.float32(0.25)
    sim.data.qvel.fill_(0.5)
    assert torch.all(sim.state.qvel == 0.5)
    sim.state.qvel.zero_()
    for name, view in sim.state.tensors().items():
        assert view.device == sim.torch_device, name
        assert view.shape[0] == NUM_ENVS, name


def test_addresses_are_stable_across_steps(sim: Simulator) -> None:
    before = {k: v.data_ptr() for k, v in sim.state.tensors().items()}
    for _ in range(3):
        sim.step(2)
        sim.refresh()
        sim.refresh(torch.tensor([0, NUM_ENVS, 2], dtype=torch.int64))
    assert {k: v.data_ptr() for k, v in sim.state.tensors().items()} == before


def test_kinematics_match_mujoco(sim: Simulator) -> None:
    model = sim.mj_model
    qpos, qvel = _perturbed_states(model, NUM_ENVS, seed=1)
    _reset_all(sim, qpos, qvel)
    s = sim.state
    for w in range(NUM_ENVS):
        ref = _reference(model, qpos[w], qvel[w], s.ctrl[w].numpy())
        np.testing.assert_allclose(s.body_pos_w[w].numpy(), ref.xpos, atol=1e-5)
        np.testing.assert_allclose(s.body_quat_w[w].numpy(), ref.xquat, atol=1e-5)
        np.testing.assert_allclose(s.site_pos_w[w].numpy(), ref.site_xpos, atol=1e-5)
        np.testing.assert_allclose(s.sensordata[w].numpy(), ref.sensordata, atol=1e-4)
        velocity = np.zeros(6)
        for b in range(model.nbody):
            # XBODY: the body frame origin (mjOBJ_BODY would be the centre of mass).
            mujoco.mj_objectVelocity(model, ref, mujoco.mjtObj.mjOBJ_XBODY, b, velocity, 0)
            np.testing.assert_allclose(s.body_ang_vel_w[w, b].numpy(), velocity[:3], atol=1e-4)
            np.testing.assert_allclose(s.body_lin_vel_w[w, b].numpy(), velocity[3:], atol=1e-4)


@pytest.mark.parametrize("cpu_graph", [True, False])
def test_rollout_matches_mujoco_step(cpu_graph: bool) -> None:
    """50 steps from different perturbed states, with contacts forming, against mj_step."""
    sim = Simulator.from_file("g1", 3, keyframe="stand", cpu_graph=cpu_graph)
    model = sim.mj_model
    qpos, qvel = _perturbed_states(model, 3, seed=2)
    _reset_all(sim, qpos, qvel)
    refs = [_reference(model, qpos[w], qvel[w], sim.state.ctrl[w].numpy()) for w in range(3)]
    for _ in range(50):
        sim.step(1)
        for ref in refs:
            mujoco.mj_step(model, ref)
    # MJWarp runs in float32 against MuJoCo C's float64; 50 steps (0.25 s) with the feet landing
    # stay within 2 mm / 2 mrad.
    for w, ref in enumerate(refs):
        assert ref.ncon > 0
        np.testing.assert_allclose(sim.state.qpos[w].numpy(), ref.qpos, atol=2e-3)
        np.testing.assert_allclose(sim.state.qvel[w].numpy(), ref.qvel, atol=5e-2)


def test_cpu_graph_equals_eager_bit_for_bit() -> None:
    sims = [Simulator.from_file("g1", 2, keyframe="stand", cpu_graph=g) for g in (True, False)]
    qpos, qvel = _perturbed_states(sims[0].mj_model, 2, seed=3)
    for s in sims:
        _reset_all(s, qpos, qvel)
        for _ in range(5):
            s.step(4)
    assert torch.equal(sims[0].state.qpos, sims[1].state.qpos)
    assert torch.equal(sims[0].state.qvel, sims[1].state.qvel)


def test_write_rows_then_refresh_rows(sim: Simulator) -> None:
    model = sim.mj_model
    qpos, qvel = _perturbed_states(model, NUM_ENVS, seed=4)
    _reset_all(sim, qpos, qvel)
    for _ in range(3):
        sim.step(2)
    sim.refresh()
    sim.data.qacc_warmstart.fill_(1.0)
    before = {k: v.clone() for k, v in sim.state.tensors().items()}
    warmstart_before = wp_numpy(sim.data.qacc_warmstart)

    new_qpos, new_qvel = _perturbed_states(model, 2, seed=5)
    # Capacity 3 with one padding slot: worlds 2 and 0 are written, the id NUM_ENVS is skipped.
    ids = torch.tensor([2, 0, NUM_ENVS], dtype=torch.int64)
    padded_qpos = torch.from_numpy(np.vstack([new_qpos, new_qpos[:1]]))
    padded_qvel = torch.from_numpy(np.vstack([new_qvel, new_qvel[:1]]))
    sim.write_rows(ids, padded_qpos, padded_qvel)
    sim.refresh(ids)

    s = sim.state
    for row, w in enumerate((2, 0)):
        ref = _reference(model, new_qpos[row], new_qvel[row], s.ctrl[w].numpy())
        np.testing.assert_array_equal(s.qpos[w].numpy(), new_qpos[row])
        np.testing.assert_allclose(s.body_pos_w[w].numpy(), ref.xpos, atol=1e-5)
        np.testing.assert_allclose(s.body_quat_w[w].numpy(), ref.xquat, atol=1e-5)
        np.testing.assert_allclose(s.sensordata[w].numpy(), ref.sensordata, atol=1e-4)
        assert np.all(wp_numpy(sim.data.qacc_warmstart)[w] == 0.0)
    for w in (1, 3):
        for name, value in s.tensors().items():
            assert torch.equal(value[w], before[name][w]), (name, w)
        np.testing.assert_array_equal(wp_numpy(sim.data.qacc_warmstart)[w], warmstart_before[w])


def test_stands_on_keyframe_targets_for_two_seconds() -> None:
    sim = Simulator.from_file("g1", 2, keyframe="stand")
    start = sim.state.qpos[:, 2].clone()
    lowest = start.clone()
    for _ in range(100):  # 100 policy steps x 4 substeps x 5 ms = 2 s
        sim.step(4)
        lowest = torch.minimum(lowest, sim.state.qpos[:, 2])
    assert torch.all(torch.isfinite(sim.state.qpos))
    assert torch.all((start - lowest).abs() < 0.05)
    sim.check()


def test_overflow_is_reported_by_check() -> None:
    sim = Simulator.from_file("g1", 2, keyframe="stand", njmax=4)
    sim.step(1)
    assert np.all(sim.overflow_flags() & mjw.OverflowType.NEFC)
    with pytest.raises(SimulationOverflowError, match="NEFC.*njmax"):
        sim.check()


def test_name_resolution(sim: Simulator) -> None:
    assert sim.body_ids(["torso_link"]) == [sim.mj_model.body("torso_link").id]
    assert sim.body_ids(".*_ankle_roll_link") == [
        sim.mj_model.body("left_ankle_roll_link").id,
        sim.mj_model.body("right_ankle_roll_link").id,
    ]
    assert sim.actuator_ids("left_knee_joint") == [3]
    joints = sim.joint_ids(["left_hip_pitch_joint", "waist_yaw_joint"])
    assert [int(sim.mj_model.jnt_qposadr[j]) for j in joints] == [7, 7 + 12]
    gyro = sim.sensor_slice("imu_torso_gyro")
    assert gyro.stop - gyro.start == 3
    with pytest.raises(KeyError, match="close matches.*left_knee_link"):
        sim.body_ids("left_knee_lnk")
    for lookup in (sim.joint_ids, sim.actuator_ids, sim.sensor_ids):
        with pytest.raises(KeyError, match="unknown"):
            lookup("no_such_thing")


def test_bad_input_is_rejected(sim: Simulator) -> None:
    nq, nv = sim.mj_model.nq, sim.mj_model.nv
    ids = torch.tensor([0, 1], dtype=torch.int64)
    with pytest.raises(ValueError, match=r"qpos must have shape \(2, 36\)"):
        sim.write_rows(ids, torch.zeros(2, nq - 1), torch.zeros(2, nv))
    with pytest.raises(ValueError, match="qvel must have dtype torch.float32"):
        sim.write_rows(ids, torch.zeros(2, nq), torch.zeros(2, nv, dtype=torch.float64))
    with pytest.raises(ValueError, match="env_ids must have dtype torch.int64"):
        sim.write_rows(ids.int(), torch.zeros(2, nq), torch.zeros(2, nv))
    with pytest.raises(ValueError, match=r"env_ids must have shape \(3,\)"):
        sim.refresh(ids)
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        Simulator(sim.mj_model, 0)
    with pytest.raises(FileNotFoundError, match="robot asset 'no_robot/scene.xml'"):
        Simulator.from_file("no_robot", 1)
    with pytest.raises(KeyError, match="unknown keyframe name 'crouch'"):
        Simulator(sim.mj_model, 1, keyframe="crouch")


def wp_numpy(array) -> np.ndarray:
    return array.numpy().copy()


def test_body_contact_flags_match_mujoco_contacts() -> None:
    sim = Simulator.from_file("g1", 2, keyframe="stand")
    model = sim.mj_model
    qpos, qvel = _perturbed_states(model, 2, seed=6)
    qpos[1, 2] -= 0.35  # world 1: pelvis low enough for knees/hands to hit the floor
    _reset_all(sim, qpos, qvel)
    sim.step(1)  # contacts of this substep come from the state written above
    for w in range(2):
        ref = _reference(model, qpos[w], qvel[w], sim.state.ctrl[w].numpy())
        touching = {int(model.geom_bodyid[g]) for c in ref.contact[: ref.ncon] if c.dist <= 0 for g in c.geom}
        flagged = set(np.flatnonzero(sim.state.body_contact[w].numpy()).tolist())
        assert flagged == touching
    assert len(flagged) > 0


def test_batched_model_field_is_per_world() -> None:
    sim = Simulator.from_file("g1", 2, keyframe="stand", batched_model_fields=["geom_friction"])
    friction = sim.model_fields["geom_friction"]
    assert friction.shape == (2, sim.mj_model.ngeom, 3)
    feet = sim.geom_ids(".*_foot_.*")
    friction[1, feet, 0] = 0.3
    sim.step(1)
    d = sim.data
    count = int(d.nacon.numpy()[0])
    worlds = d.contact.worldid.numpy()[:count]
    sliding = d.contact.friction.numpy()[:count, 0]
    # MuJoCo takes the larger friction of the two geoms; the floor has 0.8 in both worlds, so
    # lower the floor too in world 1 to see the per-world value.
    assert np.allclose(sliding[worlds == 0], 0.8)
    friction[1, sim.geom_ids("floor"), 0] = 0.3
    sim.step(1)
    count = int(d.nacon.numpy()[0])
    worlds = d.contact.worldid.numpy()[:count]
    sliding = d.contact.friction.numpy()[:count, 0]
    assert np.allclose(sliding[worlds == 1], 0.3) and np.allclose(sliding[worlds == 0], 0.8)


def _add_subtree_com_sensor(spec: mujoco.MjSpec) -> None:
    spec.add_sensor(
        name="pelvis_subtree_com",
        type=mujoco.mjtSensor.mjSENS_SUBTREECOM,
        objtype=mujoco.mjtObj.mjOBJ_BODY,
        objname="pelvis",
    )


def test_refreshed_rows_read_their_own_worlds_model_rows() -> None:
    """refresh(env_ids) under per-world masses: each refreshed world's mass-dependent sensor (the
    whole robot's centre of mass) equals MuJoCo C with that world's masses, not with the masses of
    the scratch row it was computed in (world 4 in scratch row 0 would read world 0's masses)."""
    num_envs = 6
    fields = ["body_mass", "body_subtreemass"]
    sim = Simulator.from_file(
        "g1", num_envs, keyframe="stand", refresh_capacity=3, batched_model_fields=fields, edit=_add_subtree_com_sensor
    )
    model = sim.mj_model
    references = []
    for world in range(num_envs):  # world w: every link 10 % * w heavier, the torso 60 % * w
        row_model = copy.deepcopy(model)
        row_model.body_mass[1:] *= 1.0 + 0.1 * world
        row_model.body_mass[sim.body_ids("torso_link")] *= 1.0 + 0.6 * world
        mujoco.mj_setConst(row_model, mujoco.MjData(row_model))  # recomputes body_subtreemass
        sim.model_fields["body_mass"][world] = torch.from_numpy(row_model.body_mass.astype(np.float32))
        sim.model_fields["body_subtreemass"][world] = torch.from_numpy(row_model.body_subtreemass.astype(np.float32))
        references.append(row_model)
    qpos, qvel = _perturbed_states(model, num_envs, seed=7)
    _reset_all(sim, qpos, qvel)
    com = sim.sensor_slice("pelvis_subtree_com")
    full = sim.state.sensordata[:, com].clone()
    for world in range(num_envs):  # the full-width refresh reads every world's own row already
        expected = _reference(references[world], qpos[world], qvel[world], np.zeros(model.nu)).sensordata[com]
        np.testing.assert_allclose(full[world].numpy(), expected, atol=1e-5)
    assert (full[5] - full[0]).abs().max() > 1e-3  # the masses really move the centre of mass

    new_qpos, new_qvel = _perturbed_states(model, 2, seed=8)
    ids = torch.tensor([4, 2, num_envs], dtype=torch.int64)  # capacity 3, one padding slot
    padded_qpos, padded_qvel = np.vstack([new_qpos, new_qpos[:1]]), np.vstack([new_qvel, new_qvel[:1]])
    sim.write_rows(ids, torch.from_numpy(padded_qpos), torch.from_numpy(padded_qvel))
    sim.refresh(ids)
    for row, world in enumerate((4, 2)):
        expected = _reference(references[world], new_qpos[row], new_qvel[row], np.zeros(model.nu)).sensordata[com]
        np.testing.assert_allclose(sim.state.sensordata[world, com].numpy(), expected, atol=1e-5)
    for world in (0, 1, 3, 5):
        assert torch.equal(sim.state.sensordata[world, com], full[world])


def test_overflow_flags_are_read_on_torchs_current_stream(monkeypatch) -> None:
    """The flags come from the torch view of MJWarp's array (torch's stream, the steps' stream),
    never from Warp's ``array.numpy()`` (the legacy default stream, unordered with torch's
    non-blocking streams on CUDA)."""
    sim = Simulator.from_file("g1", 2, keyframe="stand", njmax=4)
    sim.step(1)

    def unordered_read(self):
        raise AssertionError("overflow flags read through Warp's array.numpy()")

    monkeypatch.setattr(wp.array, "numpy", unordered_read)
    assert np.all(sim.overflow_flags() & mjw.OverflowType.NEFC)


def test_warp_cuda_output_comes_from_the_environment(monkeypatch) -> None:
    """UNILAB_WARP_CUDA_OUTPUT=cubin makes Warp hand the driver CUBINs (what the GPU check runs);
    a value Warp does not know is one line naming the variable."""
    from unilab_gpu.sim.device import WARP_CUDA_OUTPUT_ENV

    monkeypatch.setattr(wp.config, "cuda_output", None)
    monkeypatch.setenv(WARP_CUDA_OUTPUT_ENV, "cubin")
    Simulator.from_file("g1", 1)
    assert wp.config.cuda_output == "cubin"
    monkeypatch.setenv(WARP_CUDA_OUTPUT_ENV, "sass")
    with pytest.raises(ValueError, match="UNILAB_WARP_CUDA_OUTPUT must be 'cubin' or 'ptx'.*'sass'"):
        Simulator.from_file("g1", 1)


def test_a_reached_solver_iteration_cap_is_not_a_capacity_overflow() -> None:
    """MJWarp flags ITERATIONS / LS_ITERATIONS when the solver stops at its cap (a captured step's
    fixed-iteration solver always does): check() passes on those and names only capacity bits."""
    sim = Simulator.from_file("g1", 2, keyframe="stand")
    caps = int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
    wp.to_torch(sim.data.overflow).fill_(caps)
    sim.check()
    wp.to_torch(sim.data.overflow)[1] = caps | int(mjw.OverflowType.NARROWPHASE)
    with pytest.raises(SimulationOverflowError, match=r"\(NARROWPHASE\) in 1 of 2 worlds"):
        sim.check()
