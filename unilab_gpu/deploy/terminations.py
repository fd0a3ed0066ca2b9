"""NumPy twins of the failure terminations of the G1 tasks, keyed by the env term's path: when a
run on MuJoCo C (or a robot) is in a state that training would have ended as a failure.

Each entry of :data:`TERMINATIONS` builds, once, a :class:`FallCheck` from the termination's
YAML ``params`` (names, not ids); ``check(data, frame)`` says whether the state in ``data``
(kinematics current) fails it, ``frame`` being the reference frame the last control step
followed (tracking). User modules add theirs (:mod:`.registry`, ``TERMINATIONS``). The env
termination names its twin where it is defined (``@term(deploy=...)``, as :mod:`.terms` explains).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import mujoco

from . import registry
from .policy_file import DeploymentError
from .rotations import rotmat
from .terms import MOTION_COMMAND, TermContext


class FallCheck(NamedTuple):
    """A built termination twin: ``check(data, frame) -> bool`` and the condition in words."""

    check: Callable[[mujoco.MjData, int], bool]
    text: str


def root_height_below(ctx: TermContext, term: str, min_height: float) -> FallCheck:
    # Above the ground under the root, as the env measures it: z on a flat floor, the terrain's
    # surface on a generated terrain (the model's floor heightfield).
    root, ground = ctx.root_qpos, ctx.ground

    def check(data: mujoco.MjData, frame: int) -> bool:
        return bool(data.qpos[root + 2] - ground.heights_at(data.qpos[root : root + 2]) < min_height)

    return FallCheck(check, f"root below {min_height} m" + ("" if ground.flat else " above the ground"))


def body_tilt_above(ctx: TermContext, term: str, body_names: list[str], max_degrees: float) -> FallCheck:
    names = [body_names] if isinstance(body_names, str) else list(body_names)
    bodies = [ctx.body_id(name, f"termination '{term}'") for name in names]
    upright = math.cos(math.radians(max_degrees))
    # A body's z axis . world z is its rotation matrix's [2, 2].
    return FallCheck(
        lambda data, frame: any(data.xmat[body][8] < upright for body in bodies),
        f"{', '.join(names)} tilted past {max_degrees:g} degrees",
    )


def _anchor(ctx: TermContext, term: str, command_name: str) -> tuple[int, int]:
    """The reference's anchor column and the robot's anchor body id."""
    anchor = ctx.command(command_name, MOTION_COMMAND, f"termination '{term}'")["anchor_body"]
    return ctx.need_reference(term).body_column(anchor), ctx.body_id(anchor, f"termination '{term}'")


def anchor_height_error_above(ctx: TermContext, term: str, threshold: float, command_name: str = "motion") -> FallCheck:
    column, body = _anchor(ctx, term, command_name)

    def check(data: mujoco.MjData, frame: int) -> bool:
        return bool(abs(ctx.need_reference(term).body_pos_w[frame, column, 2] - data.xpos[body, 2]) > threshold)

    return FallCheck(check, f"anchor height off the reference's by > {threshold} m")


def anchor_orientation_error_above(
    ctx: TermContext, term: str, threshold: float, command_name: str = "motion"
) -> FallCheck:
    column, body = _anchor(ctx, term, command_name)

    def check(data: mujoco.MjData, frame: int) -> bool:
        # -g_z seen from a frame is its rotation matrix's [2, 2]; a heading change leaves it alone.
        reference = rotmat(ctx.need_reference(term).body_quat_w[frame, column])[2, 2]
        return bool(abs(reference - data.xmat[body][8]) > threshold)

    return FallCheck(check, f"gravity z seen from the anchors off by > {threshold}")


TERMINATIONS: dict[str, Callable[..., FallCheck]] = {
    "unilab_gpu.envs.mdp.terminations.root_height_below": root_height_below,
    "unilab_gpu.tasks.velocity.terminations.body_tilt_above": body_tilt_above,
    "unilab_gpu.tasks.tracking.terminations.anchor_height_error_above": anchor_height_error_above,
    "unilab_gpu.tasks.tracking.terminations.anchor_orientation_error_above": anchor_orientation_error_above,
}
"""The env termination's dotted path -> its twin's builder ``build(ctx, term_name, **params)``.
Reports list the failure terminations without a twin (e.g. the tracking task's end-effector
height) as not counted."""


def fall_check_builders() -> dict[str, Callable[..., FallCheck]]:
    """:data:`TERMINATIONS` extended by the user's (``UNILAB_DEPLOY_MODULES``)."""
    return registry.table("TERMINATIONS", TERMINATIONS)


def build_fall_check(ctx: TermContext, name: str, func: str, params: dict) -> FallCheck:
    """The twin of failure termination ``name`` (``func``, YAML ``params``).

    Raises:
      DeploymentError: the termination has no twin, or its parameters do not fit it.
    """
    func = registry.canonical(func)
    build = fall_check_builders().get(func)
    if build is None:
        raise DeploymentError(f"termination '{name}' uses {func}, which has no runtime twin")
    try:
        return build(ctx, name, **params)
    except TypeError as error:
        raise DeploymentError(f"termination '{name}' ({func}): parameters {params}: {error}") from None
