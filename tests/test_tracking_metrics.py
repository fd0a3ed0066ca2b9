"""Tracking metrics in stats.summary(): per-step errors against NumPy, summed on the device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.utils.sync_audit import no_host_sync


def _angle(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    dot = np.abs(np.sum(q1 * q2, axis=-1)).clip(max=1.0)
    return 2.0 * np.arccos(dot)


def test_summary_reports_the_mean_per_step_tracking_errors() -> None:
    overrides = ["events.push=null", "randomize_initial_episode_length=false"]
    env = make_env("g1_tracking", num_envs=4, compile=False, announce=False, overrides=overrides)
    env.reset()
    env.stats.clear()
    actions = torch.linspace(-0.3, 0.3, 4 * 29).view(4, 29)
    expected = {
        "body_pos_error_m": [],
        "body_pos_error_anchored_m": [],
        "body_ori_error_rad": [],
        "joint_pos_error_rad": [],
    }
    cmd = env.command_manager.get("motion")
    for _ in range(3):
        # A step scores the reference frame its policy observed, the one loaded before the step.
        observed_pos, observed_joints = cmd.body_pos_w.clone().numpy(), cmd.joint_pos.clone().numpy()
        with no_host_sync():
            env.step(actions)
        assert (env.episode_length > 0).all()  # no reset: the robot state is the scored one
        robot = env.sim.state.body_pos_w[:, cmd.body_ids].numpy()
        robot_q = env.sim.state.body_quat_w[:, cmd.body_ids].numpy()
        expected["body_pos_error_m"].append(np.linalg.norm(observed_pos - robot, axis=-1).mean())
        expected["body_pos_error_anchored_m"].append(
            np.linalg.norm(cmd.body_pos_relative_w.numpy() - robot, axis=-1).mean()
        )
        expected["body_ori_error_rad"].append(_angle(cmd.body_quat_relative_w.numpy(), robot_q).mean())
        expected["joint_pos_error_rad"].append(np.abs(observed_joints - env.robot.joint_pos.numpy()).mean())
    summary = env.stats.summary()
    for name, values in expected.items():
        assert summary[f"tracking/{name}"] == pytest.approx(float(np.mean(values)), abs=1e-5), name
    assert summary["tracking/body_pos_error_anchored_m"] > 0 and "termination/motion_clip_end" in summary
    env.stats.clear()
    assert env.stats.summary()["tracking/body_pos_error_m"] == 0.0
