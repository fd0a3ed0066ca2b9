"""Our tracking policy in holosoma's whole-body-tracking ONNX convention (``unilab-export --convention holosoma``).

holosoma-inference 0.1.3 runs a tracking policy as one ONNX file: inputs ``obs`` ``(1, 5 J + 9)``
and ``time_step`` ``(1, 1)`` float; outputs ``actions`` ``(1, J)`` and the reference motion
embedded in the file at that step, ``joint_pos``, ``joint_vel`` ``(1, J)``, ``ref_pos_xyz``
``(1, 3)``, ``ref_quat_xyzw`` ``(1, 4)`` (the world pose of the reference body, ``torso_link``);
the last frame is held past the end. Metadata: ``dof_names``, ``kp``, ``kd``, ``action_scale``,
``robot_urdf`` (JSON). Its deploy loop (``policies/wbt.py``, ``policies/base.py``):

- builds the observation from the terms of its ``wbt`` preset concatenated in **sorted name
  order**: ``actions`` (its previous raw output), ``base_ang_vel`` (pelvis IMU gyro),
  ``dof_pos`` (joint angles minus *its* default angles), ``dof_vel``, ``motion_command`` (the
  reference joint angles and velocities the previous call returned), ``motion_ref_ori_b`` (the
  reference body's orientation relative to the robot's, two rotation-matrix columns), every
  scale 1, no history;
- commands ``target = default_dof_angles + action_scale * actions``, with ``action_scale`` from
  the metadata, its own default angles (:data:`HOLOSOMA_G1_DEFAULT_DOF_ANGLES`);
- advances ``time_step`` by one per call once the clip is started, so the call at ``time_step =
  t`` observes the reference of frame ``t - 1`` (the previous call's output; frame 0 at ``t = 0``).
  holosoma's training shows frame ``k`` at ``time_step`` ``k`` instead; the file declares the
  inference timing it assumes in a ``time_step_lead`` metadata key (:data:`TIME_STEP_LEAD`), which
  the deploy runtime's holosoma format reads (``unilab-sim2sim``, docs/export.md).

:class:`HolosomaTrackingPolicy` wraps our deterministic policy so that it consumes that
observation: each of our policy terms is rebuilt from the holosoma term that carries the same
quantity, and our action is turned into holosoma's. Our terms without a holosoma counterpart,
the reference anchor position and the base linear velocity of ``g1_tracking`` (a real robot needs
state estimation for them), are refused: export a ``g1_tracking_no_state_estimation`` policy,
whose 154 columns are holosoma's terms. Two of our quantities are recovered, not read:

- our previous action from holosoma's: ``a_prev = (d_h + s_h a_h,prev - r_prev) / s``, with
  ``r_prev`` the reference the previous call observed, taken from the embedded table at
  ``time_step - 2`` (clamped at 0), which holds while ``time_step`` advances by one per call or
  stays at 0; exact unless the previous target was clamped to a joint limit. At the first call
  holosoma feeds zeros (its target: the default pose), ours a zero residual (the reference pose).
- our target ``clamp(r + s a, bounds)`` (``r`` the observed reference) becomes holosoma's action
  ``(target - d_h) / s_h``; ``s_h`` (the ``action_scale`` metadata) is our per-joint scale.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch
from torch import nn

from unilab_gpu.deploy.foreign import read_format

CONVENTION = "holosoma"

_FORMAT = read_format(CONVENTION)
HOLOSOMA_G1_DOF_NAMES = tuple(_FORMAT["default_joint_pos"])
"""holosoma-inference 0.1.3's G1 29-DoF joint order (robot preset ``g1_29dof``: ``dof_names``), as the
deploy runtime's format file holds it (``deploy/formats/holosoma.json``, ``default_joint_pos`` in that order)."""

HOLOSOMA_G1_DEFAULT_DOF_ANGLES = tuple(float(_FORMAT["default_joint_pos"][name]) for name in HOLOSOMA_G1_DOF_NAMES)
"""Its default angles (rad, ``dof_names`` order): ``dof_pos`` is relative to them and actions add to them."""

TIME_STEP_LEAD = 1
"""The timing the export assumes, holosoma-inference's (the call at ``time_step = t`` observes the
reference of frame ``t - 1``), declared in the file's ``time_step_lead`` metadata for the deploy
runtime's holosoma format (whose default, 0, is holosoma training's timing)."""

REF_BODY = "torso_link"
"""holosoma's reference body (``motion.body_name_ref``): ``ref_pos_xyz``, ``ref_quat_xyzw`` and
``motion_ref_ori_b`` are about it."""

HOLOSOMA_WBT_TERMS = ("actions", "base_ang_vel", "dof_pos", "dof_vel", "motion_command", "motion_ref_ori_b")
"""The ``wbt`` preset's actor terms in holosoma's concatenation (sorted) order."""

_TERM = "unilab_gpu.tasks.tracking.observations."
_MDP = "unilab_gpu.envs.mdp.observations."
OUR_TERMS = {
    f"{_TERM}motion_command": "motion_command",
    f"{_TERM}motion_anchor_ori_b": "motion_ref_ori_b",
    f"{_MDP}sensor": "base_ang_vel",
    f"{_MDP}joint_pos_rel": "dof_pos",
    f"{_MDP}joint_vel": "dof_vel",
    f"{_MDP}last_action": "actions",
}
"""Our policy terms (defining paths, as the metadata records them) and the holosoma term each is rebuilt from."""

OUTPUT_NAMES = ("actions", "joint_pos", "joint_vel", "ref_pos_xyz", "ref_quat_xyzw")


def holosoma_layout(num_joints: int) -> dict[str, slice]:
    """Columns of each holosoma ``wbt`` term in its ``obs`` vector (``5 J + 9`` wide)."""
    dims = {"actions": num_joints, "base_ang_vel": 3, "dof_pos": num_joints, "dof_vel": num_joints,
            "motion_command": 2 * num_joints, "motion_ref_ori_b": 6}  # fmt: skip
    layout, start = {}, 0
    for name in HOLOSOMA_WBT_TERMS:
        layout[name] = slice(start, start + dims[name])
        start += dims[name]
    return layout


class HolosomaTrackingPolicy(nn.Module):
    """``(obs (1, 5 J + 9), time_step (1, 1))`` in holosoma's convention -> its five outputs.

    Args:
        policy: our deterministic policy, ``(batch, observation_dim)`` -> actions.
        metadata: our deployment metadata of that policy (``export.metadata.deployment_metadata``).
        reference: the embedded motion at the control rate, our observed joint order:
            ``joint_pos``, ``joint_vel`` ``(T, J)``, ``ref_pos`` ``(T, 3)``, ``ref_quat`` ``(T, 4)``
            wxyz (the reference body's world pose).
        model: the robot's MuJoCo model (to check that the angular velocity term is the root's gyro).

    Raises:
        ValueError: a policy term holosoma's observation does not carry (named), a history or
            noise-free requirement not met, or joints other than holosoma's G1 joints.
    """

    def __init__(
        self, policy: nn.Module, metadata: dict[str, Any], reference: dict[str, np.ndarray], model: mujoco.MjModel
    ) -> None:
        super().__init__()
        joints = list(metadata["joint_names"])
        observed = list(metadata["observed_joint_names"])
        if sorted(joints) != sorted(HOLOSOMA_G1_DOF_NAMES) or sorted(observed) != sorted(HOLOSOMA_G1_DOF_NAMES):
            raise ValueError(
                f"export --convention {CONVENTION}: the policy's joints are not holosoma's G1 29-DoF joints "
                f"({len(joints)} actions)"
            )
        if metadata["action_kind"] != "joint_position" or metadata["action_scale"] != metadata["action_scale_negative"]:
            raise ValueError(
                f"export --convention {CONVENTION}: needs joint_position actions with one scale per joint "
                f"(holosoma's target = default + scale * action), got {metadata['action_kind']}"
            )
        num = len(joints)
        self.policy = policy
        self.layout = holosoma_layout(num)
        self.terms = [self._term(t, metadata, model) for t in metadata["observation_terms"]]
        self.observation_dim = int(metadata["observation_dim"])
        dof = list(HOLOSOMA_G1_DOF_NAMES)
        f32 = dict(dtype=torch.float32)
        # Index maps: holosoma order -> ours (action order, observed order) and back.
        self.register_buffer("h_to_action", torch.tensor([dof.index(n) for n in joints]))
        self.register_buffer("h_to_observed", torch.tensor([dof.index(n) for n in observed]))
        self.register_buffer("action_to_h", torch.tensor([joints.index(n) for n in dof]))
        self.register_buffer("observed_to_action", torch.tensor([observed.index(n) for n in joints]))
        default_h = torch.tensor(HOLOSOMA_G1_DEFAULT_DOF_ANGLES, **f32)
        self.register_buffer("default_h_action", default_h[self.h_to_action])
        self.register_buffer("default_h_observed", default_h[self.h_to_observed])
        self.register_buffer("default_observed", torch.tensor(metadata["observed_default_joint_pos"], **f32))
        self.register_buffer("scale", torch.tensor(metadata["action_scale"], **f32))
        self.register_buffer("scale_negative", torch.tensor(metadata["action_scale_negative"], **f32))
        self.register_buffer("action_low", torch.tensor(metadata["action_low"], **f32))
        self.register_buffer("action_high", torch.tensor(metadata["action_high"], **f32))
        bounds = np.array([[-np.inf if lo is None else lo, np.inf if hi is None else hi]
                           for lo, hi in metadata["action_bounds"]], dtype=np.float32)  # fmt: skip
        self.register_buffer("bound_low", torch.from_numpy(bounds[:, 0]))
        self.register_buffer("bound_high", torch.from_numpy(bounds[:, 1]))
        self.residual = metadata["action_offset_observation_columns"] is not None
        self.register_buffer("action_offset", torch.tensor(metadata["action_offset"], **f32))  # unused if residual
        # holosoma's action_scale: ours (for the G1's tracking task 0.25 effort / kp, holosoma's own rule).
        self.register_buffer("scale_h", self.scale.clone())
        ref_joint_pos = torch.as_tensor(reference["joint_pos"], **f32)
        self.register_buffer("table_joint_pos", ref_joint_pos)  # observed order, for r_prev
        to_h = torch.tensor([observed.index(n) for n in HOLOSOMA_G1_DOF_NAMES])
        self.register_buffer("table_joint_pos_h", ref_joint_pos[:, to_h])
        self.register_buffer("table_joint_vel_h", torch.as_tensor(reference["joint_vel"], **f32)[:, to_h])
        self.register_buffer("table_ref_pos", torch.as_tensor(reference["ref_pos"], **f32))
        quat = torch.as_tensor(reference["ref_quat"], **f32)
        self.register_buffer("table_ref_quat_xyzw", torch.cat((quat[:, 1:], quat[:, :1]), dim=1))
        self.last_frame = int(ref_joint_pos.shape[0]) - 1

    @staticmethod
    def _term(term: dict[str, Any], metadata: dict[str, Any], model: mujoco.MjModel) -> tuple[str, float, Any]:
        """``(holosoma term, scale, clip)`` of one of our policy terms, or a one-line refusal."""
        name, func = term["name"], term["func"]
        if func == f"{_MDP}sensor" and not gyro_on_root(model, term["params"]["sensor_names"]):
            func = f"{func}({term['params']['sensor_names']})"  # only the root's gyro is holosoma's base_ang_vel
        if func not in OUR_TERMS:
            raise ValueError(
                f"export --convention {CONVENTION}: policy term '{name}' ({func}) has no counterpart in holosoma's wbt "
                f"observation {list(HOLOSOMA_WBT_TERMS)}; export a policy of g1_tracking_no_state_estimation"
            )
        if term["history"] != 1:
            raise ValueError(f"export --convention {CONVENTION}: policy term '{name}' has history {term['history']}, "
                             "holosoma's wbt terms have none")  # fmt: skip
        if OUR_TERMS[func] == "motion_ref_ori_b":
            anchor = metadata["commands"][term["params"].get("command_name", "motion")]["params"]["anchor_body"]
            if anchor != REF_BODY:
                raise ValueError(f"export --convention {CONVENTION}: the motion command's anchor_body is '{anchor}', "
                                 f"holosoma's reference body is '{REF_BODY}'")  # fmt: skip
        return OUR_TERMS[func], float(term["scale"]), term["clip"]

    def _frame(self, time_step: torch.Tensor, offset: int) -> torch.Tensor:
        """Table row ``clamp(time_step + offset, 0, T - 1)``, ``(1,)`` int64."""
        return (time_step.reshape(1).to(torch.int64) + offset).clamp(0, self.last_frame)

    def our_observation(self, obs: torch.Tensor, time_step: torch.Tensor) -> torch.Tensor:
        """Our policy group ``(1, observation_dim)`` rebuilt from holosoma's ``obs`` ``(1, 5 J + 9)``."""
        lay = self.layout
        h_joint = lambda name: obs[:, lay[name]]  # noqa: E731 (holosoma's dof order)
        command = h_joint("motion_command")
        num = self.h_to_observed.numel()
        ref_observed = command[:, :num][:, self.h_to_observed]
        prev_ref = self.table_joint_pos.index_select(0, self._frame(time_step, -2))[:, self.observed_to_action]
        prev_target = self.default_h_action + self.scale_h * h_joint("actions")[:, self.h_to_action]
        prev_offset = prev_ref if self.residual else self.action_offset
        quantities = {
            "motion_command": torch.cat((ref_observed, command[:, num:][:, self.h_to_observed]), dim=1),
            "motion_ref_ori_b": obs[:, lay["motion_ref_ori_b"]],
            "base_ang_vel": obs[:, lay["base_ang_vel"]],
            "dof_pos": h_joint("dof_pos")[:, self.h_to_observed] + self.default_h_observed - self.default_observed,
            "dof_vel": h_joint("dof_vel")[:, self.h_to_observed],
            "actions": (prev_target - prev_offset) / self.scale,
        }
        pieces = []
        for name, scale, clip in self.terms:  # in our group's column order
            value = quantities[name] * scale
            pieces.append(value if clip is None else value.clamp(-clip, clip))
        return torch.cat(pieces, dim=1)

    def forward(self, obs: torch.Tensor, time_step: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ours = self.our_observation(obs, time_step)
        action = self.policy(ours).clamp(self.action_low, self.action_high)
        scale = torch.where(action >= 0, self.scale, self.scale_negative)
        if self.residual:
            num = self.h_to_observed.numel()
            offset = obs[:, self.layout["motion_command"]][:, :num][:, self.h_to_action]
        else:
            offset = self.action_offset
        target = torch.minimum(torch.maximum(offset + scale * action, self.bound_low), self.bound_high)
        actions_h = ((target - self.default_h_action) / self.scale_h)[:, self.action_to_h]
        row = self._frame(time_step, 0)
        return (
            actions_h,
            self.table_joint_pos_h.index_select(0, row),
            self.table_joint_vel_h.index_select(0, row),
            self.table_ref_pos.index_select(0, row),
            self.table_ref_quat_xyzw.index_select(0, row),
        )


def holosoma_metadata(metadata: dict[str, Any], robot_urdf: str) -> dict[str, Any]:
    """The keys holosoma-inference reads, as its files hold them (JSON values, ``dof_names`` order):
    ``robot_urdf`` is the URDF text of our robot model (its tracking policy class computes the
    reference body's orientation from it, ``export.urdf``); plus ``time_step_lead`` (the timing
    assumed, for the deploy runtime) and ``unilab``, our own deployment metadata of the wrapped policy."""
    joints = list(metadata["joint_names"])
    order = [joints.index(n) for n in HOLOSOMA_G1_DOF_NAMES]
    pick = lambda key: [metadata[key][i] for i in order]  # noqa: E731
    return {
        "dof_names": list(HOLOSOMA_G1_DOF_NAMES),
        "kp": pick("stiffness"),
        "kd": pick("damping"),
        "action_scale": pick("action_scale"),
        "command_ranges": None,
        "robot_urdf": robot_urdf,
        "time_step_lead": TIME_STEP_LEAD,
        "unilab": {
            "convention": CONVENTION,
            "default_dof_angles": list(HOLOSOMA_G1_DEFAULT_DOF_ANGLES),
            "ref_body": REF_BODY,
            **metadata,
        },  # fmt: skip
    }


def write_holosoma_onnx(
    module: HolosomaTrackingPolicy, metadata: dict[str, Any], path: str | os.PathLike, exclusive: bool = False
) -> Path:
    """Export ``module`` with holosoma's input and output names and shapes (``[1, ...]``) to
    ``path`` atomically, ``metadata`` as JSON values in ``metadata_props``."""
    from unilab_gpu.export.onnx_policy import write_exported

    example = (torch.zeros(1, module.layout["motion_ref_ori_b"].stop), torch.zeros(1, 1))
    names = {"input_names": ["obs", "time_step"], "output_names": list(OUTPUT_NAMES)}
    return write_exported(module, example, metadata, path, exclusive, **names)


def gyro_on_root(model: mujoco.MjModel, sensor_names: list[str]) -> bool:
    """Whether ``sensor_names`` is one gyro on the root body (holosoma's ``base_ang_vel``: the pelvis IMU)."""
    if len(sensor_names) != 1:
        return False
    sensor = model.sensor(sensor_names[0])
    is_gyro = int(sensor.type[0]) == int(mujoco.mjtSensor.mjSENS_GYRO)
    return is_gyro and int(model.site_bodyid[int(sensor.objid[0])]) == 1


def embedded_reference(env, motion: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """The motion to embed, at ``env``'s control rate in its observed joint order: the run's own
    clip (its motion command's library, which must hold exactly one), or the clip file ``motion``.

    Returns ``joint_pos``, ``joint_vel`` ``(T, J)``, ``ref_pos`` ``(T, 3)``, ``ref_quat`` ``(T, 4)``
    wxyz: the anchor body's world pose (holosoma's reference body).
    """
    from unilab_gpu.motion import RobotKinematics, load_motion

    command = env.command_manager.get("motion")
    observed = list(env.robot.joint_names)
    if motion is None:
        library = command.library
        if library.num_clips != 1:
            raise ValueError(
                f"export --convention {CONVENTION}: the run's motion set has {library.num_clips} clips and the file "
                "embeds one; pass --motion FILE"
            )
        joints = [list(library.joint_names).index(n) for n in observed]
        arrays = {
            "joint_pos": library.joint_pos[:, joints],
            "joint_vel": library.joint_vel[:, joints],
            "ref_pos": library.body_pos_w[:, command.anchor_index],
            "ref_quat": library.body_quat_w[:, command.anchor_index],
        }
        return {k: v.detach().cpu().numpy().astype(np.float64) for k, v in arrays.items()}
    clip = load_motion(motion, kinematics=RobotKinematics(env.sim.mj_model), fps=1.0 / env.step_dt)
    joints = [clip.joint_names.index(n) for n in observed]
    anchor = clip.body_names.index(command.body_names[command.anchor_index])
    return {
        "joint_pos": clip.joint_pos[:, joints],
        "joint_vel": clip.joint_vel[:, joints],
        "ref_pos": clip.body_pos_w[:, anchor],
        "ref_quat": clip.body_quat_w[:, anchor],
    }
