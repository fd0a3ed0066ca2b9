"""SAC and FlashSAC learn the pendulum swing-up on CPU (the end-to-end learning check).

Score: mean return of one full 200-step episode in each of 32 evaluation envs (random start
angle and velocity), deterministic actions. Per-step reward is Gymnasium Pendulum-v1's
``-(theta^2 + 0.1 thetadot^2 + 0.001 u^2)``, so 0 is the best possible return; a policy that
swings up and balances scores about -150 to -250 from random starts.

Random policy (uniform actions in [-1, 1]) on the same evaluation: -1181 (measured,
``test_random_policy_score``).

Both agents must *solve* it: return > -400, above any policy that leaves the pendulum hanging
or spinning (about -1000 and worse) and reachable only by swinging up from most starts. Every
run seeds the global generator, the env and the trainer with its seed.

The threshold holds for the seed and the thread count (issue 61): every score of the committed
spread (tests/data/learning_spread.json, ``python tests/learning_spread.py``: each test's own
settings, seeds 0-2 at 1 and 2 torch threads, each run in a fresh interpreter) clears it by at
least ``MARGIN`` (50), which ``test_every_learning_threshold_clears_its_measured_spread_by_the_margin``
asserts. Seeds 0 / 1 / 2, 1 thread | 2 threads:

- SAC, 12,000 env steps (1,500 iterations of 8 envs, the first 500 with uniform random actions),
  2,002 updates of batch 128, 1-2 minutes: -336 / -283 / -284 | -328 / -279 / -277.
- FlashSAC, 12,000 env steps, about 5,900 updates of batch 512, 4-5 minutes on a loaded core:
  -273 / -274 / -271 | -277 / -268 / -283. The same FlashSAC through the compiled
  update (``test_flashsac_swings_the_pendulum_up_through_the_compiled_update``): -273 / -274 / -271
  | -277 / -268 / -283, the eager rows to the unit.

What it took: SAC with the preset's 10 warm-up iterations scored -312 / -424 / -637 at 1 thread
(-776 for seed 2 with 20,000 env steps: budget alone did not swing seed 2 up); 250 warm-up
iterations -353 / -330 / -318, 500 the row above (clipped double-Q instead: seed 2 -707).
FlashSAC with 1,000 iterations scored -278 / -276 / -288 at 1 thread but -505 for seed 0 at 2
(the issue's measurement; with 250 warm-up iterations -422 / -521 / -337 at 2 threads): the
matmul's reduction order moves a run that has not converged yet by 200, and 1,500 iterations
converge at both thread counts.

FlashSAC runs as its authors do (actor heads outside the norm projection and near zero at
start, log-std in [-5, 0], fixed-norm BatchNorm/RMSNorm parameters). What this small budget
needs is the regime of the paper: BatchNorm statistics from large batches (the paper uses 2048)
and a replay ratio nearer the authors' single-env setting of one update per transition (here
4 updates per 8-env step, 0.5). With the earlier batch 128 and 2 updates per step it stalled
near -650 (-639 after 12,000 env steps); batch 512 with 2 updates per step solved 2 of 3 seeds
(-270, -647, -405 after 8,000 env steps; critic width 64: -685, -306, -338 after 12,000). The
critic is 64 wide (the actor 32) so that 4 updates of 512 per step fit in the time; an update
of the 128-wide critic costs 2.5 times as much. (These comparisons and the momentum one below
ran the same settings with a different global random stream, not this file's seeds.)

BatchNorm running statistics use ``batch_norm_momentum=0.1``: with the paper's 0.01 (a memory of
~100 updates) the running statistics that the acting policy and the actor loss's critic use lag
weights trained at lr 3e-3 (seeds 0-2: -250, -252, -399, one at the threshold). It keeps the
paper's held exploration noise (holds of up to 16 steps), which the swing-up needs (redrawing
the noise every step reached only -750 with seed 1 in an earlier version).

The G1 defaults of configs/algo/*.yaml are sized for 4096 envs on a GPU; the overrides below
shrink networks and batches to what two CPU cores update in a minute or two. Compilation is
off (Inductor's CPU codegen alone would take minutes).
"""

from __future__ import annotations

import json
import math
import time

import pytest
import torch
from learning_spread import MARGIN, RUNS, SPREAD_FILE, fingerprint, settings, threshold
from rl_agent_helpers import COMPILE_BACKEND

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.evaluation.rollout import agent_policy, evaluate, uniform_random_policy
from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.rl.trainer import TrainerSettings

RANDOM_RETURN = -1181.0
THRESHOLD = {"sac": -400.0, "flashsac": -400.0}
NUM_ENVS = 8

PENDULUM = {
    "sac": dict(
        actor_hidden_dims=[64, 64],
        critic_hidden_dims=[128, 128],
        batch_size=128,
        updates_per_step=2,
        learning_rate=1e-3,
        learning_rate_end=1e-3,
        alpha_init=0.1,
        # 500 iterations (4,000 transitions) of uniform random actions before the first update:
        # with the preset's 10, seeds 0-2 reached -312 / -424 / -637 (tests/data/learning_spread.json's
        # history in the module docstring); the swing-up needs the replay to hold swings first.
        warmup_steps=500,
        # A 12k-step budget needs an actor step per critic step and a fast target: with the G1
        # preset's actor_update_period=2 and tau=0.05 (holosoma's) it reaches only -650 here.
        actor_update_period=1,
        tau=0.1,
        v_min=-1000.0,  # returns are not scaled in SAC: the support spans the pendulum's
        v_max=10.0,  # discounted returns (per-step cost <= 16.3, horizon ~100 steps)
    ),
    "flashsac": dict(
        actor_hidden_dim=32,
        critic_hidden_dim=64,
        actor_num_blocks=1,
        critic_num_blocks=1,
        batch_size=512,  # BatchNorm statistics need large batches (paper: 2048)
        updates_per_step=4,  # replay ratio 0.5 (authors' single-env default: 1)
        n_step=3,
        learning_rate=3e-3,
        learning_rate_end=3e-3,
        tau=0.1,
        actor_update_period=1,
        num_atoms=51,
        alpha_init=0.001,  # returns are scaled to about [-3, 0]: a larger alpha drowns the reward
        batch_norm_momentum=0.1,  # running statistics must keep up with 3e-3 steps (see above)
    ),
}
ITERATIONS = {"sac": 1500, "flashsac": 1500}


def evaluation_env():
    return make_env(
        "pendulum", num_envs=32, compile=False, seed=123, overrides=["randomize_initial_episode_length=false"]
    )


def train(algo: str, seed: int = 0, compile: bool = False) -> tuple[OffPolicyTrainer, float]:
    # Seed the global generator too: it initialises the networks and draws the policy noise, so
    # without it the result would depend on which tests ran before in the same process.
    torch.manual_seed(seed)
    env = make_env("pendulum", num_envs=NUM_ENVS, compile=False, seed=seed)
    values = {"name": algo, "buffer_capacity_per_env": 2000, **PENDULUM[algo]}
    cfg = algo_config({**values, "compile": compile}, compile=compile)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device, COMPILE_BACKEND)
    settings = TrainerSettings(iterations=ITERATIONS[algo], log_every=100, seed=seed)
    trainer = OffPolicyTrainer(env, agent, settings)
    start = time.perf_counter()
    trainer.train()
    return trainer, time.perf_counter() - start


def train_and_score(algo: str, seed: int = 0, compile: bool = False) -> float:
    """The learning test's score of ``algo`` trained with ``seed``: the mean evaluation return."""
    trainer, seconds = train(algo, seed, compile)
    assert trainer.agent.cfg.compile is compile
    env = evaluation_env()
    stats = evaluate(env, agent_policy(trainer.agent), env.max_episode_length)
    assert stats["episode/count"] == 32
    print(f"{algo}: {trainer.env_steps} env steps, {trainer.agent.num_updates} updates, {seconds:.0f} s")
    return stats["episode/return"]


def test_the_committed_spread_was_measured_with_the_tests_settings():
    """tests/data/learning_spread.json describes the learning tests as they are: each measured
    run's fingerprint is that of its test's current settings (change a setting, re-measure with
    ``python tests/learning_spread.py --runs RUN``), and every row names a seed, a thread count
    and a finite score."""
    spread = json.loads(SPREAD_FILE.read_text())
    assert spread["runs"] and set(spread["runs"]) <= set(RUNS)
    for run, entry in spread["runs"].items():
        assert entry["fingerprint"] == fingerprint(run), (
            f"the {run} learning test's settings changed since they were measured: "
            f"python tests/learning_spread.py --runs {run}"
        )
        assert entry["settings"] == json.loads(json.dumps(settings(run)))
        for row in entry["scores"]:
            assert row["threads"] in (1, 2) and row["seed"] >= 0 and math.isfinite(row["score"])


def test_every_learning_threshold_clears_its_measured_spread_by_the_margin():
    """Each learning test's threshold sits at least ``MARGIN`` below every score its settings
    reached over seeds 0-2 at 1 and 2 torch threads (tests/data/learning_spread.json), so neither
    the seed nor the matmul's reduction order decides whether it passes."""
    spread = json.loads(SPREAD_FILE.read_text())
    grid = {(seed, threads) for seed in (0, 1, 2) for threads in (1, 2)}
    for run in RUNS:
        rows = spread["runs"][run]["scores"]
        missing = grid - {(row["seed"], row["threads"]) for row in rows}
        assert not missing, (
            f"{run}: (seed, threads) {sorted(missing)} not measured: python tests/learning_spread.py --runs {run}"
        )
        worst = min(rows, key=lambda row: row["score"])
        assert worst["score"] - threshold(run) >= MARGIN, (
            f"{run}: seed {worst['seed']} at {worst['threads']} threads scored {worst['score']}, "
            f"within {MARGIN} of the threshold {threshold(run)}"
        )


def test_random_policy_score():
    env = evaluation_env()
    stats = evaluate(env, uniform_random_policy(env, torch.Generator().manual_seed(0)), env.max_episode_length)
    assert stats["episode/count"] == 32
    assert stats["episode/return"] == pytest.approx(RANDOM_RETURN, abs=30.0)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_agent_swings_the_pendulum_up(algo):
    score = train_and_score(algo)
    need = THRESHOLD[algo]
    assert score > need, f"{algo} scored {score:.0f} (random {RANDOM_RETURN:.0f}, need {need:.0f})"


@pytest.mark.slow
def test_flashsac_swings_the_pendulum_up_through_the_compiled_update():
    """The main job's algorithm learns with every update piece under ``torch.compile`` (Dynamo
    whole-graph capture with the tests' backend, ``UNILAB_TEST_COMPILE_BACKEND``)."""
    score = train_and_score("flashsac", compile=True)
    need = THRESHOLD["flashsac"]
    assert score > need, f"compiled flashsac scored {score:.0f} (random {RANDOM_RETURN:.0f}, need {need:.0f})"
