"""The env's capture path on a CPU: warm-up, first-replay check and fallback leave no trace.

On CUDA, ``reset()`` warms the step up (running it for real), captures it and checks one replay
against one eager step. Here the CUDA graph is replaced by a stand-in that runs the same step
body, so everything around the capture runs as it does on a GPU, and the env must end up
exactly, bit for bit, where an env that never captured ends up.
"""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.envs.env_step import CaptureReplayError
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.snapshot import env_tensors

TASKS = {
    "pendulum": ["episode_length_s=0.3"],
    # Motion command, adaptive sampler, interval pushes, reset noise: all draw random numbers.
    "g1_tracking": ["episode_length_s=0.2", "events.push.interval_range_s=[0.02,0.06]"],
}


SCRATCH = {"_compactor._slots"}
"""Scratch buffers written before they are read in every step (``torch.empty`` contents)."""


class StandInGraph:
    """Warms ``fn`` up like CudaGraph (runs it ``warmup`` times), replays by running it."""

    def __init__(self, fn, replays: bool = True, warmup: int = 2) -> None:
        self.fn, self.replays = fn, replays
        for _ in range(warmup):
            fn()

    def replay(self) -> None:
        if self.replays:
            self.fn()


def _build(task: str, num_envs: int = 8, graph=None, capture="auto"):
    env = make_env(task, num_envs=num_envs, overrides=TASKS[task], seed=3, compile=False, announce=False)
    if graph is not None:  # take the CUDA path: capture at reset() through the stand-in
        env.capture_mode, env._capture = capture, True
        env._make_graph = graph
    return env


def _rollout(env, steps: int = 6) -> dict[str, torch.Tensor]:
    obs = env.reset()
    out = {"rng": torch.get_rng_state(), **{f"reset.obs.{k}": v.clone() for k, v in obs.items()}}
    out.update({f"reset.{k}": t.clone() for k, t in env_tensors(env).items() if k not in SCRATCH})
    actions = torch.linspace(-0.5, 0.5, env.num_envs * env.action_dim).view(env.num_envs, env.action_dim)
    for i in range(steps):
        result = env.step(actions)
        out.update({f"{i}.reward": result.reward.clone(), f"{i}.terminated": result.terminated.clone()})
        out.update({f"{i}.truncated": result.truncated.clone(), f"{i}.rng": torch.get_rng_state()})
        out.update({f"{i}.obs.{k}": v.clone() for k, v in result.obs.items()})
    return out


def _assert_identical(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.equal(got[name], value), f"{name} differs"


@pytest.mark.parametrize("task", list(TASKS))
def test_a_captured_env_continues_exactly_like_one_that_never_captured(task: str) -> None:
    expected = _rollout(_build(task))
    graphs = []
    env = _build(task, graph=lambda fn: graphs.append(StandInGraph(fn)) or graphs[-1])
    got = _rollout(env)
    assert env.captured and len(graphs) == 1 and env.capture_skipped is None
    _assert_identical(got, expected)  # RNG state, observations, every env tensor, then 6 steps


def test_a_graph_that_replays_nothing_falls_back_to_eager_and_leaves_no_trace() -> None:
    expected = _rollout(_build("pendulum"))
    env = _build("pendulum", graph=lambda fn: StandInGraph(fn, replays=False))
    with pytest.warns(UserWarning, match="runs eagerly on cpu: capture failed.*first replay differs.*qpos"):
        got = _rollout(env)
    assert not env.captured and "first replay differs" in env.capture_skipped
    _assert_identical(got, expected)


def test_a_capture_error_falls_back_with_its_reason_and_capture_true_raises() -> None:
    def broken(fn):
        fn()  # part of a warm-up ran before the failure: its effects must be undone too
        raise RuntimeError("Cannot synchronize stream while graph capture is active")

    expected = _rollout(_build("pendulum"))
    env = _build("pendulum", graph=broken)
    with pytest.warns(UserWarning, match="capture failed \\(RuntimeError: Cannot synchronize stream"):
        got = _rollout(env)
    _assert_identical(got, expected)
    strict = _build("pendulum", graph=broken, capture=True)
    with pytest.raises(RuntimeError, match="Cannot synchronize"):
        strict.reset()
    strict = _build("pendulum", graph=lambda fn: StandInGraph(fn, replays=False), capture=True)
    with pytest.raises(CaptureReplayError, match="first replay differs"):
        strict.reset()


def test_capture_setting_is_checked_and_cpu_envs_say_how_they_run(capsys) -> None:
    with pytest.raises(ValueError, match="capture must be true, false or 'auto', got 'yes'"):
        make_env("pendulum", num_envs=2, capture="yes")
    env = make_env("pendulum", num_envs=2, compile=False)
    line = capsys.readouterr().out.strip().splitlines()
    assert line == [env.headline()]
    assert "pendulum x 2 envs on cpu" in line[0] and "no CUDA graph on CPU" in line[0]
    assert env.device == torch.device("cpu") and env.capture_skipped is None and not env.captured
