"""Left-right mirror maps of an env's observation groups and action (symmetry augmentation).

The mirror image of a state of a robot symmetric about its sagittal (x-z) plane is the state
``unilab-motion mirror`` writes (:mod:`unilab_gpu.motion.mirror`): the world reflected ``y -> -y``
and every left part swapped with its right twin. Every observation term and action this project
configures is then a permutation of its own columns times a sign per column, so the mirror image
of a whole group is one map::

    mirrored[:, k] = sign[k] * x[:, index[k]]          (:class:`MirrorMap`)

resolved here on the cold path, term by term, from the rule each term declares beside its
definition (``@term(mirror=...)``, :mod:`unilab_gpu.managers.term_spec`: one of the rules below,
or ``None`` for a term without a mirror image); the hot path is one gather and one multiply. A term
without a rule, or one whose configuration breaks the symmetry (an asymmetric clip, a default pose
or action range that is not its own mirror image), is refused with an error naming the term.

Rules (``m = (1, -1, 1)`` is the reflection, ``s_j`` the joint signs of
:class:`~unilab_gpu.motion.mirror.RobotMirror`):

===============================  ===========================================================
rule                             mirror image
===============================  ===========================================================
``joints``                       joint ``j`` takes ``s_j`` times the value of its twin
``joints_about_default``         the same, once the default pose is checked to be its own image
``biased_joints_about_default``  the same, once the encoder bias range is checked to be symmetric about 0
``joint_cos_sin``                ``cos`` of the twin, ``s_j sin`` of the twin
``reference_joints``             a reference's angles and velocities, joint by joint
``action``                       the action's own map (:meth:`RobotSymmetry.action`)
``VECTOR``                       ``(x, -y, z)`` (positions, linear velocities, gravity)
``imu_sensors``                  ``(x, -y, z)``; gyros ``(-x, y, -z)`` (axial vectors)
``ROTATION_COLUMNS``             ``M R M``: the 6 entries of two columns get ``(+, -, -, +, +, -)``
``tracked_bodies(entry_signs)``  each body's block moves to its twin's, with the rule of its entries
``height_scan``                  the ray at ``(x, y)`` takes the value of the ray at ``(x, -y)``
``fixed(signs)``                 fixed signs: ``(1, -1, -1)`` for a twist ``(v_x, v_y, omega_z)``
``gait_clock``                   half a cycle later: ``(-sin phi, -cos phi)``
===============================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch

from unilab_gpu.managers.term import resolve_callable
from unilab_gpu.managers.term_spec import spec_of
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.mirror import DEFAULT_NAME_PAIRS, REFLECT_AXIAL, REFLECT_VECTOR, RobotMirror

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
    from unilab_gpu.managers.term import Term

SYMMETRY_ATOL = 1e-4
"""How far (rad, or the action term's units) a default pose or action range may be from its mirror image."""

ROTATION_COLUMNS_SIGN = np.array([1.0, -1.0, -1.0, 1.0, 1.0, -1.0])
"""``M R M`` on the first two columns of ``R`` flattened row by row, ``[R00, R01, R10, R11, R20, R21]``."""


@dataclass(frozen=True)
class MirrorMap:
    """``mirrored[..., k] = sign[k] * x[..., index[k]]`` over ``dim`` features.

    Attributes:
        index: ``(dim,)`` int64, the source column of each column.
        sign: ``(dim,)`` float32, ``+1`` or ``-1``.
    """

    index: torch.Tensor
    sign: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The mirror image of ``x`` ``(..., dim)``, a new tensor of the same shape."""
        return x.index_select(-1, self.index) * self.sign


class RobotSymmetry:
    """The env's robot and its mirror pairs, in the env's own column orders.

    Attributes:
        joint_pair: ``(J,)`` the twin of each robot joint, as a column of ``env.robot.joint_pos``.
        joint_sign: ``(J,)`` mirrored angle = sign * angle of the twin.
        body_pair: ``(nbody,)`` the twin of each MuJoCo body id (the world is its own).
    """

    def __init__(self, env: ManagerBasedRlEnv) -> None:
        self.env = env
        model = env.sim.mj_model
        robot_cfg = env.cfg.robot
        pairs = robot_cfg.mirror_name_pairs if robot_cfg is not None else None
        name_pairs = DEFAULT_NAME_PAIRS if pairs is None else [(str(a), str(b)) for a, b in pairs]
        self.model = model
        try:
            self.robot_mirror = RobotMirror(RobotKinematics(model), name_pairs)
        except ValueError as error:  # MotionFormatError too: name what asked for the mirror
            raise ValueError(f"symmetry augmentation (algo.mirror_fraction > 0): {error}") from None
        column = {name: c for c, name in enumerate(env.robot.joint_names)}
        names = self.robot_mirror.joint_names
        self.joint_pair = np.empty(len(column), dtype=np.int64)
        self.joint_sign = np.empty(len(column))
        for j, name in enumerate(names):
            self.joint_pair[column[name]] = column[names[self.robot_mirror.joint_pair[j]]]
            self.joint_sign[column[name]] = self.robot_mirror.joint_sign[j]
        self.body_pair = np.concatenate([[0], self.robot_mirror.body_pair + 1])
        self._data = mujoco.MjData(model)
        self._data.qpos[:] = model.qpos0
        self._data.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]
        mujoco.mj_kinematics(model, self._data)
        self._action: tuple[np.ndarray, np.ndarray] | None = None

    def joints(self, where: str, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The joint rule over ``J`` columns; with ``values`` ``(J,)`` (a default pose), check first
        that they are their own mirror image (else the term is not equivariant)."""
        if values is not None:
            mirrored = values[self.joint_pair] * self.joint_sign
            bad = np.abs(mirrored - values) > SYMMETRY_ATOL
            if bad.any():
                names = [self.env.robot.joint_names[j] for j in np.flatnonzero(bad)]
                raise ValueError(
                    f"{where}: the default pose is not its own mirror image at joints {names}; expected the default "
                    f"angle of each joint to be its twin's times the mirror sign (within {SYMMETRY_ATOL:g} rad)"
                )
        return self.joint_pair.copy(), self.joint_sign.copy()

    def self_mirrored_body(self, body: int, where: str) -> None:
        """Refuse a frame on a body that is not its own mirror image (its twin is another body)."""
        if self.body_pair[body] != body:
            names = self.env.sim.body_names
            raise ValueError(
                f"{where}: body '{names[body]}' is mirrored by '{names[self.body_pair[body]]}'; "
                "expected a body on the robot's plane of symmetry"
            )

    def self_mirrored_site(self, site: int, where: str) -> None:
        """Refuse a site that is off the plane of symmetry or whose frame is not its own mirror image."""
        self.self_mirrored_body(int(self.model.site_bodyid[site]), where)
        pos, mat = self._data.site_xpos[site], self._data.site_xmat[site].reshape(3, 3)
        reflect = np.diag(REFLECT_VECTOR)
        if abs(pos[1]) > 1e-3 or np.abs(reflect @ mat @ reflect - mat).max() > 1e-3:
            raise ValueError(
                f"{where}: site '{self.env.sim.site_names[site]}' is not its own mirror image (off the x-z plane or "
                "turned out of it); expected a sensor frame on the plane of symmetry"
            )

    def action(self) -> tuple[np.ndarray, np.ndarray]:
        """The mirror rule of the action ``(action_dim,)`` each: every actuator drives a joint whose
        twin's actuator is driven too, and the action-to-target map is its own mirror image."""
        if self._action is None:
            self._action = self._resolve_action()
        return self._action

    def _resolve_action(self) -> tuple[np.ndarray, np.ndarray]:
        term = self.env.action_manager.term
        model, robot = self.model, self.env.robot
        joints = [
            robot.joint_names.index(self.env.sim.joint_names[int(model.actuator_trnid[a, 0])])
            for a in term.ctrl_cols.tolist()
        ]
        slot = {joint: k for k, joint in enumerate(joints)}
        index, sign = np.empty(len(joints), dtype=np.int64), np.empty(len(joints))
        for k, joint in enumerate(joints):
            twin = int(self.joint_pair[joint])
            if twin not in slot:
                raise ValueError(
                    f"actions: actuator '{term.actuator_names[k]}' drives joint '{robot.joint_names[joint]}' whose "
                    f"twin '{robot.joint_names[twin]}' no actuator drives; expected every mirrored joint to be actuated"
                )
            index[k], sign[k] = slot[twin], self.joint_sign[joint]
        offset = term.offset.cpu().numpy()
        up, down = term.scale.cpu().numpy(), term.scale_negative.cpu().numpy()
        # target_k = offset_k + scale_k a_k must equal sign_k * target of the twin at a_k = sign_k a_twin,
        # so a flipped joint swaps its positive and negative scales with its twin's.
        flipped = sign < 0
        expected_up = np.where(flipped, down[index], up[index])
        expected_down = np.where(flipped, up[index], down[index])
        offset_ok = term.reference_cols is not None or np.abs(offset[index] * sign - offset).max() <= SYMMETRY_ATOL
        scale_ok = np.allclose(expected_up, up, atol=SYMMETRY_ATOL) and np.allclose(
            expected_down, down, atol=SYMMETRY_ATOL
        )
        if not (offset_ok and scale_ok):
            raise ValueError(
                "actions: the map from action to target is not its own mirror image (offsets or scales of twin "
                "actuators differ); expected a symmetric default pose and mirrored scales or joint ranges"
            )
        bias = self.env.cfg.actions.target_bias  # a hidden draw per actuator, mirrored like the targets
        if bias is not None and abs(float(bias[0]) + float(bias[1])) > SYMMETRY_ATOL:
            raise ValueError(
                f"actions.target_bias: {list(bias)} is not symmetric about 0, so a mirrored bias leaves it; "
                "expected [-b, b] to mirror the action"
            )
        return index, sign


Rule = Callable[[RobotSymmetry, "Term", int, str], tuple[np.ndarray, np.ndarray]]
"""``rule(symmetry, term, dim, where) -> (index, sign)`` over the term's own ``dim`` columns."""


def fixed(signs: Sequence[float] | np.ndarray) -> Rule:
    """Each column keeps its place, times its sign in ``signs`` (the term is ``len(signs)`` wide)."""
    signs = tuple(float(sign) for sign in signs)

    def rule(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
        if dim != len(signs):
            raise ValueError(f"{where}: expected {len(signs)} columns, got {dim}")
        return np.arange(dim), np.asarray(signs, dtype=np.float64)

    return rule


def joints_about_default(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    return symmetry.joints(where, symmetry.env.robot.default_joint_pos.cpu().numpy())


def biased_joints_about_default(
    symmetry: RobotSymmetry, term: Term, dim: int, where: str
) -> tuple[np.ndarray, np.ndarray]:
    # The bias is a hidden draw per joint and episode: the mirror image of a reading with bias b is a
    # reading of the mirrored state with bias (twin and sign of) b, as likely as b only when the
    # range is symmetric about 0.
    low, high = term.instance.low, term.instance.high
    if abs(low + high) > SYMMETRY_ATOL:
        raise ValueError(
            f"{where}.params.bias_range: [{low:g}, {high:g}] is not symmetric about 0, so a mirrored bias leaves "
            "it; expected [-b, b] to mirror the term"
        )
    return joints_about_default(symmetry, term, dim, where)


def joints(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    return symmetry.joints(where)


def joint_cos_sin(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    pair, sign = symmetry.joints(where)
    return np.concatenate([pair, pair + len(pair)]), np.concatenate([np.ones_like(sign), sign])


def reference_joints(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    pair, sign = symmetry.joints(where)  # absolute reference angles and velocities: no default pose involved
    return np.concatenate([pair, pair + len(pair)]), np.concatenate([sign, sign])


def action(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    return symmetry.action()


def imu_sensors(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    names = term.cfg.params.get("sensor_names", [])
    names = [names] if isinstance(names, str) else list(names)
    model, sim = symmetry.model, symmetry.env.sim
    signs: list[np.ndarray] = []
    for sensor in sim.sensor_ids(names):
        kind = mujoco.mjtSensor(int(model.sensor_type[sensor]))
        if kind == mujoco.mjtSensor.mjSENS_GYRO:
            signs.append(REFLECT_AXIAL)
        elif kind in (mujoco.mjtSensor.mjSENS_VELOCIMETER, mujoco.mjtSensor.mjSENS_ACCELEROMETER):
            signs.append(REFLECT_VECTOR)
        else:
            raise ValueError(
                f"{where}: sensor '{sim.sensor_names[sensor]}' is a {kind.name}, which has no mirror rule; "
                "expected a gyro, velocimeter or accelerometer"
            )
        if int(model.sensor_objtype[sensor]) != mujoco.mjtObj.mjOBJ_SITE:
            raise ValueError(f"{where}: sensor '{sim.sensor_names[sensor]}' is not attached to a site")
        symmetry.self_mirrored_site(int(model.sensor_objid[sensor]), where)
    return np.arange(dim), np.concatenate(signs) if signs else np.ones(0)


def gait_clock(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    if term.cfg.params.get("phase_offsets") is not None:
        raise ValueError(
            f"{where}: per-foot clocks (phase_offsets) have no mirror rule; expected the shared clock "
            "(phase_offsets: null), whose mirror image is half a cycle later"
        )
    # Twin feet run half a cycle apart (the G1's walk, the Go2's trot): the mirrored gait is the same
    # gait half a cycle on, phi + pi, so both sin and cos change sign. Checked on every reward term
    # that gives feet sites their offsets on the clock (FeetPhase).
    model = symmetry.model
    for reward in symmetry.env.reward_manager.terms:
        sites, offsets = (getattr(reward.instance, key, None) for key in ("site_ids", "offsets"))
        if sites is None or offsets is None:
            continue
        body_of = [int(model.site_bodyid[site]) for site in sites.tolist()]
        for f, body in enumerate(body_of):
            twin = int(symmetry.body_pair[body])
            gap = float(offsets[body_of.index(twin)] - offsets[f]) if twin in body_of else None
            if gap is None or abs(np.cos(gap) + 1.0) > 1e-4:
                raise ValueError(
                    f"{where}: rewards.{reward.name} does not put the twin of foot site "
                    f"'{symmetry.env.sim.site_names[int(sites[f])]}' half a cycle away; expected twin feet half a "
                    "cycle apart (a walk or a trot) to mirror the gait clock"
                )
    return np.arange(dim), -np.ones(dim)


def tracked_bodies(entry_signs: np.ndarray) -> Rule:
    def rule(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
        command = symmetry.env.command_manager.get(term.cfg.params.get("command_name", "motion"))
        symmetry.self_mirrored_body(command.anchor_body_id, where)
        bodies = command.body_ids.tolist()
        width = len(entry_signs)
        index, sign = [], []
        for body in bodies:
            twin = int(symmetry.body_pair[body])
            if twin not in bodies:
                raise ValueError(
                    f"{where}: tracked body '{symmetry.env.sim.body_names[body]}' has its twin "
                    f"'{symmetry.env.sim.body_names[twin]}' untracked; expected the tracked bodies to come in pairs"
                )
            index.append(bodies.index(twin) * width + np.arange(width))
            sign.append(entry_signs)
        return np.concatenate(index), np.concatenate(sign)

    return rule


def height_scan(symmetry: RobotSymmetry, term: Term, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    points = term.instance.points_b.cpu().numpy()  # (rays, 2) in the heading frame
    mirrored = points * np.array([1.0, -1.0])
    distance = np.abs(mirrored[:, None, :] - points[None, :, :]).max(axis=-1)
    index = distance.argmin(axis=1)
    if distance[np.arange(len(points)), index].max() > 1e-6:
        raise ValueError(f"{where}: the scan's grid is not symmetric about its x axis")
    return index, np.ones(len(points))


VECTOR = fixed(REFLECT_VECTOR)
"""A base-frame vector ``(x, y, z)``: position, linear velocity, gravity."""

ROTATION_COLUMNS = fixed(ROTATION_COLUMNS_SIGN)
"""The first two columns of a rotation matrix, row by row (:data:`ROTATION_COLUMNS_SIGN`)."""


def observation_mirror(symmetry: RobotSymmetry, group: str) -> MirrorMap:
    """The mirror map of observation group ``group`` ``(dim,)``, term by term, history included.

    Raises:
        ValueError: naming the first term without a rule, or whose configuration is not symmetric.
    """
    env = symmetry.env
    manager_group = env.observation_manager.groups[group]
    index = np.arange(manager_group.dim)
    sign = np.ones(manager_group.dim)
    for term, cfg, layout in zip(manager_group.terms, manager_group.cfgs, manager_group.layouts, strict=True):
        where = f"observations.{group}.terms.{term.name}"
        rule = spec_of(resolve_callable(cfg.func, f"{where}.func")).mirror
        if not callable(rule):  # None (declared without one) or not declared
            raise ValueError(
                f"{where}: '{cfg.func}' has no mirror rule, so symmetry augmentation cannot mirror it; expected a "
                "term that declares one (@term(mirror=...), unilab_gpu.managers.term_spec), or algo.mirror_fraction=0"
            )
        term_index, term_sign = rule(symmetry, term, layout.dim, where)
        if cfg.clip is not None and (term_sign < 0).any() and cfg.clip[0] != -cfg.clip[1]:
            raise ValueError(f"{where}: clip {list(cfg.clip)} is not symmetric about 0, so the mirrored term leaves it")
        for block in range(layout.history):  # history blocks are oldest first, each laid out like the term
            start = layout.group.start + block * layout.dim
            index[start : start + layout.dim] = start + term_index
            sign[start : start + layout.dim] = term_sign
    return _to_map(index, sign, env.device)


def action_mirror(symmetry: RobotSymmetry) -> MirrorMap:
    """The mirror map of the action ``(action_dim,)``."""
    return _to_map(*symmetry.action(), symmetry.env.device)


def _to_map(index: np.ndarray, sign: np.ndarray, device: torch.device) -> MirrorMap:
    return MirrorMap(
        torch.as_tensor(index, dtype=torch.int64, device=device),
        torch.as_tensor(sign, dtype=torch.float32, device=device),
    )
