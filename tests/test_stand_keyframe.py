"""The committed stand keyframe is what scripts/g1_stand_keyframe.py computes."""

from __future__ import annotations

import runpy
from pathlib import Path

import mujoco
import numpy as np

from unilab_gpu.paths import robot_asset

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "g1_stand_keyframe.py"


def test_script_reproduces_the_committed_keyframe() -> None:
    script = runpy.run_path(str(SCRIPT))
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    pose = script["initial_pose"](model)
    qpos, ctrl = script["equilibrium"](model, pose, pose[7:].copy())
    key = model.key("stand")
    # The XML keeps 8 decimals.
    np.testing.assert_allclose(qpos, key.qpos, atol=2e-8)
    np.testing.assert_allclose(ctrl, key.ctrl, atol=2e-8)
    # Independent of the solver: the joint pose is the documented one with level soles.
    np.testing.assert_allclose(qpos[[7, 10, 11]], [-0.312, 0.669, -0.357])
