"""The env's construction phases: they run in the documented order, each leaves what the next
reads, and every buffer the step touches exists once they end and keeps its address through
reset and steps (the precondition of capturing the step as one CUDA graph)."""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.envs.manager_based_rl_env import CONSTRUCTION_PHASES, ManagerBasedRlEnv

TERRAIN_TASK = ("go2_velocity_rough", ["events.push=null"])
"""A task with every construction step: robot config, generated terrain and its curriculum."""

LEFT_BY_PHASE = {
    "_build_sim_and_scene": {"sim", "robot", "device", "terrain_grid", "model_edit", "step_dt", "max_episode_length"},
    "_allocate_row_state": {"episode_length", "_compactor", "reset_staging", "terrain", "state_valid", "stats"},
    "_build_managers": {
        "command_manager",
        "action_manager",
        "termination_manager",
        "reward_manager",
        "event_manager",
        "observation_manager",
    },
    "_allocate_step_buffers": {"_action_in", "_non_finite", "_diverged", "_all_rows", "transition_valid", "result"},
    "_prepare_compile_and_capture": {"compiled", "_step", "_graph", "capture_mode"},
}
"""What each phase sets on the env (a later phase reads it)."""


class PhaseRecordingEnv(ManagerBasedRlEnv):
    """The env, built as usual, noting after each construction phase which attributes exist."""

    def __init__(self, *args, **kwargs) -> None:
        self.phases_run: list[tuple[str, set[str]]] = []
        super().__init__(*args, **kwargs)


def _recording(phase: str):
    def run(self, *args, **kwargs):
        getattr(ManagerBasedRlEnv, phase)(self, *args, **kwargs)
        self.phases_run.append((phase, set(vars(self))))

    return run


for _phase in CONSTRUCTION_PHASES:
    setattr(PhaseRecordingEnv, _phase, _recording(_phase))


def test_phases_run_in_the_documented_order_each_leaving_what_the_next_reads() -> None:
    task, overrides = TERRAIN_TASK
    env = PhaseRecordingEnv(load_task_cfg(task, overrides), 4, compile=False, announce=False, name=task)
    assert [phase for phase, _ in env.phases_run] == list(CONSTRUCTION_PHASES) == list(LEFT_BY_PHASE)
    present: set[str] = set()
    for phase, attributes in env.phases_run:
        new = attributes - present
        assert LEFT_BY_PHASE[phase] <= new, f"{phase} left {sorted(LEFT_BY_PHASE[phase] - new)} unset"
        for later in CONSTRUCTION_PHASES[CONSTRUCTION_PHASES.index(phase) + 1 :]:
            assert not LEFT_BY_PHASE[later] & new, f"{phase} set what {later} should: {LEFT_BY_PHASE[later] & new}"
        present = attributes
    assert env.terrain is not None and env.terrain.curriculum is not None  # the managers' phase bound it
    obs = env.reset()
    assert set(obs) == set(env.observation_dims)


@pytest.mark.parametrize("task, overrides", [("pendulum", []), TERRAIN_TASK])
def test_every_buffer_exists_after_construction_and_keeps_its_address(task: str, overrides: list[str]) -> None:
    # 0.2 s episodes (10 steps at 50 Hz) end inside the 20 steps below: the step's resets run too.
    overrides = [*overrides, "episode_length_s=0.2"]
    env = make_env(task, num_envs=6, overrides=overrides, compile=False, announce=False)
    built = {name: t.data_ptr() for name, t in env.persistent_buffers().items()}
    env.reset()
    actions = torch.zeros(env.num_envs, env.action_dim)
    for _ in range(20):
        env.step(actions)
    assert float(env.stats.episodes) > 0
    env.reset()
    assert {name: t.data_ptr() for name, t in env.persistent_buffers().items()} == built
