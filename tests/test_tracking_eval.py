"""``unilab-eval`` and its library (:mod:`unilab_gpu.evaluation`): the metrics against NumPy, the
success rate of a policy that fails at a known frame, and bad input in one line each."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from unilab_gpu.cli.eval import main
from unilab_gpu.evaluation.metrics import TrackedState, tracking_errors
from unilab_gpu.evaluation.tracking import TrackingEvaluation, make_eval_env, start_frames
from unilab_gpu.utils.rotations import quat_from_euler_xyz, quat_mul
from unilab_gpu.utils.sync_audit import no_host_sync

ROOT = Path(__file__).resolve().parents[1]
VELOCITY_ONNX = ROOT / "docs" / "policies" / "g1_velocity_sac.onnx"


def _random_state(generator: torch.Generator, envs: int = 3, bodies: int = 5, joints: int = 4) -> TrackedState:
    quat = torch.randn(envs, bodies, 4, generator=generator)
    return TrackedState(
        torch.randn(envs, bodies, 3, generator=generator),
        quat / quat.norm(dim=-1, keepdim=True),
        torch.randn(envs, joints, generator=generator),
        torch.randn(envs, joints, generator=generator),
    )


def test_metrics_match_numpy_on_known_offsets():
    generator = torch.Generator().manual_seed(0)
    reference = _random_state(generator)
    shift = torch.tensor([0.3, -0.4, 0.0])  # the whole robot 0.5 m away: MPKPE 0.5, R-MPKPE 0
    extra = torch.tensor([0.0, 0.0, 0.2])  # and body 4 (an end effector) 0.2 m higher than that
    body_pos = reference.body_pos_w + shift
    body_pos[:, 4] += extra
    angle = 0.3  # the end effectors turned by 0.3 rad about z
    turn = quat_from_euler_xyz(torch.tensor(0.0), torch.tensor(0.0), torch.tensor(angle)).expand(3, 2, 4)
    body_quat = reference.body_quat_w.clone()
    body_quat[:, [1, 4]] = quat_mul(body_quat[:, [1, 4]], turn)
    joint_offset = torch.tensor([0.1, -0.2, 0.0, 0.3])
    robot = TrackedState(body_pos, body_quat, reference.joint_pos + joint_offset, reference.joint_vel - 2.0)
    errors = tracking_errors(robot, reference, anchor=0, end_effectors=torch.tensor([1, 4]))

    # NumPy, from the definitions.
    p, r = robot.body_pos_w.numpy(), reference.body_pos_w.numpy()
    mpkpe = np.linalg.norm(p - r, axis=-1).mean(axis=-1)
    relative = (p - p[:, :1]) - (r - r[:, :1])
    r_mpkpe = np.linalg.norm(relative, axis=-1).mean(axis=-1)
    ee_pos = np.linalg.norm((p - r)[:, [1, 4]], axis=-1).mean(axis=-1)
    np.testing.assert_allclose(errors["mpkpe"].numpy(), mpkpe, rtol=1e-5)
    np.testing.assert_allclose(errors["r_mpkpe"].numpy(), r_mpkpe, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(errors["ee_pos_error"].numpy(), ee_pos, rtol=1e-5)

    # And the known numbers of these offsets.
    moved = math.sqrt(0.3**2 + 0.4**2 + 0.2**2)  # ... with body 4's extra height
    np.testing.assert_allclose(errors["mpkpe"].numpy(), (4 * 0.5 + moved) / 5, rtol=1e-5)
    np.testing.assert_allclose(errors["r_mpkpe"].numpy(), 0.2 / 5, rtol=1e-5)  # only body 4 moved relative to 0
    np.testing.assert_allclose(errors["ee_pos_error"].numpy(), (0.5 + moved) / 2, rtol=1e-5)
    np.testing.assert_allclose(errors["ee_ori_error"].numpy(), angle, rtol=1e-4)
    np.testing.assert_allclose(errors["joint_pos_error"].numpy(), 0.6 / 4, rtol=1e-5)
    np.testing.assert_allclose(errors["joint_vel_sq_error"].numpy(), 4.0, rtol=1e-5)


def test_start_frames_cover_every_clip_evenly():
    clip, frame = start_frames([100, 41], 6, spread=True)
    assert clip.tolist() == [0, 1, 0, 1, 0, 1]
    assert frame.tolist() == [0, 0, 33, 13, 66, 26]  # floor(k (L - 1) / 3)
    assert start_frames([100, 41], 4, spread=False)[1].tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="3 trials cannot cover 4 clips"):
        start_frames([10, 10, 10, 10], 3, spread=False)


FAIL_FRAME = 30
CLIP_SECONDS = 2.0  # synthetic clip: 100 frames at 50 Hz


def test_a_policy_failing_at_a_known_frame_gives_the_known_success_rate():
    """Every second row fails on the step that scores frame 30 (a scripted termination), the task's
    own failure terms are off: from frame 0 half the trials succeed, from spread starts the even
    rows that start after frame 30 succeed too; a trial is scored on the steps before its end."""
    trials = 4
    overrides = [
        f"commands.motion.params.synthetic_seconds={CLIP_SECONDS}",
        "terminations.anchor_height=null",
        "terminations.anchor_orientation=null",
        "terminations.end_effector_height=null",
        f"+terminations.scripted={{func: env_test_terms.FailAtFrame, params: {{frame: {FAIL_FRAME}, every: 2}}}}",
    ]
    env = make_eval_env("g1_tracking", overrides, trials, "cpu")
    evaluation = TrackingEvaluation(env, trials, ["synthetic"])
    length = evaluation.clip_lengths[0]
    zero = torch.zeros(env.num_envs, env.action_dim)
    obs = env.reset()
    with no_host_sync():  # the loop's steps read nothing back
        for _ in range(3):
            obs = evaluation.step(lambda obs: zero, obs)
    report = evaluation.run(lambda obs: zero)

    assert report["failure_terms"] == ["scripted"] and report["steps"] == length
    spread = start_frames([length], trials, spread=True)[1].tolist()
    for name, starts, first_row in (("start", [0] * trials, 0), ("spread", spread, trials)):
        fails = [(first_row + k) % 2 == 0 and s <= FAIL_FRAME for k, s in enumerate(starts)]
        trial = report[name]["trials"]
        assert trial["start_frame"] == starts
        assert trial["success"] == [not f for f in fails], name
        steps = [FAIL_FRAME - s if f else length - 1 - s for s, f in zip(starts, fails, strict=True)]
        assert trial["scored_steps"] == steps, name
        assert report[name]["overall"]["success_rate"] == pytest.approx(1 - sum(fails) / trials)
        assert report[name]["clips"]["synthetic"]["success_rate"] == report[name]["overall"]["success_rate"]
    assert report["start"]["overall"]["success_rate"] == 0.5
    # The zero action follows the clip's joints for a few tenths of a second, then falls: errors of a fall.
    assert 0.0 < report["start"]["overall"]["r_mpkpe_m"] < report["start"]["overall"]["mpkpe_m"] < 2.0


def test_the_tracking_evaluation_reports_the_torque_demand_at_the_motor_limit():
    """Torque demand (issue 60) in ``unilab-eval``'s tracking report: the share of actuator-steps,
    over every row-step of the run, whose PD torque at the step's targets MuJoCo C clamps at the
    motor's force limit (``mj_forward`` at each step's starting state with that step's ctrl)."""
    import mujoco

    env = make_eval_env("g1_tracking", ["commands.motion.params.synthetic_seconds=0.2"], 1, "cpu")
    evaluation = TrackingEvaluation(env, 1, ["synthetic"])
    action = torch.randn(env.num_envs, env.action_dim, generator=torch.Generator().manual_seed(0)) * 2.0
    state = env.sim.state
    starts, ctrls = [], []

    def policy(obs):
        if starts:  # the previous step's targets (a reset leaves ctrl alone)
            ctrls.append(state.ctrl.clone().numpy())
        starts.append((state.qpos.clone().numpy(), state.qvel.clone().numpy()))
        return action

    report = evaluation.run(policy)
    ctrls.append(state.ctrl.clone().numpy())
    model = env.sim.mj_model
    data = mujoco.MjData(model)
    limited = model.actuator_forcelimited.astype(bool)
    effort = np.abs(model.actuator_forcerange).min(axis=1)
    at_limit = []
    for (qpos, qvel), ctrl in zip(starts, ctrls, strict=True):
        for row in range(env.num_envs):
            data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[row], qvel[row], ctrl[row]
            mujoco.mj_forward(model, data)
            at_limit.append(limited & (np.abs(data.actuator_force) >= effort * (1 - 1e-5)))
    expected = float(np.mean(at_limit))
    assert len(starts) == report["steps"] and 0.0 < expected < 1.0
    assert report["torque_limit_share"] == pytest.approx(expected, abs=1e-6)
    again = evaluation.run(lambda obs: torch.zeros_like(action))  # a second run counts its own steps only
    assert again["torque_limit_share"] < expected


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err and err.startswith("unilab-eval: error: ")
    return err


def test_bad_input_is_one_line(tmp_path, capsys):
    assert "checkpoint not found" in _one_line_error(capsys, [str(tmp_path / "no_run")])
    if VELOCITY_ONNX.is_file():
        err = _one_line_error(capsys, ["--onnx", str(VELOCITY_ONNX), "--device", "cpu"])
        assert "is a velocity policy (task g1_velocity), which has no clips to track" in err
    not_onnx = tmp_path / "policy.onnx"
    not_onnx.write_bytes(b"not a model")
    assert "not a readable ONNX policy" in _one_line_error(capsys, ["--onnx", str(not_onnx)])
    out = tmp_path / "eval.json"
    out.write_text("{}")
    assert "exists; pass --force" in _one_line_error(capsys, ["--onnx", str(VELOCITY_ONNX), "--out", str(out)])


def test_a_velocity_run_is_refused_in_one_line(tmp_path, capsys):
    from rl_agent_helpers import TINY_FLASHSAC_OVERRIDES

    from unilab_gpu.cli.train import main as train_main

    run = tmp_path / "velocity_run"
    argv = ["task=g1_velocity", "env.num_envs=2", "total_env_steps=2", "progress=lines", "export_onnx=false"]
    assert train_main([*argv, f"run_dir={run}", *TINY_FLASHSAC_OVERRIDES]) == 0
    capsys.readouterr()
    err = _one_line_error(capsys, [str(run), "--device", "cpu"])
    assert "is a velocity policy (task g1_velocity), which has no clips to track" in err


def test_periodic_evaluation_writes_tensorboard_and_the_log(tmp_path, capsys):
    from rl_agent_helpers import TINY_FLASHSAC_OVERRIDES
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from unilab_gpu.cli.train import main as train_main

    run = tmp_path / "tracking_run"
    argv = [
        "env.num_envs=2",
        "total_env_steps=8",  # 4 iterations: evaluations after iterations 2 and 4
        "log_every=2",
        "eval.every=2",
        "eval.trials=1",
        "progress=lines",
        "export_onnx=false",
        "env.overrides=['commands.motion.params.synthetic_seconds=1.0']",
        f"run_dir={run}",
    ]
    assert train_main([*argv, *TINY_FLASHSAC_OVERRIDES]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("eval at ")]
    assert [line.split(":")[0] for line in lines] == ["eval at 4 env steps", "eval at 8 env steps"]
    assert "from frame 0" in lines[0] and "R-MPKPE" in lines[0]
    events = EventAccumulator(str(run))
    events.Reload()
    success = events.Scalars("eval/spread/success_rate")
    assert [point.step for point in success] == [4, 8] and all(0.0 <= p.value <= 1.0 for p in success)
    assert "eval/start/mpkpe_m" in events.Tags()["scalars"]


def test_periodic_evaluation_of_a_task_without_motion_is_a_config_error(tmp_path, capsys):
    from unilab_gpu.cli.train import main as train_main

    run = tmp_path / "pendulum_run"
    assert train_main(["task=pendulum", "eval.every=5", "progress=lines", f"run_dir={run}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'eval.every' 5" in err and "follows no motion" in err and "\n" not in err
    assert not run.exists()


def test_periodic_evaluation_is_off_on_a_cpu_by_default():
    from unilab_gpu.training.config import compose_train_config, resolve_auto

    assert resolve_auto(compose_train_config(["device=cpu"])).eval.every == 0
