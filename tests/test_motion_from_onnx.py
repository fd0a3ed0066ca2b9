"""``unilab-motion from-onnx``: the motion a tracking ONNX embeds behind ``time_step``, read back.

A tiny ONNX built here with ``onnx.helper`` holds a known clip as holosoma's exporter stores one
(its joints in another order than the model's, the pose of ``torso_link`` rather than the root,
xyzw quaternions, held past its last frame): the written clip must be that clip, root included.
The real holosoma dance policies (``../shared/peers/holosoma``) are checked against onnxruntime's
own outputs at a few steps; those tests skip where the files are absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from motion_helpers import run_motion_cli

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from unilab_gpu.motion import load_motion, synthesize_clip  # noqa: E402
from unilab_gpu.motion.kinematics import RobotKinematics  # noqa: E402
from unilab_gpu.motion.policy_reference import read_policy_reference  # noqa: E402
from unilab_gpu.motion.validation import MotionFormatError  # noqa: E402

G1 = RobotKinematics.from_robot("g1")
PEERS = Path(__file__).resolve().parents[1].parent / "shared" / "peers" / "holosoma"
OBS_DIM = 5


def _tracking_onnx(
    path: Path, tables: dict[str, np.ndarray], dof_names, obs_leaks: bool = False, named: bool = True
) -> Path:
    """An ONNX like holosoma's tracking policies: ``obs (1, 5)``, ``time_step (1, 1)`` float ->
    ``actions`` (a linear map of obs) and the four reference tables gathered at ``clip(time_step,
    0, T - 1)``. ``obs_leaks`` adds ``sum(obs)`` to ``joint_pos`` (a reference that is not fixed);
    ``named=False`` leaves out the ``dof_names`` metadata."""
    frames = len(tables["joint_pos"])
    nodes = [
        helper.make_node("Cast", ["time_step"], ["t_int"], to=TensorProto.INT64),
        helper.make_node("Squeeze", ["t_int", "axis1"], ["t_sq"]),
        helper.make_node("Clip", ["t_sq", "zero", "last"], ["t"]),
        helper.make_node("MatMul", ["obs", "w"], ["actions"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(frames - 1, np.int64), "last"),
        numpy_helper.from_array(np.ones((OBS_DIM, len(dof_names)), np.float32), "w"),
    ]
    for name, table in tables.items():
        inits.append(numpy_helper.from_array(table.astype(np.float32), f"{name}_table"))
        out = f"{name}_raw" if (obs_leaks and name == "joint_pos") else name
        nodes.append(helper.make_node("Gather", [f"{name}_table", "t"], [out]))
    if obs_leaks:
        nodes += [helper.make_node("ReduceSum", ["obs"], ["obs_sum"], keepdims=1),
                  helper.make_node("Add", ["joint_pos_raw", "obs_sum"], ["joint_pos"])]  # fmt: skip
    widths = {"joint_pos": len(dof_names), "joint_vel": len(dof_names), "ref_pos_xyz": 3, "ref_quat_xyzw": 4}
    graph = helper.make_graph(
        nodes,
        "tracking",
        [
            helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, OBS_DIM]),
            helper.make_tensor_value_info("time_step", TensorProto.FLOAT, [1, 1]),
        ],  # fmt: skip
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, len(dof_names)])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, w]) for n, w in widths.items()],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if named:
        helper.set_model_props(model, {"dof_names": json.dumps(list(dof_names))})
    onnx.save(model, path)
    return path


TORSO = G1.body_names.index("torso_link")


def _clip_tables(clip, order: np.ndarray) -> dict[str, np.ndarray]:
    """The clip's reference in the ONNX convention: joints in ``order``, the torso's pose, quaternion xyzw."""
    quat = clip.body_quat_w[:, TORSO]
    return {
        "joint_pos": clip.joint_pos[:, order],
        "joint_vel": clip.joint_vel[:, order],
        "ref_pos_xyz": clip.body_pos_w[:, TORSO],
        "ref_quat_xyzw": np.concatenate((quat[:, 1:], quat[:, :1]), axis=1),
    }


@pytest.fixture(scope="module")
def known():
    """A 1 s synthetic clip, its joints reversed in the ONNX (mapped back by ``dof_names``)."""
    clip = synthesize_clip(seconds=1.0, seed=4, kinematics=G1)
    order = np.arange(G1.num_joints)[::-1]
    return clip, order, [G1.joint_names[j] for j in order]


def test_known_motion_comes_back(tmp_path, capsys, known):
    clip, order, names = known
    policy = _tracking_onnx(tmp_path / "p.onnx", _clip_tables(clip, order), names)
    out = tmp_path / "ref.npz"
    code, text, err = run_motion_cli(capsys, "from-onnx", str(policy), str(out), "--hold-seconds", "0.5")
    assert code == 0, err
    assert f"{clip.num_frames} frames at 50 fps (1.00 s)" in text and "from time_step 50" in text
    assert "joint limits: inside" in text
    got = load_motion(out, fps=None, kinematics=G1)
    assert got.num_frames == clip.num_frames == 51
    tol = dict(atol=5e-6)  # the ONNX stores float32
    np.testing.assert_allclose(got.joint_pos, clip.joint_pos, **tol)
    np.testing.assert_allclose(got.joint_vel, clip.joint_vel, atol=1e-5)
    # The root is solved from the torso's pose and the waist joints.
    np.testing.assert_allclose(got.root_pos, clip.root_pos, **tol)
    np.testing.assert_allclose(got.root_quat, clip.root_quat, **tol)
    # Bodies come from the model's kinematics: the synthetic clip's own FK bodies.
    np.testing.assert_allclose(got.body_pos_w, clip.body_pos_w, atol=1e-5)
    np.testing.assert_allclose(got.body_lin_vel_w, clip.body_lin_vel_w, atol=1e-3)


def test_a_still_stretch_inside_the_motion_is_kept(tmp_path, known):
    clip, order, names = known
    tables = {k: np.concatenate((v[:20], np.repeat(v[20:21], 10, axis=0), v[20:])) for k, v in
              _clip_tables(clip, order).items()}  # fmt: skip
    path = _tracking_onnx(tmp_path / "still.onnx", tables, names)
    reference = read_policy_reference(path, 50.0, G1, hold_seconds=0.5)
    assert reference.last_step == 60 and reference.source.num_frames == 61
    np.testing.assert_allclose(reference.source.joint_pos[20:31], np.repeat(clip.joint_pos[20:21, order], 11, 0),
                               atol=2e-6)  # fmt: skip
    # A still stretch longer than the hold ends the motion there.
    assert read_policy_reference(path, 50.0, G1, hold_seconds=0.1).last_step == 20


@pytest.mark.parametrize(
    "case, message",
    [
        ("obs_leaks", "output 'joint_pos' at time_step 0 depends on the observation"),
        ("still", "the reference outputs never change"),
        ("no_names", "the metadata has no 'dof_names'"),
    ],
)
def test_bad_policies_are_one_line(tmp_path, capsys, known, case, message):
    clip, order, names = known
    tables = _clip_tables(clip, order)
    if case == "still":
        tables = {k: np.repeat(v[:1], 5, axis=0) for k, v in tables.items()}
    policy = _tracking_onnx(tmp_path / "p.onnx", tables, names, case == "obs_leaks", case != "no_names")
    code, _, err = run_motion_cli(capsys, "from-onnx", str(policy), str(tmp_path / "o.npz"), "--hold-seconds", "0.2")
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_a_motion_that_never_holds_is_refused(tmp_path, known):
    clip, order, names = known
    path = _tracking_onnx(tmp_path / "p.onnx", _clip_tables(clip, order), names)
    with pytest.raises(MotionFormatError, match="still changes at time_step 25"):
        read_policy_reference(path, 50.0, G1, hold_seconds=0.5, max_seconds=0.5)


@pytest.mark.parametrize("name, frames", [("ppo_g1_29dof_dancing", 6574), ("fastsac_g1_29dof_dancing", 6774)])
def test_holosoma_dance(tmp_path, capsys, name, frames):
    import onnxruntime

    policy = PEERS / f"{name}.onnx"
    if not policy.is_file():
        pytest.skip(f"holosoma's dance policy is not at {policy}")
    out = tmp_path / "dance.npz"
    code, text, err = run_motion_cli(capsys, "from-onnx", str(policy), str(out))
    assert code == 0, err
    assert f"{frames} frames at 50 fps" in text
    clip = load_motion(out, fps=None, kinematics=G1)
    session = onnxruntime.InferenceSession(str(policy), providers=["CPUExecutionProvider"])
    dof_names = json.loads(session.get_modelmeta().custom_metadata_map["dof_names"])
    columns = [dof_names.index(n) for n in G1.joint_names]
    rng = np.random.default_rng(0)
    for step in (0, 1, 777, frames // 2, frames - 1):
        feeds = {"obs": rng.standard_normal((1, 154)).astype(np.float32), "time_step": np.array([[step]], np.float32)}
        joint_pos, joint_vel, pos, quat_xyzw = session.run(["joint_pos", "joint_vel", "ref_pos_xyz", "ref_quat_xyzw"],
                                                           feeds)  # fmt: skip
        np.testing.assert_allclose(clip.joint_pos[step], joint_pos[0, columns], atol=1e-6)
        np.testing.assert_allclose(clip.joint_vel[step], joint_vel[0, columns], atol=1e-5)
        # The stored pose is the torso's: the clip's torso lies there (the root solved, FK back).
        np.testing.assert_allclose(clip.body_pos_w[step, TORSO], pos[0], atol=1e-6)
        quat = quat_xyzw[0, [3, 0, 1, 2]]
        np.testing.assert_allclose(clip.body_quat_w[step, TORSO], quat / np.linalg.norm(quat), atol=1e-6)
    # The pelvis is the root body; every quaternion is a unit one.
    np.testing.assert_allclose(clip.body_pos_w[:, 0], clip.root_pos, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(clip.body_quat_w, axis=-1), 1.0, atol=1e-9)
