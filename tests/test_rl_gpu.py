"""The RL path on CUDA (marker ``gpu``): Inductor-compiled updates, captured updates, fused AdamW
with a CUDA learning-rate tensor, and a CUDA generator through a checkpoint round trip."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch._inductor.config
from rl_agent_helpers import synthetic_batch
from test_rl_trainer import TINY, agent_tensors
from test_rl_update_step import filled_replay

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.checkpoint import load_checkpoint, save_checkpoint
from unilab_gpu.rl.off_policy_trainer import UPDATE_METRICS, OffPolicyTrainer
from unilab_gpu.rl.trainer import TrainerSettings
from unilab_gpu.rl.update_step import UpdateStep, UpdateWarmUpError

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)"),
]


def _agent(algo: str, compile: bool, seed: int = 0):
    torch.manual_seed(seed)
    cfg = algo_config(TINY[algo], compile=compile)
    return make_agent(cfg, {"policy": 5, "critic": 7}, 2, 4, torch.device("cuda", torch.cuda.current_device()))


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_inductor_compiled_updates_match_eager_updates_on_cuda(algo: str) -> None:
    """Same start, same random numbers (each update pair from one seed; Inductor's
    ``fallback_random`` draws them as eager code does): the same losses and parameters."""
    batch = {k: v.cuda() for k, v in synthetic_batch(16, 5, 7, 2).items()}
    compiled, eager = _agent(algo, compile=True), _agent(algo, compile=False)
    with torch._inductor.config.patch(fallback_random=True):  # compiled at the first update
        for step in range(3):
            torch.manual_seed(10 + step)
            got = compiled.update(batch)
            torch.manual_seed(10 + step)
            expected = eager.update(batch)
            for key in ("critic_loss", "actor_loss"):
                assert got[key].device.type == "cuda" and torch.isfinite(got[key])
                torch.testing.assert_close(got[key], expected[key], rtol=1e-3, atol=1e-4, msg=f"{key}, update {step}")
    for a, b in zip(compiled.actor.parameters(), eager.actor.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_each_phase_runs_twice_on_a_side_stream_before_its_capture() -> None:
    """Two real updates of each actor phase (nothing left to compile or allocate), then the
    recording (which runs nothing) and its replay: six updates, four run outside a capture."""
    device = torch.device("cuda", torch.cuda.current_device())
    agent = _agent("sac", compile=False)
    body, capturing = agent.update_body, []

    def recorded(batch, actor_step):
        capturing.append(torch.cuda.is_current_stream_capturing())
        return body(batch, actor_step)

    agent.update_body = recorded
    sums = torch.zeros(len(UPDATE_METRICS), device=device)
    step = UpdateStep(
        agent, filled_replay(device), 16, torch.Generator(device).manual_seed(7), sums, UPDATE_METRICS, True
    )
    for _ in range(6):
        step()
    assert capturing == [False] * 4 + [True] * 2 and agent.num_updates == 6 and set(step.graphs) == {True, False}
    assert step.mode == "captured"


def test_a_failed_warm_up_is_reported_as_such_and_not_counted() -> None:
    agent = _agent("sac", compile=False)

    def out_of_memory(batch, actor_step):
        raise torch.OutOfMemoryError("CUDA out of memory (test)")

    agent.update_body = out_of_memory
    device = agent.device
    sums = torch.zeros(len(UPDATE_METRICS), device=device)
    step = UpdateStep(
        agent, filled_replay(device), 16, torch.Generator(device).manual_seed(7), sums, UPDATE_METRICS, True
    )
    with pytest.raises(UpdateWarmUpError, match=r"warm-up run 1 of 2 failed \(OutOfMemoryError: CUDA out of memory"):
        step()
    assert agent.num_updates == 0 and step.graphs == {} and step.capture is True


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_captured_updates_equal_eager_updates_on_cuda(algo: str, compile: bool) -> None:
    """Six updates through :class:`UpdateStep` from the same start, replay, sampling generator and
    default-generator seed: captured (two graphs, one per actor phase, then replays) == uncaptured,
    in the metric sums and in every tensor of the agent's state."""
    device = torch.device("cuda", torch.cuda.current_device())
    results = []
    with torch._inductor.config.patch(fallback_random=True):
        for capture in (False, True):
            agent = _agent(algo, compile=compile)
            sums = torch.zeros(len(UPDATE_METRICS), device=device)
            generator = torch.Generator(device).manual_seed(7)
            step = UpdateStep(agent, filled_replay(device), 16, generator, sums, UPDATE_METRICS, capture=capture)
            torch.manual_seed(2)
            for _ in range(6):
                step()
            torch.cuda.synchronize(device)
            assert len(step.graphs) == (2 if capture else 0) and agent.num_updates == 6
            results.append((sums.cpu(), {k: v.cpu() for k, v in agent_tensors(SimpleNamespace(agent=agent)).items()}))
    (eager_sums, eager_state), (captured_sums, captured_state) = results
    assert torch.isfinite(captured_sums).all()
    torch.testing.assert_close(captured_sums, eager_sums, rtol=1e-4, atol=1e-5)
    for key, value in eager_state.items():
        torch.testing.assert_close(captured_state[key], value, rtol=1e-4, atol=1e-5, msg=key)


def test_fused_adamw_follows_a_cuda_learning_rate_tensor() -> None:
    agent = _agent("sac", compile=False)
    lr = agent.schedule.lr
    assert lr.device.type == "cuda"
    optimizer = agent.optimizers["critic"]
    assert optimizer.param_groups[0]["lr"] is lr and optimizer.defaults["fused"]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    batch = {k: v.cuda() for k, v in synthetic_batch(16, 5, 7, 2).items()}
    before = [p.detach().clone() for p in params]
    lr.fill_(0.0)  # a zero learning rate read from the tensor: no parameter moves
    agent.update(batch)
    assert all(torch.equal(a, p) for a, p in zip(before, params, strict=True))
    lr.fill_(1e-3)
    agent.update(batch)
    assert any(not torch.equal(a, p) for a, p in zip(before, params, strict=True))


def test_a_cuda_generator_survives_a_checkpoint(tmp_path) -> None:
    def trainer(seed: int) -> OffPolicyTrainer:
        env = make_env("pendulum", num_envs=4, device="cuda", compile=False, seed=seed)
        values = {**TINY["flashsac"], "warmup_steps": 2, "updates_per_step": 1, "buffer_capacity_per_env": 16}
        cfg = algo_config(values, compile=False)
        agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
        settings = TrainerSettings(iterations=6, seed=seed)
        return OffPolicyTrainer(env, agent, settings)

    first = trainer(0)
    first.train()
    save_checkpoint(tmp_path / "checkpoint.pt", {"trainer": first.state_dict()})
    resumed = trainer(1)
    resumed.load_state_dict(load_checkpoint(tmp_path)["trainer"])
    assert resumed.generator.device.type == "cuda"
    assert torch.equal(resumed.generator.get_state(), first.generator.get_state())
    draws = [torch.rand(8, device="cuda", generator=t.generator) for t in (first, resumed)]
    assert torch.equal(*draws)
