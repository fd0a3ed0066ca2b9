"""Run holosoma-inference's own whole-body-tracking policy class on a file and a list of robot states.

Executed by ``tests/test_export_holosoma.py`` with the Python of a separate environment where
``holosoma-inference`` 0.1.3 is installed (never imported by the project). Usage::

    python holosoma_wbt_runner.py POLICY.onnx STATES.npz OUT.npz

``STATES.npz`` holds per call ``k``: ``robot_state`` (71,) in holosoma's layout (base position,
quaternion wxyz, 29 joint angles, base linear velocity, gyro, 29 joint velocities), ``time_step``
(the call's), ``previous_action`` (holosoma's previous raw output). ``OUT.npz`` gets ``q_target``
(K, 29): the joint targets holosoma's loop commands (``scaled action + default angles``).

The class is built without its hardware interface (``object.__new__``: no robot, no SDK, no
clock), then its own methods run: ``setup_policy`` (the ONNX, its metadata, pinocchio on the
file's ``robot_urdf``), ``_configure_action_scales`` (the ``action_scale`` metadata) and, per
call, ``rl_inference`` (its observation terms, sorted concatenation, ONNX call and action scaling).
The state its loop would carry between calls is set from the file: the previous call's reference
(its own policy closure at ``time_step - 1``) and the previous action.
"""

import sys
from dataclasses import replace

import numpy as np
from holosoma_inference.config.config_values.inference import g1_29dof_wbt
from holosoma_inference.policies.wbt import WholeBodyTrackingPolicy
from loguru import logger


def main(policy_path: str, states_path: str, out_path: str) -> None:
    logger.remove()  # quiet
    config = replace(g1_29dof_wbt, task=replace(g1_29dof_wbt.task, model_path=policy_path))
    policy = object.__new__(WholeBodyTrackingPolicy)
    policy.config = config
    policy._target_source = None
    policy.logger = logger
    policy.use_sim_time = False
    policy.robot_yaw_offset = policy.motion_yaw_offset = 0.0
    policy.per_joint_policy_action_scale = None
    policy._init_robot_config(config.robot)
    policy._init_obs_config()
    policy.policy_action_scale = config.task.policy_action_scale
    policy.setup_policy(policy_path)
    policy._configure_action_scales()
    policy.motion_clip_progressing = True
    states = np.load(states_path)
    targets = []
    zeros = np.zeros_like(policy.obs_buf_dict["actor_obs"])
    for state, time_step, previous in zip(
        states["robot_state"], states["time_step"], states["previous_action"], strict=True
    ):
        # What the loop carries from the previous call (at time_step - 1, or 0 at the start).
        feed = {"obs": zeros, "time_step": np.array([[max(int(time_step) - 1, 0)]], np.float32)}
        _, policy.motion_command_t, policy.ref_quat_xyzw_t = policy.policy(feed)
        policy.curr_motion_timestep = int(time_step)
        policy.last_policy_action = previous.reshape(1, -1)
        scaled = policy.rl_inference(state.reshape(1, -1))
        targets.append((scaled + policy.default_dof_angles)[0])
    np.savez(out_path, q_target=np.array(targets))


if __name__ == "__main__":
    main(*sys.argv[1:4])
