"""The MJCF a policy runs on, checked against the policy's metadata before the first step.

A policy trained on one model and run on another with different joint names, actuator order,
PD gains, force limits or timestep does something else than it learned, often without falling
at once; every such difference is refused here, in one line naming the first one found.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from .physics import physics_mismatch
from .policy_file import DeploymentError

RTOL = 1e-5
"""Relative tolerance of gains, limits and timestep (the metadata holds float32 values)."""


def actuator_ids(model: mujoco.MjModel, names: list[str]) -> np.ndarray:
    """Actuator ids of ``names`` (action order), ``(action_dim,)``."""
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in names]
    missing = [n for n, i in zip(names, ids, strict=True) if i < 0]
    if missing:
        raise DeploymentError(f"MJCF does not match the policy: actuators {missing[:4]} are not in the model")
    return np.asarray(ids, dtype=np.int64)


def joint_addresses(model: mujoco.MjModel, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """qpos and qvel addresses of the hinge/slide joints ``names``, ``(J,)`` each."""
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
    missing = [n for n, i in zip(names, ids, strict=True) if i < 0]
    if missing:
        model_joints = [model.joint(j).name for j in range(model.njnt)][:4]
        raise DeploymentError(
            f"MJCF does not match the policy: joints {missing[:4]} ({len(missing)} of {len(names)}) are not in the "
            f"model (its joints: {model_joints}...)"
        )
    return np.asarray(model.jnt_qposadr[ids], dtype=np.int64), np.asarray(model.jnt_dofadr[ids], dtype=np.int64)


def root_address(model: mujoco.MjModel) -> int:
    """qpos address of the free root joint."""
    if model.njnt == 0 or int(model.jnt_type[0]) != int(mujoco.mjtJoint.mjJNT_FREE):
        raise DeploymentError("MJCF does not match the policy: its first joint is not a free (floating-base) joint")
    return int(model.jnt_qposadr[0])


def check_model(model: mujoco.MjModel, meta: dict[str, Any]) -> None:
    """Refuse a model that differs from the one the policy was trained on.

    Checked: the timestep against ``physics_dt``, and the solver options against ``physics`` (when
    the metadata has them: write them with :func:`.physics.apply_physics_options`); per action ``i``: actuator
    ``actuator_names[i]`` exists and drives joint ``joint_names[i]``; for ``joint_position``
    actions it is a position actuator with ``kp`` = ``stiffness[i]`` and ``kv`` = ``damping[i]``;
    its force limit equals ``effort_limit[i]`` (``null``: none); the observed joints are the
    model's hinge and slide joints in model order, with the keyframe's positions as defaults.

    Raises:
      DeploymentError: the first mismatch, in one line.
    """
    timestep = float(model.opt.timestep)
    if not _close(timestep, meta["physics_dt"]):
        raise DeploymentError(
            f"MJCF does not match the policy: timestep {timestep:g} s, the policy's physics_dt {meta['physics_dt']:g} s"
        )
    if meta.get("physics") is not None:
        mismatch = physics_mismatch(model, meta["physics"], RTOL)
        if mismatch is not None:
            raise DeploymentError(f"MJCF does not match the policy: {mismatch}")
    joint_addresses(model, meta["joint_names"])
    _check_observed_joints(model, meta)
    actuators = actuator_ids(model, meta["actuator_names"])
    position = meta["action_kind"] == "joint_position"
    for i, a in enumerate(actuators.tolist()):
        name, joint = meta["actuator_names"][i], meta["joint_names"][i]
        driven = model.joint(int(model.actuator_trnid[a, 0])).name
        if driven != joint:
            raise DeploymentError(
                f"MJCF does not match the policy: actuator '{name}' drives joint '{driven}', the policy's action {i} "
                f"joint '{joint}' (joint order differs)"
            )
        if position:
            is_position = int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
            kp, kv = float(model.actuator_gainprm[a, 0]), float(-model.actuator_biasprm[a, 2])
            if not is_position or not _close(-float(model.actuator_biasprm[a, 1]), kp):
                raise DeploymentError(f"MJCF does not match the policy: actuator '{name}' is not a position actuator")
            for what, got, want in (("kp", kp, meta["stiffness"][i]), ("kv", kv, meta["damping"][i])):
                if not _close(got, want):
                    raise DeploymentError(
                        f"MJCF does not match the policy: actuator '{name}' has {what} {got:g}, the policy {want:g}"
                    )
        limit = float(model.actuator_forcerange[a, 1]) if model.actuator_forcelimited[a] else None
        want = meta["effort_limit"][i]
        if (limit is None) != (want is None) or (limit is not None and not _close(limit, want)):
            raise DeploymentError(
                f"MJCF does not match the policy: actuator '{name}' has force limit {limit}, the policy {want}"
            )


def _check_observed_joints(model: mujoco.MjModel, meta: dict[str, Any]) -> None:
    """The observed joints are the model's hinge and slide joints in model order (what the training
    env observes), with the model keyframe's positions as their defaults; a foreign policy's
    (metadata ``format``) are the same joints in its own order, with its own defaults."""
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    joints = [j for j in range(model.njnt) if int(model.jnt_type[j]) in scalar]
    names = [model.joint(j).name for j in joints]
    observed = meta["observed_joint_names"]
    joint_addresses(model, observed)  # names the joints the model lacks
    if meta.get("format") is not None:  # a foreign policy: its own joint order and default pose, mapped by name
        if sorted(observed) != sorted(names):
            extra = sorted(set(names) - set(observed))[:4]
            raise DeploymentError(f"MJCF does not match the policy: it observes none of the model's joints {extra}")
        return
    if observed != names:
        i = next(
            (i for i, (a, b) in enumerate(zip(observed, names, strict=False)) if a != b), min(len(observed), len(names))
        )
        raise DeploymentError(
            f"MJCF does not match the policy: metadata 'observed_joint_names[{i}]' is "
            f"{observed[i] if i < len(observed) else None!r}, the model's joint {i} (hinge and slide joints in model "
            f"order, as training observes them) is {names[i] if i < len(names) else None!r}"
        )
    keyframe = meta.get("keyframe")
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe) if keyframe else -1
    if keyframe and key < 0:
        raise DeploymentError(f"MJCF does not match the policy: it has no keyframe '{keyframe}' (metadata 'keyframe')")
    qpos = model.key_qpos[key] if key >= 0 else model.qpos0
    defaults = qpos[model.jnt_qposadr[joints]]
    for i, (name, got, want) in enumerate(zip(names, defaults, meta["observed_default_joint_pos"], strict=True)):
        if abs(float(got) - want) > 1e-5 * max(1.0, abs(want)):
            raise DeploymentError(
                f"MJCF does not match the policy: metadata 'observed_default_joint_pos[{i}]' ({name}) is {want:g}, "
                f"the model's {f'keyframe {keyframe!r}' if keyframe else 'qpos0'} has {float(got):g}"
            )


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= RTOL * max(abs(want), 1e-12)
