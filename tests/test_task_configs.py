"""Task configs resolve to what they resolved to before robots were split from tasks (issue 31).

``tests/data/task_configs/<task>.yaml`` holds each task's resolved config as the env saw it at
commit 36caf7a, when every G1 task still wrote the G1's names itself. The G1 tasks are now a
robot-agnostic base task plus ``configs/robot/g1.yaml``; they must resolve to the same config,
key for key and in the same order (the order of terms is the order of the observation layout).
The only key they gain is ``robot``, the robot config itself. When actions became terms (issue 35)
the snapshots' ``actions`` sections alone were rewritten mechanically into the term form
(``kind`` -> ``func``; ``actuator_names`` and every other non-default key -> ``params``; ``clip``
kept), every other key untouched. When the tracking command took motion sets (issue 33) the
tracking snapshots gained its one new parameter, ``motion_weights: null`` (every clip weight 1,
the old behaviour), and later ``motion_order: auto`` (unnamed columns detected, the old behaviour).
When tasks could stand on a generated terrain (issue 32) every config gained
``terrain``, which these flat-ground tasks leave ``None`` (the scene's own floor, as before). When
robots came to own their physics options (issue 47) every config gained ``control_dt``, the period
``decimation x timestep`` is checked against: 0.02 s (4 x 5 ms, as before) for the robot tasks,
``None`` (unchecked) for the pendulum. When the tracking command gained its start and failure levers
(issue 48) the tracking snapshots gained ``first_frame_share: 0.2`` (a fifth of episodes start at
frame 0: the one default that changed, for the full-clip success it measured),
``blend_in_seconds: 0.0`` with ``blend_in_keyframe: stand`` (no blend, as before) and
``termination_curriculum: null`` (the thresholds as written, as before). When the command path could
simulate a robot's latency and target bias (issue 58) every snapshot's ``actions`` gained
``delay_steps: null`` and ``target_bias: null`` (neither, as before). When the configs took the short
``func`` spelling of the project's terms (``mdp.rewards.alive``, issue 59) the snapshots stayed as
they were: a config's ``func`` is stored in full, as the env resolves it.

A meant change rewrites the snapshots it touches with ``python tests/task_config_snapshots.py --update``
(:mod:`task_config_snapshots`) and adds its line here.
"""

from __future__ import annotations

import pytest
import yaml
from task_config_snapshots import SNAPSHOTS, UPDATE_COMMAND, resolved, snapshot_of


def _ordered(value):
    """``value`` with every mapping as a list of (key, value) pairs, so equality checks key order."""
    if isinstance(value, dict):
        return [(key, _ordered(item)) for key, item in value.items()]
    if isinstance(value, (list, tuple)):
        return [_ordered(item) for item in value]
    return value


@pytest.mark.parametrize("task", sorted(p.stem for p in SNAPSHOTS.glob("*.yaml")))
def test_resolved_config_equals_the_pre_split_snapshot(task: str) -> None:
    expected = yaml.safe_load((SNAPSHOTS / f"{task}.yaml").read_text())
    config = resolved(task)
    assert config["terrain"] is None, f"task '{task}' stands on its scene's floor"
    assert config["control_dt"] == (None if task == "pendulum" else 0.02)
    assert task == "pendulum" or expected["decimation"] * 0.005 == pytest.approx(0.02)
    config = snapshot_of(config)
    meant = f"if the change is meant, run `{UPDATE_COMMAND} {task}` and say why in this test's docstring"
    assert list(config) == list(expected), f"task '{task}': its sections differ from the snapshot; {meant}"
    for key in expected:
        assert _ordered(config[key]) == _ordered(expected[key]), (
            f"task '{task}': '{key}' differs from the snapshot; {meant}"
        )
