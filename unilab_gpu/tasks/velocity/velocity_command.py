"""The planar velocity command and the gait clock of the velocity task."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.row_buffers import rows_with_dummy, valid_row_mean
from unilab_gpu.managers.term_spec import term
from unilab_gpu.utils.ranges import clamp_to, low_and_span
from unilab_gpu.utils.rotations import quat_apply_inverse, yaw_quat

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView
    from unilab_gpu.managers.reset_staging import ResetStaging

TWO_PI = 2.0 * math.pi

VELOCITY_METRICS = {"lin_vel_error": "velocity/lin_vel_error_mps", "yaw_rate_error": "velocity/yaw_rate_error_radps"}
""":meth:`VelocityCommand.tracking_errors` key -> its per-step mean in ``stats.summary()``: the
planar velocity error ``||c_xy - v_xy||`` (m/s) and the yaw-rate error ``|c_z - omega_z|`` (rad/s),
means over rows and steps, against the command the step's rewards see."""


@term(deploy="velocity")  # the runtime feeds a twist and a gait clock (deploy.terms.COMMAND_KINDS)
class VelocityCommand:
    """Per row: a base-frame command ``[v_x, v_y, omega_z]`` resampled on a timer, and a gait phase.

    Every step (``update``, inside the env step) each row's timer runs down by ``step_dt``; rows
    whose timer expired draw a new command and a new timer. All rows draw and ``torch.where``
    keeps the expired ones, so the step has a static shape and reads nothing back to the host.

    Draws are uniform in the ranges, then the **dead zone** commands standing still: a planar
    velocity with ``||(v_x, v_y)|| < dead_zone`` becomes 0, and so does a yaw rate with
    ``|omega_z| < dead_zone``. With ``heading_fraction > 0`` that fraction of draws (per row, at
    each resample) is a heading target instead of a yaw rate; those rows get
    ``omega_z = clip(heading_stiffness * wrap(heading - yaw), ang_vel_z_range)`` every step.
    ``fixed`` replaces every draw by one constant command (for play and evaluation).

    The gait phase ``phase`` (rad, ``[0, 2 pi)``) of the left foot advances by
    ``2 pi * gait_frequency * step_dt`` per step; the right foot is half a cycle behind. It starts
    at a uniform random value in each new episode.

    Fields (``(num_envs, ...)`` views of storage with one dummy row for padded reset ids):
    ``command`` ``(num_envs, 3)``, ``phase`` ``(num_envs,)``, ``time_left`` ``(num_envs,)`` s,
    ``heading`` ``(num_envs,)`` rad, ``heading_rows`` ``(num_envs,)`` bool.
    """

    def __init__(
        self,
        env: EnvView,
        lin_vel_x_range: list[float],
        lin_vel_y_range: list[float],
        ang_vel_z_range: list[float],
        resampling_time_range: list[float],
        dead_zone: float = 0.2,
        gait_frequency: float = 1.5,
        heading_fraction: float = 0.0,
        heading_stiffness: float = 0.5,
        fixed: list[float] | None = None,
    ) -> None:
        lo, hi = resampling_time_range
        if not 0 < lo <= hi:
            raise ValueError(
                f"VelocityCommand: resampling_time_range must be [low, high] with 0 < low <= high, got {[lo, hi]}"
            )
        for name, value, expected, ok in (
            ("dead_zone", dead_zone, ">= 0", dead_zone >= 0),
            ("gait_frequency", gait_frequency, ">= 0", gait_frequency >= 0),
            ("heading_fraction", heading_fraction, "in [0, 1]", 0 <= heading_fraction <= 1),
        ):
            if not ok:
                raise ValueError(f"VelocityCommand: {name} must be {expected}, got {value}")
        if fixed is not None and len(fixed) != 3:
            raise ValueError(f"VelocityCommand: fixed must be [v_x, v_y, omega_z] or null, got {fixed!r}")
        n, device = env.num_envs, env.device
        self.num_envs = n
        self.step_dt = env.step_dt
        self.robot = env.robot
        ranges = [lin_vel_x_range, lin_vel_y_range, ang_vel_z_range]
        self.low, self.span = low_and_span(ranges, 3, "VelocityCommand: the velocity ranges", device)
        self.time_low, self.time_span = resampling_time_range[0], resampling_time_range[1] - resampling_time_range[0]
        self.dead_zone = dead_zone
        self.phase_step = TWO_PI * gait_frequency * env.step_dt
        self.heading_fraction = heading_fraction
        self.heading_stiffness = heading_stiffness
        self.fixed = None if fixed is None else torch.tensor(fixed, dtype=torch.float32, device=device)
        self._command, self.command = rows_with_dummy(n, 3, device=device)
        """``[v_x, v_y, omega_z]`` in the base (heading) frame, m/s and rad/s, ``(num_envs, 3)``."""
        self._phase, self.phase = rows_with_dummy(n, device=device)
        self._time_left, self.time_left = rows_with_dummy(n, device=device)
        self._heading, self.heading = rows_with_dummy(n, device=device)
        self._heading_rows, self.heading_rows = rows_with_dummy(n, dtype=torch.bool, device=device)
        self._commanded_displacement, self.commanded_displacement = rows_with_dummy(n, 2, device=device)
        """``(N, 2)`` metres, world frame: where the planar commands would have taken the row since its
        episode started, ``sum R(yaw) c_xy dt`` with the row's actual heading; the terrain curriculum
        compares the row's own displacement with it. Kept only while ``record_displacement`` is set."""
        self.record_displacement = False
        """Set by the env when a terrain curriculum reads ``commanded_displacement`` (a flat task
        skips the work)."""
        self._metrics = {key: env.stats.add_step_mean(name) for key, name in VELOCITY_METRICS.items()}
        self._state_valid = env.state_valid

    def draw(self, rows: int) -> torch.Tensor:
        """``rows`` fresh commands ``(rows, 3)``, dead zone applied."""
        if self.fixed is not None:
            return self.fixed.expand(rows, 3)
        raw = self.low + self.span * torch.rand(rows, 3, device=self.low.device)
        moving = torch.linalg.vector_norm(raw[:, :2], dim=1, keepdim=True) >= self.dead_zone
        turning = raw[:, 2:].abs() >= self.dead_zone
        return torch.cat([raw[:, :2] * moving, raw[:, 2:] * turning], dim=1)

    def update(self, env: EnvView) -> None:
        """Advance the gait clock and the timers; resample the rows whose timer expired; add this
        step's velocity errors (:data:`VELOCITY_METRICS`) into the stats' step sums."""
        self.phase.copy_(torch.remainder(self.phase + self.phase_step, TWO_PI))
        self.time_left.sub_(self.step_dt)
        due = self.time_left <= 0.0
        n = self.num_envs
        self.command.copy_(torch.where(due[:, None], self.draw(n), self.command))
        self.time_left.copy_(torch.where(due, self._draw_time(n), self.time_left))
        if self.heading_fraction > 0 and self.fixed is None:
            heading, heading_rows = self._draw_heading(n)
            self.heading.copy_(torch.where(due, heading, self.heading))
            self.heading_rows.copy_(torch.where(due, heading_rows, self.heading_rows))
            self._steer()
        if self.record_displacement:
            self.commanded_displacement.add_(self._world_planar_command() * self.step_dt)
        # After the resample and the steering: the errors of the command this step's rewards score.
        for key, value in self.tracking_errors().items():
            self._metrics[key].add_(value)

    def reset(self, staging: ResetStaging) -> None:
        """New command, timer and gait phase for the staged rows (``staging.env_ids``, padded);
        the staged robot state is left to the reset events."""
        env_ids = staging.env_ids
        k = env_ids.shape[0]
        self._command.index_copy_(0, env_ids, self.draw(k))
        self._time_left.index_copy_(0, env_ids, self._draw_time(k))
        self._phase.index_copy_(0, env_ids, TWO_PI * torch.rand(k, device=self.low.device))
        self._commanded_displacement.index_fill_(0, env_ids, 0.0)
        if self.heading_fraction > 0 and self.fixed is None:
            heading, heading_rows = self._draw_heading(k)
            self._heading.index_copy_(0, env_ids, heading)
            self._heading_rows.index_copy_(0, env_ids, heading_rows)

    def row_errors(self) -> dict[str, torch.Tensor]:
        """Per row, ``(num_envs,)``: the planar velocity error ``||c_xy - v_xy||`` (m/s, ``v`` the
        root velocity in the root frame, as the tracking reward) and the yaw-rate error
        ``|c_z - omega_z|`` (rad/s, ``omega`` the root angular velocity in the root frame)."""
        robot = self.robot
        lin_vel_b = quat_apply_inverse(robot.root_quat_w, robot.root_lin_vel_w)
        return {
            "lin_vel_error": torch.linalg.vector_norm(self.command[:, :2] - lin_vel_b[:, :2], dim=1),
            "yaw_rate_error": (self.command[:, 2] - robot.root_ang_vel_b[:, 2]).abs(),
        }

    def tracking_errors(self) -> dict[str, torch.Tensor]:
        """The :meth:`row_errors` as means over the rows whose state is valid (``env.state_valid``
        of the last step), 0-d device tensors: no host sync, so a rollout can sum them and read
        the sums once."""
        return {name: valid_row_mean(error, self._state_valid) for name, error in self.row_errors().items()}

    def _world_planar_command(self) -> torch.Tensor:
        """The planar command ``(N, 2)`` turned from the heading frame into the world frame."""
        w, x, y, z = self.robot.root_quat_w.unbind(1)
        # The root's x axis projected on the ground: the heading, whatever the roll and pitch.
        forward = torch.stack([1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z)], dim=1)
        cos, sin = (forward / torch.linalg.vector_norm(forward, dim=1, keepdim=True).clamp_min(1e-6)).unbind(1)
        cx, cy = self.command[:, 0], self.command[:, 1]
        return torch.stack([cos * cx - sin * cy, sin * cx + cos * cy], dim=1)

    def _draw_time(self, rows: int) -> torch.Tensor:
        return self.time_low + self.time_span * torch.rand(rows, device=self.low.device)

    def _draw_heading(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        device = self.low.device
        heading = TWO_PI * torch.rand(rows, device=device) - math.pi
        return heading, torch.rand(rows, device=device) < self.heading_fraction

    def _steer(self) -> None:
        q = yaw_quat(self.robot.root_quat_w)
        yaw = 2.0 * torch.atan2(q[:, 3], q[:, 0])
        error = torch.remainder(self.heading - yaw + math.pi, TWO_PI) - math.pi
        low, high = self.low[2], self.low[2] + self.span[2]
        rate = clamp_to(self.heading_stiffness * error, low, high)
        self.command[:, 2] = torch.where(self.heading_rows, rate, self.command[:, 2])
