"""The simulator alone (`unilab-demo`): build the G1 worlds, step them, report speed and phases.

Usage: ``unilab-demo [--device auto|cpu|cuda|cuda:N] [--num-envs N] [--steps N]``
"""

from __future__ import annotations

import argparse
import time

import torch

from unilab_gpu.cli.arguments import Bound, check_bounds, whole
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.sim.simulator import Simulator

DECIMATION = 4  # physics steps per 50 Hz control step
MAX_NUM_ENVS = 1 << 20
"""Most G1 worlds (256 times the CUDA default): more would not fit one GPU's memory."""
MAX_STEPS = 100_000
"""Most timed steps (2,000 simulated seconds): a speed report settles within a few hundred."""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(device: str, num_envs: int, steps: int) -> dict[str, float]:
    """Step ``num_envs`` G1 worlds ``steps`` times with swaying joint targets; return phase ms."""
    sim = Simulator.from_file("g1", num_envs, device, keyframe="stand")
    stand_ctrl = sim.state.ctrl[0].clone()
    sway = torch.linspace(0.0, 2.0 * torch.pi, num_envs, device=sim.torch_device)[:, None]
    phases = {"actions": 0.0, "physics": 0.0, "refresh": 0.0}
    sim.step(DECIMATION)  # compiles/records on first use; not timed
    for step in range(steps):
        t0 = time.perf_counter()
        # Small arm/waist sway around the standing targets so the worlds diverge.
        sim.state.ctrl.copy_(stand_ctrl + 0.05 * torch.sin(sway + 0.1 * step))
        _sync(sim.torch_device)
        t1 = time.perf_counter()
        sim.step(DECIMATION)
        _sync(sim.torch_device)
        t2 = time.perf_counter()
        sim.refresh()
        _sync(sim.torch_device)
        t3 = time.perf_counter()
        phases["actions"] += t1 - t0
        phases["physics"] += t2 - t1
        phases["refresh"] += t3 - t2
    sim.check()
    fallen = int((sim.state.qpos[:, 2] < 0.5).sum())
    total = sum(phases.values())
    print(f"G1 x {num_envs} worlds on {device}: {steps} control steps of {DECIMATION} x 5 ms physics")
    print(f"  {num_envs * steps / total:,.0f} env-steps/s ({1e3 * total / steps:.2f} ms per step)")
    for name, seconds in phases.items():
        print(f"  {name:8s} {1e3 * seconds / steps:8.3f} ms/step  {100 * seconds / total:5.1f} %")
    print(f"  pelvis below 0.5 m in {fallen} of {num_envs} worlds after {steps * DECIMATION * 0.005:.1f} s")
    return {name: 1e3 * seconds / steps for name, seconds in phases.items()}


BOUNDS = {
    "--num-envs": Bound(1, MAX_NUM_ENVS, integer=True, meaning="simulated G1s"),
    "--steps": Bound(1, MAX_STEPS, integer=True, meaning="env steps"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="unilab-demo", description="Step the G1 simulator and report where the time goes."
    )
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    parser.add_argument("--num-envs", type=whole, default=None, help="default: 4096 on CUDA, 32 on CPU")
    parser.add_argument("--steps", type=whole, default=50)
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        raise SystemExit(f"--device: {error}") from None
    num_envs = args.num_envs or (4096 if device.type == "cuda" else 32)
    run(str(device), num_envs, args.steps)


if __name__ == "__main__":
    main()
