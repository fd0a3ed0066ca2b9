"""The run of a sim-to-sim scenario: an exported policy stepped by MuJoCo C, judged as training judges.

The policy runs through the robot-side runtime (:mod:`unilab_gpu.deploy`: observation, action
map, PD targets and rates from the file's metadata) on the model its scenario built
(:mod:`.scenario`), stepped by MuJoCo C instead of the MJWarp it was trained on. Falls are the
failure terminations of the policy's task config that have a runtime twin
(:class:`~.scenario.FallRule`); after one the robot is put back at its start, or at the
reference's current frame, and goes on. MuJoCo C stays silent when its solver stops at the
iteration cap unconverged and resets a state whose acceleration blows up: the run counts both,
warns, and the report (:mod:`.report`) names them (``solver_unconverged_fraction``; ``diverged``,
each also a fall, its steps left out of the errors) rather than letting them pass as large
velocity errors. MuJoCo C's own warnings come to the report too, not to ``MUJOCO_LOG.TXT``.

:func:`sim2sim` runs a :class:`~.scenario.Scenario` and returns the report (docs/deploy.md);
``unilab-sim2sim`` (``unilab_gpu/cli/sim2sim.py``) is its command line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab_gpu.deploy import Controller
from unilab_gpu.deploy.rotations import quat_conjugate, quat_mul, rotate, rotate_inverse, yaw_quat
from unilab_gpu.deploy.terminations import build_fall_check
from unilab_gpu.envs.env_cfg import DivergenceCfg
from unilab_gpu.export.sim2sim.report import SecondTally, StepNumbers, sim2sim_report
from unilab_gpu.export.sim2sim.scenario import FallRule, Scenario, control_steps


class Sim2Sim:
    """One run of a policy in MuJoCo C, with the statistics of the module docstring.

    Args:
      controller: the runtime, with the reference of a tracking policy.
      command: ``[v_x, v_y, omega_z]`` of a velocity policy (``None``: standing, or tracking).
      falls: the failure terminations counted (:class:`~.scenario.FallRule`).
      origin: ``(3,)`` added to the keyframe's root position at every start of a velocity policy
        (the sub-terrain it starts on, :class:`~.terrain.TerrainChoice`); ``None``: the keyframe's.
      divergence: the envelope of a plausible state (the task's ``divergence``): a state outside it,
        non-finite, or one MuJoCo C reset for a bad ``qacc``/``qpos``/``qvel`` (its warnings) is a
        diverged simulation, counted as a fall and as ``diverged``, its step left out of the errors.
      warn: receives each warning line (the first divergence; solver non-convergence, at the end).
    """

    def __init__(
        self,
        controller: Controller,
        command: Sequence[float] | None,
        falls: FallRule,
        origin: Sequence[float] | None = None,
        divergence: DivergenceCfg | None = None,
        warn: Callable[[str], None] = print,
    ) -> None:
        self.controller = ctl = controller
        self.origin = None if origin is None else np.asarray(origin, dtype=np.float64)
        self.model = model = controller.model
        self.data = mujoco.MjData(model)
        meta = controller.metadata
        self.tracking = controller.reference is not None
        if not self.tracking:
            ctl.command = np.asarray(command if command is not None else [0.0, 0.0, 0.0])
        self.falls = falls
        self.fall_checks = [build_fall_check(ctl.context, name, func, params) for name, func, params in falls.counted]
        self.falls_are = " or ".join(check.text for check in self.fall_checks)
        """The counted failure terminations in words (the report's ``falls_are``)."""
        self.root_qpos = ctl.context.root_qpos
        self.effort = np.array([np.inf if e is None else e for e in meta["effort_limit"]])
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in meta["joint_names"]]
        limited = model.jnt_limited[ids].astype(bool)
        self.joint_low = np.where(limited, model.jnt_range[ids, 0], -np.inf)
        self.joint_high = np.where(limited, model.jnt_range[ids, 1], np.inf)
        if self.tracking:
            params = ctl.motion_command["params"]
            self.tracked = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in params["body_names"]]
            self.tracked_columns = [ctl.reference.body_column(n) for n in params["body_names"]]
            self.anchor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, params["anchor_body"])
            self.anchor_column = ctl.reference.body_column(params["anchor_body"])
        self._substep_torque = 0.0
        self._substep_ratio = 0.0
        self._unconverged = 0
        """Physics steps of the current control step whose constraint solver stopped at its
        iteration cap without converging."""
        self.divergence = divergence if divergence is not None else DivergenceCfg()
        self.warn = warn
        self.warnings: list[str] = []
        """The warnings of the run, in order (the report's ``warnings``)."""
        self.start()

    def start(self, time: float = 0.0, phase: float = 0.0) -> None:
        """Put the robot at its start: the keyframe (on :attr:`origin`), or the reference at ``time``."""
        ctl, model, data = self.controller, self.model, self.data
        keyframe = ctl.metadata.get("keyframe")
        key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe) if keyframe else -1
        if key >= 0:
            mujoco.mj_resetDataKeyframe(model, data, key)
        else:
            mujoco.mj_resetData(model, data)
        if self.tracking:
            qpos, qvel = ctl.reference.state(ctl.reference.frame_at(time))
            joints = ctl.context
            data.qpos[self.root_qpos : self.root_qpos + 7] = qpos[:7]
            data.qvel[:6] = qvel[:6]
            data.qpos[joints.joint_qpos], data.qvel[joints.joint_qvel] = qpos[7:], qvel[6:]
        elif self.origin is not None:
            data.qpos[self.root_qpos : self.root_qpos + 3] += self.origin
        ctl.reset(data, time=time, phase=phase)

    def _watch(self, data: mujoco.MjData) -> None:
        tau = np.abs(self.controller.pd_torque(data))
        self._substep_torque = max(self._substep_torque, float(np.max(tau - self.effort)))
        self._substep_ratio = max(self._substep_ratio, float(np.max(tau / self.effort)))
        self._unconverged += int(solver_unconverged(self.model, data))

    def diverged(self, warnings_before: int) -> bool:
        """Whether the control step just taken diverged: MuJoCo C warned of a bad acceleration,
        position or velocity (it then resets the state to ``qpos0``, which would otherwise read as
        huge velocity errors), or the state is non-finite or outside :attr:`divergence`."""
        data = self.data
        if divergence_warnings(data) > warnings_before:
            return True
        finite = np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()
        return not finite or (
            np.abs(data.qpos).max() > self.divergence.max_qpos or np.abs(data.qvel).max() > self.divergence.max_qvel
        )

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        self.warn(f"unilab-sim2sim: warning: {text}")

    def fallen(self, frame: int) -> bool:
        """Whether the state fails a counted termination (:class:`~.scenario.FallRule`); ``frame``: the
        reference frame the last step followed."""
        return any(check.check(self.data, frame) for check in self.fall_checks)

    def errors(self, frame: int) -> dict[str, float]:
        """This step's tracking errors (after physics; ``frame``: the reference frame it followed)."""
        data, ctl = self.data, self.controller
        if not self.tracking:
            twist, command = self._root_twist(), ctl.command
            return {
                "lin_vel_error_mps": float(np.linalg.norm(command[:2] - twist[:2])),
                "yaw_rate_error_radps": float(abs(command[2] - twist[2])),
            }
        ref = ctl.reference
        target = ref.body_pos_w[frame, self.tracked_columns]
        robot = data.xpos[self.tracked]
        # Re-anchored as the tracking task scores: the reference moved to the robot anchor's xy and heading.
        ref_anchor_pos, ref_anchor_quat = (
            ref.body_pos_w[frame, self.anchor_column],
            ref.body_quat_w[frame, self.anchor_column],
        )
        heading = yaw_quat(quat_mul(data.xquat[self.anchor], quat_conjugate(ref_anchor_quat)))
        shift = np.array([*data.xpos[self.anchor, :2], ref_anchor_pos[2]])
        anchored = np.array([shift + rotate(heading, p - ref_anchor_pos) for p in target])
        return {
            "body_pos_error_m": float(np.linalg.norm(target - robot, axis=1).mean()),
            "body_pos_error_anchored_m": float(np.linalg.norm(anchored - robot, axis=1).mean()),
        }

    def velocity(self) -> dict[str, float]:
        """The root velocity a velocity policy reached after this step (root frame; tracking: none).
        Its means beside the errors tell a robot that walks slower or sideways of its command (a
        mean off the command) from one whose walk sways about it (a mean on it)."""
        if self.tracking:
            return {}
        v_x, v_y, omega_z = self._root_twist()
        return {"lin_vel_x_mps": float(v_x), "lin_vel_y_mps": float(v_y), "yaw_rate_radps": float(omega_z)}

    def _root_twist(self) -> np.ndarray:
        """``[v_x, v_y, omega_z]`` of the root now: planar velocity in the root frame and the yaw
        rate, the quantities a velocity command names."""
        data = self.data
        lin_vel_b = rotate_inverse(data.qpos[self.root_qpos + 3 : self.root_qpos + 7], data.qvel[0:3])
        return np.array([lin_vel_b[0], lin_vel_b[1], data.qvel[5]])

    def run(
        self,
        seconds: float,
        on_frame: Callable[[mujoco.MjData, np.ndarray | None], None] | None = None,
        on_step: Callable[[int, int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Run the whole control steps in ``seconds`` (:func:`control_steps`); returns the per-second
        rows and the summary of the steps taken, and ``steps``.

        A ``KeyboardInterrupt`` ends the run early: the result then covers the steps completed
        before it, with ``interrupted`` true (``None`` rows and summary when none was).

        Args:
          on_frame: ``on_frame(data, ghost_qpos)`` after each control step (video).
          on_step: ``on_step(steps_done, steps, falls)`` after each control step (progress).
        """
        ctl = self.controller
        steps = control_steps(seconds, ctl.control_dt)
        tally = SecondTally(round(1.0 / ctl.control_dt), ctl.decimation)
        interrupted = False
        # MuJoCo C's warnings come to the report, not to MUJOCO_LOG.TXT in the user's folder.
        mujoco_texts: list[str] = []
        previous_handler = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(mujoco_texts.append)
        try:
            for _ in range(steps):
                frame = ctl.frame
                self._substep_torque, self._substep_ratio, self._unconverged = -np.inf, 0.0, 0
                warnings_before = divergence_warnings(self.data)
                ctl.step(self.data, on_substep=self._watch)
                diverged = self.diverged(warnings_before)
                q = self.data.qpos[ctl.joint_qpos]
                excess = 0.0 if diverged else float(np.max(np.maximum(self.joint_low - q, q - self.joint_high)))
                measured = {} if diverged else self.errors(frame) | self.velocity()
                fell = diverged or self.fallen(frame)
                # The step's numbers are added at once, so an interrupt leaves no half-counted step.
                tally.add(
                    StepNumbers(
                        measured, excess, self._substep_torque, self._substep_ratio, self._unconverged, fell, diverged
                    )
                )
                if diverged and tally.diverged == 1:  # the first divergence
                    self._warn(
                        f"the simulation diverged at {tally.steps * ctl.control_dt:.2f} s (MuJoCo C reset a bad state, "
                        "or it left the task's divergence envelope); counted as a fall and as 'diverged', and the "
                        "robot restarts; a larger solver budget (the robot config's physics.iterations) or a smaller "
                        "timestep may hold it"
                    )
                if on_frame is not None:
                    on_frame(self.data, ctl.reference.state(ctl.frame)[0] if self.tracking else None)
                if fell:
                    self.start(time=ctl.time, phase=ctl.phase)
                if on_step is not None:
                    on_step(tally.steps, steps, tally.falls)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            mujoco.set_mju_user_warning(previous_handler)
        if mujoco_texts:
            self._warn(f"MuJoCo C warned {len(mujoco_texts)} time(s), first: {mujoco_texts[0].strip()}")
        if tally.unconverged:
            self._warn(
                f"MuJoCo's constraint solver stopped at its iteration cap ({self.model.opt.iterations}) without "
                f"converging in {tally.unconverged} of {tally.steps * ctl.decimation} physics steps; its forces there "
                "are approximate: raise the robot config's physics.iterations (and ls_iterations), as an elliptic "
                "cone with a high impratio needs, and retrain"
            )
        rows, summary = tally.rows(), tally.summary()
        return {"steps": tally.steps, "interrupted": interrupted, "per_second": rows, "summary": summary}


def solver_unconverged(model: mujoco.MjModel, data: mujoco.MjData) -> bool:
    """Whether the constraint solver of the last ``mj_step`` stopped at ``opt.iterations`` in some
    island without meeting its tolerance (MuJoCo C says nothing then; its forces are approximate)."""
    cap, tolerance = int(model.opt.iterations), float(model.opt.tolerance)
    for island in range(max(int(data.nisland), 1)):
        niter = int(data.solver_niter[island])
        if niter < cap:
            continue
        last = island * mujoco.mjNSOLVER + min(niter, mujoco.mjNSOLVER) - 1  # the stats of its last iteration
        stat = data.solver[last]
        if not (stat.improvement < tolerance or stat.gradient < tolerance):
            return True
    return False


DIVERGENCE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
)
"""MuJoCo C's warnings of a state it found unusable and reset (to ``qpos0``)."""


def divergence_warnings(data: mujoco.MjData) -> int:
    """How many times MuJoCo C has reset ``data`` for a bad acceleration, position or velocity."""
    return sum(int(data.warning[int(kind)].number) for kind in DIVERGENCE_WARNINGS)


def sim2sim(
    scenario: Scenario,
    video: str | Path | None = None,
    on_step: Callable[[int, int, int], None] | None = None,
    announce: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run ``scenario`` in MuJoCo C; returns the report (:func:`~.report.sim2sim_report`, docs/deploy.md).

    The run takes the whole control steps in the scenario's ``seconds`` (at least one); the
    report's ``seconds`` is the time simulated. On ``KeyboardInterrupt`` during the run the report
    covers the steps taken (``interrupted``: true) and the video, if any, holds their frames.

    Args:
      video: write an MP4 of the run here (the reference as a ghost).
      on_step: progress callback, see :meth:`Sim2Sim.run`.
      announce: receives the one-line description of the run before it starts, and its warnings.

    Raises:
      DeploymentError: the scenario cannot be built (:meth:`~.scenario.Scenario.prepare`).
    """
    prepared = scenario.prepare(announce)
    prepared.controller.faults = scenario.faults
    divergence = prepared.cfg.divergence
    run = Sim2Sim(prepared.controller, scenario.command, prepared.falls, prepared.origin, divergence, announce)
    announce(prepared.describe())
    recorder = _VideoFrames(prepared.model) if video is not None else None
    started = time.perf_counter()
    try:
        result = run.run(prepared.seconds, recorder, on_step)
        if recorder is not None and recorder.frames:
            recorder.save(video, 1.0 / prepared.controller.control_dt)
    finally:
        if recorder is not None:
            recorder.close()
    return sim2sim_report(prepared, result, run.falls_are, run.warnings, time.perf_counter() - started)


class _VideoFrames:
    """Frames of the run after each control step (the reference as a ghost), then an MP4."""

    def __init__(self, model: mujoco.MjModel) -> None:
        from unilab_gpu.render.offscreen import OffscreenRenderer

        root = int(model.jnt_bodyid[0]) if model.njnt else 1
        self.renderer = OffscreenRenderer(model, body=max(root, 1))
        self.frames: list[np.ndarray] = []

    def __call__(self, data: mujoco.MjData, ghost_qpos: np.ndarray | None) -> None:
        self.frames.append(self.renderer.render(data, ghost_qpos))

    def save(self, path: str | Path, fps: float) -> None:
        from unilab_gpu.render.video import write_video

        write_video(path, self.frames, fps)

    def close(self) -> None:
        self.renderer.close()
