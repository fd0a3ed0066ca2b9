"""Foreign policy formats (``unilab_gpu/deploy/foreign.py``, ``deploy/formats/holosoma.json``).

holosoma's G1 ONNX files (``../shared/peers/holosoma/``) run through the deploy runtime: every
observation term is checked against a computation of its own here (MuJoCo C quantities, NumPy,
the numbers of holosoma-inference 0.1.3's presets written out by hand), the action map against
holosoma's per-joint scales, the reference sim-to-sim follows against the network's own outputs, and the
concatenation order against a run that falls when it is wrong.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import mujoco
import numpy as np
import onnxruntime
import pytest

from unilab_gpu.cli.sim2sim import main as sim2sim_main
from unilab_gpu.deploy import Controller, DeploymentError, foreign
from unilab_gpu.deploy.foreign import ForeignPolicy, detect_format, open_policy
from unilab_gpu.export.sim2sim import Scenario, Sim2Sim
from unilab_gpu.paths import robot_asset

PEERS = Path(__file__).resolve().parents[1] / ".." / "shared" / "peers" / "holosoma"
LOCO = PEERS / "fastsac_g1_29dof.onnx"
LOCO_PPO = PEERS / "ppo_g1_29dof.onnx"
DANCE = PEERS / "fastsac_g1_29dof_dancing.onnx"
OURS = Path(__file__).resolve().parents[1] / "docs" / "policies" / "g1_velocity_sac.onnx"

pytestmark = pytest.mark.skipif(
    not DANCE.is_file(), reason="holosoma's policies are not at ../shared/peers/holosoma (see its README.md)"
)

# holosoma-inference 0.1.3, config_values/observation.py (loco-g1-29dof, wbt): term -> (dim, scale),
# in the order the presets list them.
LOCO_PRESET = {
    "base_ang_vel": (3, 0.25),
    "projected_gravity": (3, 1.0),
    "command_lin_vel": (2, 1.0),
    "command_ang_vel": (1, 1.0),
    "dof_pos": (29, 1.0),
    "dof_vel": (29, 0.05),
    "actions": (29, 1.0),
    "sin_phase": (2, 1.0),
    "cos_phase": (2, 1.0),
}
WBT_PRESET = {
    "motion_command": (58, 1.0),
    "motion_ref_ori_b": (6, 1.0),
    "base_ang_vel": (3, 1.0),
    "dof_pos": (29, 1.0),
    "dof_vel": (29, 1.0),
    "actions": (29, 1.0),
}
# config_values/robot.py, g1_29dof: default_dof_angles and default_per_joint_action_scale.
DEFAULTS = [-0.312, 0.0, 0.0, 0.669, -0.363, 0.0] * 2 + [0.0] * 3 + [0.2, 0.2, 0.0, 0.6, 0.0, 0.0, 0.0]
DEFAULTS += [0.2, -0.2, 0.0, 0.6, 0.0, 0.0, 0.0]
LEG, ARM, WRIST = 0.547546465219, 0.350661466378, 0.438577313919
HOLOSOMA_SCALES = [LEG, ARM, LEG, ARM, WRIST, WRIST] * 2 + [LEG, WRIST, WRIST] + [WRIST] * 5 + [0.074500870329] * 2
HOLOSOMA_SCALES += [WRIST] * 5 + [0.074500870329] * 2


def _model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(robot_asset("g1")))


def _dof_names(path: Path) -> list[str]:
    raw = onnxruntime.InferenceSession(str(path)).get_modelmeta().custom_metadata_map
    return json.loads(raw["dof_names"])


def _random_state(model: mujoco.MjModel, seed: int) -> mujoco.MjData:
    rng = np.random.default_rng(seed)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    quat = rng.normal(size=4)
    data.qpos[3:7] = quat / np.linalg.norm(quat)
    data.qpos[7:] += rng.uniform(-0.3, 0.3, model.nq - 7)
    data.qvel[:] = rng.normal(size=model.nv)
    mujoco.mj_forward(model, data)
    return data


def _split(obs: np.ndarray, preset: dict[str, tuple[int, float]]) -> dict[str, np.ndarray]:
    """``obs`` cut into holosoma's terms, concatenated by sorted name (policies/base.py)."""
    out, column = {}, 0
    for name in sorted(preset):
        out[name] = obs[column : column + preset[name][0]]
        column += preset[name][0]
    assert column == len(obs)
    return out


def _joint_columns(model: mujoco.MjModel, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
    return model.jnt_qposadr[ids], model.jnt_dofadr[ids]


def _pelvis_angular_velocity(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    velocity = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, model.body("pelvis").id, velocity, 1)
    return velocity[:3]  # [angular, linear], in the body frame (XBODY: not its inertial frame)


def test_detects_the_format_of_each_file() -> None:
    for path in PEERS.glob("*.onnx"):
        raw = onnxruntime.InferenceSession(str(path)).get_modelmeta().custom_metadata_map
        assert detect_format(raw) == "holosoma"
    raw = onnxruntime.InferenceSession(str(OURS)).get_modelmeta().custom_metadata_map
    assert detect_format(raw) == "unilab"
    assert ForeignPolicy(LOCO, "holosoma").kind == "velocity"
    assert open_policy(DANCE).kind == "tracking"
    assert open_policy(OURS).metadata["task"].startswith("g1_velocity")


def test_locomotion_terms_match_an_independent_computation() -> None:
    model = _model()
    policy = ForeignPolicy(LOCO, "holosoma")
    controller = Controller(policy, model)
    data = _random_state(model, 0)
    command, phase = np.array([0.3, -0.2, 0.4]), 1.1
    controller.command = command
    controller.reset(data, phase=phase)
    obs = controller.observe(data)
    assert obs.shape == (100,)
    terms = _split(obs, LOCO_PRESET)
    names = _dof_names(LOCO)
    qpos, qvel = _joint_columns(model, names)
    # holosoma advances its clock (2 pi / (50 Hz x 1 s)) before it observes; feet at offsets 0 and pi
    clock = phase + 2 * math.pi / 50 + np.array([0.0, math.pi])
    gravity = data.xmat[model.body("pelvis").id].reshape(3, 3).T @ np.array([0.0, 0.0, -1.0])
    expected = {
        "base_ang_vel": 0.25 * _pelvis_angular_velocity(model, data),
        "projected_gravity": gravity,
        "command_lin_vel": command[:2],
        "command_ang_vel": command[2:],
        "dof_pos": data.qpos[qpos] - np.asarray(DEFAULTS),
        "dof_vel": 0.05 * data.qvel[qvel],
        "actions": np.zeros(29),
        "sin_phase": np.sin(clock),
        "cos_phase": np.cos(clock),
    }
    for name, value in expected.items():
        np.testing.assert_allclose(terms[name], value, atol=1e-5, err_msg=name)
    # The action map: default angles + 0.25 x action (loco preset), the clipped action observed next.
    step = controller.step(data)
    np.testing.assert_allclose(step.target, np.asarray(DEFAULTS) + 0.25 * step.action, atol=1e-6)
    np.testing.assert_allclose(_split(controller.observe(data), LOCO_PRESET)["actions"], step.action, atol=1e-6)


def test_tracking_terms_and_action_scale_match_an_independent_computation(dance_reference) -> None:
    model = _model()
    policy = ForeignPolicy(DANCE, "holosoma")
    np.testing.assert_allclose(policy.metadata["action_scale"], HOLOSOMA_SCALES, rtol=1e-9)
    controller = Controller(policy, model, dance_reference)
    data = _random_state(model, 1)
    frame = 1234
    controller.reset(data, time=frame / 50)
    obs = controller.observe(data)
    terms = _split(obs, WBT_PRESET)
    session = onnxruntime.InferenceSession(str(DANCE))
    feed = {"obs": np.zeros((1, 154), np.float32), "time_step": np.array([[frame]], np.float32)}
    joint_pos, joint_vel, _, ref_xyzw = (v[0] for v in session.run(None, feed)[1:])
    torso = data.xmat[model.body("torso_link").id].reshape(3, 3)
    reference = np.zeros(9)
    mujoco.mju_quat2Mat(reference, np.asarray(ref_xyzw, np.float64)[[3, 0, 1, 2]])
    relative = torso.T @ reference.reshape(3, 3)
    qpos, qvel = _joint_columns(model, _dof_names(DANCE))
    expected = {
        "motion_command": np.concatenate([joint_pos, joint_vel]),
        "motion_ref_ori_b": relative[:, :2].reshape(6),
        "base_ang_vel": _pelvis_angular_velocity(model, data),
        "dof_pos": data.qpos[qpos] - np.asarray(DEFAULTS),
        "dof_vel": data.qvel[qvel],
        "actions": np.zeros(29),
    }
    for name, value in expected.items():
        np.testing.assert_allclose(terms[name], value, atol=1e-5, err_msg=name)
    step = controller.step(data)
    np.testing.assert_allclose(step.target, np.asarray(DEFAULTS) + np.asarray(HOLOSOMA_SCALES) * step.action, atol=1e-6)


@pytest.fixture(scope="module")
def dance_reference():
    return Scenario(DANCE, format="holosoma").prepare(lambda _: None).controller.reference


def test_sim2sim_follows_the_networks_own_reference(dance_reference) -> None:
    """Without --motion a holosoma dance file is run on the reference behind its time_step input:
    6,774 frames (README); joints and the torso's pose at a frame are the network's outputs there."""
    reference = dance_reference
    assert reference.num_frames == 6774
    session = onnxruntime.InferenceSession(str(DANCE))
    torso = reference.body_column("torso_link")
    for frame in (0, 1000, 6773):
        feed = {"obs": np.zeros((1, 154), np.float32), "time_step": np.array([[frame]], np.float32)}
        joint_pos, joint_vel, ref_pos, ref_xyzw = (v[0] for v in session.run(None, feed)[1:])
        np.testing.assert_allclose(reference.joint_pos[frame], joint_pos, atol=1e-6)
        np.testing.assert_allclose(reference.joint_vel[frame], joint_vel, atol=1e-6)
        np.testing.assert_allclose(reference.body_pos_w[frame, torso], ref_pos, atol=1e-5)
        quat = np.asarray(ref_xyzw, np.float64)[[3, 0, 1, 2]]
        assert abs(abs(np.dot(reference.body_quat_w[frame, torso], quat / np.linalg.norm(quat))) - 1) < 1e-6


def _listed_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the holosoma format that concatenates the terms in the preset's listing order."""
    folder = tmp_path / "formats"
    shutil.copytree(foreign.FORMATS, folder)
    data = json.loads((folder / "holosoma.json").read_text())
    data["concatenation"] = "listed"
    (folder / "holosoma.json").write_text(json.dumps(data))
    monkeypatch.setattr(foreign, "FORMATS", folder)


def _falls(seconds: float, path: Path = LOCO) -> int:
    prepared = Scenario(path, command=[0.5, 0.0, 0.0], seconds=seconds, format="holosoma").prepare(lambda _: None)
    run = Sim2Sim(prepared.controller, [0.5, 0.0, 0.0], prepared.falls, None, prepared.cfg.divergence, lambda _: None)
    return run.run(prepared.seconds)["summary"]["falls"]


def test_the_wrong_concatenation_order_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """holosoma concatenates by sorted term name: so built, FastSAC walks 8 s at 0.5 m/s without a
    fall; in the order the preset lists the terms, the vector differs and the robot falls."""
    model = _model()
    data = _random_state(model, 2)
    right = Controller(ForeignPolicy(LOCO, "holosoma"), model)
    right.reset(data)
    assert _falls(8.0) == 0
    _listed_format(tmp_path, monkeypatch)
    wrong = Controller(ForeignPolicy(LOCO, "holosoma"), model)
    wrong.reset(data)
    assert np.abs(wrong.observe(data) - right.observe(data)).max() > 0.1
    assert _falls(8.0) > 0


def test_refuses_a_policy_it_cannot_describe(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import onnx

    bare = onnx.load(str(LOCO))
    del bare.metadata_props[:]
    path = tmp_path / "bare.onnx"
    onnx.save(bare, str(path))
    with pytest.raises(DeploymentError, match="no format describes this policy"):
        open_policy(path)
    assert sim2sim_main([str(path), "--command", "0.5,0,0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no format describes this policy" in err
    # A format without a kind for the network's inputs (obs, time_step): the dance file is refused.
    data = json.loads((foreign.FORMATS / "holosoma.json").read_text())
    del data["kinds"]["tracking"]
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "holosoma.json").write_text(json.dumps(data))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(foreign, "FORMATS", folder)
        with pytest.raises(DeploymentError, match="fit no kind"):
            ForeignPolicy(DANCE, "holosoma")
    with pytest.raises(DeploymentError, match="not a foreign policy format"):
        ForeignPolicy(LOCO, "mjlab")


def test_sim2sim_runs_a_holosoma_policy(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "report.json"
    assert (
        sim2sim_main(
            [str(LOCO_PPO), "--format", "holosoma", "--command", "0.5,0,0", "--seconds", "3", "--out", str(out)]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert report["algo"] == "holosoma velocity" and report["summary"]["falls"] == 0
    assert len(report["per_second"]) == 3
    assert report["summary"]["lin_vel_x_mps"] > 0.2


def test_joints_are_mapped_onto_the_mjcf_by_name(tmp_path: Path) -> None:
    """A file whose joint order is not the MJCF's: observed joints, gains, defaults and targets follow
    its names (here the holosoma file with its ``dof_names``, ``kp`` and ``kd`` reversed)."""
    import onnx

    proto = onnx.load(str(LOCO))
    values = {p.key: json.loads(p.value) for p in proto.metadata_props}
    for entry in proto.metadata_props:
        if entry.key in ("dof_names", "kp", "kd"):
            entry.value = json.dumps(values[entry.key][::-1])
    path = tmp_path / "reversed.onnx"
    onnx.save(proto, str(path))
    model = _model()
    controller = Controller(ForeignPolicy(path, "holosoma"), model)  # the MJCF's gains checked by name
    data = _random_state(model, 3)
    controller.reset(data)
    names = values["dof_names"][::-1]
    qpos, _ = _joint_columns(model, names)
    dof_pos = _split(controller.observe(data), LOCO_PRESET)["dof_pos"]
    np.testing.assert_allclose(dof_pos, data.qpos[qpos] - np.asarray(DEFAULTS[::-1]), atol=1e-5)
    step = controller.step(data)
    actuators = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in names]
    np.testing.assert_allclose(data.ctrl[actuators], step.target, atol=1e-12)


def test_the_robustness_grid_runs_a_foreign_policy() -> None:
    """holosoma's walker goes through the same fault grid as our exports (``--robustness --format``):
    every cell runs, the nominal cells agree with each other, and a fault changes what the
    policy does (3 steps of command latency move its velocity error off the nominal one)."""
    from unilab_gpu.export.sim2sim.robustness import robustness_grid

    report = robustness_grid(LOCO, seconds=1.0, commands=[(0.5, 0.0, 0.0)], format="holosoma")
    cells = {(c["fault"], c["level"]): c for c in report["cells"]}
    nominal = cells[("delay_steps", 0)]
    assert nominal["falls"] == 0 and nominal["diverged"] == 0
    assert cells[("payload_kg", 0)]["error"] == pytest.approx(nominal["error"])
    assert cells[("delay_steps", 3)]["error"] != pytest.approx(nominal["error"], abs=1e-4)
    # holosoma's metadata names no observation noise: its row is the nominal run, and says so
    assert list(report["inert_faults"]) == ["noise_scale"]
    assert all(cells[("noise_scale", level)] | {"level": 0.0} == cells[("noise_scale", 0.0)] for level in (1.0, 2.0))
