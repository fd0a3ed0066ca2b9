"""One rank of the agent-level data-parallel checks of ``tests/test_distributed.py``.

Run as ``python tests/distributed_worker.py OUT_DIR`` (or ``... learn OUT_DIR ENV_STEPS``,
``... finish OUT_DIR``, ``... finish-peer-dies OUT_DIR`` or ``... train-poisoned OUT_DIR
OVERRIDES...``) with torchrun's environment (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``); writes ``OUT_DIR/rank<r>.pt``. The test process
recomputes what a single process would do with the union of the ranks' data and compares. Every
mode leaves through :meth:`DataParallel.finish`, as the command-line tools do.

Every draw is a function of ``(rank, step)`` (:func:`batch`, :func:`scaler_step`,
:func:`sampler_rows`), so the test rebuilds each rank's data without talking to the workers.
"""

from __future__ import annotations

import atexit
import copy
import os
import sys
import time
from pathlib import Path

import torch

from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
from unilab_gpu.rl.distributed import DataParallel, launch_from_env

POLICY_DIM, CRITIC_DIM, ACT_DIM, BATCH = 3, 5, 2, 16
UPDATES = 3
SCALER_ENVS, SCALER_STEPS = 3, 5
SAMPLER_STEPS, SAMPLER_ROWS = 4, 6


def tiny_agent(algo: str, seed: int, **overrides):
    """A tiny agent of ``algo`` whose initial weights depend on ``seed``; ``overrides`` are algo keys."""
    torch.manual_seed(seed)
    values = {**TINY_CONFIGS[algo], "batch_size": BATCH, "learning_rate_decay_steps": 40, **overrides}
    cfg = algo_config(values, compile=False)
    dims = {"policy": POLICY_DIM, "critic": CRITIC_DIM}
    return make_agent(cfg, dims, ACT_DIM, SCALER_ENVS, "cpu")


def batch(rank: int, step: int, rows: int = BATCH) -> dict[str, torch.Tensor]:
    """Rank ``rank``'s update batch ``step`` (``rows`` transitions)."""
    g = torch.Generator().manual_seed(1000 * rank + step)

    def draw(*shape: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
        return shift + scale * torch.randn(*shape, generator=g)

    return {
        "policy_obs": draw(rows, POLICY_DIM, scale=2.0, shift=float(rank)),
        "critic_obs": draw(rows, CRITIC_DIM, shift=-float(rank)),
        "action": torch.rand(rows, ACT_DIM, generator=g) * 2 - 1,
        "reward": draw(rows),
        "next_policy_obs": draw(rows, POLICY_DIM, scale=2.0, shift=float(rank)),
        "next_critic_obs": draw(rows, CRITIC_DIM, shift=-float(rank)),
        "discount": torch.full((rows,), 0.99),
    }


def union_batch(step: int, world: int) -> dict[str, torch.Tensor]:
    """The concatenation of every rank's batch ``step``."""
    parts = [batch(rank, step) for rank in range(world)]
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


def repeated_noise(copies: int):
    """A ``torch.randn_like`` whose ``(copies * B, ...)`` draws are ``copies`` stacked copies of
    one seeded ``(B, ...)`` draw, the n-th call's seed being n: a rank's policy noise then equals
    its rows' noise in a single process that updates on the union of ``copies`` ranks' batches."""
    calls = [0]

    def randn_like(x: torch.Tensor, **kwargs) -> torch.Tensor:
        g = torch.Generator().manual_seed(calls[0])
        calls[0] += 1
        one = torch.randn((x.shape[0] // copies, *x.shape[1:]), generator=g, dtype=x.dtype)
        return one.repeat(copies, *([1] * (x.dim() - 1)))

    return randn_like


def scaler_step(rank: int, step: int, envs: int = SCALER_ENVS) -> tuple[torch.Tensor, ...]:
    """Reward, terminated and truncated ``(envs,)`` of rank ``rank``'s env step ``step``."""
    g = torch.Generator().manual_seed(500 + 100 * rank + step)
    reward = (rank + 1.0) * torch.randn(envs, generator=g) + rank
    done = torch.rand(envs, generator=g) < 0.3
    return reward, done, torch.zeros(envs, dtype=torch.bool)


def sampler_library():
    from unilab_gpu.motion.kinematics import RobotKinematics
    from unilab_gpu.motion.library import MotionLibrary
    from unilab_gpu.motion.synthetic import synthesize_clip

    kin = RobotKinematics.from_robot("g1")
    clips = [synthesize_clip(seconds=s, seed=i, kinematics=kin) for i, s in enumerate((3.0, 6.5))]
    return MotionLibrary(clips, body_names=["pelvis"])


def sampler_rows(rank: int, step: int) -> tuple[torch.Tensor, ...]:
    """Ended episodes of rank ``rank`` at env step ``step``: clip, frame, failed, valid ``(rows,)``."""
    g = torch.Generator().manual_seed(900 + 100 * rank + step)
    clip = torch.randint(0, 2, (SAMPLER_ROWS,), generator=g)
    frame = torch.randint(0, 150 if rank == 0 else 300, (SAMPLER_ROWS,), generator=g)
    failed = torch.rand(SAMPLER_ROWS, generator=g) < 0.7
    return clip, frame, failed, torch.ones(SAMPLER_ROWS, dtype=torch.bool)


class SamplerEnv:
    """The part of an env that :meth:`DataParallel.merge_learning_state_` uses, around a sampler."""

    def __init__(self, sampler) -> None:
        self.sampler = sampler

    def learning_state(self) -> dict[str, dict[str, torch.Tensor]]:
        return {"commands.motion": {f"sampler.{k}": v for k, v in self.sampler.state_dict().items()}}

    def load_learning_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        self.sampler.load_state_dict({k.removeprefix("sampler."): v for k, v in state["commands.motion"].items()})


def learn(out_dir: Path, fleet_env_steps: int, seed: int = 0) -> None:
    """Train SAC on the pendulum with ``tests/test_rl_learning.py``'s settings, 4 envs per rank
    (rank r seeded ``world_size * seed + r``), for ``fleet_env_steps`` over all ranks; rank 0 writes
    the evaluation score."""
    from test_rl_learning import ITERATIONS, PENDULUM, evaluation_env

    from unilab_gpu.envs.make_env import make_env
    from unilab_gpu.evaluation.rollout import agent_policy, evaluate
    from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
    from unilab_gpu.rl.trainer import TrainerSettings

    launch = launch_from_env()
    assert launch is not None, "run with RANK / WORLD_SIZE set"
    # Rank 1 waits in the final barrier while rank 0 evaluates: room for a loaded machine.
    dp = DataParallel.start(launch, torch.device("cpu"), timeout_s=240)
    try:
        seed = launch.world_size * seed + launch.rank
        torch.manual_seed(seed)
        env = make_env("pendulum", num_envs=4, compile=False, seed=seed, announce=False)
        iterations = fleet_env_steps // (env.num_envs * launch.world_size)
        # The random-action warm-up keeps its share of the single-process test's iterations.
        warmup = PENDULUM["sac"]["warmup_steps"] * iterations // ITERATIONS["sac"]
        values = {"name": "sac", "buffer_capacity_per_env": 2000, **PENDULUM["sac"], "warmup_steps": warmup}
        cfg = algo_config(values, compile=False)
        agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
        settings = TrainerSettings(iterations=iterations, log_every=100, seed=seed)
        trainer = OffPolicyTrainer(env, agent, settings, data_parallel=dp)
        trainer.train()
    except BaseException:
        dp.close()
        raise
    if launch.rank == 0:
        eval_env = evaluation_env()
        stats = evaluate(eval_env, agent_policy(agent), eval_env.max_episode_length)
        torch.save({"return": stats["episode/return"], "env_steps": trainer.env_steps}, out_dir / "learn.pt")
    dp.finish(0, "distributed_worker")


def main(out_dir: Path) -> None:
    from unilab_gpu.motion.sampler import AdaptiveStartSampler

    launch = launch_from_env()
    assert launch is not None, "run with RANK / WORLD_SIZE set"
    rank, world = launch.rank, launch.world_size
    result: dict[str, object] = {}
    dp = DataParallel.start(launch, torch.device("cpu"), timeout_s=60)
    try:
        # (a) SAC: identical replicas, equal to one process on the union batch.
        torch.randn_like = repeated_noise(1)
        sac = tiny_agent("sac", seed=10 + rank)  # different on every rank until the broadcast
        dp.attach(sac)
        if rank == 0:
            result["sac_initial"] = copy.deepcopy(sac.state_dict())  # state_dict() shares the storage
        for step in range(UPDATES):
            sac.update(batch(rank, step))
        result["sac"] = sac.state_dict()

        # FlashSAC: BatchNorm running statistics ride with the gradients, so replicas stay equal.
        flash = tiny_agent("flashsac", seed=20 + rank)
        flash_dp = DataParallel(rank, world, torch.device("cpu"))
        flash_dp.attach(flash)
        for step in range(UPDATES):
            flash.observe_step(*scaler_step(rank, step))
            flash.update(batch(rank, step))
        result["flashsac"] = flash.state_dict()

        # SAC with a support sized from the first batch: every rank takes the fleet's widest bound.
        sized = tiny_agent("sac", seed=40 + rank, value_range="reward_scale")
        sized_dp = DataParallel(rank, world, torch.device("cpu"))
        sized_dp.attach(sized)
        sized.update(batch(rank, 0))
        result["sized_support"] = sized.support.clone()

        # (b) reward scaler: two merges, each after SCALER_STEPS local env steps.
        scaler_agent = tiny_agent("flashsac", seed=30)
        scaler_dp = DataParallel(rank, world, torch.device("cpu"))
        scaler_dp.attach(scaler_agent)
        scaler = scaler_agent.reward_scaler
        merged = []
        for round_ in range(2):
            for step in range(SCALER_STEPS):
                scaler_agent.observe_step(*scaler_step(rank, round_ * SCALER_STEPS + step))
            scaler_dp.before_update()
            merged.append({k: getattr(scaler, k).clone() for k in ("count", "mean", "var", "abs_max")})
        result["scaler"] = merged

        # (b) adaptive sampler: failure statistics averaged at two logging points.
        sampler = AdaptiveStartSampler(sampler_library(), ema_rate=0.1)
        env = SamplerEnv(sampler)
        probabilities = []
        for round_ in range(2):
            for step in range(SAMPLER_STEPS):
                sampler.update(*sampler_rows(rank, round_ * SAMPLER_STEPS + step))
            dp.merge_learning_state_(env)
            probabilities.append(sampler.probabilities.clone())
        result["sampler"] = probabilities

        # Logging point: window sums and the per-rank flag table.
        sums = [torch.tensor([1.0 + rank, 2.0]), torch.tensor(10.0 * rank)]
        table = dp.reduce_window_(sums, torch.tensor([float(rank), 7.0]))
        result["window"] = {"sums": sums, "table": table}
    except BaseException:
        dp.close()
        raise
    torch.save(result, out_dir / f"rank{rank}.pt")
    dp.finish(0, "distributed_worker")


FINISH_STATUS = (0, 3)
"""The status each rank hands :meth:`DataParallel.finish` in the ``finish`` mode."""
PEER_DELAY_S = 2.0
"""How long rank 1 works on after the last collective before it finishes (``finish`` mode)."""


def finish(out_dir: Path, peer_dies: bool) -> None:
    """End both ranks through :meth:`DataParallel.finish` after one ``all_reduce``.

    Each rank's ``sys.stdout`` is a block-buffered file ``OUT_DIR/rank<r>.out`` (what finish must
    flush) and an ``atexit`` handler writes ``rank<r>.atexit`` with the time it ran. Rank 1 calls
    finish :data:`PEER_DELAY_S` later than rank 0 and writes the time just before; rank 0 must wait
    for it. With ``peer_dies`` rank 1 instead ends at once with status 7, never finishing.
    """
    launch = launch_from_env()
    assert launch is not None, "run with RANK / WORLD_SIZE set"
    rank = launch.rank
    dp = DataParallel.start(launch, torch.device("cpu"), timeout_s=60)
    dp.all_reduce_sum_(torch.ones(3))  # a collective whose tensor dies right after, as in training
    sys.stdout = open(out_dir / f"rank{rank}.out", "w", buffering=1 << 16)  # block-buffered: finish must flush it
    atexit.register(lambda: (out_dir / f"rank{rank}.atexit").write_text(repr(time.time())))
    if rank == 1:
        if peer_dies:
            os._exit(7)
        time.sleep(PEER_DELAY_S)
    print(f"rank {rank} finishes at {time.time()!r}")
    dp.finish(FINISH_STATUS[rank], "distributed_worker")
    (out_dir / f"rank{rank}.after").write_text("finish returned")


def train_poisoned(out_dir: Path, overrides: list[str]) -> int:
    """``unilab-train`` with ``overrides`` where rank 1's actor turns NaN after its second update
    (as a diverged update would); every call of :meth:`DataParallel.finish` first writes its status
    to ``OUT_DIR/rank<r>.finish``."""
    from unilab_gpu.cli.train import main as train_main
    from unilab_gpu.rl.off_policy import OffPolicyAgent

    launch = launch_from_env()
    assert launch is not None, "run with RANK / WORLD_SIZE set"
    real_update, real_finish = OffPolicyAgent.update, DataParallel.finish

    def update(self, batch):
        metrics = real_update(self, batch)
        if self.num_updates >= 2:
            with torch.no_grad():
                next(self.actor.parameters()).fill_(float("nan"))
        return metrics

    def finish(self, status: int, program: str):
        (out_dir / f"rank{self.rank}.finish").write_text(str(status))
        real_finish(self, status, program)

    if launch.rank == 1:
        OffPolicyAgent.update = update
    DataParallel.finish = finish
    return train_main(overrides)


if __name__ == "__main__":
    if sys.argv[1] == "learn":
        learn(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] in ("finish", "finish-peer-dies"):
        finish(Path(sys.argv[2]), peer_dies=sys.argv[1] == "finish-peer-dies")
    elif sys.argv[1] == "train-poisoned":
        sys.exit(train_poisoned(Path(sys.argv[2]), sys.argv[3:]))
    else:
        main(Path(sys.argv[1]))
