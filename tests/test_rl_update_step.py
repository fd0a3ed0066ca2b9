"""The training update as one device function (:class:`~unilab_gpu.rl.update_step.UpdateStep`):
compiled == eager over several updates from the same replay, seed and sampling generator
(metrics, networks, targets, temperature, optimizer state, schedule); capturable optimizers; a
checkpoint saved and resumed across the compiled path; bad settings named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from rl_agent_helpers import COMPILE_BACKEND, small_agent
from test_rl_trainer import agent_tensors

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
from unilab_gpu.rl.checkpoint import load_checkpoint, save_checkpoint
from unilab_gpu.rl.off_policy_trainer import UPDATE_METRICS, OffPolicyTrainer
from unilab_gpu.rl.replay import ReplayBuffer
from unilab_gpu.rl.trainer import TrainerSettings
from unilab_gpu.rl.update_step import UpdateStep
from unilab_gpu.utils.sync_audit import HostSyncError, no_host_sync

ALGOS = ["sac", "flashsac"]
NUM_ENVS = 4


def filled_replay(device: str | torch.device = "cpu") -> ReplayBuffer:
    """12 steps of random transitions (policy obs 5, critic obs 7, actions 2), some episode ends."""
    gen = torch.Generator().manual_seed(3)
    replay = ReplayBuffer(16, NUM_ENVS, 5, 7, 2, n_step=2, final_obs_fraction=0.5, device=device)
    for _ in range(12):
        policy, critic = torch.randn(NUM_ENVS, 5, generator=gen), torch.randn(NUM_ENVS, 7, generator=gen)
        ended = torch.rand(NUM_ENVS, generator=gen) < 0.2
        step = (
            policy,
            critic,
            torch.rand(NUM_ENVS, 2, generator=gen) * 2 - 1,
            torch.randn(NUM_ENVS, generator=gen),
            ended,
            torch.zeros(NUM_ENVS, dtype=torch.bool),
            torch.randn(NUM_ENVS, 5, generator=gen),
            torch.randn(NUM_ENVS, 7, generator=gen),
        )
        replay.add(*(t.to(replay.device) for t in step))
    return replay


def run_updates(algo: str, compiled: bool, updates: int = 5):
    """``updates`` updates through :class:`UpdateStep`; returns the agent and the metric sums."""
    torch.manual_seed(1)
    agent = small_agent(algo, num_envs=NUM_ENVS, compile=compiled, compile_backend=COMPILE_BACKEND)
    reward = torch.tensor([1.0, -0.5, 0.25, 2.0])
    no_end = torch.zeros(NUM_ENVS, dtype=torch.bool)
    agent.observe_step(reward, no_end, no_end)  # FlashSAC's reward scale moves off its start
    sums = torch.zeros(len(UPDATE_METRICS))
    step = UpdateStep(agent, filled_replay(), 16, torch.Generator().manual_seed(7), sums, UPDATE_METRICS)
    torch.manual_seed(2)
    for _ in range(updates):
        step()
    return agent, sums


@pytest.mark.parametrize("algo", ALGOS)
def test_compiled_update_step_equals_eager_update_step(algo):
    """Same seed, replay and sampling generator: the same metric sums and every tensor of the
    agent's state (networks, target critic, temperature, normalisers, optimizer moments and step
    counters, schedule) after 5 updates, 3 of them with an actor step."""
    eager, eager_sums = run_updates(algo, compiled=False)
    compiled, compiled_sums = run_updates(algo, compiled=True)
    assert eager.num_updates == compiled.num_updates == 5
    assert eager.optimizers["actor"].state_dict()["state"][0]["step"].item() == 3  # actor steps at 0, 2, 4
    torch.testing.assert_close(compiled_sums, eager_sums, rtol=1e-5, atol=1e-6)
    expected, got = agent_tensors_of(eager), agent_tensors_of(compiled)
    assert expected.keys() == got.keys() and any("target_critic" in key for key in expected)
    for key, value in expected.items():
        torch.testing.assert_close(got[key], value, rtol=1e-5, atol=1e-6, msg=key)


def agent_tensors_of(agent) -> dict[str, torch.Tensor]:
    return agent_tensors(SimpleNamespace(agent=agent))  # type: ignore[arg-type]  # reads ``.agent`` only


def test_update_step_sums_the_metrics_the_agent_returns():
    """The accumulator holds the sum of what ``agent.update`` returned, update by update."""
    torch.manual_seed(1)
    agent = small_agent("sac")
    replay, sums = filled_replay(), torch.zeros(len(UPDATE_METRICS))
    step = UpdateStep(agent, replay, 16, torch.Generator().manual_seed(7), sums, UPDATE_METRICS)
    returned = []
    update = agent.update
    agent.update = lambda batch: returned.append(update(batch)) or returned[-1]
    for _ in range(3):
        step()
    expected = torch.stack([torch.stack([m[key] for key in UPDATE_METRICS]) for m in returned]).sum(0)
    torch.testing.assert_close(sums, expected)
    assert torch.isfinite(sums).all() and sums[0] > 0  # cross-entropy losses are positive


@pytest.mark.parametrize("algo", ALGOS)
def test_optimizers_are_capturable_and_stay_so_after_loading(algo):
    agent = small_agent(algo)
    for opt in agent.optimizers.values():
        group = opt.param_groups[0]
        assert group["capturable"] and group["fused"] and group["lr"] is agent.schedule.lr
    run = UpdateStep(agent, filled_replay(), 16, torch.Generator().manual_seed(0), torch.zeros(5), UPDATE_METRICS)
    run()
    step_counter = agent.optimizers["critic"].state[next(agent.critic.parameters())]["step"]
    assert isinstance(step_counter, torch.Tensor) and step_counter.device == agent.device
    # A checkpoint written before the optimizers were capturable still loads as capturable.
    state = agent.state_dict()
    for saved in state["optimizers"].values():
        for group in saved["param_groups"]:
            group["capturable"] = False
    clone = small_agent(algo)
    clone.load_state_dict(state)
    assert all(opt.param_groups[0]["capturable"] for opt in clone.optimizers.values())


def test_capture_needs_a_cuda_device():
    agent = small_agent("sac")
    with pytest.raises(ValueError, match="algo.capture_update.*CUDA"):
        UpdateStep(agent, filled_replay(), 16, torch.Generator(), torch.zeros(5), UPDATE_METRICS, capture=True)


def test_capture_update_is_ignored_on_cpu_and_refused_in_a_data_parallel_run():
    env = make_env("pendulum", num_envs=NUM_ENVS, compile=False, seed=0)
    cfg = algo_config({**TINY_CONFIGS["sac"], "capture_update": True}, compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    trainer = OffPolicyTrainer(env, agent, TrainerSettings(iterations=1))
    assert trainer.update_step.capture is False  # CPU: the same update runs directly
    fleet = SimpleNamespace(world_size=2)
    with pytest.raises(ValueError, match="algo.capture_update.*data-parallel"):
        OffPolicyTrainer(env, agent, TrainerSettings(iterations=1), data_parallel=fleet)  # type: ignore[arg-type]


def compiled_trainer(iterations: int) -> OffPolicyTrainer:
    env = make_env("pendulum", num_envs=NUM_ENVS, compile=False, seed=0)
    values = {**TINY_CONFIGS["flashsac"], "warmup_steps": 2, "buffer_capacity_per_env": 32, "compile": True}
    cfg = algo_config(values, compile=True)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device, COMPILE_BACKEND)
    return OffPolicyTrainer(env, agent, TrainerSettings(iterations=iterations, log_every=100, seed=0))


def test_checkpoint_saved_and_resumed_across_the_compiled_update(tmp_path):
    """A compiled run saved after 6 iterations and resumed in a fresh compiled trainer holds the
    saved state exactly, and its next updates run and change it."""
    torch.manual_seed(0)
    first = compiled_trainer(6)
    first.train()
    save_checkpoint(tmp_path / "checkpoint.pt", {"trainer": first.state_dict()})
    torch.manual_seed(0)
    resumed = compiled_trainer(10)
    resumed.load_state_dict(load_checkpoint(tmp_path)["trainer"])
    saved, restored = agent_tensors(first), agent_tensors(resumed)
    for key, value in saved.items():
        assert torch.equal(restored[key], value), key
    assert resumed.agent.num_updates == first.agent.num_updates == 2 * (6 - 2 + 1)
    resumed.train()
    # The resumed run refills replay for 2 iterations, then updates on each of the other 2.
    assert resumed.iteration == 10 and resumed.agent.num_updates == 2 * (6 - 2 + 1) + 2 * (4 - 2 + 1)
    assert resumed.agent.schedule.num_steps.item() == resumed.agent.num_updates
    after = agent_tensors(resumed)
    assert any(not torch.equal(after[key], saved[key]) for key in saved if "actor" in key)
    assert all(torch.isfinite(value).all() for value in after.values() if value.is_floating_point())


@pytest.mark.parametrize("algo", ALGOS)
def test_update_step_does_no_host_sync_and_the_audit_sees_into_it(algo):
    """What a CUDA graph records passes the host-sync audit; a host read slipped into the
    agent's update is caught there (so the doctor's loop audit covers the update step)."""
    agent = small_agent(algo, num_envs=NUM_ENVS, max_grad_norm=1.0)  # clipping audited too
    step = UpdateStep(agent, filled_replay(), 16, torch.Generator().manual_seed(0), torch.zeros(5), UPDATE_METRICS)
    with no_host_sync():
        for _ in range(2):  # with and without the actor step
            step()
    body = agent.update_body
    agent.update_body = lambda batch, actor_step: (batch["reward"].sum().item(), body(batch, actor_step))[1]
    with pytest.raises(HostSyncError, match="item"), no_host_sync():
        step()


def test_loading_the_trainers_state_captures_the_update_again():
    """The loaded optimizer state lives in new tensors that graphs recorded before would not see:
    the trainer forgets its update graphs and warm-up runs, and the next updates capture anew."""
    env = make_env("pendulum", num_envs=NUM_ENVS, compile=False, seed=0)
    cfg = algo_config(TINY_CONFIGS["sac"], compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    trainer = OffPolicyTrainer(env, agent, TrainerSettings(iterations=1))
    state = trainer.state_dict()
    trainer.update_step.graphs[True] = object()  # as if both phases had been captured on CUDA
    trainer.update_step.warm_runs.update({True: 2, False: 2})
    trainer.load_state_dict(state)
    assert trainer.update_step.graphs == {} and trainer.update_step.warm_runs == {True: 0, False: 0}
