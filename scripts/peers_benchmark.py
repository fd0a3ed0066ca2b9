"""Peers benchmark: holosoma's G1 policies and ours, side by side in one plain-MuJoCo-C harness.

Usage::

    python scripts/peers_benchmark.py --out docs/benchmarks/peers/peers.json --png docs/benchmarks/peers/peers.png
    python scripts/peers_benchmark.py --out docs/benchmarks/peers/peers.json --png docs/benchmarks/peers/peers.png \\
        --markdown docs/benchmarks/peers/tables.md --merge --force --skip-locomotion --skip-peer-tracking \\
        --tracker ours.onnx --tracker-motion dance.npz                                     # adds our tracker's row
    python scripts/peers_benchmark.py ... --seconds 4 --trials 2 --tracking-seconds 6         # a quick look

Every policy runs through ``unilab-sim2sim``'s machinery (:class:`~unilab_gpu.export.sim2sim.Scenario`,
:class:`~unilab_gpu.export.sim2sim.Sim2Sim`) on the project's G1 MJCF; holosoma's files through the
``holosoma`` format (``unilab_gpu/deploy/formats/holosoma.json``). Falls are the project task's
failure terminations (``g1_velocity``, ``g1_tracking``) for every policy alike.

- **Locomotion** (our ``docs/policies/g1_velocity_sac.onnx``, holosoma FastSAC and PPO): four
  commands for ``--seconds`` each, from the keyframe: falls, planar and yaw-rate errors, the mean
  velocity reached; then the same with pushes: a root velocity change of 0.5 m/s (the edge of
  our training's push range) every 4 s from 2 s, in turn +x, +y, -x, -y (world frame).
- **Tracking** (holosoma FastSAC and PPO, each on the dance its file embeds; ``--tracker``: ours
  on ``--tracker-motion``): ``--trials`` trials from frame 0 and as many from starts spread over
  the clip (the project's ``start_frames``), each trial ``k`` with the same start perturbation
  for every policy (seeded by ``k``: root xy +-5 cm, yaw +-0.1 rad, each joint +-0.05 rad). A
  trial ends at its first fall or at the clip's end (success). Errors are the project's
  ``tracking_errors`` (MPKPE, R-MPKPE, joint error; the robot config's 14 tracked bodies, anchor
  ``torso_link``) over the steps before the first fall, overall and per 10 s window of the clip.

JSON (machine info, the command line of every row) and a PNG, written atomically.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

from unilab_gpu.cli.arguments import MAX_SECONDS, Bound, check_bounds, whole
from unilab_gpu.cli.eval import MAX_TRIALS
from unilab_gpu.deploy.rotations import quat_mul
from unilab_gpu.evaluation.metrics import TrackedState, tracking_errors
from unilab_gpu.evaluation.tracking import start_frames
from unilab_gpu.export.sim2sim import Scenario, Sim2Sim
from unilab_gpu.export.sim2sim.run import divergence_warnings
from unilab_gpu.export.sim2sim.scenario import control_steps
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.utils.files import check_output, portable_paths, write_atomic, write_json_atomic

PEERS = Path("../shared/peers/holosoma")
LOCOMOTION = {
    "ours (SAC)": ("docs/policies/g1_velocity_sac.onnx", None),
    "holosoma FastSAC": (str(PEERS / "fastsac_g1_29dof.onnx"), "holosoma"),
    "holosoma PPO": (str(PEERS / "ppo_g1_29dof.onnx"), "holosoma"),
}
TRACKING = {
    "holosoma FastSAC": (str(PEERS / "fastsac_g1_29dof_dancing.onnx"), "holosoma", None),
    "holosoma PPO": (str(PEERS / "ppo_g1_29dof_dancing.onnx"), "holosoma", None),
}
COMMANDS = {
    "forward 0.5": [0.5, 0.0, 0.0],
    "backward 0.3": [-0.3, 0.0, 0.0],
    "sideways 0.3": [0.0, 0.3, 0.0],
    "turning 0.5": [0.0, 0.0, 0.5],
}
PUSH_START_S, PUSH_EVERY_S, PUSH_MPS = 2.0, 4.0, 0.5
PUSH_DIRECTIONS = ((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0))
WINDOW_S = 10.0
PERTURB_XY_M, PERTURB_YAW_RAD, PERTURB_JOINT_RAD = 0.05, 0.1, 0.05


def quiet(_: str) -> None:
    """Swallows a run's announcements (the script prints its own lines)."""


def locomotion_case(
    path: str, fmt: str | None, command: list[float], seconds: float, push: bool, model: str | None = None
) -> dict[str, Any]:
    """One velocity run: the summary of :meth:`Sim2Sim.run` (with pushes: at the schedule above)."""
    prepared = Scenario(path, command=command, seconds=seconds, format=fmt, model_path=model).prepare(quiet)
    run = Sim2Sim(prepared.controller, command, prepared.falls, prepared.origin, prepared.cfg.divergence, quiet)
    dt = prepared.controller.control_dt
    pushes = []

    def kick(done: int, steps: int, falls: int) -> None:
        t = done * dt
        index = round((t - PUSH_START_S) / PUSH_EVERY_S)
        if push and index >= 0 and abs(t - (PUSH_START_S + index * PUSH_EVERY_S)) < dt / 2:
            direction = PUSH_DIRECTIONS[index % len(PUSH_DIRECTIONS)]
            run.data.qvel[0:2] += PUSH_MPS * np.asarray(direction)  # world frame, as PushRoot
            pushes.append(round(t, 3))

    result = run.run(prepared.seconds, on_step=kick)
    keys = (
        "falls",
        "lin_vel_error_mps",
        "yaw_rate_error_radps",
        "lin_vel_x_mps",
        "lin_vel_y_mps",
        "yaw_rate_radps",
        "peak_torque_over_limit",
    )
    fall_seconds = [row["second"] for row in result["per_second"] if row["falls"]]
    return {key: result["summary"][key] for key in keys} | {"pushes_s": pushes, "seconds_with_falls": fall_seconds}


def perturbation(trial: int, joints: int) -> dict[str, np.ndarray]:
    """Trial ``trial``'s start perturbation, the same for every policy."""
    rng = np.random.default_rng(1000 + trial)
    return {
        "xy": rng.uniform(-PERTURB_XY_M, PERTURB_XY_M, 2),
        "yaw": rng.uniform(-PERTURB_YAW_RAD, PERTURB_YAW_RAD),
        "joints": rng.uniform(-PERTURB_JOINT_RAD, PERTURB_JOINT_RAD, joints),
    }


class TrackingHarness:
    """Trials of one tracking policy in MuJoCo C (module docstring)."""

    def __init__(self, path: str, fmt: str | None, motion: str | None, model: str | None = None) -> None:
        prepared = Scenario(path, motion=motion, format=fmt, model_path=model).prepare(quiet)
        self.ctl = ctl = prepared.controller
        self.run = Sim2Sim(ctl, None, prepared.falls, None, prepared.cfg.divergence, quiet)
        self.falls_are = self.run.falls_are
        self.motion_name = prepared.motion_name
        self.reference = ref = ctl.reference
        model = ctl.model
        tracking = prepared.cfg.robot.tracking
        self.bodies = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in tracking.bodies]
        self.columns = [ref.body_column(n) for n in tracking.bodies]
        self.anchor = tracking.bodies.index(ctl.motion_command["params"]["anchor_body"])
        self.end_effectors = torch.tensor([tracking.bodies.index(n) for n in tracking.end_effectors])
        self.hinges = [j for j in range(model.njnt) if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE)]

    def trial(self, frame: int, trial: int, last_frame: int | None = None) -> dict[str, Any]:
        """One trial from ``frame`` to ``last_frame`` (default: the clip's last), perturbed as ``trial``."""
        ctl, run, ref, data, model = self.ctl, self.run, self.reference, self.run.data, self.ctl.model
        last = ref.num_frames - 1 if last_frame is None else min(last_frame, ref.num_frames - 1)
        start_time = frame / ref.fps
        run.start(time=start_time)
        kick = perturbation(trial, len(self.hinges))
        root = ctl.context.root_qpos
        data.qpos[root : root + 2] += kick["xy"]
        half = kick["yaw"] / 2
        data.qpos[root + 3 : root + 7] = quat_mul(
            np.array([np.cos(half), 0, 0, np.sin(half)]), data.qpos[root + 3 : root + 7]
        )
        adr = model.jnt_qposadr[self.hinges]
        data.qpos[adr] = np.clip(
            data.qpos[adr] + kick["joints"], model.jnt_range[self.hinges, 0], model.jnt_range[self.hinges, 1]
        )
        ctl.reset(data, time=start_time)
        robot = {"pos": [], "quat": [], "q": [], "qd": []}
        frames, failed_at = [], None
        for _ in range(last - frame):
            scored = ctl.frame
            warnings_before = divergence_warnings(data)
            ctl.step(data)
            if run.diverged(warnings_before) or run.fallen(scored):
                failed_at = scored
                break
            frames.append(scored)
            robot["pos"].append(data.xpos[self.bodies].copy())
            robot["quat"].append(data.xquat[self.bodies].copy())
            robot["q"].append(data.qpos[ctl.context.joint_qpos].copy())
            robot["qd"].append(data.qvel[ctl.context.joint_qvel].copy())
        out: dict[str, Any] = {
            "start_frame": frame,
            "success": failed_at is None,
            "failed_at_frame": failed_at,
            "seconds_to_first_failure": None if failed_at is None else (failed_at - frame) / ref.fps,
        }
        if frames:
            f = np.asarray(frames)
            as_t = lambda a: torch.as_tensor(np.asarray(a))  # noqa: E731
            errors = tracking_errors(
                TrackedState(as_t(robot["pos"]), as_t(robot["quat"]), as_t(robot["q"]), as_t(robot["qd"])),
                TrackedState(
                    as_t(ref.body_pos_w[f][:, self.columns]),
                    as_t(ref.body_quat_w[f][:, self.columns]),
                    as_t(ref.joint_pos[f]),
                    as_t(ref.joint_vel[f]),
                ),
                self.anchor,
                self.end_effectors,
            )
            out["per_step"] = {"frame": f} | {k: errors[k].numpy() for k in ("mpkpe", "r_mpkpe", "joint_pos_error")}
        return out


METRIC_KEYS = {"mpkpe": "mpkpe_m", "r_mpkpe": "r_mpkpe_m", "joint_pos_error": "joint_pos_error_rad"}


def summarize(trials: list[dict[str, Any]], fps: float, frames: int) -> dict[str, Any]:
    """Overall and per-window results of one set of trials (per-step arrays dropped)."""
    window = round(WINDOW_S * fps)
    steps = [t["per_step"] for t in trials if "per_step" in t]
    frame = np.concatenate([s["frame"] for s in steps]) if steps else np.zeros(0, dtype=int)
    values = {k: np.concatenate([s[k] for s in steps]) if steps else np.zeros(0) for k in METRIC_KEYS}

    def means(mask: np.ndarray) -> dict[str, float | None]:
        count = int(mask.sum())
        return {"scored_steps": count} | {
            name: (float(values[k][mask].mean()) if count else None) for k, name in METRIC_KEYS.items()
        }

    failures = [t["seconds_to_first_failure"] for t in trials if not t["success"]]
    overall = {
        "trials": len(trials),
        "success_rate": float(np.mean([t["success"] for t in trials])),
        "seconds_to_first_failure_mean": float(np.mean(failures)) if failures else None,
        "seconds_to_first_failure_median": float(np.median(failures)) if failures else None,
    } | means(np.ones(len(frame), dtype=bool))
    windows = []
    for w in range(0, frames, window):
        failed_here = sum(
            1 for t in trials if t["failed_at_frame"] is not None and w <= t["failed_at_frame"] < w + window
        )
        windows.append(
            {"seconds": [w / fps, min(w + window, frames) / fps], "first_failures": failed_here}
            | means((frame >= w) & (frame < w + window))
        )
    per_trial = [{k: v for k, v in t.items() if k != "per_step"} for t in trials]
    return {"overall": overall, "windows": windows, "trials": per_trial}


def tracking_rows(name: str, harness: TrackingHarness, trials: int, seconds: float | None) -> dict[str, Any]:
    ref = harness.reference
    frames = ref.num_frames if seconds is None else min(ref.num_frames, round(seconds * ref.fps) + 1)
    out = {
        "motion": harness.motion_name,
        "frames": ref.num_frames,
        "evaluated_frames": frames,
        "falls_are": harness.falls_are,
    }
    for set_name, spread in (("start", False), ("spread", True)):
        starts = start_frames([frames], trials, spread)[1].tolist()
        began = time.perf_counter()
        results = [harness.trial(f, k, frames - 1) for k, f in enumerate(starts)]
        out[set_name] = summarize(results, ref.fps, frames)
        o = out[set_name]["overall"]
        print(
            f"  {name} {set_name}: success {o['success_rate']:.2f}, MPKPE {o['mpkpe_m']}, "
            f"{time.perf_counter() - began:.0f} s"
        )
    return out


def plot(result: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    loco = result["locomotion"]
    names, commands = list(loco), list(COMMANDS)
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [loco[name]["commands"][c]["lin_vel_error_mps"] for c in commands]
        bars = axes[0].bar(np.arange(len(commands)) + i * width, values, width, label=name)
        for bar, c in zip(bars, commands, strict=True):
            falls = loco[name]["commands"][c]["falls"] + loco[name]["pushed"][c]["falls"]
            axes[0].annotate(
                f"{loco[name]['commands'][c]['falls']}/{loco[name]['pushed'][c]['falls']}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
                color="red" if falls else "black",
            )
    axes[0].set_xticks(np.arange(len(commands)) + 0.4 - width / 2, commands)
    axes[0].set_ylabel("planar velocity error (m/s)")
    axes[0].set_title("Locomotion, 20 s per command (labels: falls / falls with pushes)")
    axes[0].legend(fontsize=8)
    for name, row in result["tracking"].items():
        for ax, key in ((axes[1], "mpkpe_m"), (axes[2], "r_mpkpe_m")):
            for set_name, style in (("start", "-"), ("spread", "--")):
                w = row[set_name]["windows"]
                x = [v["seconds"][0] for v in w]
                y = [np.nan if v[key] is None else v[key] for v in w]
                ax.plot(x, y, style, marker="o", ms=3, label=f"{name} ({set_name})")
    for ax, title in ((axes[1], "MPKPE (m)"), (axes[2], "R-MPKPE (m)")):
        ax.set_xlabel("clip time, start of the 10 s window (s)")
        ax.set_title(f"Dance tracking: {title}, steps before the first fall")
        ax.legend(fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


HOLOSOMA_SOLE = (
    ((0.075, -0.026), 0.01, 0.05),
    ((0.0395, -0.018), 0.008, 0.167),
    ((0.039, -0.01), 0.01, 0.182),
    ((0.039, 0.0), 0.01, 0.186),
    ((0.039, 0.01), 0.01, 0.182),
    ((0.0395, 0.018), 0.008, 0.167),
    ((0.075, 0.026), 0.01, 0.05),
)
"""holosoma's G1 foot collision (``robot_urdf`` in its dance files' metadata): per foot, capsules along x
at ``(x, y)`` and z = -0.025 in ``*_ankle_roll_link``, radius and length (m)."""


def holosoma_feet_model(folder: Path) -> Path:
    """The project's G1 with holosoma's foot soles in place of its four contact spheres per foot."""
    from unilab_gpu.paths import robot_asset

    spec = mujoco.MjSpec.from_file(str(robot_asset("g1")))
    for side in ("left", "right"):
        body = spec.body(f"{side}_ankle_roll_link")
        ours = [g for g in body.geoms if "foot" in g.name]
        friction, contype, conaffinity, condim = (
            list(ours[0].friction),
            ours[0].contype,
            ours[0].conaffinity,
            ours[0].condim,
        )
        for geom in ours:
            spec.delete(geom)
        for i, ((x, y), radius, length) in enumerate(HOLOSOMA_SOLE):
            geom = body.add_geom(
                name=f"{side}_foot_sole_{i}",
                type=mujoco.mjtGeom.mjGEOM_CAPSULE,
                size=[radius, length / 2, 0],
                pos=[x, y, -0.025],
                quat=[0.5**0.5, 0, 0.5**0.5, 0],
            )
            geom.friction, geom.contype, geom.conaffinity, geom.condim = friction, contype, conaffinity, condim
    path = folder / "g1_holosoma_feet.xml"
    path.write_text(spec.to_xml())
    return path


def _scaled(field: str, factor: float, rows: slice = slice(None)):
    def edit(model: mujoco.MjModel) -> None:
        getattr(model, field)[rows] *= factor

    return edit


def _set(field: str, value: float, index: Any = slice(None)):
    def edit(model: mujoco.MjModel) -> None:
        getattr(model, field)[index] = value

    return edit


def _gains(factor: float):
    def edit(model: mujoco.MjModel) -> None:
        model.actuator_gainprm[:, 0] *= factor
        model.actuator_biasprm[:, 1] *= factor

    return edit


def _elliptic(model: mujoco.MjModel) -> None:
    model.opt.cone, model.opt.impratio, model.opt.iterations = mujoco.mjtCone.mjCONE_ELLIPTIC, 10.0, 50


VARIANTS = {
    "as is": None,
    "joint armature x0.1": _scaled("dof_armature", 0.1, slice(6, None)),
    "joint armature x2": _scaled("dof_armature", 2.0, slice(6, None)),
    "friction 0.4": _set("geom_friction", 0.4, (slice(None), 0)),
    "friction 1.6": _set("geom_friction", 1.6, (slice(None), 0)),
    "force limits x1.5": _scaled("actuator_forcerange", 1.5),
    "joint damping 0.5": _set("dof_damping", 0.5, slice(6, None)),
    "kp, kd x0.8": _gains(0.8),
    "kp, kd x1.2": _gains(1.2),
    "elliptic cone, impratio 10, 50 iterations": _elliptic,
    "holosoma's foot soles": "feet",
    "reference one frame late (holosoma-inference's loop)": "lag",
}
"""Model variants (and one adapter variant) of the diagnosis: each edits the compiled model in place
(the gains scale the position actuators' kp and kv together), or names a variant built otherwise."""


def first_fall(harness: TrackingHarness, frame: int, seconds: float, lag: int = 0) -> float | None:
    """Seconds from ``frame`` (unperturbed) to the first fall, ``None`` if none within ``seconds``."""
    ctl, run, data = harness.ctl, harness.run, harness.run.data
    run.start(time=frame / harness.reference.fps)
    for step in range(round(seconds / ctl.control_dt)):
        scored = ctl.frame
        if lag:  # the observation shows the reference the network returned a step before
            ctl.context.frame = max(scored - lag, 0)
            obs = ctl.observe(data)
            ctl.context.frame = scored
            ctl.step(data, obs=obs)
        else:
            ctl.step(data)
        if run.fallen(scored):
            return (step + 1) * ctl.control_dt
    return None


def diagnose(seconds: float, starts: tuple[int, ...] = (0, 2000, 4000)) -> dict[str, Any]:
    """Seconds to the first fall of both holosoma dance policies under each of :data:`VARIANTS`."""
    import tempfile

    out: dict[str, Any] = {"starts": list(starts), "seconds": seconds, "policies": {}}
    with tempfile.TemporaryDirectory() as folder:
        feet = holosoma_feet_model(Path(folder))
        for name, (path, fmt, _) in TRACKING.items():
            harness, rows = TrackingHarness(path, fmt, None), {}
            model = harness.ctl.model
            for variant, edit in VARIANTS.items():
                if edit == "feet":
                    rows[variant] = [
                        first_fall(TrackingHarness(path, fmt, None, str(feet)), f, seconds) for f in starts
                    ]
                    continue
                saved = copy.copy(model) if callable(edit) else None
                if callable(edit):
                    edit(model)
                rows[variant] = [first_fall(harness, f, seconds, lag=1 if edit == "lag" else 0) for f in starts]
                if saved is not None:
                    for field in (
                        "dof_armature",
                        "geom_friction",
                        "actuator_forcerange",
                        "dof_damping",
                        "actuator_gainprm",
                        "actuator_biasprm",
                    ):
                        getattr(model, field)[:] = getattr(saved, field)
                    model.opt.cone, model.opt.impratio = saved.opt.cone, saved.opt.impratio
                    model.opt.iterations = saved.opt.iterations
                print(f"  diagnosis {name}, {variant}: first fall {rows[variant]}")
            out["policies"][name] = rows
    return out


def markdown(result: dict[str, Any]) -> str:
    """The README tables of ``result``: locomotion per command, tracking per set, tracking per window."""
    lines = [
        "| policy | command | falls / with pushes | planar error (m/s) | yaw-rate error (rad/s) | "
        "mean velocity reached | with pushes: planar / yaw-rate error | run it |",
        "|---|---|---:|---:|---:|---|---:|---|",
    ]
    for name, row in result["locomotion"].items():
        for label, command in COMMANDS.items():
            c, p = row["commands"][label], row["pushed"][label]
            flag = f" --format {row['format']}" if row["format"] != "unilab" else ""
            run = f"`unilab-sim2sim {row['policy']}{flag} --command={','.join(f'{v:g}' for v in command)}`"
            lines.append(
                f"| {name} | {label} | {c['falls']} / {p['falls']} | {c['lin_vel_error_mps']:.3f} | "
                f"{c['yaw_rate_error_radps']:.3f} | {c['lin_vel_x_mps']:.2f}, {c['lin_vel_y_mps']:.2f}, "
                f"{c['yaw_rate_radps']:.2f} | {p['lin_vel_error_mps']:.3f} / {p['yaw_rate_error_radps']:.3f} | {run} |"
            )
    lines += [
        "",
        "| policy | starts | success | MPKPE (m) | R-MPKPE (m) | joint error (rad) | time to first failure, "
        "mean / median (s) | clip | run it |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    fmt = lambda v, d=3: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
    for name, row in result["tracking"].items():
        for set_name, label in (("start", "frame 0"), ("spread", "spread")):
            o = row[set_name]["overall"]
            lines.append(
                f"| {name} | {label} | {o['success_rate']:.2f} ({o['trials']}) | {fmt(o['mpkpe_m'])} | "
                f"{fmt(o['r_mpkpe_m'])} | {fmt(o['joint_pos_error_rad'])} | "
                f"{fmt(o['seconds_to_first_failure_mean'], 1)} / {fmt(o['seconds_to_first_failure_median'], 1)} | "
                f"{row['evaluated_frames']} frames | `{row['sim2sim_command']}` |"
            )
    if result["tracking"]:
        first = next(iter(result["tracking"].values()))["spread"]["windows"]
        heads = [f"{w['seconds'][0]:g}–{w['seconds'][1]:g} s" for w in first]
        lines += ["", "| policy, spread starts | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
        for name, row in result["tracking"].items():
            windows = row["spread"]["windows"]
            cells = [f"{fmt(w['mpkpe_m'])} / {fmt(w['r_mpkpe_m'])} ({w['first_failures']})" for w in windows]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


BOUNDS = {
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="locomotion: simulated seconds per command"),
    "--trials": Bound(1, MAX_TRIALS, integer=True, meaning="tracking: trials per set"),
    "--tracking-seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="tracking: the clip's first seconds"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="peers_benchmark", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="the JSON report (required unless --diagnose)")
    parser.add_argument("--png", type=Path, default=None)
    parser.add_argument("--seconds", type=float, default=20.0, help="locomotion: seconds per command")
    parser.add_argument("--trials", type=whole, default=16, help="tracking: trials per set")
    parser.add_argument("--tracking-seconds", type=float, default=None, help="tracking: the clip's first S s only")
    parser.add_argument("--tracker", default=None, help="our tracking policy (an export) to add")
    parser.add_argument("--tracker-motion", default=None, help="the dance clip our tracker follows")
    parser.add_argument("--tracker-name", default="ours", help="the row name of --tracker (one row per name)")
    parser.add_argument("--skip-locomotion", action="store_true")
    parser.add_argument("--skip-peer-tracking", action="store_true", help="tracking: only --tracker")
    parser.add_argument("--merge", action="store_true", help="keep the rows of the existing --out that are not rerun")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the README tables here")
    parser.add_argument("--diagnose", type=Path, default=None, help="only the dance diagnosis, written here")
    parser.add_argument("--model", default=None, help="an MJCF in place of the project's G1 (a model variant)")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.out is None and args.diagnose is None:
        parser.error("--out is required (or --diagnose OUT.json)")
    for option, path in (("--out", args.out), ("--png", args.png), ("--markdown", args.markdown)):
        if path is not None and args.diagnose is None:
            check_output(path, option, force=args.force, example=f"peers{path.suffix}")
    command_line = " ".join(["python", "scripts/peers_benchmark.py", *(sys.argv[1:] if argv is None else argv)])
    if args.diagnose is not None:
        check_output(args.diagnose, "--diagnose", force=args.force, example="diagnosis.json")
        diagnosis = {
            "what": "seconds to the first fall of the holosoma dance policies from unperturbed starts, "
            "per model variant",
            "command": command_line,
        } | diagnose(args.seconds)
        write_json_atomic(args.diagnose, portable_paths(diagnosis | {"machine": machine_info("cpu")}))
        print(f"wrote {args.diagnose}")
        return 0
    result: dict[str, Any] = {"what": __doc__.split("\n")[0], "command": command_line, "locomotion": {}, "tracking": {}}
    if args.merge and args.out.is_file():  # e.g. our tracker's row added to the committed peers' rows
        previous = json.loads(args.out.read_text())
        result |= {"locomotion": previous["locomotion"], "tracking": previous["tracking"]}
        reruns = not (args.skip_locomotion and args.skip_peer_tracking) or args.tracker is not None
        result["command"] = f"{previous['command']}; then {command_line}" if reruns else previous["command"]
    if not args.skip_locomotion:
        for name, (path, fmt) in LOCOMOTION.items():
            row: dict[str, Any] = {"policy": path, "format": fmt or "unilab", "commands": {}, "pushed": {}}
            for label, command in COMMANDS.items():
                for key, push in (("commands", False), ("pushed", True)):
                    row[key][label] = case = locomotion_case(path, fmt, command, args.seconds, push, args.model)
                    print(
                        f"  {name} {label}{' pushed' if push else ''}: falls {case['falls']}, "
                        f"planar {case['lin_vel_error_mps']:.3f}, yaw {case['yaw_rate_error_radps']:.3f}"
                    )
            flag = f" --format {fmt}" if fmt else ""
            row["sim2sim_command"] = f"unilab-sim2sim {path}{flag} --command VX,VY,WZ --seconds {args.seconds:g}"
            result["locomotion"][name] = row
    tracking = {} if args.skip_peer_tracking else dict(TRACKING)
    if args.tracker is not None:
        tracking[args.tracker_name] = (args.tracker, None, args.tracker_motion)
    for name, (path, fmt, motion) in tracking.items():
        harness = TrackingHarness(path, fmt, motion, args.model)
        row = {"policy": path, "format": fmt or "unilab"} | tracking_rows(
            name, harness, args.trials, args.tracking_seconds
        )
        flag = (f" --format {fmt}" if fmt else "") + (f" --motion {motion}" if motion else "")
        row["sim2sim_command"] = f"unilab-sim2sim {path}{flag}"
        result["tracking"][name] = row
    result["control_steps_per_locomotion_case"] = control_steps(args.seconds, 0.02)
    result["machine"] = machine_info("cpu")
    write_json_atomic(args.out, portable_paths(result))
    print(f"wrote {args.out}")
    if args.markdown is not None:
        table = markdown(result)
        write_atomic(args.markdown, lambda file: file.write(table.encode()))
        print(f"wrote {args.markdown}")
    if args.png is not None and result["locomotion"] and result["tracking"]:
        png = plot(result)
        write_atomic(args.png, lambda file: file.write(png))
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
