"""Training env-steps/s with the live viewer on and off, measured in one run (issue 24).

One trainer (``configs/train.yaml`` with the given overrides) runs windows of ``--iterations``
iterations in turn: without the viewer; with the feed's throttled copies only (the trainer's
``after_iteration``, at most 10 a second; the picture paused, as when no browser is connected);
and with the drawing thread redrawing K worlds for a connected websocket client that stands in
for a browser (so the server also serializes and sends every update). Windows of the same
process see the same machine load; the ratios of the medians are the numbers to read. Writes
JSON with the machine description::

    OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES="" python scripts/bench_viewer.py --iterations 5 --rounds 30 \\
        --overrides algo=sac algo.warmup_steps=2 algo.batch_size=256 "algo.actor_hidden_dims=[64,64]" \\
        "algo.critic_hidden_dims=[64,64]" --out docs/benchmarks/viewer_cpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

import msgspec
import viser
from websockets.sync.client import connect

from unilab_gpu.cli.arguments import Bound, check_bounds, whole
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.training.config import compose_train_config, resolve_auto
from unilab_gpu.training.run import make_trainer
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_json_atomic
from unilab_gpu.viewer.live import LiveViewer


class BrowserStandIn:
    """A websocket client of the viewer that receives and drops every message (as a page would)."""

    def __init__(self, url: str) -> None:
        ws_url = url.replace("http://", "ws://")
        self.socket = connect(ws_url, subprotocols=[f"viser-v{viser.__version__}"], max_size=None)
        # viser counts a client as connected (and the viewer draws for it) once it reports its camera.
        camera = {
            "type": "ViewerCameraMessage",
            "wxyz": [1.0, 0.0, 0.0, 0.0],
            "position": [3.0, -3.0, 1.5],
            "fov": 1.0,
            "near": 0.01,
            "far": 100.0,
            "image_height": 800,
            "image_width": 1280,
            "look_at": [0.0, 0.0, 0.5],
            "up_direction": [0.0, 0.0, 1.0],
        }
        self.socket.send(msgspec.msgpack.encode(camera))
        self.received = 0
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            for message in self.socket:
                self.received += len(message)
        except Exception:  # closed at the end of the benchmark
            pass

    def close(self) -> None:
        self.socket.close()


def window(trainer, iterations: int) -> float:
    """Env-steps/s over ``iterations`` iterations (the loop of ``Trainer.train`` without logging)."""
    start = time.perf_counter()
    for _ in range(iterations):
        trainer.run_iteration()
        if trainer.after_iteration is not None:
            trainer.after_iteration()
    return iterations * trainer.env.num_envs / (time.perf_counter() - start)


BOUNDS = {
    "--iterations": Bound(1, integer=True, meaning="iterations per window"),
    "--rounds": Bound(1, integer=True, meaning="pairs of windows"),
    "--worlds": Bound(1, integer=True, meaning="worlds the viewer shows"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_viewer", description=__doc__.split("\n")[0])
    parser.add_argument("--overrides", nargs="*", default=["algo.warmup_steps=2"], help="train config overrides")
    parser.add_argument("--iterations", type=whole, default=20, help="iterations per window")
    parser.add_argument("--rounds", type=whole, default=8, help="pairs of windows (off, on)")
    parser.add_argument("--worlds", type=whole, default=4)
    parser.add_argument("--out", type=Path, default=None, help="JSON file")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.out is not None:
        try:  # found out now, not after the measurement
            check_output(args.out, "--out", force=args.force, example="viewer.json")
        except OutputPathError as error:
            raise SystemExit(f"bench_viewer: error: {error}") from None

    cfg = resolve_auto(compose_train_config(["device=cpu", *args.overrides]))
    env = make_env(
        cfg.task,
        num_envs=cfg.env.num_envs,
        device=cfg.device,
        overrides=list(cfg.env.overrides),
        seed=0,
        compile=cfg.compile,
    )
    trainer = make_trainer(env, cfg, seed=0)
    obs = env.reset()
    trainer._policy_obs.copy_(obs["policy"])
    trainer._critic_obs.copy_(obs[trainer._critic_group])
    window(trainer, args.iterations)  # warm-up: first updates, allocator

    live = LiveViewer(env, args.worlds, port=0, mode="train")
    browser = BrowserStandIn(live.url)
    deadline = time.monotonic() + 30
    while not live.server.get_clients():
        if time.monotonic() > deadline:
            raise RuntimeError("the stand-in client never registered with the viewer")
        time.sleep(0.1)
    off, copying, on = [], [], []
    for _ in range(args.rounds):
        trainer.after_iteration = None
        off.append(window(trainer, args.iterations))
        trainer.after_iteration = live.feed.maybe_copy
        live.paused = True  # copies only, no drawing: as with no browser connected
        copying.append(window(trainer, args.iterations))
        live.paused = False
        on.append(window(trainer, args.iterations))
    copies, drawn, received = live.feed.copies, live.drawn, browser.received
    browser.close()
    live.close()

    result = {
        "what": "training env-steps/s, viewer off vs on, alternating windows of one run",
        "task": cfg.task,
        "algo": cfg.algo.name,
        "num_envs": env.num_envs,
        "worlds_shown": args.worlds,
        "overrides": args.overrides,
        "iterations_per_window": args.iterations,
        "rounds": args.rounds,
        "off_env_steps_per_s": off,
        "copies_only_env_steps_per_s": copying,
        "on_env_steps_per_s": on,
        "off_median": statistics.median(off),
        "copies_only_median": statistics.median(copying),
        "on_median": statistics.median(on),
        "copies_only_over_off": statistics.median(copying) / statistics.median(off),
        "on_over_off": statistics.median(on) / statistics.median(off),
        "draw_ms_per_iteration": 1e3 * (1 / statistics.median(on) - 1 / statistics.median(off)) * env.num_envs,
        "viewer_copies": copies,
        "viewer_draws": drawn,
        "bytes_sent_to_client": received,
        "machine": machine_info(cfg.device),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    if args.out:
        write_json_atomic(args.out, portable_paths(result))


if __name__ == "__main__":
    main()
