"""The blend-in from the standing keyframe: its ends against the keyframe and the clip, its middle
against the smoothstep by hand, its bodies against MuJoCo C's forward kinematics."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.motion.blend import blend_in_from_keyframe
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.synthetic import synthesize_clip


@pytest.fixture(scope="module")
def setup():
    kin = RobotKinematics.from_robot("g1")
    clip = synthesize_clip(seconds=2.0, seed=3, kinematics=kin)
    key = kin.model.key("stand").qpos.copy()
    return kin, clip, key, blend_in_from_keyframe(clip, kin, key, seconds=0.4)


def _yaw(q):
    w, x, y, z = q
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def test_blend_starts_on_the_keyframe_and_ends_on_frame_zero(setup) -> None:
    kin, clip, key, out = setup
    n = 20  # 0.4 s at 50 fps
    assert out.joint_pos.shape[0] == clip.joint_pos.shape[0] + n
    np.testing.assert_allclose(out.joint_pos[n:], clip.joint_pos)
    np.testing.assert_allclose(out.root_pos[n:], clip.root_pos)
    np.testing.assert_allclose(out.joint_pos[0], key[7:])
    np.testing.assert_allclose(out.root_pos[0], [clip.root_pos[0, 0], clip.root_pos[0, 1], key[2]])
    # The keyframe (facing +x, its own slight tilt kept) turned to frame 0's heading: yaw ⊗ key.
    half = _yaw(clip.root_quat[0]) / 2
    turned = np.zeros(4)
    mujoco.mju_mulQuat(turned, np.array([np.cos(half), 0.0, 0.0, np.sin(half)]), key[3:7] / np.linalg.norm(key[3:7]))
    np.testing.assert_allclose(out.root_quat[0], turned, atol=1e-9)
    # Halfway, the smoothstep is 1/2; a quarter in, 3/16 - 2/64 = 0.15625.
    np.testing.assert_allclose(out.joint_pos[n // 2], (key[7:] + clip.joint_pos[0]) / 2)
    np.testing.assert_allclose(out.joint_pos[n // 4], key[7:] + 0.15625 * (clip.joint_pos[0] - key[7:]))


def test_blend_bodies_equal_mujoco_forward_kinematics(setup) -> None:
    kin, clip, key, out = setup
    data = mujoco.MjData(kin.model)
    for t in (0, 7, 19):
        data.qpos[:3], data.qpos[3:7], data.qpos[7:] = out.root_pos[t], out.root_quat[t], out.joint_pos[t]
        mujoco.mj_kinematics(kin.model, data)
        np.testing.assert_allclose(out.body_pos_w[t], data.xpos[1:], atol=1e-9)
    # Velocities are finite differences of the blended poses: at frame 0 a forward difference,
    # (s(1/20) - s(0)) * 50 fps of the whole change, s(x) = 3x^2 - 2x^3.
    x = 1 / 20
    expected = (3 * x**2 - 2 * x**3) * 50.0 * (clip.joint_pos[0] - key[7:])
    np.testing.assert_allclose(out.joint_vel[0], expected, atol=1e-9)


def test_tracking_task_blends_every_clip_and_names_a_missing_keyframe() -> None:
    quiet = ["events.push=null", "commands.motion.params.synthetic_seconds=2.0"]
    plain = make_env("g1_tracking", num_envs=1, compile=False, overrides=quiet, announce=False)
    blended = make_env(
        "g1_tracking", num_envs=1, compile=False, overrides=[*quiet, "commands.motion.params.blend_in_seconds=0.5"],
        announce=False,
    )  # fmt: skip
    length = int(plain.command_manager.get("motion").library.clip_length[0])
    assert int(blended.command_manager.get("motion").library.clip_length[0]) == length + 25
    with pytest.raises(ValueError, match="blend_in_keyframe: the model has no keyframe 'sit'"):
        make_env(
            "g1_tracking", num_envs=1, compile=False, announce=False,
            overrides=[*quiet, "commands.motion.params.blend_in_seconds=0.5",
                       "commands.motion.params.blend_in_keyframe=sit"],
        )  # fmt: skip
