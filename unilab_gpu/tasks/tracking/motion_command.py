"""The motion command: which reference frame each row tracks, and the reference state there.

Its motion table (which clips, as one device table) is built by
:mod:`~unilab_gpu.tasks.tracking.motion_table`; where episodes start, and the state staged there, is
:mod:`~unilab_gpu.tasks.tracking.episode_starts`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.row_buffers import rows_with_dummy, valid_row_mean
from unilab_gpu.managers.term_spec import term
from unilab_gpu.motion import AdaptiveStartSampler, ClipStartSampler, UniformStartSampler
from unilab_gpu.tasks.tracking.episode_starts import EpisodeStarts
from unilab_gpu.tasks.tracking.levers import check_levers
from unilab_gpu.tasks.tracking.motion_table import load_motion_table
from unilab_gpu.tasks.tracking.terminations import ThresholdCurriculum
from unilab_gpu.utils.rotations import (
    quat_apply,
    quat_conjugate,
    quat_error_magnitude,
    quat_mul,
    yaw_quat,
)

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView
    from unilab_gpu.managers.reset_staging import ResetStaging


SAMPLERS = {"adaptive": AdaptiveStartSampler, "uniform": UniformStartSampler, "start": ClipStartSampler}
CLIP_END_MODES = ("time_out", "wrap")


TRACKING_METRICS = {
    "body_pos_error": "tracking/body_pos_error_m",
    "body_pos_error_anchored": "tracking/body_pos_error_anchored_m",
    "body_ori_error": "tracking/body_ori_error_rad",
    "joint_pos_error": "tracking/joint_pos_error_rad",
}
""":meth:`MotionCommand.row_errors` key -> its per-step mean in ``stats.summary()`` (means over
rows, tracked bodies or joints, and steps): body positions in the world and against the targets
re-anchored to the robot's anchor (what the rewards use), body orientation against the
re-anchored targets, joint positions. The fraction of episodes that reach the clip's end is
``termination/motion_clip_end``."""


@term(deploy="motion")  # the runtime plays a reference clip (deploy.terms.COMMAND_KINDS)
class MotionCommand:
    """Per-row (clip, frame) into a device motion table, advanced one frame per env step.

    Reference fields (all ``(num_envs, ...)``, world frame, wxyz; ``B`` tracked bodies in the
    order of ``body_names``): ``joint_pos``/``joint_vel (num_envs, J)``,
    ``body_pos_w``/``body_lin_vel_w``/``body_ang_vel_w (num_envs, B, 3)``,
    ``body_quat_w (num_envs, B, 4)``; the anchor is tracked body ``anchor_index``. The relative
    body targets ``body_pos_relative_w``/``body_quat_relative_w`` are the reference bodies moved
    so the reference anchor sits at the robot anchor's xy and yaw (height and tilt kept), as in
    BeyondMimic: they score the pose independently of drift. They are computed by ``update``
    (full width, after physics) for the rewards and terminations of that step; rows reset later
    in the same step keep the previous values until the next ``update``.

    At a reset (``reset(staging)``, before the reset events) the row reports how its previous
    episode ended (``staging.episode_failed``) to the sampler, draws a start from it (adaptive
    by failure rate per 1 s bin by default) and overwrites the staged default pose with the
    reference state there plus noise. All of it touches only the compacted reset rows.

    With two or more clips, ``stats.summary()`` also holds ``motion/<clip>/episodes``,
    ``motion/<clip>/episode_length`` and ``motion/<clip>/failure_rate`` per clip (named by
    ``motion.motion_set.clip_names``).

    Args:
      motion_files: the motion set: files (any format ``load_motion`` reads), folders (every
        ``.npz`` / ``.csv`` in it) and globs (``clips/**/*.npz``), as a list. Every
        clip is resampled to the control rate and mapped onto the robot by joint and body name.
        Empty: one synthetic clip of ``synthetic_seconds`` is generated at construction.
      motion_weights: one weight > 0 per ``motion_files`` entry, applied to each clip it yields:
        the start samplers draw that clip's frames ``weight`` times as often (default: all 1).
      motion_order: the column order of files whose joints and bodies are unnamed (BeyondMimic
        NPZs), one of ``motion.ORDERS``: ``auto`` (detected per file by forward kinematics),
        ``mjcf`` (the model's, as mjlab writes them) or ``isaaclab_bfs`` (Isaac Lab's breadth
        first, as BeyondMimic's Isaac Lab scripts write them). Named columns keep their names.
      body_ids: MuJoCo ids of the tracked bodies (``body_names`` in the YAML).
      anchor_body: the tracked body whose pose anchors the relative targets (``torso_link``).
      sampling: ``adaptive``, ``uniform`` or ``start`` (every episode from frame 0 of a clip).
      first_frame_share: share of episodes, in [0, 1], that start exactly at frame 0 of a clip
        drawn by clip weight, beside ``sampling`` (which draws the others): a clip's opening, where
        the robot stands still and every real performance begins, is one instant that adaptive
        bins and spread starts rarely hit exactly.
      blend_in_seconds: > 0: every clip begins with this long a transition from the robot's
        standing keyframe ``blend_in_keyframe`` into its first frame
        (:func:`~unilab_gpu.motion.blend.blend_in_from_keyframe`), so frame 0 is the robot
        standing and the clip proper starts ``blend_in_seconds`` later; 0: the clips as loaded.
      blend_in_keyframe: the model keyframe the blend starts from (the robot config's).
      termination_curriculum: keyword arguments of
        :class:`~unilab_gpu.tasks.tracking.terminations.ThresholdCurriculum` (loose failure
        thresholds at first, tightened as the clip is learned); ``None``: the thresholds as written.
      adaptive: keyword arguments of ``AdaptiveStartSampler`` (``bin_seconds``,
        ``uniform_ratio``, ``ema_rate``).
      at_clip_end: ``time_out`` (the ``motion_clip_end`` termination ends the episode) or
        ``wrap`` (jump to a new start and keep going; the robot state is kept, so the next
        transition crosses a discontinuity in the reference that the critic must bootstrap over).
      pose_range: six ``[low, high]`` reset noise ranges: x, y, z (m), roll, pitch, yaw (rad).
      velocity_range: six ranges added to the root velocity: x, y, z (m/s), roll, pitch, yaw (rad/s).
      joint_position_range: ``[low, high]`` noise added to the reference joint positions.
      soft_joint_limit_ratio: noisy joint positions are clipped to this share of each range.
    """

    def __init__(
        self,
        env: EnvView,
        body_ids: torch.Tensor,
        anchor_body: str = "torso_link",
        motion_files: list[str] | None = None,
        motion_weights: list[float] | None = None,
        motion_order: str = "auto",
        synthetic_seconds: float = 10.0,
        synthetic_seed: int = 0,
        sampling: str = "adaptive",
        adaptive: dict | None = None,
        first_frame_share: float = 0.0,
        blend_in_seconds: float = 0.0,
        blend_in_keyframe: str | None = None,
        termination_curriculum: dict | None = None,
        at_clip_end: str = "time_out",
        pose_range: list[list[float]] | None = None,
        velocity_range: list[list[float]] | None = None,
        joint_position_range: list[float] | None = None,
        soft_joint_limit_ratio: float = 0.9,
    ) -> None:
        check_levers(
            first_frame_share=first_frame_share,
            blend_in_seconds=blend_in_seconds,
            soft_joint_limit_ratio=soft_joint_limit_ratio,
            termination_curriculum=termination_curriculum,
            adaptive=adaptive,
        )
        if sampling not in SAMPLERS:
            raise ValueError(f"commands.motion.params.sampling must be one of {list(SAMPLERS)}, got '{sampling}'")
        if at_clip_end not in CLIP_END_MODES:
            raise ValueError(f"commands.motion.params.at_clip_end must be one of {CLIP_END_MODES}, got '{at_clip_end}'")
        self.num_envs = n = env.num_envs
        self.device = device = env.device
        self.wrap = at_clip_end == "wrap"
        self.body_ids = body_ids
        self.body_names = [env.sim.body_names[int(b)] for b in body_ids.tolist()]
        if anchor_body not in self.body_names:
            raise ValueError(
                f"commands.motion.params.anchor_body '{anchor_body}' must be one of body_names {self.body_names}"
            )
        self.anchor_index = self.body_names.index(anchor_body)
        self.anchor_body_id = int(body_ids[self.anchor_index])

        where = "commands.motion.params"
        self.library = load_motion_table(
            env, self.body_names, where, motion_files, motion_weights, motion_order, synthetic_seconds,
            synthetic_seed, blend_in_seconds, blend_in_keyframe,
        )  # fmt: skip
        self.sampler = SAMPLERS[sampling](self.library, **(adaptive or {}) if sampling == "adaptive" else {})
        self.termination_curriculum = ThresholdCurriculum(
            device, **({"start_scale": 1.0} if termination_curriculum is None else termination_curriculum)
        )
        """Its ``scale`` (0-d) multiplies the failure thresholds of the tracking terminations."""
        self._curriculum_learns = termination_curriculum is not None

        self.starts = EpisodeStarts(
            self.library, self.sampler, first_frame_share, env.robot, where, device, pose_range, velocity_range,
            joint_position_range, soft_joint_limit_ratio,
        )  # fmt: skip
        """Where the rows' episodes start and the state staged there."""

        j, b = env.robot.num_joints, len(self.body_names)
        self._clip_storage, self.clip = rows_with_dummy(n, dtype=torch.int64, device=device)
        self._frame_storage, self.frame = rows_with_dummy(n, dtype=torch.int64, device=device)
        self.at_end = torch.zeros(n, dtype=torch.bool, device=device)
        """Rows whose reference reached the last frame of its clip this step, ``(num_envs,)``."""
        self._ref_storage: dict[str, torch.Tensor] = {}
        for name, shape in {
            "joint_pos": (j,),
            "joint_vel": (j,),
            "body_pos_w": (b, 3),
            "body_quat_w": (b, 4),
            "body_lin_vel_w": (b, 3),
            "body_ang_vel_w": (b, 3),
        }.items():
            storage, view = rows_with_dummy(n, *shape, device=device)
            self._ref_storage[name] = storage
            setattr(self, name, view)
        self.body_pos_relative_w = torch.zeros(n, b, 3, device=device)
        self.body_quat_relative_w = torch.zeros(n, b, 4, device=device)
        self._robot = env.robot
        self._sim_state = env.sim.state
        self._env = env  # fix_starts() asks it whether the step is still open to Python-level changes
        if self._curriculum_learns:
            env.stats.register("motion/termination_scale", self.termination_curriculum.scale)
            env.stats.register("motion/failure_rate_ema", self.termination_curriculum.failure_rate)
        if isinstance(self.sampler, AdaptiveStartSampler):
            env.stats.register("motion/sampling_entropy", self.sampler.entropy)
            env.stats.register("motion/sampling_top_bin", self.sampler.top_bin)
        if self.library.num_clips > 1:  # one clip's totals are the episode statistics themselves
            env.stats.add_row_groups("motion", self.library.clip_names, self.clip)
        self._metrics = {name: env.stats.add_step_mean(key) for name, key in TRACKING_METRICS.items()}
        self._state_valid = env.state_valid
        self._row_errors = {name: torch.zeros(n, device=device) for name in (*TRACKING_METRICS, "anchor_pos_error")}

    # ------------------------------------------------------------------------------------------
    # Views of the robot and the reference that terms read.

    @property
    def anchor_pos_w(self) -> torch.Tensor:
        """Reference anchor position, ``(num_envs, 3)``."""
        return self.body_pos_w[:, self.anchor_index]

    @property
    def anchor_quat_w(self) -> torch.Tensor:
        """Reference anchor orientation, ``(num_envs, 4)``."""
        return self.body_quat_w[:, self.anchor_index]

    @property
    def robot_body_pos_w(self) -> torch.Tensor:
        """Tracked robot bodies' positions, ``(num_envs, B, 3)``."""
        return self._sim_state.body_pos_w[:, self.body_ids]

    @property
    def robot_body_quat_w(self) -> torch.Tensor:
        return self._sim_state.body_quat_w[:, self.body_ids]

    @property
    def robot_body_lin_vel_w(self) -> torch.Tensor:
        return self._sim_state.body_lin_vel_w[:, self.body_ids]

    @property
    def robot_body_ang_vel_w(self) -> torch.Tensor:
        return self._sim_state.body_ang_vel_w[:, self.body_ids]

    @property
    def robot_anchor_pos_w(self) -> torch.Tensor:
        return self._sim_state.body_pos_w[:, self.anchor_body_id]

    @property
    def robot_anchor_quat_w(self) -> torch.Tensor:
        return self._sim_state.body_quat_w[:, self.anchor_body_id]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """What the command has learned, for resumes: the start sampler's state (adaptive
        sampling's failure rates) and, when one is configured, the termination curriculum's scale."""
        has_state = hasattr(self.sampler, "state_dict")
        state = {f"sampler.{k}": v for k, v in self.sampler.state_dict().items()} if has_state else {}
        if self._curriculum_learns:
            curriculum = self.termination_curriculum.state_dict()
            state.update({f"termination_curriculum.{k}": v for k, v in curriculum.items()})
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict` in place (a state saved before the curriculum existed keeps its default)."""
        sampler = {k.removeprefix("sampler."): v for k, v in state.items() if k.startswith("sampler.")}
        if hasattr(self.sampler, "load_state_dict"):
            self.sampler.load_state_dict(sampler)
        curriculum = {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith("termination_curriculum.")}
        if curriculum:
            self.termination_curriculum.load_state_dict(curriculum)

    # ------------------------------------------------------------------------------------------
    # Hot path.

    def update(self, env: EnvView) -> None:
        """Score the frame the policy observed: the relative targets against the robot after
        physics, whether that frame is its clip's last, and this step's per-row errors."""
        self.at_end.copy_(self.frame >= self.library.clip_length[self.clip] - 1)
        self._relative_targets()
        self._score_rows()

    def advance(self, env: EnvView) -> None:
        """Move every row on to the next frame (after the step's rewards and terminations, before
        its observations), so the policy observes the frame the next step scores.

        A row at its clip's last frame either ends (``time_out``: its reset places it anew; its
        final observation shows the last frame again) or, with ``wrap``, jumps to a new start.
        """
        last = self.library.clip_length[self.clip] - 1
        if self.wrap:
            u = torch.rand(2, self.num_envs, device=self.device)
            clip, frame = self.place_start(u[0], u[1])
            self.clip.copy_(torch.where(self.at_end, clip, self.clip))
            self.frame.copy_(torch.where(self.at_end, frame, torch.minimum(self.frame + 1, last)))
        else:
            self.frame.copy_(torch.minimum(self.frame + 1, last))
        self._load_reference(self.clip, self.frame, None)

    def _score_rows(self) -> None:
        """This step's per-row errors (:meth:`row_errors`) and their means into the stats' step sums."""
        robot_pos = self.robot_body_pos_w
        errors = self._row_errors
        errors["body_pos_error"].copy_(torch.linalg.vector_norm(self.body_pos_w - robot_pos, dim=-1).mean(dim=-1))
        errors["body_pos_error_anchored"].copy_(
            torch.linalg.vector_norm(self.body_pos_relative_w - robot_pos, dim=-1).mean(dim=-1)
        )
        orientation = quat_error_magnitude(self.body_quat_relative_w, self.robot_body_quat_w)
        errors["body_ori_error"].copy_(orientation.mean(dim=-1))
        errors["joint_pos_error"].copy_((self.joint_pos - self._robot.joint_pos).abs().mean(dim=-1))
        errors["anchor_pos_error"].copy_(torch.linalg.vector_norm(self.anchor_pos_w - self.robot_anchor_pos_w, dim=-1))
        for name, step_sum in self._metrics.items():
            step_sum.add_(valid_row_mean(errors[name], self._state_valid))

    def reset(self, staging: ResetStaging) -> None:
        """Start the staged rows (padded with num_envs) at sampled frames; stage their state."""
        env_ids = staging.env_ids
        valid = env_ids < self.num_envs
        self.sampler.update(self._clip_storage[env_ids], self._frame_storage[env_ids], staging.episode_failed, valid)
        self.termination_curriculum.update(staging.episode_failed, valid)
        clip, frame = self.starts.draw(env_ids)
        self._clip_storage.index_copy_(0, env_ids, clip)
        self._frame_storage.index_copy_(0, env_ids, frame)
        ref = self._load_reference(clip, frame, env_ids)
        self.starts.stage_state(ref, staging)

    def place_start(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Episode starts (clip, frame), int64 ``(N,)`` each, from uniform numbers ``u``, ``v`` in
        [0, 1) ``(N,)`` (:meth:`EpisodeStarts.place <unilab_gpu.tasks.tracking.episode_starts.EpisodeStarts.place>`)."""
        return self.starts.place(u, v)

    def fix_starts(self, clip: torch.Tensor, frame: torch.Tensor) -> None:
        """From the next reset on, row ``i`` starts every episode at ``frame[i]`` of ``clip[i]``
        (both ``(num_envs,)`` int64) instead of a sampled start: a fixed set of starts that an
        evaluation shares between policies. The sampler still learns from the episodes' ends.

        Raises:
          RuntimeError: the env's step is compiled or captured and has been reset already
            (``env.step_frozen``): whether starts are fixed is a Python branch of the reset, fixed
            in the traced regions and the CUDA graph, so the call would be ignored.
        """
        if self._env.step_frozen:
            raise RuntimeError(
                "fix_starts: the env's step is already compiled or captured (at its first reset()), which fixed "
                "whether starts are sampled; call fix_starts before the env's first reset(), or build it with "
                "compile=False, capture=False"
            )
        self.starts.fix(clip, frame, self.num_envs)

    def reference_qpos(self, env_id: int) -> torch.Tensor:
        """Row ``env_id``'s current reference pose as a model ``qpos`` ``(7 + J,)``: root position,
        root quaternion (wxyz), joint positions in the robot's order (cold path, for drawing it)."""
        return self.reference_qpos_rows(slice(env_id, env_id + 1))[0]

    def reference_qpos_rows(self, rows: slice) -> torch.Tensor:
        """:meth:`reference_qpos` of the rows ``rows``, ``(len(rows), 7 + J)``, read without a
        host sync (the live viewer copies it while training)."""
        ref = self.library.gather(self.clip[rows], self.frame[rows])
        return torch.cat([ref.root_pos, ref.root_quat, ref.joint_pos], dim=1)

    def row_errors(self) -> dict[str, torch.Tensor]:
        """Per row, ``(num_envs,)``, as scored by the last step (the frame the policy had observed):
        ``body_pos_error`` (m, world frame) and ``body_pos_error_anchored`` (m, against the
        re-anchored targets), means over the tracked bodies; ``body_ori_error`` (rad, re-anchored);
        ``joint_pos_error`` (rad, mean over joints); ``anchor_pos_error`` (m, world frame).
        ``tracking/<name>_<unit>`` in ``stats.summary()`` is each one's mean per step."""
        return self._row_errors

    def tracking_errors(self) -> dict[str, torch.Tensor]:
        """Mean position error over the rows whose state is valid (``env.state_valid`` of the last
        step) of each tracked body (against the re-anchored targets) and of the anchor (world
        frame), m, as 0-d device tensors: no host sync, so a rollout can sum them and read the
        sums once."""
        per_body = torch.linalg.vector_norm(self.body_pos_relative_w - self.robot_body_pos_w, dim=-1)
        errors = valid_row_mean(per_body, self._state_valid)
        out = {f"body_pos_error/{name}": errors[i] for i, name in enumerate(self.body_names)}
        out["anchor_pos_error"] = valid_row_mean(self._row_errors["anchor_pos_error"], self._state_valid)
        return out

    # ------------------------------------------------------------------------------------------

    def _load_reference(self, clip: torch.Tensor, frame: torch.Tensor, env_ids: torch.Tensor | None):
        """Gather the reference at (clip, frame) into all rows (``env_ids`` None) or the listed rows."""
        ref = self.library.gather(clip, frame)
        for name, storage in self._ref_storage.items():
            value = getattr(ref, name)
            if env_ids is None:
                storage[: self.num_envs].copy_(value)
            else:
                storage.index_copy_(0, env_ids, value)
        return ref

    def _relative_targets(self) -> None:
        anchor_pos = self.anchor_pos_w[:, None]
        robot_anchor_pos = self.robot_anchor_pos_w[:, None]
        # Robot anchor's xy with the reference anchor's height; heading difference only.
        shift = torch.cat([robot_anchor_pos[..., :2], anchor_pos[..., 2:]], dim=-1)
        heading = yaw_quat(quat_mul(self.robot_anchor_quat_w, quat_conjugate(self.anchor_quat_w)))[:, None]
        heading = heading.expand_as(self.body_quat_w)
        self.body_quat_relative_w.copy_(quat_mul(heading, self.body_quat_w))
        self.body_pos_relative_w.copy_(shift + quat_apply(heading, self.body_pos_w - anchor_pos))
