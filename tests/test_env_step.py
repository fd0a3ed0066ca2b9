"""The env step: sync audit, stable addresses, autoreset, reset capacity, compiled == eager."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.paths import list_tasks
from unilab_gpu.utils.sync_audit import no_host_sync

FORCED = ["+terminations.forced={func: env_test_terms.ForcedEnd}"]


def _pendulum(num_envs: int = 6, overrides: list[str] = (), **kwargs):
    kwargs.setdefault("compile", False)
    return make_env("pendulum", num_envs=num_envs, overrides=list(overrides), **kwargs)


def _forced(env):
    return env.termination_manager.terms[env.termination_manager.term_names.index("forced")].instance


@pytest.mark.parametrize("task", list_tasks())
def test_step_and_reset_never_sync_the_host(task: str) -> None:
    """Every task's step and reset: no host sync, no host-to-device copy (``no_host_sync``)."""
    env = make_env(task, num_envs=4, compile=False, overrides=["episode_length_s=0.2"])
    actions = torch.zeros(4, env.action_dim)
    with no_host_sync():
        env.reset()
        # Time-outs after 0.2 s (10 control steps at 50 Hz) end every row at least once in 12
        # steps, also for a robot that does not fall under zero actions (the Go2 stands).
        for _ in range(12):
            env.step(actions)
    assert float(env.stats.episodes) > 0


def test_buffer_addresses_are_stable() -> None:
    env = _pendulum(overrides=["episode_length_s=0.3"])
    env.reset()
    actions = torch.zeros(env.num_envs, 1)
    env.step(actions)
    before = {name: t.data_ptr() for name, t in env.persistent_buffers().items()}
    for _ in range(100):
        env.step(actions)
    env.reset()
    assert {name: t.data_ptr() for name, t in env.persistent_buffers().items()} == before


def test_autoreset_of_one_row() -> None:
    """A forced end: final_obs holds the pre-reset observation, obs the new episode's, the
    episode is counted once, and every other row is bitwise what an env without the end gives."""
    actions = torch.linspace(-1, 1, 6)[:, None]
    runs = []
    for force in (False, True):
        # The step's randomness comes from torch's default generator: run the twins one after
        # the other from the same seed so they draw the same numbers.
        env = _pendulum(overrides=FORCED + ["episode_length_s=100"], seed=3)
        env.reset()
        for _ in range(5):
            env.step(actions)
        _forced(env).mask[1] = force
        result = env.step(actions)
        _forced(env).mask[1] = False
        runs.append((env, {k: v.clone() for k, v in result.obs.items()}, result))
    (plain, plain_obs, _), (forced, _, result) = runs

    assert result.terminated.tolist() == [False, True, False, False, False, False]
    # The pre-reset observation of row 1 is what the undisturbed twin observes.
    torch.testing.assert_close(result.final_obs["policy"][1], plain_obs["policy"][1], rtol=0, atol=0)
    # The new episode's first observation, recomputed from the simulator state with NumPy.
    q = float(forced.robot.joint_pos[1, 0])
    qd = float(forced.robot.joint_vel[1, 0])
    np.testing.assert_allclose(result.obs["policy"][1].numpy(), [math.cos(q), math.sin(q), 0.125 * qd], atol=1e-6)
    assert -1.0 <= qd <= 1.0 and int(forced.episode_length[1]) == 0
    others = [0, 2, 3, 4, 5]
    assert torch.equal(result.obs["policy"][others], plain_obs["policy"][others])
    assert torch.equal(forced.sim.state.qpos[others], plain.sim.state.qpos[others])
    assert float(forced.stats.termination_term_counts[-1]) == 1.0
    for _ in range(3):
        forced.step(actions)
    assert float(forced.stats.termination_term_counts[-1]) == 1.0  # counted once


def test_more_ends_than_capacity_are_all_reset() -> None:
    env = _pendulum(num_envs=8, overrides=FORCED + ["reset_capacity=2", "episode_length_s=100"])
    env.reset()
    actions = torch.zeros(8, 1)
    env.step(actions)
    forced = _forced(env)
    forced.mask[:7] = True
    env.step(actions)
    forced.mask[:] = False
    reset_seen = torch.zeros(8, dtype=torch.bool)
    reset_seen |= env.episode_length == 0
    steps = 1
    while not bool(reset_seen[:7].all()):
        env.step(actions)
        reset_seen |= env.episode_length == 0
        steps += 1
        assert steps <= math.ceil(7 / 2), "rows left un-reset beyond ceil(ended / capacity) steps"
    assert not bool(reset_seen[7])
    assert int(env.reset_rows.deferred_count) == 5 + 3 + 1  # rows waiting after steps 1, 2, 3
    assert float(env.stats.episodes) == 7.0


@pytest.mark.slow
@pytest.mark.parametrize("task,num_envs", [("pendulum", 6), ("g1_stand", 3), ("go2_velocity", 3), ("g1_tracking", 3)])
def test_compiled_step_equals_eager(task: str, num_envs: int) -> None:
    """Every region layout: evaluate ending with the final observations (no advancing command:
    pendulum, stand, velocity with its randomized model rows), or an advance region (tracking)."""
    overrides = ["episode_length_s=0.5"]  # resets within the 50 steps
    envs = [make_env(task, num_envs=num_envs, overrides=overrides, seed=7, compile=c) for c in (False, True)]
    generator = torch.Generator().manual_seed(0)
    actions = [torch.rand(50, num_envs, envs[0].action_dim, generator=generator) * 2 - 1 for _ in range(1)][0]
    outputs = []
    for env in envs:
        torch.manual_seed(11)
        env.reset()
        rewards, ends, obs = [], [], []
        for t in range(50):
            result = env.step(actions[t])
            rewards.append(result.reward.clone())
            ends.append((result.terminated | result.truncated).clone())
            obs.append(torch.cat([v.clone() for v in result.obs.values()], dim=1))
        outputs.append((torch.stack(rewards), torch.stack(ends), torch.stack(obs)))
    (r0, e0, o0), (r1, e1, o1) = outputs
    assert e0.any()
    assert torch.equal(e0, e1)
    torch.testing.assert_close(r1, r0, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(o1, o0, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("task,num_envs", [("pendulum", 6), pytest.param("g1_tracking", 4, marks=pytest.mark.slow)])
def test_compiled_deferred_resets_equal_eager(task: str, num_envs: int) -> None:
    """reset_capacity=1 with several rows ending per step: the compiled step defers the same rows
    as the eager one and every output agrees step by step. The evaluate region reads the
    compactor's ``pending``/``wait`` and rewrites them at its end (the write-after-read order that
    Inductor 2.11 lost for other buffers, docs/architecture.md step-path rule 6)."""
    overrides = FORCED + ["reset_capacity=1", "episode_length_s=0.3", "randomize_initial_episode_length=false"]
    envs = [make_env(task, num_envs=num_envs, overrides=overrides, seed=5, compile=c) for c in (False, True)]
    generator = torch.Generator().manual_seed(1)
    steps = 20
    actions = torch.rand(steps, num_envs, envs[0].action_dim, generator=generator) * 2 - 1
    forced_ends = torch.rand(steps, num_envs, generator=generator) < 0.3
    traces = []
    for env in envs:
        torch.manual_seed(13)
        env.reset()
        trace = []
        for t in range(steps):
            _forced(env).mask.copy_(forced_ends[t])
            result = env.step(actions[t])
            rows = env.reset_rows
            trace.append(
                {
                    "obs": torch.cat([v.clone() for v in result.obs.values()], dim=1),
                    "final_obs": torch.cat([v.clone() for v in result.final_obs.values()], dim=1),
                    "reward": result.reward.clone(),
                    "terminated": result.terminated.clone(),
                    "truncated": result.truncated.clone(),
                    "valid": result.valid.clone(),
                    "pending": rows.pending.clone(),
                    "wait": rows.wait.clone(),
                    "env_ids": rows.env_ids.clone(),
                    "deferred_count": rows.deferred_count.clone(),
                    "episode_length": env.episode_length.clone(),
                    "qpos": env.sim.state.qpos.clone(),
                }
            )
        traces.append(trace)
    eager, compiled = traces
    assert int(eager[-1]["deferred_count"]) > 0, "no reset was deferred: the test would not exercise it"
    assert max(int((s["terminated"] | s["truncated"]).sum()) for s in eager) > 1  # rows ending together
    for t, (e, c) in enumerate(zip(eager, compiled, strict=True)):
        for name, want in e.items():
            got = c[name]
            close = torch.allclose(got, want, rtol=1e-4, atol=1e-4)
            same = close if want.is_floating_point() else torch.equal(got, want)
            assert same, f"step {t} {name}: compiled {got.tolist()} != eager {want.tolist()}"
