"""The env step captured as one CUDA graph (marker ``gpu``; skipped without a CUDA device)."""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.doctor.captured_step import check_replay_does_not_wait
from unilab_gpu.envs.make_env import make_env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)"),
]

OVERRIDES = ["episode_length_s=1.0", "events.push=null"]  # resets every ~50 steps


def _rollout(env, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rewards, ends, obs = [], [], []
    for a in actions:
        result = env.step(a)
        rewards.append(result.reward.clone())
        ends.append(result.terminated | result.truncated)
        obs.append(result.obs["policy"].clone())
    return torch.stack(rewards), torch.stack(ends), torch.stack(obs)


@pytest.mark.parametrize("task", ["g1_stand", "g1_tracking"])
def test_replayed_steps_equal_eager_steps(task: str) -> None:
    """200 steps with resets in MJWarp's deterministic mode: the graph gives the eager numbers.

    Deterministic mode sorts contacts and constraint rows and makes Warp's atomics order-free, so
    physics repeats bit for bit; the torch side runs the same kernels in the same order. The
    tolerance only covers torch ops whose CUDA kernels reduce with atomics.
    """
    num_envs = 256
    actions = 0.3 * torch.randn(200, num_envs, 29, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    results = []
    for capture in (False, True):
        env = make_env(task, num_envs, "cuda", OVERRIDES, seed=5, compile=False, capture=capture, deterministic=True)
        env.reset()
        assert env.captured == capture and env.device == torch.device("cuda", torch.cuda.current_device())
        results.append(_rollout(env, actions))
    (r_eager, e_eager, o_eager), (r_graph, e_graph, o_graph) = results
    assert e_eager.any(dim=0).sum() > num_envs // 2  # most rows were reset at least once
    assert torch.equal(e_graph, e_eager)
    torch.testing.assert_close(r_graph, r_eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(o_graph, o_eager, rtol=1e-5, atol=1e-5)


def test_capture_leaves_the_env_where_an_uncaptured_one_is() -> None:
    """reset() with capture (warm-up, capture, first-replay check) changes nothing observable."""
    states = []
    for capture in (False, True):
        env = make_env("g1_tracking", 128, "cuda", seed=2, compile=False, capture=capture, deterministic=True)
        obs = env.reset()
        states.append((torch.cuda.get_rng_state(), obs["policy"].clone(), env.sim.state.qpos.clone()))
    for eager, captured in zip(*states, strict=True):
        assert torch.equal(eager, captured)


def test_replay_does_not_wait_for_the_device() -> None:
    """The eager step body under sync debug 'error'; replays enqueue in far less than they run."""
    env = make_env("g1_tracking", 4096, "cuda", overrides=OVERRIDES, compile=False, capture=True)
    env.reset()
    check = check_replay_does_not_wait(env)
    assert check.status == "pass", check.detail
    assert torch.isfinite(env.result.reward).all()


def test_unindexed_cuda_and_torch_device_spellings_step() -> None:
    """``device="cuda"`` used to make every step raise (cuda != cuda:0)."""
    for spelling in ("cuda", torch.device("cuda"), f"cuda:{torch.cuda.current_device()}"):
        env = make_env("pendulum", 4, spelling, compile=False)
        env.reset()
        result = env.step(torch.zeros(4, 1, device="cuda"))
        assert env.captured and torch.isfinite(result.reward).all()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_an_env_on_the_second_gpu_captures_and_matches_eager() -> None:
    """cuda:1 while cuda:0 is current: the capture runs under cuda:1 on a stream of cuda:1."""
    assert torch.cuda.current_device() == 0
    actions = 0.3 * torch.randn(30, 64, 29, device="cuda:1", generator=torch.Generator("cuda:1").manual_seed(0))
    results = []
    for capture in (False, True):
        env = make_env("g1_stand", 64, "cuda:1", OVERRIDES, seed=5, compile=False, capture=capture, deterministic=True)
        env.reset()
        assert env.captured == capture and env.device == torch.device("cuda", 1)
        results.append(_rollout(env, actions))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    assert torch.cuda.current_device() == 0
