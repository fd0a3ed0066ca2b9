"""``unilab-sim2sim``: run an exported policy in plain MuJoCo (C) from its ONNX file alone.

Usage::

    unilab-sim2sim POLICY.onnx [--command vx,vy,wz] [--motion FILE] [--seconds S]
                   [--video OUT.mp4] [--out report.json] [--model MJCF] [--force]

The policy runs through the robot-side runtime (:mod:`unilab_gpu.deploy`: observation, action
map, PD targets and rates from the file's metadata) on the project's MJCF of the robot it names
(``--model`` for another), stepped by MuJoCo C instead of the MJWarp it was trained on. A velocity
policy starts at the model's keyframe and follows ``--command``; a tracking policy starts at the
reference's first frame and follows ``--motion`` (any format ``unilab-motion`` reads; default: the
clip the metadata names, or its synthetic clip). Reported per second and in all: falls (the
failure terminations of the policy's task config, thresholds read from it: velocity policies the
root too low or a body tilted too far, ``root_height_below`` and ``body_tilt_above``; tracking
policies the anchor too far above or below the reference's or tilted differently,
``anchor_height_error`` and ``anchor_orientation_error``; the robot is then put back at its start,
or at the reference's current frame, and goes on), the velocity
errors as the velocity task defines them (``||c_xy - v_xy||``, ``|c_z - omega_z|``, root frame)
or the tracked bodies' position errors (world frame, and against the reference re-anchored at
the robot's anchor as the tracking task scores them), the largest joint-limit excursion and the
largest PD torque beyond a joint's force limit. ``--out`` writes the report as JSON (atomically).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab_gpu.deploy import Controller, DeploymentError, PolicyFile, ReferenceMotion
from unilab_gpu.deploy.rotations import quat_conjugate, quat_mul, rotate, rotate_inverse, rotmat, yaw_quat
from unilab_gpu.utils.files import check_output, write_atomic


@dataclass(frozen=True)
class FallRule:
    """When a run counts a fall: the failure terminations of the policy's task config (with the
    training run's overrides), so sim-to-sim and training judge a state alike.

    A velocity policy falls when the root is below ``min_root_height`` (``root_height_below``) or
    one of ``tilt_bodies`` tilts more than ``max_tilt_degrees`` from upright (``body_tilt_above``).
    A tracking policy loses the reference when its anchor's height differs from the reference
    anchor's by more than ``anchor_height`` (``anchor_height_error``) or the z components of
    gravity seen from the two anchors differ by more than ``anchor_orientation``
    (``anchor_orientation_error``): a reference may bend far over, so an absolute tilt is no fall.
    """

    min_root_height: float | None = None
    tilt_bodies: tuple[str, ...] = ()
    max_tilt_degrees: float | None = None
    anchor_height: float | None = None
    anchor_orientation: float | None = None

    @classmethod
    def of_task(cls, meta: dict[str, Any], tracking: bool) -> FallRule:
        """The rule of ``meta``'s task and overrides; a task without those terminations is refused."""
        from unilab_gpu.envs.make_env import load_task_cfg  # the training side's config

        task = meta.get("task")
        cfg = load_task_cfg(task, meta.get("env_overrides") or [])
        params = {t.func.rsplit(".", 1)[-1]: t.params for t in cfg.terminations.values() if t is not None}
        needed = (
            ("anchor_height_error", "anchor_orientation_error")
            if tracking
            else ("root_height_below", "body_tilt_above")
        )
        missing = [name for name in needed if name not in params]
        if missing:
            raise DeploymentError(f"task '{task}' has no {', '.join(missing)} termination to count falls by")
        if tracking:
            return cls(
                anchor_height=params["anchor_height_error"]["threshold"],
                anchor_orientation=params["anchor_orientation_error"]["threshold"],
            )
        tilt = params["body_tilt_above"]
        return cls(
            min_root_height=params["root_height_below"]["min_height"],
            tilt_bodies=tuple(tilt["body_names"]),
            max_tilt_degrees=tilt["max_degrees"],
        )

    def describe(self) -> str:
        """The rule in words (the report's ``falls_are``)."""
        if self.anchor_height is not None:
            return (
                f"anchor height off the reference's by > {self.anchor_height} m or gravity z seen from the anchors "
                f"off by > {self.anchor_orientation}"
            )
        return (
            f"root below {self.min_root_height} m or {', '.join(self.tilt_bodies)} tilted past "
            f"{self.max_tilt_degrees:g} degrees"
        )


def load_reference(
    meta: dict[str, Any], model: mujoco.MjModel, motion: str | None
) -> tuple[ReferenceMotion, str] | None:
    """The reference of a tracking policy at its control rate and its name; ``None`` for others.

    ``motion`` (any format) or else the metadata's: its first motion file, or its synthetic clip.
    """
    from unilab_gpu.motion import RobotKinematics, load_motion, synthesize_clip  # the training side converts

    command = next((c for c in meta["commands"].values() if c["func"].endswith("MotionCommand")), None)
    if command is None:
        if motion is not None:
            raise DeploymentError(f"--motion: the policy ({meta.get('task')}) follows no motion command")
        return None
    fps = 1.0 / meta["control_dt"]
    kinematics = RobotKinematics(model)
    params = command["params"]
    files = [motion] if motion is not None else list(params.get("motion_files") or [])
    if files:
        clip = load_motion(Path(files[0]).expanduser(), fps=fps, kinematics=kinematics)
        name = str(files[0])
    else:
        seconds, seed = params.get("synthetic_seconds", 10.0), params.get("synthetic_seed", 0)
        clip = synthesize_clip(seconds, seed, fps=fps, kinematics=kinematics)
        name = f"synthetic (seconds {seconds:g}, seed {seed})"
    return ReferenceMotion(clip.fps, clip.joint_names, clip.body_names, **clip.arrays()), name


class Sim2Sim:
    """One run of a policy in MuJoCo C, with the statistics of the module docstring."""

    def __init__(self, controller: Controller, command: Sequence[float] | None, falls: FallRule) -> None:
        self.controller = ctl = controller
        self.falls = falls
        self.model = model = controller.model
        self.data = mujoco.MjData(model)
        meta = controller.metadata
        self.tracking = controller.reference is not None
        if not self.tracking:
            ctl.command = np.asarray(command if command is not None else [0.0, 0.0, 0.0])
        self.tilt_bodies = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in falls.tilt_bodies]
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
        self.start()

    def start(self, time: float = 0.0, phase: float = 0.0) -> None:
        """Put the robot at its start: the keyframe, or the reference at ``time``."""
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
        ctl.reset(data, time=time, phase=phase)

    def _watch(self, data: mujoco.MjData) -> None:
        tau = np.abs(self.controller.pd_torque(data))
        self._substep_torque = max(self._substep_torque, float(np.max(tau - self.effort)))
        self._substep_ratio = max(self._substep_ratio, float(np.max(tau / self.effort)))

    def fallen(self, frame: int) -> bool:
        """Whether the robot fell (:class:`FallRule`); ``frame``: the reference frame the last step
        followed."""
        data, rule = self.data, self.falls
        if self.tracking:
            ref = self.controller.reference
            height = abs(ref.body_pos_w[frame, self.anchor_column, 2] - data.xpos[self.anchor, 2])
            # -g_z seen from a frame is its rotation matrix's [2, 2]; a heading change leaves it alone.
            tilt = abs(rotmat(ref.body_quat_w[frame, self.anchor_column])[2, 2] - data.xmat[self.anchor][8])
            return bool(height > rule.anchor_height or tilt > rule.anchor_orientation)
        low = data.qpos[self.root_qpos + 2] < rule.min_root_height
        upright = math.cos(math.radians(rule.max_tilt_degrees))
        tilted = any(data.xmat[body][8] < upright for body in self.tilt_bodies)  # body z . world z
        return bool(low or tilted)

    def errors(self, frame: int) -> dict[str, float]:
        """This step's tracking errors (after physics; ``frame``: the reference frame it followed)."""
        data, ctl = self.data, self.controller
        if not self.tracking:
            quat = data.qpos[self.root_qpos + 3 : self.root_qpos + 7]
            lin_vel_b = rotate_inverse(quat, data.qvel[0:3])
            command = ctl.command
            return {
                "lin_vel_error_mps": float(np.linalg.norm(command[:2] - lin_vel_b[:2])),
                "yaw_rate_error_radps": float(abs(command[2] - data.qvel[5])),
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

    def run(self, seconds: float, on_frame=None) -> dict[str, Any]:
        """Run for ``seconds``; ``on_frame(data, ghost_qpos)`` after each control step (video)."""
        ctl = self.controller
        steps = round(seconds / ctl.control_dt)
        per_second: list[dict[str, Any]] = []
        second: dict[str, Any] = {}
        for step in range(steps):
            if step % round(1.0 / ctl.control_dt) == 0:
                second = {
                    "second": len(per_second),
                    "falls": 0,
                    "steps": 0,
                    "sums": {},
                    "joint": 0.0,
                    "torque": 0.0,
                    "ratio": 0.0,
                }
                per_second.append(second)
            frame = ctl.frame
            self._substep_torque, self._substep_ratio = -np.inf, 0.0
            ctl.step(self.data, on_substep=self._watch)
            q = self.data.qpos[ctl.joint_qpos]
            second["joint"] = max(second["joint"], float(np.max(np.maximum(self.joint_low - q, q - self.joint_high))))
            second["torque"] = max(second["torque"], self._substep_torque)
            second["ratio"] = max(second["ratio"], self._substep_ratio)
            for name, value in self.errors(frame).items():
                second["sums"][name] = second["sums"].get(name, 0.0) + value
            second["steps"] += 1
            if on_frame is not None:
                on_frame(self.data, ctl.reference.state(ctl.frame)[0] if self.tracking else None)
            if self.fallen(frame):
                second["falls"] += 1
                self.start(time=ctl.time, phase=ctl.phase)
        rows = [_row(s) for s in per_second]
        return {"per_second": rows, "summary": _summary(rows)}


def _row(second: dict[str, Any]) -> dict[str, Any]:
    row = {"second": second["second"], "falls": second["falls"]}
    row.update({name: total / second["steps"] for name, total in second["sums"].items()})
    row["joint_limit_excess_rad"] = max(second["joint"], 0.0)
    row["torque_limit_excess_nm"] = max(second["torque"], 0.0)
    row["peak_torque_over_limit"] = second["ratio"]
    return row


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    means = [k for k in rows[0] if k.endswith(("_mps", "_radps", "_m"))]
    summary: dict[str, Any] = {"falls": sum(r["falls"] for r in rows)}
    summary.update({k: float(np.mean([r[k] for r in rows])) for k in means})
    for key in ("joint_limit_excess_rad", "torque_limit_excess_nm", "peak_torque_over_limit"):
        summary[key] = max(r[key] for r in rows)
    return summary


def sim2sim(
    policy_path: str | Path,
    command: Sequence[float] | None = None,
    motion: str | None = None,
    seconds: float | None = None,
    video: str | Path | None = None,
    model_path: str | Path | None = None,
) -> dict[str, Any]:
    """Run ``policy_path`` in MuJoCo C; returns the report (see the module docstring)."""
    from unilab_gpu.paths import robot_asset

    policy = PolicyFile(policy_path)
    meta = policy.metadata
    mjcf = Path(model_path) if model_path is not None else robot_asset(meta.get("robot_model") or "g1")
    model = mujoco.MjModel.from_xml_path(str(mjcf))
    loaded = load_reference(meta, model, motion)
    reference, motion_name = loaded if loaded is not None else (None, None)
    if reference is None and command is None:
        raise DeploymentError("--command vx,vy,wz is required for a velocity policy")
    if reference is not None and command is not None:
        raise DeploymentError("--command applies to velocity policies; this one follows a motion (--motion)")
    controller = Controller(policy, model, reference)
    if seconds is None:
        seconds = reference.duration if reference is not None else 20.0
    if reference is not None and seconds > reference.duration + 1e-9:
        print(f"unilab-sim2sim: the reference lasts {reference.duration:.2f} s; running {reference.duration:.2f} s")
        seconds = reference.duration
    print(
        f"unilab-sim2sim: {meta.get('task')} / {meta.get('algo')} policy {policy_path} on {mjcf.name} in MuJoCo "
        f"{mujoco.__version__} (C) for {seconds:g} s, "
        + (f"motion {motion_name}" if reference is not None else f"command {list(command)}")
    )
    falls = FallRule.of_task(meta, tracking=reference is not None)
    run = Sim2Sim(controller, command, falls)
    recorder = _VideoFrames(model, run.data) if video is not None else None
    started = time.perf_counter()
    try:
        result = run.run(seconds, recorder)
        if recorder is not None:
            recorder.save(video, 1.0 / controller.control_dt)
    finally:
        if recorder is not None:
            recorder.close()
    return {
        "policy": str(policy_path),
        "task": meta.get("task"),
        "algo": meta.get("algo"),
        "mjcf": str(mjcf),
        "engine": f"MuJoCo {mujoco.__version__} (C)",
        "command": None if reference is not None else [float(c) for c in command],
        "motion": motion_name,
        "seconds": seconds,
        "control_dt": controller.control_dt,
        "physics_dt": float(model.opt.timestep),
        "falls_are": falls.describe(),
        "wall_seconds": round(time.perf_counter() - started, 2),
        **result,
    }


class _VideoFrames:
    """Frames of the run after each control step (the reference as a ghost), then an MP4."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
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


def _command(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected three numbers vx,vy,wz such as 0.5,0,0, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="unilab-sim2sim", description=__doc__.split("\n")[0])
    parser.add_argument("policy", help="exported policy (unilab-export)")
    parser.add_argument("--command", type=_command, default=None, help="velocity command vx,vy,wz (m/s, rad/s)")
    parser.add_argument(
        "--motion", default=None, help="reference motion of a tracking policy (any unilab-motion format)"
    )
    parser.add_argument("--seconds", type=float, default=None, help="default: 20 (velocity), the clip (tracking)")
    parser.add_argument("--video", default=None, help="write an MP4 of the run")
    parser.add_argument("--out", default=None, help="write the report as JSON")
    parser.add_argument("--model", default=None, help="MJCF to run on (default: the project's model of the robot)")
    parser.add_argument("--force", action="store_true", help="replace existing --out / --video files")
    args = parser.parse_args(argv)
    if args.seconds is not None and not (math.isfinite(args.seconds) and args.seconds > 0):
        parser.error(f"--seconds must be a finite number > 0, got {args.seconds}")
    try:
        for option, path, example in (("--out", args.out, "report.json"), ("--video", args.video, "sim2sim.mp4")):
            if path is not None:
                check_output(path, option, force=args.force, inputs=[args.policy], example=example)
        report = sim2sim(args.policy, args.command, args.motion, args.seconds, args.video, args.model)
    except (ValueError, KeyError, FileNotFoundError) as error:  # DeploymentError and MotionFormatError are ValueErrors
        print(f"unilab-sim2sim: error: {error}", file=sys.stderr)
        return 2
    _print(report)
    if args.out is not None:
        import json

        write_atomic(args.out, lambda file: file.write((json.dumps(report, indent=2) + "\n").encode()))
        print(f"report: {args.out}")
    if args.video is not None:
        print(f"video: {args.video}")
    return 0


def _print(report: dict[str, Any]) -> None:
    rows = report["per_second"]
    keys = [k for k in rows[0] if k != "second"]
    print("  second  " + "  ".join(f"{k:>24}" for k in keys))
    for row in rows:
        print(f"  {row['second']:>6}  " + "  ".join(f"{row[k]:>24.4g}" for k in keys))
    print("  all     " + "  ".join(f"{report['summary'].get(k, float('nan')):>24.4g}" for k in keys))


if __name__ == "__main__":
    sys.exit(main())
