"""Trainer loop: warm-up, update cadence, logged values, sync-free iterations, checkpoints, resume."""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
from unilab_gpu.rl.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.rl.trainer import TrainerSettings
from unilab_gpu.utils.sync_audit import no_host_sync

NUM_ENVS = 4
TINY = TINY_CONFIGS


class RecordingLogger:
    def __init__(self) -> None:
        self.points: list[tuple[int, int, dict[str, float]]] = []

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        self.points.append((iteration, env_steps, scalars))


def make_trainer(algo="flashsac", iterations=12, warmup=4, log_every=100, seed=0, **algo_overrides):
    env = make_env("pendulum", num_envs=NUM_ENVS, compile=False, seed=seed)
    values = {**TINY[algo], "warmup_steps": warmup, "buffer_capacity_per_env": 32, **algo_overrides}
    cfg = algo_config(values, compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    settings = TrainerSettings(iterations=iterations, log_every=log_every, seed=seed)
    logger = RecordingLogger()
    return OffPolicyTrainer(env, agent, settings, logger), logger  # type: ignore[arg-type]


def agent_tensors(trainer: OffPolicyTrainer) -> dict[str, torch.Tensor]:
    """Every tensor of the agent state (modules and optimizers), flattened by path."""
    out: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, torch.Tensor):
            out[prefix] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}/{key}", item)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(f"{prefix}/{i}", item)

    walk("", trainer.agent.state_dict())
    return out


def test_warmup_acts_randomly_then_updates_every_iteration():
    trainer, _ = make_trainer(iterations=10, warmup=4, updates_per_step=2)
    calls = []
    act = trainer.agent.act
    trainer.agent.act = lambda obs, deterministic=False: calls.append(1) or act(obs, deterministic)
    trainer.train()
    # Updates start on the iteration whose replay write makes warmup_steps steps: 4th, ..., 10th.
    assert trainer.agent.num_updates == 2 * (10 - 4 + 1)
    assert len(calls) == 10 - 4  # the agent acts only after the warm-up
    actions = trainer.replay.action[:4]
    assert actions.abs().max() <= 1.0 and actions.std() > 0.3  # uniform on [-1, 1]: std 0.577
    # FlashSAC's reward scaler saw every env step of every iteration.
    assert trainer.agent.reward_scaler.count.item() == 10 * NUM_ENVS


def test_logged_values_match_an_independent_account():
    trainer, logger = make_trainer(iterations=8, warmup=2, log_every=4, updates_per_step=1)
    metrics = []
    update = trainer.agent.update
    trainer.agent.update = lambda batch: metrics.append(update(batch)) or metrics[-1]
    trainer.train()
    assert [(i, s) for i, s, _ in logger.points] == [(4, 4 * NUM_ENVS), (8, 8 * NUM_ENVS)]
    scalars = logger.points[1][2]
    # Per-step rewards of iterations 4..7, as written to replay.
    torch.testing.assert_close(
        scalars["train/reward_mean"], trainer.replay.reward[4:8].mean().item(), rtol=1e-5, atol=0
    )
    critic = torch.stack([m["critic_loss"] for m in metrics[-4:]]).mean().item()
    torch.testing.assert_close(scalars["loss/critic"], critic, rtol=1e-5, atol=0)
    assert scalars["policy/temperature"] == pytest.approx(
        torch.stack([m["alpha"] for m in metrics[-4:]]).mean().item(), rel=1e-5
    )
    assert scalars["train/learning_rate"] == pytest.approx(trainer.agent.schedule.lr.item())
    assert scalars["perf/env_steps_per_s"] > 0
    assert {"perf/act_ms", "perf/env_ms", "perf/replay_ms", "perf/update_ms"} <= set(scalars)
    assert "episode/return" not in scalars  # no episode ended in 8 steps (episodes last 200)


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_iterations_after_warmup_do_no_host_sync(algo):
    trainer, _ = make_trainer(algo, iterations=6, warmup=2, log_every=1000)
    trainer.train()  # warm-up and first updates outside the audit
    trainer.settings.iterations = 9
    with no_host_sync():
        for _ in range(3):
            trainer.run_iteration()
    assert trainer.agent.num_updates == trainer.algo.updates_per_step * (9 - 2 + 1)


def test_checkpoint_round_trip_restores_networks_optimizers_and_counter(tmp_path):
    trainer, _ = make_trainer(iterations=8, warmup=2)
    trainer.train()
    path = save_checkpoint(tmp_path / "checkpoint.pt", {"trainer": trainer.state_dict()})
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temp file left behind

    fresh, _ = make_trainer(iterations=8, warmup=2, seed=1)
    before = {key: value.clone() for key, value in agent_tensors(fresh).items()}  # loading copies in place
    fresh.load_state_dict(load_checkpoint(path)["trainer"])
    saved, restored = agent_tensors(trainer), agent_tensors(fresh)
    assert saved.keys() == restored.keys() and any("optimizers" in k for k in saved)
    assert any(not torch.equal(before[k], saved[k]) for k in before)  # the check can fail
    for key in saved:
        assert torch.equal(saved[key], restored[key]), key
    assert fresh.iteration == 8 and fresh.env_steps == 8 * NUM_ENVS
    assert fresh.agent.num_updates == trainer.agent.num_updates
    assert torch.equal(fresh.generator.get_state(), trainer.generator.get_state())


def test_a_state_from_another_device_type_loads_and_reseeds_sampling():
    trainer, _ = make_trainer(iterations=8, warmup=2)
    trainer.train()
    state = trainer.state_dict()
    # A CUDA generator's state is Philox seed + offset, 16 bytes; a CPU one is 5056 bytes.
    state["generator"] = torch.zeros(16, dtype=torch.uint8)
    fresh, _ = make_trainer(iterations=8, warmup=2, seed=1)
    fresh.load_state_dict(state)  # used to raise "RNG state is wrong size"
    for key, value in agent_tensors(trainer).items():
        assert torch.equal(agent_tensors(fresh)[key], value), key
    expected = torch.Generator().manual_seed(fresh.settings.seed + 8).get_state()
    assert fresh.iteration == 8 and torch.equal(fresh.generator.get_state(), expected)


def test_resume_continues_step_counter_and_learning_rate_schedule(tmp_path):
    straight, _ = make_trainer(iterations=16, warmup=2)
    straight.train()

    first, _ = make_trainer(iterations=8, warmup=2)
    first.train()
    save_checkpoint(tmp_path / "checkpoint.pt", {"trainer": first.state_dict()})
    resumed, _ = make_trainer(iterations=16, warmup=2)
    resumed.load_state_dict(load_checkpoint(tmp_path)["trainer"])
    resumed.train()

    assert resumed.iteration == 16
    # The resumed run refills replay for warmup_steps iterations (no update in the first one),
    # so it makes one update fewer than the straight run: 2 * (7 + 8) against 2 * 15.
    assert resumed.agent.num_updates == 2 * (8 - 2 + 1) + 2 * (8 - 2 + 1)
    assert straight.agent.num_updates == 2 * (16 - 2 + 1)
    steps = resumed.agent.schedule.num_steps.item()
    assert steps == resumed.agent.num_updates
    # Cosine schedule value after `steps` updates, from its formula (decay over 40 updates).
    import math

    expected = 1.5e-4 + 0.5 * (3e-4 - 1.5e-4) * (1 + math.cos(math.pi * min(steps / 40, 1.0)))
    assert resumed.agent.schedule.lr.item() == pytest.approx(expected, rel=1e-6)
    assert resumed.agent.optimizers["critic"].param_groups[0]["lr"] is resumed.agent.schedule.lr


def test_corrupt_or_foreign_checkpoint_gives_an_error_naming_the_file(tmp_path):
    trainer, _ = make_trainer(iterations=3, warmup=2)
    trainer.train()
    good = save_checkpoint(tmp_path / "good.pt", {"trainer": trainer.state_dict()})
    data = good.read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    for path in (truncated, garbage, foreign, tmp_path / "missing.pt"):
        with pytest.raises(CheckpointError, match=path.name):
            load_checkpoint(path)


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "checkpoint.pt", {"value": torch.tensor(1.0)})

    def failing_save(obj, file):
        file.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"value": torch.tensor(2.0)})
    monkeypatch.undo()
    assert load_checkpoint(path)["value"].item() == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_an_env_without_final_observations_is_refused():
    """Time-outs bootstrap from the true last observation, which ``final_obs: false`` does not compute."""
    env = make_env("pendulum", num_envs=NUM_ENVS, compile=False, overrides=["final_obs=false"])
    cfg = algo_config(TINY["sac"], compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    with pytest.raises(ValueError, match=r"final observations \(final_obs: true\)"):
        OffPolicyTrainer(env, agent, TrainerSettings(iterations=1))
