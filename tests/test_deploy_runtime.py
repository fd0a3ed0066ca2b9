"""The robot-side runtime (``unilab_gpu/deploy``) against the training env, and ``unilab-sim2sim``.

Agreement: from the env's own initial state (``_play`` variants: no observation noise, no pushes;
the tracking task's foot-friction randomisation off), a fixed random SAC policy exported to ONNX
(normaliser statistics far from identity), the runtime's observation from ``mujoco.MjData``
equals the env's (MJWarp on CPU) at step 0 within ``START_TOLERANCE`` and stays within
``DRIFT_TOLERANCE`` over ``STEPS`` control steps in which MuJoCo C and MJWarp each step their own
copy (measured: at most 1.5e-5, docs/deploy.md). Each mutation the agreement must catch (two
observation terms swapped, the normaliser left out, an action scale changed) exceeds it.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from motion_helpers import REAL_CLIP

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
import onnx  # noqa: E402

from unilab_gpu.cli.sim2sim import main as sim2sim_main  # noqa: E402
from unilab_gpu.deploy import METADATA_VERSION, Controller, DeploymentError, PolicyFile, ReferenceMotion  # noqa: E402
from unilab_gpu.deploy.terms import TERMS  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.export.export_run import export_agent  # noqa: E402
from unilab_gpu.export.metadata import deployment_metadata  # noqa: E402
from unilab_gpu.export.onnx_policy import write_onnx  # noqa: E402
from unilab_gpu.export.policy import deterministic_policy  # noqa: E402
from unilab_gpu.export.sim2sim import FallRule, Scenario, Sim2Sim, load_reference, sim2sim  # noqa: E402
from unilab_gpu.export.sim2sim.run import divergence_warnings, solver_unconverged  # noqa: E402
from unilab_gpu.paths import robot_asset  # noqa: E402
from unilab_gpu.rl.sac import SacAgent, SacConfig  # noqa: E402
from unilab_gpu.utils.files import portable_paths  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[1] / "unilab_gpu" / "deploy"
STEPS = 10
START_TOLERANCE = 1e-5
DRIFT_TOLERANCE = 1e-4
TASKS = {
    "g1_velocity_play": [],
    "g1_tracking_play": ["events.foot_friction=null"],  # play keeps it: a per-world friction MuJoCo C lacks
}


class Case:
    """A task's env (one world), a random SAC agent exported with and without its normaliser."""

    def __init__(self, task: str, folder: Path) -> None:
        torch.manual_seed(0)
        self.task, self.overrides = task, TASKS[task]
        self.env = make_env(task, num_envs=1, device="cpu", compile=False, seed=1, overrides=self.overrides)
        dims = self.env.observation_dims
        agent = SacAgent(
            SacConfig(actor_hidden_dims=(32, 16), critic_hidden_dims=(8,), compile=False),
            dims["policy"],
            dims["critic"],
            29,
        )
        torch.nn.init.normal_(agent.actor.net[-1].weight, std=0.1)  # zero at init: actions of about +-0.3 instead
        obs = self.env.reset()["policy"]
        # Statistics far from identity: a runtime that skipped the normaliser would act differently.
        agent.policy_norm.update(obs + torch.randn(256, dims["policy"]) * 0.5)
        self.path = export_agent(self.env, agent, task, "sac", folder / f"{task}.onnx", self.overrides)
        bare = deterministic_policy(agent)
        bare.norm = torch.nn.Identity()
        metadata = deployment_metadata(self.env, task, "sac", self.overrides)
        self.bare_path = write_onnx(bare, dims["policy"], metadata, folder / f"{task}_no_normaliser.onnx")
        self.policy = PolicyFile(self.path)
        self.model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))

    def controller(self, policy: PolicyFile | None = None) -> Controller:
        loaded = load_reference(self.policy.metadata, self.model, None)
        return Controller(policy or self.policy, self.model, loaded[0] if loaded else None)

    def drift(self, controller: Controller, errors: list | None = None) -> list[float]:
        """Largest |runtime obs - env obs| at control steps 0..STEPS, both starting from the env's
        reset state; the env acts with the file's policy on its own observations. ``errors``
        collects (runtime, env) tracking errors of each step."""
        env = self.env
        env.reset()
        tracking = controller.reference is not None
        falls = FallRule.of_task(controller.metadata)
        run = Sim2Sim(controller, None if tracking else [0.0, 0.0, 0.0], falls)
        data = run.data
        data.qpos[:] = env.sim.state.qpos[0].numpy()
        data.qvel[:] = env.sim.state.qvel[0].numpy()
        if controller.reference is None:
            twist = env.command_manager.get("twist")
            controller.command = twist.command[0].numpy()
            controller.reset(data, phase=float(twist.phase[0]))
        else:
            motion = env.command_manager.get("motion")
            controller.reset(data, time=int(motion.frame[0]) * controller.control_dt)
        drift = []
        for step in range(STEPS + 1):
            expected = env.observation_manager.obs["policy"][0].numpy().copy()
            obs = controller.observe(data)
            drift.append(float(np.abs(obs - expected).max()))
            if step == STEPS:
                return drift
            env.step(torch.from_numpy(self.policy(expected)[None]))
            frame = controller.frame
            controller.step(data, obs)
            if errors is not None:
                command = env.command_manager.get("twist" if controller.reference is None else "motion")
                env_errors = {k: float(v[0]) for k, v in command.row_errors().items()}
                errors.append((run.errors(frame), env_errors))
        return drift


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Case]:
    folder = tmp_path_factory.mktemp("deploy")
    return {task: Case(task, folder) for task in TASKS}


def _with_metadata(path: Path, out: Path, edit) -> Path:
    """A copy of an ONNX file with its metadata edited by ``edit(dict)`` (``None``: removed)."""
    model = onnx.load(str(path))
    meta = {p.key: json.loads(p.value) for p in model.metadata_props}
    meta = edit(meta)
    del model.metadata_props[:]
    if meta is not None:
        onnx.helper.set_model_props(model, {k: json.dumps(v) for k, v in meta.items()})
    onnx.save(model, str(out))
    return out


@pytest.mark.parametrize("task", list(TASKS))
def test_runtime_observation_agrees_with_the_env(cases, task) -> None:
    case = cases[task]
    errors: list = []
    drift = case.drift(case.controller(), errors)
    assert drift[0] <= START_TOLERANCE, drift
    assert max(drift) <= DRIFT_TOLERANCE, drift
    # sim2sim's per-step tracking errors are the training task's statistics of the same state.
    names = {"lin_vel_error_mps": "lin_vel_error", "yaw_rate_error_radps": "yaw_rate_error"}
    names.update({"body_pos_error_m": "body_pos_error", "body_pos_error_anchored_m": "body_pos_error_anchored"})
    for runtime, env in errors:
        for key, value in runtime.items():
            assert value == pytest.approx(env[names[key]], abs=1e-4), (key, runtime, env)


@pytest.mark.parametrize("task", list(TASKS))
def test_agreement_catches_wrong_metadata_and_a_missing_normaliser(cases, task) -> None:
    case = cases[task]

    def swapped(meta):
        terms = {t["name"]: t for t in meta["observation_terms"]}
        a, b = terms["joint_pos"], terms["joint_vel"]  # both 29 wide: the layout itself stays valid
        a["start"], a["stop"], b["start"], b["stop"] = b["start"], b["stop"], a["start"], a["stop"]
        meta["observation_terms"].sort(key=lambda t: t["start"])
        return meta

    def rescaled(meta):
        meta["action_scale"][3] *= 1.5  # one joint (the left knee)
        meta["action_scale_negative"][3] *= 1.5
        return meta

    for name, policy in (
        ("swapped terms", PolicyFile(case.path, swapped(copy.deepcopy(case.policy.metadata)))),
        ("no normaliser", PolicyFile(case.bare_path)),
        ("action scale", PolicyFile(case.path, rescaled(copy.deepcopy(case.policy.metadata)))),
    ):
        drift = case.drift(case.controller(policy))
        assert max(drift) > 10 * DRIFT_TOLERANCE, (name, drift)


def test_bad_policy_files_get_one_line_each(cases, tmp_path) -> None:
    case = cases["g1_velocity_play"]
    bad = {
        "no metadata": (_with_metadata(case.path, tmp_path / "bare.onnx", lambda m: None), "no deployment metadata"),
        "future": (
            _with_metadata(
                case.path, tmp_path / "future.onnx", lambda m: {**m, "metadata_version": METADATA_VERSION + 1}
            ),
            f"metadata_version {METADATA_VERSION + 1} is newer than this runtime reads",
        ),
        "old": (
            _with_metadata(case.path, tmp_path / "old.onnx", lambda m: {**m, "metadata_version": 2}),
            "re-export the run with unilab-export",
        ),
    }
    for path, message in bad.values():
        with pytest.raises(DeploymentError, match=message) as caught:
            PolicyFile(path)
        assert "\n" not in str(caught.value)
    renamed = _with_metadata(
        case.path,
        tmp_path / "renamed.onnx",
        lambda m: {**m, **{k: ["left_hip_pitch"] + m[k][1:] for k in ("joint_names", "observed_joint_names")}},
    )
    with pytest.raises(DeploymentError, match=r"joints \['left_hip_pitch'\] \(1 of 29\) are not in the model"):
        Controller(PolicyFile(renamed), case.model)
    assert sim2sim_main([str(renamed), "--command", "0.5,0,0", "--seconds", "0.1"]) == 2
    assert sim2sim_main([str(bad["no metadata"][0]), "--command", "0.5,0,0"]) == 2


def test_the_model_is_checked_against_the_metadata(cases) -> None:
    case = cases["g1_velocity_play"]
    for edit, message in (
        (lambda m: setattr(m.opt, "timestep", 0.004), "timestep 0.004 s, the policy's physics_dt 0.005 s"),
        (lambda m: m.actuator_gainprm.__setitem__((3, 0), 50.0), "actuator 'left_knee_joint' has kp 50"),
        (lambda m: m.actuator_biasprm.__setitem__((0, 2), -1.0), "actuator 'left_hip_pitch_joint' has kv 1"),
        (lambda m: m.actuator_forcerange.__setitem__((5, 1), 10.0), "force limit 10.0, the policy 50.0"),
    ):
        model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
        edit(model)
        if "kp" in message:
            model.actuator_biasprm[3, 1] = -50.0  # still a position actuator, with another gain
        with pytest.raises(DeploymentError, match=message):
            Controller(case.policy, model)
    meta = copy.deepcopy(case.policy.metadata)
    meta["actuator_names"][0], meta["actuator_names"][1] = meta["actuator_names"][1], meta["actuator_names"][0]
    with pytest.raises(DeploymentError, match="drives joint 'left_hip_roll_joint'.*joint order differs"):
        Controller(PolicyFile(case.path, meta), case.model)


def test_unknown_terms_and_motions_of_another_robot_are_refused(cases, tmp_path) -> None:
    case = cases["g1_tracking_play"]
    meta = copy.deepcopy(case.policy.metadata)
    meta["observation_terms"][0]["func"] = "my_robot.terms.foot_contact"
    with pytest.raises(DeploymentError, match=r"'command' uses my_robot.terms.foot_contact.*supported: \[") as caught:
        case.controller(PolicyFile(case.path, meta))
    assert all(name in str(caught.value) for name in TERMS)
    with pytest.raises(DeploymentError, match="reads a motion reference"):
        Controller(case.policy, case.model)

    reference, _ = load_reference(case.policy.metadata, case.model, None)
    other = ReferenceMotion(
        reference.fps,
        [f"h1_{name}" for name in reference.joint_names],
        reference.body_names,
        **{name: getattr(reference, name) for name in ("joint_pos", "joint_vel", "root_pos", "root_quat")},
        **{name: getattr(reference, name) for name in ("root_lin_vel", "root_ang_vel", "body_pos_w", "body_quat_w")},
    )
    with pytest.raises(DeploymentError, match="a clip of another robot\\? it lacks 29 of the policy's 29 joints"):
        Controller(case.policy, case.model, other)
    # The same clip as a file, through unilab-sim2sim (which converts any format first): one line.
    arrays = {name: getattr(other, name) for name in ("joint_pos", "joint_vel", "root_pos", "root_quat")}
    np.savez(
        tmp_path / "h1.npz",
        format="unilab-motion",
        schema_version=1,
        fps=other.fps,
        joint_names=np.array(other.joint_names),
        body_names=np.array(other.body_names),
        root_lin_vel=other.root_lin_vel,
        root_ang_vel=other.root_ang_vel,
        body_pos_w=other.body_pos_w,
        body_quat_w=other.body_quat_w,
        body_lin_vel_w=np.zeros_like(other.body_pos_w),
        body_ang_vel_w=np.zeros_like(other.body_pos_w),
        **arrays,
    )
    assert sim2sim_main([str(case.path), "--motion", str(tmp_path / "h1.npz")]) == 2


def test_canonical_clips_load_and_play_by_time(cases, tmp_path) -> None:
    from unilab_gpu.motion import RobotKinematics, save_motion, synthesize_clip

    g1 = RobotKinematics.from_robot("g1")
    clip = synthesize_clip(2.0, 3, fps=50.0, kinematics=g1)
    path = save_motion(clip, tmp_path / "clip.npz")
    reference = ReferenceMotion.load(path)
    np.testing.assert_array_equal(reference.body_pos_w, clip.body_pos_w)
    assert reference.frame_at(0.0) == 0 and reference.frame_at(0.02 * 7) == 7 and reference.frame_at(99.0) == 100
    with pytest.raises(DeploymentError, match="60 fps, the policy runs at 50 Hz"):
        clip60 = save_motion(synthesize_clip(2.0, 3, fps=60.0, kinematics=g1), tmp_path / "c60.npz")
        ReferenceMotion.load(clip60).for_robot(clip.joint_names, [], 50.0, "c60.npz")


def test_a_clip_of_wrong_shapes_is_one_line(tmp_path) -> None:
    """Arrays whose shapes disagree with the clip's names were a numpy broadcast error at the first
    step; now loading names the array, its shape and the expected one."""
    from unilab_gpu.deploy.reference import FIELDS
    from unilab_gpu.motion import RobotKinematics, synthesize_clip

    clip = synthesize_clip(0.5, 3, fps=50.0, kinematics=RobotKinematics.from_robot("g1"))
    arrays = {name: getattr(clip, name) for name in FIELDS}
    ReferenceMotion(clip.fps, clip.joint_names, clip.body_names, **arrays)
    arrays["body_quat_w"] = arrays["body_quat_w"][:, :-1]
    frames, bodies = len(clip.joint_pos), len(clip.body_names)
    with pytest.raises(
        DeploymentError,
        match=re.escape(f"'body_quat_w' has shape ({frames}, {bodies - 1}, 4), expected (T, {bodies}, 4)"),
    ):
        ReferenceMotion(clip.fps, clip.joint_names, clip.body_names, **arrays)


def test_cli_reports_and_writes_atomically(cases, tmp_path, capsys) -> None:
    out = tmp_path / "report.json"
    assert sim2sim_main([str(cases["g1_tracking_play"].path), "--seconds", "1.5", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [row["second"] for row in report["per_second"]] == [0, 1]
    assert report["motion"].startswith("synthetic") and report["command"] is None
    summary = report["summary"]
    assert summary["falls"] == sum(row["falls"] for row in report["per_second"])
    assert 0 < summary["body_pos_error_anchored_m"] < 1 and summary["peak_torque_over_limit"] > 0
    assert sim2sim_main([str(cases["g1_tracking_play"].path), "--seconds", "1", "--out", str(out)]) == 2  # no --force
    assert "exists" in capsys.readouterr().err


def test_falls_are_counted_by_the_task_configs_terminations() -> None:
    # The thresholds come from the policy's task and its training overrides (configs/task/*.yaml), in the
    # twin table's order; failure terminations without a twin are listed, time-outs are no failures.
    velocity = FallRule.of_task({"task": "g1_velocity", "env_overrides": ["terminations.fell.params.min_height=0.5"]})
    assert velocity == FallRule(
        (
            ("fell", "unilab_gpu.envs.mdp.terminations.root_height_below", {"min_height": 0.5}),
            (
                "tilt",
                "unilab_gpu.tasks.velocity.terminations.body_tilt_above",
                {"body_names": ["torso_link"], "max_degrees": 65.0},
            ),
        )
    )
    tracking = FallRule.of_task({"task": "g1_tracking", "env_overrides": []})
    assert [(name, params) for name, _, params in tracking.counted] == [
        ("anchor_height", {"threshold": 0.25}),
        ("anchor_orientation", {"threshold": 0.8}),
    ]
    assert tracking.uncounted == (
        ("end_effector_height", "unilab_gpu.tasks.tracking.terminations.BodyHeightErrorAbove"),
    )
    with pytest.raises(DeploymentError, match="task 'g1_velocity' has no failure termination with a runtime twin"):
        FallRule.of_task({"task": "g1_velocity", "env_overrides": ["terminations.tilt=null", "terminations.fell=null"]})


def test_cli_video_has_a_frame_per_control_step(cases, tmp_path) -> None:
    iio = pytest.importorskip("imageio.v3")
    video = tmp_path / "run.mp4"
    try:
        sim2sim(Scenario(cases["g1_tracking_play"].path, seconds=0.2), video=video)
    except Exception as error:  # no GL library: skipped here, a failure in CI (as tests/test_video.py)
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no offscreen GL backend: {type(error).__name__}: {error}")
    frames = iio.imread(video)
    assert frames.shape == (10, 480, 640, 3) and frames.std() > 10  # 0.2 s at 50 Hz, not a blank picture


def test_runtime_imports_only_numpy_mujoco_onnxruntime(cases, tmp_path) -> None:
    allowed = {"numpy", "mujoco", "onnxruntime", "__future__"} | set(sys.stdlib_module_names)
    for path in DEPLOY.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [] if node.level > 0 else [node.module.split(".")[0]]
            else:
                continue
            assert set(roots) <= allowed, f"{path.name} imports {roots}"
    # A copy under another name, with torch, warp, hydra and unilab_gpu unimportable, runs the policy.
    copy_dir = tmp_path / "robot" / "g1_runtime"
    copy_dir.parent.mkdir()
    import shutil

    shutil.copytree(DEPLOY, copy_dir, ignore=shutil.ignore_patterns("__pycache__"))
    script = textwrap.dedent(
        f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "warp", "hydra", "omegaconf", "unilab_gpu", "onnx"):
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        sys.path.insert(0, {str(copy_dir.parent)!r})
        import mujoco
        from g1_runtime import Controller, PolicyFile
        model = mujoco.MjModel.from_xml_path({str(robot_asset("g1"))!r})
        data = mujoco.MjData(model)
        mujoco.mj_resetDataKeyframe(model, data, 0)
        controller = Controller(PolicyFile({str(cases["g1_velocity_play"].path)!r}), model)
        controller.command = [0.5, 0.0, 0.0]
        controller.reset(data)
        for _ in range(3):
            step = controller.step(data)
        print(step.obs.shape[0], sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "warp", "unilab_gpu")))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["98", "[]"]


@pytest.mark.skipif(not REAL_CLIP.is_file(), reason="the shared motion clip is not on this machine")
def test_shared_holosoma_clip_converts_for_the_runtime(cases) -> None:
    case = cases["g1_tracking_play"]
    reference, name = load_reference(case.policy.metadata, case.model, str(REAL_CLIP))
    controller = Controller(case.policy, case.model, reference)
    assert name == str(REAL_CLIP) and controller.reference.fps == 50.0
    assert controller.reference.num_frames > 100


def test_the_committed_velocity_policy_walks_in_mujoco_c() -> None:
    """docs/policies/g1_velocity_sac.onnx (an hour of SAC on a CPU core) through the runtime alone: 3 s at
    0.5 m/s in MuJoCo C without a fall, at the planar error it has in its training env (0.10 m/s)."""
    policy = Path(__file__).resolve().parents[1] / "docs" / "policies" / "g1_velocity_sac.onnx"
    report = sim2sim(Scenario(policy, [0.5, 0.0, 0.0], seconds=3.0))
    summary = report["summary"]
    assert summary["falls"] == 0 and summary["lin_vel_error_mps"] < 0.2, summary
    assert summary["torque_limit_excess_nm"] == 0.0 and summary["joint_limit_excess_rad"] < 0.01


def test_sim2sim_reports_the_velocity_the_policy_walks_at() -> None:
    """A velocity run's per-second means of the root velocity (root frame) are those of the states
    it left, rotated here by MuJoCo's own quaternion routine; the planar error's mean is at least
    the distance from the command to the mean velocity (the norm of a mean is at most the mean of
    the norms), so the report splits the error into that offset and the sway about it."""
    policy = PolicyFile(Path(__file__).resolve().parents[1] / "docs" / "policies" / "g1_velocity_sac.onnx")
    model = mujoco.MjModel.from_xml_path(str(robot_asset(policy.metadata["robot_model"])))
    command = np.array([-0.4, 0.0, 0.0])
    run = Sim2Sim(Controller(policy, model, None), command, FallRule.of_task(policy.metadata))
    seen = []

    def record(data: mujoco.MjData, _ghost) -> None:
        inverse, lin_vel_b = np.zeros(4), np.zeros(3)
        mujoco.mju_negQuat(inverse, data.qpos[3:7])
        mujoco.mju_rotVecQuat(lin_vel_b, data.qvel[0:3], inverse)
        seen.append([lin_vel_b[0], lin_vel_b[1], data.qvel[5]])

    result = run.run(2.0, on_frame=record)
    seen = np.array(seen)
    for row, second in zip(result["per_second"], (seen[:50], seen[50:]), strict=True):
        expected = second.mean(axis=0)
        measured = [row["lin_vel_x_mps"], row["lin_vel_y_mps"], row["yaw_rate_radps"]]
        np.testing.assert_allclose(measured, expected, atol=1e-9)
        offset = np.linalg.norm(command[:2] - expected[:2])
        assert row["lin_vel_error_mps"] >= offset - 1e-9, (row, offset)
    summary = result["summary"]
    assert summary["lin_vel_x_mps"] == pytest.approx(seen[:, 0].mean(), abs=1e-9)
    assert summary["lin_vel_x_mps"] < -0.1, summary  # it walks backwards, as commanded


# -- metadata the runtime must not trust (issue 36) -------------------------------------------
def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("unilab-sim2sim: error:") and "\n" not in err, err
    return err


def _set(key: str, value):
    def edit(meta):
        meta[key] = value
        return meta

    return edit


def _set_item(key: str, index: int, value):
    def edit(meta):
        meta[key][index] = value
        return meta

    return edit


def _set_term(field: str, value):
    def edit(meta):
        meta["observation_terms"][0][field] = value
        return meta

    return edit


BAD_METADATA = {
    # Each of these ran before: every control NaN (MuJoCo zeroed it) or no physics step, reported as 0 falls.
    "nan action scale": (_set_item("action_scale", 0, float("nan")), "'action_scale[0]' must be a finite number"),
    "nan offset": (_set_item("action_offset", 2, float("nan")), "'action_offset[2]' must be a finite number"),
    "nan bound": (_set_item("action_bounds", 1, [float("nan"), 1.0]), "'action_bounds[1]' must be [low, high]"),
    "nan default": (
        _set_item("observed_default_joint_pos", 4, float("nan")),
        "'observed_default_joint_pos[4]' must be a finite number",
    ),
    "nan obs scale": (_set_term("scale", float("nan")), "'observation_terms[0].scale' must be a finite number"),
    "decimation 0": (_set("decimation", 0), "'decimation' must be an integer >= 1, got 0"),
    "control period": (_set("control_dt", 1e9), "'control_dt' must be decimation x physics_dt = 4 x 0.005 = 0.02 s"),
    "string number": (
        _set("physics_dt", "0.005"),
        "'physics_dt' must be a finite number > 0, got '0.005' (a string)",
    ),
    "short list": (_set("stiffness", [1.0] * 28), "'stiffness' has 28 entries, expected 29 (one per action)"),
    "term without clip": (
        lambda m: (m["observation_terms"][0].pop("clip"), m)[1],
        "'observation_terms[0].clip' is missing (null or [low, high])",
    ),
    "version string": (
        _set("metadata_version", "3"),
        f"'metadata_version' must be an integer such as {METADATA_VERSION}, got '3' (a string)",
    ),
}


@pytest.mark.parametrize("case_name", list(BAD_METADATA))
def test_metadata_numbers_are_checked_when_read(cases, tmp_path, capsys, case_name) -> None:
    edit, message = BAD_METADATA[case_name]
    policy = cases["g1_velocity_play"].path
    bad = _with_metadata(policy, tmp_path / "bad.onnx", lambda m: edit(copy.deepcopy(m)))
    with pytest.raises(DeploymentError, match=re.escape(message)):
        PolicyFile(bad)
    out = tmp_path / "report.json"
    assert sim2sim_main([str(bad), "--command", "0.5,0,0", "--seconds", "0.1", "--out", str(out)]) == 2
    assert message in _one_line_error(capsys)
    assert not out.exists()


def test_network_width_and_observed_joints_are_checked(cases, tmp_path) -> None:
    case = cases["g1_velocity_play"]
    meta = copy.deepcopy(case.policy.metadata)
    meta["action_dim"] = 28
    for key in ("joint_names", "actuator_names", "action_low", "action_high", "action_scale"):
        meta[key] = meta[key][:28]
    for key in ("action_scale_negative", "action_offset", "action_bounds", "stiffness", "damping", "effort_limit"):
        meta[key] = meta[key][:28]
    with pytest.raises(DeploymentError, match="the network writes 29 columns, the metadata's action_dim is 28"):
        PolicyFile(case.path, meta)
    # Two observed joints swapped: the runtime would read each into the other's columns.
    meta = copy.deepcopy(case.policy.metadata)
    names = meta["observed_joint_names"]
    names[3], names[9] = names[9], names[3]
    with pytest.raises(
        DeploymentError,
        match=r"'observed_joint_names\[3\]' is 'right_knee_joint', the model's joint 3 .* is 'left_knee_joint'",
    ):
        Controller(PolicyFile(case.path, meta), case.model)
    meta = copy.deepcopy(case.policy.metadata)
    meta["observed_default_joint_pos"][3] += 0.2
    with pytest.raises(DeploymentError, match=r"'observed_default_joint_pos\[3\]' \(left_knee_joint\) is"):
        Controller(PolicyFile(case.path, meta), case.model)


def test_a_policy_without_velocity_or_motion_command_is_named_so(tmp_path, capsys) -> None:
    env = make_env("pendulum", num_envs=1, device="cpu", compile=False)
    dims = env.observation_dims
    agent = SacAgent(
        SacConfig(actor_hidden_dims=(8,), critic_hidden_dims=(8,), compile=False),
        dims["policy"],
        dims.get("critic", dims["policy"]),
        env.action_dim,
    )
    path = export_agent(env, agent, "pendulum", "sac", tmp_path / "pendulum.onnx")
    assert sim2sim_main([str(path), "--command", "0,0,0"]) == 2
    line = _one_line_error(capsys)
    assert "reads neither a velocity nor a motion command" in line and "velocity policy" not in line


def test_a_policy_whose_metadata_names_no_robot_runs_only_on_the_model_given(cases, tmp_path, capsys) -> None:
    """No robot is guessed for a file without ``robot_model``: one line names the field and ``--model``."""
    no_robot = _with_metadata(
        cases["g1_velocity_play"].path,
        tmp_path / "no_robot.onnx",
        lambda meta: {key: value for key, value in meta.items() if key != "robot_model"},
    )
    args = [str(no_robot), "--command", "0.5,0,0", "--seconds", "0.04"]
    assert sim2sim_main(args) == 2
    line = _one_line_error(capsys)
    assert "names no robot model (field 'robot_model'" in line and "--model FILE" in line, line
    assert sim2sim_main([*args, "--model", str(robot_asset("g1"))]) == 0


def test_seconds_shorter_than_a_control_step_run_nothing(cases, tmp_path, capsys) -> None:
    out = tmp_path / "report.json"
    args = [str(cases["g1_velocity_play"].path), "--command", "0.5,0,0", "--out", str(out)]
    assert sim2sim_main([*args, "--seconds", "0.01"]) == 2
    assert "--seconds 0.01 is less than one control step of the policy (0.02 s)" in _one_line_error(capsys)
    assert not out.exists()
    # A part of a step is not taken, and the report says the time simulated, not the time asked for.
    assert sim2sim_main([*args, "--seconds", "0.05"]) == 0
    report = json.loads(out.read_text())
    assert report["seconds"] == 0.04 and report["interrupted"] is False


def test_out_and_video_must_differ(cases, tmp_path, capsys) -> None:
    same = tmp_path / "run.mp4"
    same.write_bytes(b"a video")
    args = [str(cases["g1_velocity_play"].path), "--command", "0.5,0,0", "--force"]
    with pytest.raises(SystemExit) as exited:
        sim2sim_main([*args, "--out", str(same), "--video", str(tmp_path / "." / "run.mp4")])
    assert exited.value.code == 2 and "--out and --video name the same file" in capsys.readouterr().err
    assert same.read_bytes() == b"a video"


def test_ctrl_c_reports_the_steps_taken(cases, tmp_path, capsys, monkeypatch) -> None:
    import unilab_gpu.cli.sim2sim as cli

    class StopAfter30:  # Ctrl-C as the 30th control step ends; the progress line is printed first
        def __call__(self, done, steps, falls):
            print(f"  step {done} of {steps}")
            if done == 30:
                raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_Progress", StopAfter30)
    out = tmp_path / "report.json"
    code = sim2sim_main(
        [str(cases["g1_velocity_play"].path), "--command", "0.5,0,0", "--seconds", "3600", "--out", str(out)]
    )
    assert code == cli.INTERRUPTED_EXIT_CODE
    printed = capsys.readouterr().out
    assert "step 29 of 180000" in printed and "interrupted; the report covers the 0.6 s simulated" in printed
    report = json.loads(out.read_text())
    assert report["interrupted"] is True and report["seconds"] == 0.6
    assert [row["second"] for row in report["per_second"]] == [0]  # 30 steps of the first second
    # The partial second's means are over the 30 steps taken (the step after them never ran).
    full = sim2sim(Scenario(cases["g1_velocity_play"].path, [0.5, 0.0, 0.0], seconds=0.6), announce=lambda line: None)
    assert report["per_second"] == full["per_second"] and report["summary"] == full["summary"]


def test_long_runs_print_progress(cases, capsys, monkeypatch) -> None:
    import unilab_gpu.cli.sim2sim as cli

    monkeypatch.setattr(cli, "PROGRESS_SECONDS", 0.0)
    assert sim2sim_main([str(cases["g1_velocity_play"].path), "--command", "0.5,0,0", "--seconds", "0.1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  step ")]
    assert lines[-1].startswith("  step 5 of 5 (100.0 %), 0 falls") and len(lines) == 5


def test_a_motion_file_the_metadata_names_is_looked_for_and_named(cases, tmp_path, capsys, monkeypatch) -> None:
    from unilab_gpu.motion import RobotKinematics, save_motion, synthesize_clip

    case = cases["g1_tracking_play"]
    folder = tmp_path / "robot"
    folder.mkdir()

    def naming(name):
        def edit(meta):
            meta["commands"]["motion"]["params"]["motion_files"] = [name]
            return meta

        return edit

    # An absolute path of another machine: looked for by its file name beside the policy, then here.
    policy = _with_metadata(case.path, folder / "policy.onnx", naming("/elsewhere/clips/walk.npz"))
    monkeypatch.chdir(tmp_path)
    assert sim2sim_main([str(policy)]) == 2
    line = _one_line_error(capsys)
    assert "the policy's motion '/elsewhere/clips/walk.npz'" in line and "give the clip with --motion FILE" in line
    assert f"{folder / 'walk.npz'}, walk.npz" in line
    save_motion(synthesize_clip(1.0, 4, fps=50.0, kinematics=RobotKinematics.from_robot("g1")), folder / "walk.npz")
    out = tmp_path / "report.json"
    assert sim2sim_main([str(policy), "--out", str(out)]) == 0
    # reports name paths beside the checkout relatively (a checkout under /tmp sees tmp_path so)
    assert json.loads(out.read_text())["motion"] == portable_paths(str(folder / "walk.npz"))


def test_exports_name_motion_files_portably(tmp_path) -> None:
    from unilab_gpu.motion import RobotKinematics, save_motion, synthesize_clip

    g1 = RobotKinematics.from_robot("g1")
    clip = save_motion(synthesize_clip(1.0, 5, fps=50.0, kinematics=g1), tmp_path / "deep" / "folder" / "clip.npz")
    override = f"commands.motion.params.motion_files=[{clip}]"
    env = make_env("g1_tracking_play", num_envs=1, device="cpu", compile=False, overrides=[override])
    meta = deployment_metadata(env, "g1_tracking_play", "sac", [override])
    assert meta["motion"] == "clip.npz" and meta["commands"]["motion"]["params"]["motion_files"] == ["clip.npz"]
    assert meta["env_overrides"] == ["commands.motion.params.motion_files=[clip.npz]"]
    assert str(tmp_path) not in json.dumps(meta)


# -- one spelling of a term, and user modules (issue 35) ----------------------------------------
USER_TERMS = '''
def root_height_below(env, min_height: float):
    """A user's termination that shares its short name with the project's."""
    return env.robot.root_pos_w[:, 2] < min_height
'''

USER_TWINS = """
import numpy as np

def joint_speed(ctx, term):
    return lambda data: data.qvel[ctx.joint_qvel].copy()

def root_below(ctx, term, min_height):
    from unilab_gpu.deploy.terminations import FallCheck
    return FallCheck(lambda data, frame: bool(data.qpos[ctx.root_qpos + 2] < min_height), f"my root below {min_height}")

OBSERVATIONS = {"my_terms.joint_speed": joint_speed}
COMMANDS = {"my_terms:Twist": "velocity"}
TERMINATIONS = {"my_terms.root_height_below": root_below}
"""


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    (tmp_path / "my_terms.py").write_text(USER_TERMS)
    (tmp_path / "my_twins.py").write_text(USER_TWINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("UNILAB_TERM_MODULES", os.environ.get("UNILAB_TERM_MODULES", "") + ",my_terms")


def test_falls_match_resolved_terminations_not_short_names(user_modules, monkeypatch) -> None:
    meta = {"task": "g1_velocity", "env_overrides": ["terminations.fell.func=my_terms.root_height_below"]}
    rule = FallRule.of_task(meta)
    assert [name for name, _, _ in rule.counted] == ["tilt"]  # another module's root_height_below is not counted
    assert rule.uncounted == (("fell", "my_terms.root_height_below"),)
    # The colon spelling is the same term as the dotted one.
    colon = ["terminations.fell.func=unilab_gpu.envs.mdp.terminations:root_height_below"]
    assert FallRule.of_task({"task": "g1_velocity", "env_overrides": colon}) == FallRule.of_task(
        {"task": "g1_velocity", "env_overrides": []}
    )
    # With the user's twin listed, the user's termination counts.
    monkeypatch.setenv("UNILAB_DEPLOY_MODULES", "my_twins")
    assert [name for name, _, _ in FallRule.of_task(meta).counted] == ["tilt", "fell"]  # builtin twins first


def test_user_modules_add_observation_twins_and_command_kinds(cases, user_modules, monkeypatch) -> None:
    case = cases["g1_velocity_play"]
    meta = copy.deepcopy(case.policy.metadata)
    next(t for t in meta["observation_terms"] if t["name"] == "joint_vel")["func"] = "my_terms.joint_speed"
    meta["commands"]["twist"]["func"] = "my_terms.Twist"
    with pytest.raises(DeploymentError, match="uses my_terms.joint_speed.*listed in UNILAB_DEPLOY_MODULES"):
        Controller(PolicyFile(case.path, meta), case.model)
    monkeypatch.setenv("UNILAB_DEPLOY_MODULES", "my_twins")
    controller = Controller(PolicyFile(case.path, meta), case.model)
    assert controller.phase_step > 0  # the user's command is a velocity command: its gait clock runs
    drift = case.drift(controller)
    assert max(drift) <= DRIFT_TOLERANCE, drift
    monkeypatch.setenv("UNILAB_DEPLOY_MODULES", "no_such_module")
    with pytest.raises(DeploymentError, match="UNILAB_DEPLOY_MODULES: cannot import 'no_such_module'"):
        Controller(PolicyFile(case.path, meta), case.model)


def test_colon_form_terms_train_export_and_run_in_mujoco_c(tmp_path, capsys) -> None:
    """A task written in the documented ``module:attr`` form trains, exports (residual actions
    about the reference it observes) and runs in MuJoCo C with its falls counted."""
    from unilab_gpu.cli.train import main as train_main

    colon = [
        "commands.motion.func=unilab_gpu.tasks.tracking.motion_command:MotionCommand",
        "observations.policy.terms.command.func=unilab_gpu.tasks.tracking.observations:motion_command",
        "observations.policy.terms.joint_pos.func=unilab_gpu.envs.mdp.observations:joint_pos_rel",
        "terminations.anchor_height.func=unilab_gpu.tasks.tracking.terminations:anchor_height_error_above",
        "terminations.anchor_orientation.func=unilab_gpu.tasks.tracking.terminations:anchor_orientation_error_above",
    ]
    run = tmp_path / "run"
    tiny = ["algo=sac", "algo.warmup_steps=1", "algo.batch_size=8", "algo.buffer_capacity_per_env=16"]
    tiny += ["algo.actor_hidden_dims=[8]", "algo.critic_hidden_dims=[8]", "algo.num_atoms=11"]
    overrides = "env.overrides=[" + ",".join(f"'{o}'" for o in colon) + "]"
    args = ["task=g1_tracking", "env.num_envs=2", "total_env_steps=4", "progress=lines", f"run_dir={run}"]
    assert train_main([*args, *tiny, overrides]) == 0
    assert "export: policy" in capsys.readouterr().out
    meta = PolicyFile(run / "policy.onnx").metadata
    assert meta["commands"]["motion"]["func"] == "unilab_gpu.tasks.tracking.motion_command.MotionCommand"
    assert meta["observation_terms"][0]["func"] == "unilab_gpu.tasks.tracking.observations.motion_command"
    assert meta["action_offset_observation_columns"] is not None  # the reference found under its colon name
    out = tmp_path / "report.json"
    assert sim2sim_main([str(run / "policy.onnx"), "--seconds", "0.2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["falls_are"].startswith("anchor height off the reference's by > 0.25 m or gravity z")
    assert report["seconds"] == 0.2


def test_a_negative_command_is_the_value_of_command(cases, tmp_path) -> None:
    out = tmp_path / "report.json"
    args = [str(cases["g1_velocity_play"].path), "--command", "-0.3,0,0", "--seconds", "0.1", "--out", str(out)]
    assert sim2sim_main(args) == 0  # argparse alone: "expected one argument"
    assert json.loads(out.read_text())["command"] == [-0.3, 0.0, 0.0]


def test_a_diverged_simulation_is_named_counted_as_a_fall_and_kept_out_of_the_errors(
    cases, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # MuJoCo C's default handler would write MUJOCO_LOG.TXT here
    case = cases["g1_velocity_play"]
    warnings: list[str] = []
    run = Sim2Sim(case.controller(), [0.5, 0.0, 0.0], FallRule.of_task(case.policy.metadata), warn=warnings.append)
    reached = []

    def blow_up(data, ghost) -> None:  # after control step 3: a velocity MuJoCo C refuses (|qvel| > 1e10)
        reached.append(float(np.linalg.norm(data.qvel[:2])))
        if len(reached) == 3:
            data.qvel[6] = 1e11

    measured = []
    errors = run.errors
    run.errors = lambda frame: measured.append(errors(frame)) or measured[-1]
    result = run.run(0.2, on_frame=blow_up)
    summary, (row,) = result["summary"], result["per_second"]
    assert summary["diverged"] == row["diverged"] == 1 and summary["falls"] >= 1
    assert run.warnings[0].startswith("the simulation diverged at 0.08 s (MuJoCo C reset a bad state")
    assert run.warnings[-1] == (
        "MuJoCo C warned 1 time(s), first: Nan, Inf or huge value in QVEL at DOF 6. The simulation is unstable. "
        "Time = 0.0600."
    )
    assert warnings == [f"unilab-sim2sim: warning: {text}" for text in run.warnings]
    assert list(tmp_path.iterdir()) == [] and mujoco.get_mju_user_warning() is None  # nothing left behind
    # The errors are the means of the 9 steps that did not diverge (the diverged one would read as
    # the reset robot standing still: an error of the whole command).
    assert len(measured) == 9
    mean = np.mean([m["lin_vel_error_mps"] for m in measured])
    assert summary["lin_vel_error_mps"] == pytest.approx(mean) == row["lin_vel_error_mps"]
    assert run.divergence.max_qvel == 1000.0
    data = run.data
    data.qvel[0] = 2000.0  # finite, outside the task's divergence envelope
    assert run.diverged(divergence_warnings(data))
    data.qvel[0] = 1.0
    assert not run.diverged(divergence_warnings(data)) and run.diverged(divergence_warnings(data) - 1)


def test_solver_non_convergence_is_told_from_mujocos_own_iteration_stats() -> None:
    model = mujoco.MjModel.from_xml_path(str(robot_asset("go2")))
    model.opt.cone, model.opt.impratio = mujoco.mjtCone.mjCONE_ELLIPTIC, 100.0

    def after_drop(iterations: int) -> tuple[bool, np.ndarray]:
        model.opt.iterations = iterations
        data = mujoco.MjData(model)
        mujoco.mj_resetDataKeyframe(model, data, 0)
        data.qpos[2] += 0.01  # lands on its feet in the next steps: contacts that change
        unconverged = []
        for _ in range(20):
            mujoco.mj_step(model, data)
            unconverged.append(solver_unconverged(model, data))
        return any(unconverged), data.qacc.copy()

    starved, qacc_starved = after_drop(1)
    ample, qacc_ample = after_drop(1000)
    assert starved and not ample
    # The reference: a solver that did converge gives other accelerations than the starved one.
    assert np.abs(qacc_starved - qacc_ample).max() > 1e-3


def test_sim2sim_reports_the_physics_it_ran_and_warns_of_an_unconverged_solver(cases, tmp_path) -> None:
    case = cases["g1_velocity_play"]

    def starve(meta):
        meta["physics"]["iterations"], meta["physics"]["ls_iterations"] = 1, 1
        return meta

    starved = _with_metadata(case.path, tmp_path / "starved.onnx", starve)
    lines: list[str] = []
    report = sim2sim(Scenario(starved, [0.5, 0.0, 0.0], seconds=0.2), announce=lines.append)
    assert report["physics"] == {**case.policy.metadata["physics"], "iterations": 1, "ls_iterations": 1}
    assert case.policy.metadata["physics"]["iterations"] == 10  # the G1 scene's own
    fraction = report["summary"]["solver_unconverged_fraction"]
    assert 0 < fraction <= 1 and report["per_second"][0]["solver_unconverged_fraction"] == fraction
    (warning,) = report["warnings"]
    assert warning.startswith("MuJoCo's constraint solver stopped at its iteration cap (1) without converging in ")
    assert f"of {10 * 4} physics steps" in warning and f"unilab-sim2sim: warning: {warning}" in lines
    plain = sim2sim(Scenario(case.path, [0.5, 0.0, 0.0], seconds=0.2), announce=lambda line: None)
    assert plain["warnings"] == [] and plain["summary"]["solver_unconverged_fraction"] == 0.0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: {**p, "cone": "conic"}, "'physics.cone' must be one of pyramidal, elliptic, got 'conic'"),
        (lambda p: {**p, "iterations": 0}, "'physics.iterations' must be an integer >= 1, got 0"),
        (lambda p: {**p, "impratio": float("nan")}, "'physics.impratio' must be a finite number > 0"),
        (lambda p: {**p, "timestep": 0.004}, "'physics.timestep' must be physics_dt (0.005 s), got 0.004"),
        (lambda p: {k: v for k, v in p.items() if k != "ls_iterations"}, "'physics.ls_iterations' must be an integer"),
    ],
)
def test_bad_physics_metadata_is_refused_naming_the_option(cases, tmp_path, edit, message: str) -> None:
    def bad(meta):
        meta["physics"] = edit(meta["physics"])
        return meta

    path = _with_metadata(cases["g1_velocity_play"].path, tmp_path / "bad.onnx", bad)
    with pytest.raises(DeploymentError) as error:
        PolicyFile(path)
    assert message in str(error.value) and "\n" not in str(error.value)
