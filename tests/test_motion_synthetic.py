"""Synthetic clips: joint limits, feet on the floor, velocities consistent with positions, determinism."""

import numpy as np
import pytest
import torch

from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.synthetic import LIMIT_MARGIN, sole_geoms, synthesize_clip
from unilab_gpu.motion.velocities import angular_velocity, linear_velocity
from unilab_gpu.utils.rotations import quat_apply


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module")
def clip(kin):
    return synthesize_clip(seconds=6.5, seed=11, kinematics=kin)


def test_shape_and_names(clip, kin):
    assert clip.num_frames == 326 and clip.fps == 50.0
    assert clip.joint_names == kin.joint_names and clip.body_names == kin.body_names


def test_joint_limits_with_margin(clip, kin):
    lo, hi = kin.joint_range.T
    margin = np.minimum(LIMIT_MARGIN, 0.25 * (hi - lo))
    assert (clip.joint_pos >= lo + margin - 1e-12).all() and (clip.joint_pos <= hi - margin + 1e-12).all()
    assert clip.joint_pos.std(axis=0).min() > 0.01  # every joint actually moves


def test_feet_on_the_floor(clip, kin):
    soles = sole_geoms(kin.model)
    assert len(soles) == 8
    radius = kin.model.geom_size[soles, 0]
    # Sole sphere centres from the clip's own body poses (independent of the synthesizer's FK pass).
    body = kin.model.geom_bodyid[soles] - 1
    local = torch.from_numpy(kin.model.geom_pos[soles])
    centres = clip.body_pos_w[:, body] + quat_apply(torch.from_numpy(clip.body_quat_w[:, body]), local).numpy()
    lowest = (centres[..., 2] - radius).min(axis=1)
    assert np.abs(lowest).max() < 1e-3  # touching, within 1 mm, every frame
    assert clip.root_pos[:, 2].min() > 0.5  # standing, not folded up


def test_velocities_match_finite_differences(clip):
    fd = {
        "joint_vel": linear_velocity(clip.joint_pos, clip.fps),
        "root_lin_vel": linear_velocity(clip.root_pos, clip.fps),
        "root_ang_vel": angular_velocity(clip.root_quat, clip.fps),
        "body_lin_vel_w": linear_velocity(clip.body_pos_w, clip.fps),
        "body_ang_vel_w": angular_velocity(clip.body_quat_w, clip.fps),
    }
    for name, ref in fd.items():
        value = getattr(clip, name)
        # Central differences are O(dt²) off; the root height's kinks (foot switches) cost a little more.
        assert np.abs(value - ref)[1:-1].max() < 0.01, name
        assert np.abs(value).max() > 0.05, name


def test_root_motion_is_gentle(clip):
    assert np.abs(clip.root_pos[:, :2]).max() <= 0.4 + 1e-12
    up = quat_apply(torch.from_numpy(clip.root_quat), torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)).numpy()
    assert up[:, 2].min() > np.cos(0.1)


def test_deterministic_per_seed(kin):
    a = synthesize_clip(seconds=1.0, seed=5, kinematics=kin)
    b = synthesize_clip(seconds=1.0, seed=5, kinematics=kin)
    c = synthesize_clip(seconds=1.0, seed=6, kinematics=kin)
    np.testing.assert_array_equal(a.body_pos_w, b.body_pos_w)
    assert np.abs(a.joint_pos - c.joint_pos).max() > 0.05
