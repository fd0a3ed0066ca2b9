"""A BeyondMimic ``.npz`` recorded in Isaac Lab stores joints and bodies in Isaac Lab's breadth-first
order without names: loaded by declaring the order or detecting it by forward kinematics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from motion_helpers import g1_test_clip

from unilab_gpu.cli.motion import main
from unilab_gpu.motion import MotionFormatError, RobotKinematics, load_motion, synthesize_clip

ISAACLAB_G1_JOINTS = [
    "left_hip_pitch_joint", "right_hip_pitch_joint", "waist_yaw_joint", "left_hip_roll_joint",
    "right_hip_roll_joint", "waist_roll_joint", "left_hip_yaw_joint", "right_hip_yaw_joint", "waist_pitch_joint",
    "left_knee_joint", "right_knee_joint", "left_shoulder_pitch_joint", "right_shoulder_pitch_joint",
    "left_ankle_pitch_joint", "right_ankle_pitch_joint", "left_shoulder_roll_joint", "right_shoulder_roll_joint",
    "left_ankle_roll_joint", "right_ankle_roll_joint", "left_shoulder_yaw_joint", "right_shoulder_yaw_joint",
    "left_elbow_joint", "right_elbow_joint", "left_wrist_roll_joint", "right_wrist_roll_joint",
    "left_wrist_pitch_joint", "right_wrist_pitch_joint", "left_wrist_yaw_joint", "right_wrist_yaw_joint",
]  # fmt: skip
"""The G1's joint order in Isaac Lab (BeyondMimic's and unitree_rl_lab's G1 29-DoF policies list
their joints in it): breadth first over the kinematic tree."""


@pytest.fixture(scope="module")
def g1():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module", params=["synthetic", "largebox_carry"])
def clip(request, g1):
    return g1_test_clip(request.param, g1, seed=6)


def _isaaclab_npz(clip, path: Path, joints: list[str], bodies: list[str]) -> Path:
    """``clip`` as BeyondMimic's Isaac Lab script writes it: no names, columns in Isaac Lab's order."""
    j = [clip.joint_names.index(n) for n in joints]
    b = [clip.body_names.index(n) for n in bodies]
    fields = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
    np.savez(path, fps=np.array([clip.fps]), joint_pos=clip.joint_pos[:, j], joint_vel=clip.joint_vel[:, j],
             **{name: getattr(clip, name)[:, b] for name in fields})  # fmt: skip
    return path


def _breadth_first_bodies(g1) -> list[str]:
    """Breadth first over the body tree, written out here from the parent ids (MuJoCo C)."""
    parent = g1.model.body_parentid
    levels, frontier = [], [0]
    while frontier:
        frontier = [b for b in range(1, g1.model.nbody) if parent[b] in frontier]
        levels += frontier
    return [g1.model.body(b).name for b in levels]


def test_the_breadth_first_order_is_isaac_labs(g1) -> None:
    joints, bodies = g1.isaaclab_order()
    assert list(joints) == ISAACLAB_G1_JOINTS
    assert list(bodies) == _breadth_first_bodies(g1)
    assert bodies[:4] == ("pelvis", "left_hip_pitch_link", "right_hip_pitch_link", "waist_yaw_link")


def test_an_isaaclab_file_is_detected_and_loads_as_the_clip(g1, clip, tmp_path) -> None:
    path = _isaaclab_npz(clip, tmp_path / "isaaclab.npz", ISAACLAB_G1_JOINTS, _breadth_first_bodies(g1))
    for order in ("auto", "isaaclab_bfs"):
        loaded = load_motion(path, fps=None, kinematics=g1, order=order)
        # The format's root velocities are body 0's (the real clip's own root velocities differ).
        root_vel = {"root_lin_vel": clip.body_lin_vel_w[:, 0], "root_ang_vel": clip.body_ang_vel_w[:, 0]}
        expected = {**clip.arrays(), **root_vel}
        for name, value in expected.items():
            np.testing.assert_allclose(getattr(loaded, name), value, atol=1e-12, err_msg=f"{order}: {name}")
    with pytest.raises(MotionFormatError, match=r"'body_pos_w' at frame \d+, body '.*': \[.*\] m is .* m from"):
        load_motion(path, fps=None, kinematics=g1, order="mjcf")


def test_a_model_order_file_still_loads(g1, clip, tmp_path) -> None:
    path = _isaaclab_npz(clip, tmp_path / "mjlab.npz", list(g1.joint_names), list(g1.body_names))
    loaded = load_motion(path, fps=None, kinematics=g1)
    np.testing.assert_allclose(loaded.joint_pos, clip.joint_pos, atol=1e-12)
    np.testing.assert_allclose(loaded.body_pos_w, clip.body_pos_w, atol=1e-12)


def test_cli_order_option(g1, tmp_path, capsys) -> None:
    clip = synthesize_clip(seconds=1.0, seed=7, kinematics=g1)
    path = _isaaclab_npz(clip, tmp_path / "isaaclab.npz", ISAACLAB_G1_JOINTS, _breadth_first_bodies(g1))
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", str(path), str(tmp_path / "out.npz"), "--order", "mjcf"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1 and "'body_pos_w' at frame" in err
    assert not (tmp_path / "out.npz").exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", str(path), str(tmp_path / "out.npz"), "--order", "isaaclab_bfs"])
        raise SystemExit(0)
    assert exit_info.value.code == 0
    np.testing.assert_allclose(load_motion(tmp_path / "out.npz", kinematics=g1).joint_pos, clip.joint_pos, atol=1e-12)


def test_the_tracking_task_declares_the_order_of_its_files(g1, tmp_path) -> None:
    # commands.motion.params.motion_order reaches every file of the motion set: declared Isaac Lab
    # order loads the clip as it was, the model's order is refused by the body check, a bad value
    # names the key.
    from unilab_gpu.envs.make_env import make_env

    clip = g1_test_clip("synthetic", g1, seed=7)  # 50 fps, the control rate: no resampling
    path = _isaaclab_npz(clip, tmp_path / "isaaclab.npz", ISAACLAB_G1_JOINTS, _breadth_first_bodies(g1))

    def build(order: str):
        files = f"commands.motion.params.motion_files=['{path}']"
        overrides = [files, f"commands.motion.params.motion_order={order}"]
        return make_env("g1_tracking", num_envs=2, compile=False, overrides=overrides, announce=False)

    library = build("isaaclab_bfs").command_manager.get("motion").library
    columns = [clip.joint_names.index(n) for n in library.joint_names]
    np.testing.assert_allclose(library.joint_pos.numpy(), clip.joint_pos[:, columns], atol=1e-6)
    with pytest.raises(MotionFormatError, match=r"isaaclab\.npz: 'body_pos_w' at frame \d+"):
        build("mjcf")
    with pytest.raises(ValueError, match=r"commands\.motion\.params\.motion_order must be one of \['auto', 'mjcf', "
                                         r"'isaaclab_bfs'\], got 'bfs'"):  # fmt: skip
        build("bfs")
    bad_order = ["commands.motion.params.motion_order=bfs"]  # the synthetic clip (no files) checks the key too
    with pytest.raises(ValueError, match=r"commands\.motion\.params\.motion_order must be one of"):
        make_env("g1_tracking", num_envs=2, compile=False, overrides=bad_order, announce=False)


def test_sim2sim_reads_the_training_files_in_the_declared_order(g1, tmp_path) -> None:
    # A policy's metadata names its clip and the order training read it in; unilab-sim2sim reads
    # the clip the same way (here the model's order would be refused), and detects a --motion file.
    from unilab_gpu.export.sim2sim import load_reference

    clip = g1_test_clip("synthetic", g1, seed=8)
    path = _isaaclab_npz(clip, tmp_path / "isaaclab.npz", ISAACLAB_G1_JOINTS, _breadth_first_bodies(g1))
    func = "unilab_gpu.tasks.tracking.motion_command.MotionCommand"

    def meta(order: str) -> dict:
        params = {"motion_files": [path.name], "motion_order": order}
        return {"control_dt": 1.0 / clip.fps, "commands": {"motion": {"func": func, "params": params}}}

    reference, _ = load_reference(meta("isaaclab_bfs"), g1.model, None, policy_path=tmp_path / "policy.onnx")
    columns = [clip.joint_names.index(n) for n in reference.joint_names]
    np.testing.assert_allclose(reference.joint_pos, clip.joint_pos[:, columns], atol=1e-9)
    with pytest.raises(MotionFormatError, match=r"'body_pos_w' at frame \d+"):
        load_reference(meta("mjcf"), g1.model, None, policy_path=tmp_path / "policy.onnx")
    detected, name = load_reference(meta("mjcf"), g1.model, str(path))
    np.testing.assert_allclose(detected.joint_pos, reference.joint_pos)
    assert name == str(path)
