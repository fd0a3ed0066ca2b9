"""``unilab-export --convention holosoma``: our tracking policy in holosoma's whole-body-tracking ONNX.

Checked with onnxruntime against independent computations: the file has holosoma's input and
output names and shapes and metadata keys (its joint order the one holosoma's own G1 files carry);
the embedded motion equals the env's clip at every ``time_step`` (and holds the last frame); and,
stepping the env with our policy, holosoma's observation built here from the simulator state as
holosoma-inference builds it (sorted terms, its default angles, its previous output fed back, the
reference one frame behind ``time_step``) gives back our policy observation, and the file's
actions command the targets the env applied.
The round trip: the file run by the deploy runtime's holosoma format commands the targets of the
same policy's native export in the native runtime; ``unilab-sim2sim --format holosoma`` runs it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
import onnxruntime  # noqa: E402

from unilab_gpu.cli.export import main as export_main  # noqa: E402
from unilab_gpu.cli.sim2sim import main as sim2sim_main  # noqa: E402
from unilab_gpu.deploy import Controller, ReferenceMotion  # noqa: E402
from unilab_gpu.deploy.foreign import ForeignPolicy, open_policy  # noqa: E402
from unilab_gpu.deploy.policy_file import PolicyFile  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.export.export_run import export_agent  # noqa: E402
from unilab_gpu.export.holosoma import (  # noqa: E402
    HOLOSOMA_G1_DEFAULT_DOF_ANGLES,
    HOLOSOMA_G1_DOF_NAMES,
    HolosomaTrackingPolicy,
    embedded_reference,
)
from unilab_gpu.export.metadata import deployment_metadata  # noqa: E402
from unilab_gpu.export.policy import deterministic_policy  # noqa: E402
from unilab_gpu.motion import load_motion, save_motion, synthesize_clip  # noqa: E402
from unilab_gpu.motion.kinematics import RobotKinematics  # noqa: E402
from unilab_gpu.paths import robot_asset  # noqa: E402
from unilab_gpu.rl.sac import SacAgent, SacConfig  # noqa: E402

TASK = "g1_tracking_no_state_estimation"
QUIET = ["+observations.policy.enable_noise=false", "commands.motion.params.synthetic_seconds=2.0"]
DOF = list(HOLOSOMA_G1_DOF_NAMES)
ROOT = Path(__file__).resolve().parents[1]


def _agent(env) -> SacAgent:
    cfg = SacConfig(actor_hidden_dims=(32, 16), critic_hidden_dims=(8,), compile=False)
    torch.manual_seed(0)
    return SacAgent(cfg, env.observation_dims["policy"], env.observation_dims["critic"], env.action_dim)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    env = make_env(TASK, num_envs=1, device="cpu", compile=False, seed=3, overrides=QUIET)
    agent = _agent(env)
    obs = env.reset()
    seen = [obs["policy"].clone()]
    for _ in range(4):
        obs = env.step(agent.act(obs["policy"])).obs
        seen.append(obs["policy"].clone())
    agent.policy_norm.update(torch.cat(seen) * 3.0 + 1.0)  # far from identity: a missing normaliser shows
    path = export_agent(env, agent, TASK, "sac", tmp_path_factory.mktemp("holosoma") / "h.onnx", convention="holosoma")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return env, agent, session, path


def _run(session, obs: np.ndarray, time_step: int) -> dict[str, np.ndarray]:
    feeds = {"obs": obs.astype(np.float32)[None], "time_step": np.array([[time_step]], np.float32)}
    names = [o.name for o in session.get_outputs()]
    return {n: v[0] for n, v in zip(names, session.run(names, feeds), strict=True)}


def test_names_shapes_and_metadata(exported):
    env, _, session, _ = exported
    assert [(i.name, i.shape) for i in session.get_inputs()] == [("obs", [1, 154]), ("time_step", [1, 1])]
    assert [(o.name, o.shape) for o in session.get_outputs()] == [
        ("actions", [1, 29]), ("joint_pos", [1, 29]), ("joint_vel", [1, 29]), ("ref_pos_xyz", [1, 3]),
        ("ref_quat_xyzw", [1, 4]),
    ]  # fmt: skip
    meta = {k: json.loads(v) for k, v in session.get_modelmeta().custom_metadata_map.items()}
    assert meta["dof_names"] == DOF
    model = env.sim.mj_model
    actuator_of = {model.joint(int(model.actuator_trnid[a, 0])).name: a for a in range(model.nu)}
    kp = [float(model.actuator_gainprm[actuator_of[n], 0]) for n in DOF]
    np.testing.assert_allclose(meta["kp"], kp, rtol=1e-6)
    np.testing.assert_allclose(meta["kd"], [-float(model.actuator_biasprm[actuator_of[n], 2]) for n in DOF], rtol=1e-6)
    # holosoma's scale rule for the G1, 0.25 effort limit / kp, is the tracking task's.
    effort = [float(model.actuator_forcerange[actuator_of[n], 1]) for n in DOF]
    np.testing.assert_allclose(meta["action_scale"], 0.25 * np.array(effort) / np.array(kp), rtol=1e-5)
    assert meta["unilab"]["task"] == TASK and meta["unilab"]["convention"] == "holosoma"
    # holosoma's tracking class builds its kinematics from the robot's URDF: ours, every hinge by name.
    urdf_joints = ET.fromstring(meta["robot_urdf"]).findall("joint")
    assert {j.get("name") for j in urdf_joints if j.get("type") != "fixed"} == set(DOF)


def test_joint_order_and_defaults_are_holosomas(exported):
    """The joint order the export writes and the default angles it builds on are the deploy format's
    (one copy), and that order is the one holosoma's own G1 files carry."""
    _, _, session, _ = exported
    meta = {k: json.loads(v) for k, v in session.get_modelmeta().custom_metadata_map.items()}
    assert meta["time_step_lead"] == 1
    fmt_defaults = json.loads((ROOT / "unilab_gpu" / "deploy" / "formats" / "holosoma.json").read_text())
    fmt_defaults = fmt_defaults["default_joint_pos"]
    assert meta["unilab"]["default_dof_angles"] == [fmt_defaults[n] for n in meta["dof_names"]]
    peer = ROOT.parent / "shared" / "peers" / "holosoma" / "fastsac_g1_29dof_dancing.onnx"
    if not peer.is_file():
        pytest.skip(f"holosoma's dance policy is not at {peer} (../shared/peers/holosoma/README.md)")
    theirs = onnxruntime.InferenceSession(str(peer), providers=["CPUExecutionProvider"]).get_modelmeta()
    assert meta["dof_names"] == json.loads(theirs.custom_metadata_map["dof_names"])


def test_embedded_motion_is_the_clip(exported):
    env, _, session, _ = exported
    command = env.command_manager.get("motion")
    library = command.library
    frames = library.num_frames
    joints = [list(library.joint_names).index(n) for n in DOF]
    for step in [*range(frames), frames, frames + 50]:
        row = min(step, frames - 1)
        out = _run(session, np.zeros(154), step)
        np.testing.assert_array_equal(out["joint_pos"], library.joint_pos[row, joints].numpy())
        np.testing.assert_array_equal(out["joint_vel"], library.joint_vel[row, joints].numpy())
        np.testing.assert_array_equal(out["ref_pos_xyz"], library.body_pos_w[row, command.anchor_index].numpy())
        w, x, y, z = library.body_quat_w[row, command.anchor_index].numpy()
        np.testing.assert_array_equal(out["ref_quat_xyzw"], [x, y, z, w])


def _rotmat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def _holosoma_obs(env, previous_actions: np.ndarray) -> np.ndarray:
    """holosoma-inference's wbt observation of row 0, built from the simulator state: terms in sorted
    name order, ``dof_pos`` relative to its default angles, the reference the previous call returned."""
    model, state = env.sim.mj_model, env.sim.state
    command = env.command_manager.get("motion")
    qpos, qvel = state.qpos[0].double().numpy(), state.qvel[0].double().numpy()
    joints = [model.joint(n).qposadr[0] for n in DOF]
    dofs = [model.joint(n).dofadr[0] for n in DOF]
    observed = list(env.robot.joint_names)
    ref = [observed.index(n) for n in DOF]
    torso = model.body("torso_link").id
    robot_rot = _rotmat(state.body_quat_w[0, torso].double().numpy())
    ref_rot = _rotmat(command.anchor_quat_w[0].double().numpy())
    gyro = env.sim.sensor_slice("imu_pelvis_gyro")
    terms = {
        "actions": previous_actions,
        "base_ang_vel": state.sensordata[0, gyro].double().numpy(),
        "dof_pos": qpos[joints] - np.array(HOLOSOMA_G1_DEFAULT_DOF_ANGLES),
        "dof_vel": qvel[dofs],
        "motion_command": np.concatenate((command.joint_pos[0, ref].numpy(), command.joint_vel[0, ref].numpy())),
        "motion_ref_ori_b": (robot_rot.T @ ref_rot)[:, :2].reshape(-1),
    }
    return np.concatenate([terms[name] for name in sorted(terms)])


def _rollout(env, agent, session, steps: int = 6) -> list[dict[str, np.ndarray]]:
    """Step row 0 from a reset with our policy; per step: holosoma's observation of the state
    (``holo``), its robot state vector (``robot_state``), the ``time_step`` and previous action
    holosoma's loop would feed, our policy observation (``ours``), the file's outputs (``out``),
    and the position targets the env applied (``ctrl``, actuator order)."""
    model, state, command = env.sim.mj_model, env.sim.state, env.command_manager.get("motion")
    scale_h = np.array(json.loads(session.get_modelmeta().custom_metadata_map["action_scale"]))
    for _ in range(50):  # a start with `steps` frames left in the clip
        obs = env.reset()
        frame = int(command.frame[0])
        if frame + steps < command.library.num_frames - 1:
            break
    # Before the first step our previous action is zero: holosoma's action that commands the same
    # target about the reference the previous call observed (frame - 1).
    observed = list(env.robot.joint_names)
    previous_ref = command.library.joint_pos[max(frame - 1, 0)].numpy()[[observed.index(n) for n in DOF]]
    previous = (previous_ref - np.array(HOLOSOMA_G1_DEFAULT_DOF_ANGLES)) / scale_h
    joints = [model.joint(n).qposadr[0] for n in DOF]
    dofs = [model.joint(n).dofadr[0] for n in DOF]
    gyro = env.sim.sensor_slice("imu_pelvis_gyro")
    records = []
    for _ in range(steps):
        qpos, qvel = state.qpos[0].double().numpy(), state.qvel[0].double().numpy()
        robot_state = np.concatenate((qpos[:7], qpos[joints], qvel[:3], state.sensordata[0, gyro].numpy(), qvel[dofs]))
        record = {"time_step": frame + 1, "previous_action": previous, "robot_state": robot_state,
                  "holo": _holosoma_obs(env, previous), "ours": obs["policy"][0].numpy().copy()}  # fmt: skip
        record["out"] = _run(session, record["holo"], record["time_step"])
        obs = env.step(agent.act(obs["policy"], deterministic=True)).obs
        assert int(command.frame[0]) == frame + 1, "the episode ended early: pick another seed"
        frame += 1
        record["ctrl"] = state.ctrl[0].double().numpy().copy()
        records.append(record)
        previous = record["out"]["actions"]
    return records


def test_actions_are_our_policys_for_the_same_state(exported):
    env, agent, session, _ = exported
    module_meta = deployment_metadata(env, TASK, "sac", [])
    module = HolosomaTrackingPolicy(deterministic_policy(agent), module_meta, embedded_reference(env), env.sim.mj_model)
    model = env.sim.mj_model
    to_actuators = [DOF.index(model.joint(int(model.actuator_trnid[a, 0])).name) for a in range(model.nu)]
    scale_h = np.array(json.loads(session.get_modelmeta().custom_metadata_map["action_scale"]))
    for record in _rollout(env, agent, session):
        holo, time_step = torch.tensor(record["holo"], dtype=torch.float32)[None], torch.tensor([[record["time_step"]]])
        ours = module.our_observation(holo, time_step)
        np.testing.assert_allclose(ours[0].numpy(), record["ours"], atol=2e-5)
        # The env's position targets (ctrl) are holosoma's default + scale * actions.
        target_h = np.array(HOLOSOMA_G1_DEFAULT_DOF_ANGLES) + scale_h * record["out"]["actions"]
        np.testing.assert_allclose(target_h[to_actuators], record["ctrl"], atol=1e-4)


def _holosoma_python() -> Path | None:
    """The Python of an environment with holosoma-inference 0.1.3 (``HOLOSOMA_PYTHON``, else
    ``../venv_holosoma/bin/python`` beside the repository), or ``None``."""
    path = Path(os.environ.get("HOLOSOMA_PYTHON", ROOT.parent / "venv_holosoma" / "bin" / "python"))
    return path if path.is_file() else None


@pytest.mark.slow
def test_holosomas_own_policy_class_commands_our_targets(exported, tmp_path):
    """Optional: holosoma-inference's ``WholeBodyTrackingPolicy`` (its observation builder, pinocchio on
    the file's URDF, its action scaling) run on the export commands the targets our env applied."""
    python = _holosoma_python()
    if python is None:
        pytest.skip("no holosoma-inference environment: set HOLOSOMA_PYTHON or create ../venv_holosoma")
    env, agent, session, policy = exported
    records = _rollout(env, agent, session)
    states = tmp_path / "states.npz"
    np.savez(states, **{k: np.array([r[k] for r in records]) for k in ("robot_state", "time_step", "previous_action")})
    out = tmp_path / "out.npz"
    command = [str(python), str(ROOT / "tests" / "holosoma_wbt_runner.py"), str(policy), str(states), str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    model = env.sim.mj_model
    to_actuators = [DOF.index(model.joint(int(model.actuator_trnid[a, 0])).name) for a in range(model.nu)]
    q_target = np.load(out)["q_target"]
    np.testing.assert_allclose(q_target[:, to_actuators], np.array([r["ctrl"] for r in records]), atol=1e-4)


@pytest.fixture(scope="module")
def round_trip(exported, tmp_path_factory):
    """The fixture's policy exported twice, natively and in holosoma's convention around one short
    clip (50 fps, the control rate), and that clip as the deploy runtime takes it."""
    env, agent, _, _ = exported
    agent = copy.deepcopy(agent)  # its actor's output layer starts at zero: make the action read the observation
    torch.manual_seed(1)
    torch.nn.init.normal_(agent.actor.net[-1].weight, std=0.05)  # targets inside the joint limits
    folder = tmp_path_factory.mktemp("round_trip")
    kinematics = RobotKinematics(env.sim.mj_model)
    save_motion(synthesize_clip(seconds=1.0, seed=5, fps=1.0 / env.step_dt, kinematics=kinematics), folder / "m.npz")
    native = export_agent(env, agent, TASK, "sac", folder / "native.onnx")
    holo = export_agent(env, agent, TASK, "sac", folder / "holo.onnx", convention="holosoma", motion=folder / "m.npz")
    clip = load_motion(folder / "m.npz", kinematics=kinematics, fps=1.0 / env.step_dt)
    reference = ReferenceMotion(clip.fps, clip.joint_names, clip.body_names, **clip.arrays())
    return native, holo, reference, folder


def _targets_side_by_side(native_path, holo_path, reference, lead=None, steps=8, start=6):
    """Run the native export (native runtime) and the holosoma export (the runtime's holosoma format)
    from one perturbed reference state, each on its own ``MjData``; per control step both targets by
    joint name (holosoma's ``dof_names`` order) and both root states."""
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    native, holo = open_policy(native_path), open_policy(holo_path)
    assert isinstance(native, PolicyFile) and isinstance(holo, ForeignPolicy)
    if lead is not None:
        holo.time_step_lead = lead
    controllers = [Controller(native, model, reference), Controller(holo, model, reference)]
    rng = np.random.default_rng(1)
    datas = []
    qpos, qvel = reference.state(start)  # clip joint order
    joints = [model.joint(n) for n in reference.joint_names]
    for ctl in controllers:
        data = mujoco.MjData(model)
        data.qpos[:7], data.qvel[:6] = qpos[:7], qvel[:6]
        data.qpos[[j.qposadr[0] for j in joints]] = qpos[7:] + 0.05 * np.random.default_rng(2).normal(size=len(joints))
        data.qvel[[j.dofadr[0] for j in joints]] = qvel[6:]
        ctl.reset(data, time=start / reference.fps)
        datas.append(data)
    # One previous action for both: ours a0 (residual about the reference observed a step before),
    # holosoma's the action that commands the same target about its default angles.
    native_meta, holo_meta = native.metadata, holo.metadata
    a0 = 0.05 * rng.normal(size=native_meta["action_dim"])
    previous_ref = dict(zip(reference.joint_names, reference.joint_pos[start - 1], strict=True))
    target0 = {n: previous_ref[n] + s * a for n, s, a in
               zip(native_meta["joint_names"], native_meta["action_scale"], a0, strict=True)}  # fmt: skip
    controllers[0].context.last_action[:] = a0
    controllers[1].context.last_action[:] = [
        (target0[n] - d) / s for n, d, s in
        zip(holo_meta["joint_names"], holo_meta["action_offset"], holo_meta["action_scale"], strict=True)
    ]  # fmt: skip
    records = []
    for _ in range(steps):
        row = []
        for ctl, data in zip(controllers, datas, strict=True):
            by_name = dict(zip(ctl.metadata["joint_names"], ctl.step(data).target, strict=True))
            row.append((np.array([by_name[n] for n in DOF]), data.qpos[:7].copy()))
        records.append(row)
    return records


def test_round_trip_through_our_holosoma_format(round_trip):
    """The holosoma export, detected as format holosoma (inference timing from its metadata) and run by
    the deploy runtime, commands the native export's targets in the native runtime, step by step."""
    native, holo, reference, _ = round_trip
    assert open_policy(holo).time_step_lead == 1 and open_policy(holo).metadata["format"] == "holosoma"
    records = _targets_side_by_side(native, holo, reference)
    for step, ((target_native, root_native), (target_holo, root_holo)) in enumerate(records):
        np.testing.assert_allclose(target_holo, target_native, atol=1e-4, err_msg=f"control step {step}")
        np.testing.assert_allclose(root_holo, root_native, atol=1e-4, err_msg=f"control step {step}")
    # The same file read with holosoma training's timing (time_step = the observed frame) is told the
    # wrong frame: it recovers its previous action against the wrong reference, and its targets move.
    wrong = _targets_side_by_side(native, holo, reference, lead=0)
    assert max(np.abs(h[0] - n[0]).max() for n, h in wrong) > 5e-4


def test_sim2sim_runs_the_holosoma_export(round_trip, capsys):
    _, holo, _, folder = round_trip
    report = folder / "report.json"
    sim2sim_main([str(holo), "--format", "holosoma", "--seconds", "1.0", "--out", str(report)])
    data = json.loads(report.read_text())
    assert data["format"] == "holosoma" and data["algo"] == "holosoma tracking" and data["seconds"] == 1.0
    assert len(data["per_second"]) == 1 and "holosoma tracking policy" in capsys.readouterr().out


def test_a_policy_with_state_estimated_terms_is_refused():
    full = make_env("g1_tracking", num_envs=1, device="cpu", compile=False, overrides=QUIET[1:])
    full_agent = _agent(full)
    with pytest.raises(ValueError, match="'motion_anchor_pos_b' .* has no counterpart in holosoma's wbt observation"):
        HolosomaTrackingPolicy(deterministic_policy(full_agent), deployment_metadata(full, "g1_tracking", "sac", []),
                               embedded_reference(full), full.sim.mj_model)  # fmt: skip


def test_motion_file_and_motion_sets(tmp_path):
    env = make_env(TASK, num_envs=1, device="cpu", compile=False, overrides=QUIET)
    kinematics = RobotKinematics(env.sim.mj_model)
    clip = synthesize_clip(seconds=1.0, seed=9, kinematics=kinematics)
    save_motion(clip, tmp_path / "c.npz")
    reference = embedded_reference(env, tmp_path / "c.npz")
    torso = clip.body_names.index("torso_link")
    observed = [clip.joint_names.index(n) for n in env.robot.joint_names]
    np.testing.assert_array_equal(reference["joint_pos"], clip.joint_pos[:, observed])
    np.testing.assert_allclose(reference["ref_quat"], clip.body_quat_w[:, torso], atol=1e-12)  # renormalized on load
    save_motion(synthesize_clip(seconds=1.0, seed=8, kinematics=kinematics), tmp_path / "d.npz")
    files = f"commands.motion.params.motion_files=[{tmp_path / 'c.npz'},{tmp_path / 'd.npz'}]"
    two = make_env(TASK, num_envs=1, device="cpu", compile=False, overrides=[files])
    with pytest.raises(ValueError, match="motion set has 2 clips .* pass --motion FILE"):
        embedded_reference(two)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--motion", "c.npz"], "--motion goes with --convention holosoma"),
        (["run", "--convention", "holosoma", "--motion", "missing.npz"], "--motion missing.npz: no such motion file"),
    ],
)
def test_bad_motion_arguments_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        export_main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err
