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
import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

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
from unilab_gpu.export.sim2sim import FallRule, Sim2Sim, load_reference, sim2sim  # noqa: E402
from unilab_gpu.paths import robot_asset  # noqa: E402
from unilab_gpu.rl.sac import SacAgent, SacConfig  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[1] / "unilab_gpu" / "deploy"
STEPS = 10
START_TOLERANCE = 1e-5
DRIFT_TOLERANCE = 1e-4
TASKS = {
    "g1_velocity_play": [],
    "g1_tracking_play": ["events.foot_friction=null"],  # play keeps it: a per-world friction MuJoCo C lacks
}
SHARED_CLIP = Path("/work/shared/motions/g1/largebox_carry.npz")


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
    assert tracking.uncounted == (("end_effector_height", "unilab_gpu.tasks.tracking.terminations.BodyHeightError"),)
    with pytest.raises(DeploymentError, match="task 'g1_velocity' has no failure termination with a runtime twin"):
        FallRule.of_task({"task": "g1_velocity", "env_overrides": ["terminations.tilt=null", "terminations.fell=null"]})


def test_cli_video_has_a_frame_per_control_step(cases, tmp_path) -> None:
    iio = pytest.importorskip("imageio.v3")
    video = tmp_path / "run.mp4"
    try:
        sim2sim(cases["g1_tracking_play"].path, seconds=0.2, video=video)
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


@pytest.mark.skipif(not SHARED_CLIP.is_file(), reason="the shared motion clip is not on this machine")
def test_shared_holosoma_clip_converts_for_the_runtime(cases) -> None:
    case = cases["g1_tracking_play"]
    reference, name = load_reference(case.policy.metadata, case.model, str(SHARED_CLIP))
    controller = Controller(case.policy, case.model, reference)
    assert name == str(SHARED_CLIP) and controller.reference.fps == 50.0
    assert controller.reference.num_frames > 100


def test_the_committed_velocity_policy_walks_in_mujoco_c() -> None:
    """docs/policies/g1_velocity_sac.onnx (an hour of SAC on a CPU core) through the runtime alone: 3 s at
    0.5 m/s in MuJoCo C without a fall, at the planar error it has in its training env (0.10 m/s)."""
    policy = Path(__file__).resolve().parents[1] / "docs" / "policies" / "g1_velocity_sac.onnx"
    report = sim2sim(policy, [0.5, 0.0, 0.0], seconds=3.0)
    summary = report["summary"]
    assert summary["falls"] == 0 and summary["lin_vel_error_mps"] < 0.2, summary
    assert summary["torque_limit_excess_nm"] == 0.0 and summary["joint_limit_excess_rad"] < 0.01
