"""An observation term that keeps one value over a run's first steps is named in one warning line
(issue 60, "Nothing lost" 6: an IMU on the world body trained "fine" on a gyro reading 0)."""

from __future__ import annotations

import torch
from test_cli_train import TINY

from unilab_gpu.cli.train import main
from unilab_gpu.envs.constant_observations import ConstantObservations
from unilab_gpu.envs.make_env import make_env

FIXED_BASE_GRAVITY = "+observations.policy.terms.gravity={func: env_test_terms.never_moves}"
"""A term reading 0 every step, as a gyro on the world body does."""


def test_the_terms_that_never_change_are_named() -> None:
    env = make_env("pendulum", num_envs=4, device="cpu", compile=False, overrides=[FIXED_BASE_GRAVITY], announce=False)
    env.reset()
    watch = ConstantObservations(env, steps=10)
    generator = torch.Generator().manual_seed(0)
    while not watch.done:
        env.step(torch.rand(4, env.action_dim, generator=generator) * 2 - 1)
        watch.observe()
    assert watch.constant_terms() == ["policy/gravity"]  # angle and velocity move with the torque
    assert "policy/gravity kept one value in every row over the first 10 steps" in watch.warning()


def test_noise_does_not_hide_a_constant_term() -> None:
    noisy = FIXED_BASE_GRAVITY.replace("}", ", noise: {kind: uniform, low: -0.1, high: 0.1}}", 1)
    noisy = noisy[: noisy.rindex("}")] + "}"
    env = make_env("pendulum", num_envs=4, device="cpu", compile=False, overrides=[noisy], announce=False)
    env.reset()
    watch = ConstantObservations(env, steps=3)
    while not watch.done:
        env.step(torch.zeros(4, env.action_dim))
        watch.observe()
    assert "policy/gravity" in watch.constant_terms()


def test_training_warns_once_in_one_line(tmp_path, capsys) -> None:
    overrides = f"env.overrides=['{FIXED_BASE_GRAVITY}']"
    args = [*TINY, "total_env_steps=96", "log_every=100", f"run_dir={tmp_path / 'run'}", "export_onnx=false"]
    assert main([*args, overrides]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "kept one value" in line]
    assert len(lines) == 1 and "policy/gravity" in lines[0] and "policy/angle" not in lines[0]
