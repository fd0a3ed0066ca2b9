"""Sim-to-sim: an exported policy run in plain MuJoCo C from its ONNX file, judged as training judges.

Map (as Brax's acting code separates them):
    scenario    Scenario, PreparedScenario, FallRule, load_reference, scene_model: what is simulated
                (the model as training built it, the command or motion, the time, what counts as a fall)
    terrain     TerrainChoice, choose_terrain, read_terrain_file: the ground and the start's sub-terrain
    run         Sim2Sim, sim2sim(): the run stepped by MuJoCo C (falls, divergence, solver
                non-convergence, MuJoCo C's warnings)
    report      SecondTally, sim2sim_report, write_report: per-second rows, summary, the JSON report

``unilab-sim2sim`` (``unilab_gpu/cli/sim2sim.py``) is its command line; docs/deploy.md the report.
"""

from unilab_gpu.export.sim2sim.run import Sim2Sim, sim2sim
from unilab_gpu.export.sim2sim.scenario import FallRule, Scenario, load_reference

__all__ = ["FallRule", "Scenario", "Sim2Sim", "load_reference", "sim2sim"]
