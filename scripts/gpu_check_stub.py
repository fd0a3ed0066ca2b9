"""Stand-in for every program of scripts/gpu_check.sh in a rehearsal (``GPU_CHECK_REHEARSAL=1``).

    python scripts/gpu_check_stub.py BLOCK -- COMMAND...    # what gpu_check.sh runs instead of COMMAND

No CUDA, no bundle, the standard library only (starts in a fraction of a second). It writes what
the real program writes, where the real command line says (``--out X``, ``--junitxml=X``, stdout
for ``environment``), with the schema gpu_check_facts.py reads, one measurement at a time with
``GPU_CHECK_STUB_STEP`` seconds (default 0.2) between them, each file rewritten atomically after
every measurement, as the real programs do. ``GPU_CHECK_STUB`` says how each block behaves,
``;``-separated ``BLOCK=MODE`` (default ``ok``):

- ``ok``: every measurement, exit 0; ``fail``: every measurement, exit 1; ``cut``: one measurement,
  then exit 75 (stopped itself for want of time, as gpu_train_check.py before a steady window);
- ``hang@K``: K measurements, then waits; ``SIGINT`` ends it as the real program ends (pytest
  writes its report of the tests so far, the doctor names the check it was in), exit 130;
- ``stubborn@K``: K measurements, then waits and ignores ``SIGINT`` (a program stuck in CUDA):
  only the ``SIGKILL`` after the grace period ends it;
- ``no_cuda`` / ``no_triton`` / ``triton_timeout`` (``environment``): CUDA unusable (exit 1) /
  Triton cannot build / the Triton probe ran out of block 0's budget (CUDA usable, exit 0);
  ``hang`` (``environment``): never answers (a start that hangs).

Besides ``--out``, a command's ``--keep-run DIR`` gets a run folder (``config.yaml`` and a
``checkpoint.pt`` of a real run's size, :data:`CHECKPOINT_BYTES`, that gzip cannot shrink) and
``--plot X`` a file, as the learning-curve blocks leave them; ``unilab-motion from-onnx`` writes its
clip.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

DOCTOR_CHECKS = (
    "physics only",
    "whole step captures",
    "replay equals eager (deterministic)",
    "no host sync during replay",
    "throughput and phases",
    "solver early exit A/B",
    "step audit: g1_tracking",
    "training loop audit: sac",
    "training loop audit: flashsac",
)
"""The doctor's checks on CUDA, in its order (unilab_gpu.doctor.checks)."""

TESTS = ("test_capture", "test_env_capture", "test_reset_rows", "test_managers", "test_rl_gpu")

CHECKPOINT_BYTES = {"go2": 18_300_000, "g1": 23_900_000}
"""A run folder's ``checkpoint.pt`` by robot: what a real one gzips to (SAC at 4096 envs, Go2 on rough
terrain and G1 tracking; networks, targets and optimizer state). The stub's bytes are random, so the
archive is as large as the real one."""


def mode_of(block: str) -> tuple[str, int]:
    """This block's mode and its K (the measurements before a hang)."""
    for item in os.environ.get("GPU_CHECK_STUB", "").split(";"):
        name, _, mode = item.partition("=")
        if name.strip() == block:
            mode, _, count = mode.strip().partition("@")
            return mode, int(count or 0)
    return "ok", 0


def option(command: list[str], name: str) -> Path | None:
    """The value of ``--name X`` or ``--name=X`` in the real command line."""
    for i, word in enumerate(command):
        if word == name and i + 1 < len(command):
            return Path(command[i + 1])
        if word.startswith(name + "="):
            return Path(word.split("=", 1)[1])
    return None


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.stub.tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    os.replace(tmp, path)


def sizes(command: list[str]) -> list[int]:
    if "--num-envs" not in command:
        return [4096]
    words = command[command.index("--num-envs") + 1 :]
    return [int(w) for w in words[: next((i for i, w in enumerate(words) if not w.isdigit()), len(words))]]


class Stub:
    """One block's measurements; ``finish`` is what the real program does when it ends."""

    def __init__(self, block: str, command: list[str]) -> None:
        self.block, self.command = block, command
        self.out = option(command, "--out") or option(command, "--junitxml")
        self.done: list[Any] = []

    def program(self) -> str:
        """What the real command runs (``doctor``, ``pytest``, ``bench``, ``eval``, ...), else the block's name."""
        line = " ".join(self.command)
        for word, name in (
            ("unilab_gpu.cli.doctor", "doctor"),
            ("-m pytest", "pytest"),
            ("bench_update.py", "bench_update"),
            ("unilab_gpu.cli.bench", "bench"),
            ("unilab_gpu.cli.eval", "eval"),
            ("unilab_gpu.cli.motion", "motion"),
            ("unilab_gpu.doctor.warm", "warm"),
        ):
            if word in line:
                return name
        return self.block

    def steps(self) -> int:
        fixed = {"warm": 4, "doctor": len(DOCTOR_CHECKS), "pytest": len(TESTS), "train": 4}
        fixed.update(compiled_eager=len(self.tasks()), bench=len(sizes(self.command)), motion=1)
        fixed["bench_update"] = len(self.modes())
        return fixed.get(self.program(), 3)

    def modes(self) -> list[str]:
        words = self.command[self.command.index("--modes") + 1 :] if "--modes" in self.command else []
        return words[: next((i for i, w in enumerate(words) if w.startswith("--")), len(words))]

    def tasks(self) -> list[str]:
        words = self.command[self.command.index("--tasks") + 1 :] if "--tasks" in self.command else []
        return words[: next((i for i, w in enumerate(words) if w.startswith("--")), len(words))]

    def measure(self, i: int) -> None:
        self.done.append(i)
        program = self.program()
        if program == "doctor":
            self.write_doctor(complete=False, running=None)
        elif program == "warm":
            results = [
                {"worker": k, "modules": [f"m{k}@256"], "compiled": 1, "seconds": 1.0, "errors": {}} for k in self.done
            ]
            write_json(self.out, {"workers": 4, "results": results, "modules": len(results), "complete": False})
        elif program == "bench":
            rows = [
                {
                    "num_envs": n,
                    "env_steps_per_s": 0.9e3 * n,
                    "physics_only_ms": 1.0,
                    "overhead_ratio": 1.11,
                    "captured": True,
                }
                for n in sizes(self.command)[: len(self.done)]
            ]
            write_json(self.out, {"benchmark": "unilab-bench", "results": rows})
        elif self.block == "train":
            compiled = "compile=false" not in self.command
            mode = "captured" if "algo.capture_update=true" in self.command else "compiled" if compiled else "eager"
            report = {"check": "gpu_train_check", "env_steps_per_s": 5e5, "failures": [], "complete": False}
            report.update(compile=compiled, update_mode=mode, steady_windows=len(self.done), cut=False)
            write_json(self.out, {**report, "command": self.command})
        elif program == "bench_update":
            rows = [{"preset": "gpu", "mode": mode, "update_mode": self.update_mode(mode)} for mode in self.modes()]
            rows = [row | {"update_ms": 10.0 if row["mode"] == "eager" else 2.5} for row in rows[: len(self.done)]]
            ratios = {
                f"{r['mode']}_update_time_over_eager": r["update_ms"] / 10.0 for r in rows if r["mode"] != "eager"
            }
            write_json(self.out, {"benchmark": "update", "results": rows, "ratios": {"gpu": ratios}, "complete": False})
        elif program == "eval" and "--terrain" not in self.command and len(self.done) == 1:
            overall = {"trials": 1024, "success_rate": 0.5, "mpkpe_m": 0.05, "r_mpkpe_m": 0.03}
            report = {"benchmark": "full_clip_eval", "start": {"overall": overall}, "spread": {"overall": overall}}
            write_json(self.out, report)
        elif program == "motion" and len(self.done) == 1:
            words = [w for w in self.command[self.command.index("from-onnx") + 1 :] if not w.startswith("--")]
            Path(words[1]).write_bytes(b"PK\x03\x04 stub clip")
        elif self.block == "compiled_eager":
            tasks = self.tasks()
            checks = [
                {"name": f"compiled equals eager: {t}", "status": "pass", "detail": "stub", "data": {"task": t}}
                for t in tasks[: len(self.done)]
            ]
            write_json(self.out, {"tool": "compiled_eager", "tasks": tasks, "checks": checks, "complete": False})
        elif self.block.startswith("curve_") and self.out is not None:
            curve = [{"env_steps": 4096 * 50 * (k + 1), "terrain/mean_level": 1.0 + k} for k in self.done]
            write_json(
                self.out, {"benchmark": "learning_curve", "env_steps": 4096 * 50 * len(self.done), "curve": curve}
            )
            if len(self.done) == 1:
                self.keep_run()

    def keep_run(self) -> None:
        """``--keep-run DIR`` and ``--plot X`` as the learning-curve script leaves them."""
        run_dir, plot = option(self.command, "--keep-run"), option(self.command, "--plot")
        if run_dir is not None:
            run_dir.mkdir()
            (run_dir / "config.yaml").write_text("task: stub\n")
            robot = "go2" if any(w.startswith("go2") for w in self.command) else "g1"
            (run_dir / "checkpoint.pt").write_bytes(os.urandom(CHECKPOINT_BYTES[robot]))
        if plot is not None:
            plot.write_bytes(b"\x89PNG stub")

    def write_doctor(self, complete: bool, running: str | None, interrupted: str | None = None) -> None:
        checks = [self.check(DOCTOR_CHECKS[i]) for i in self.done]
        failed = [c["name"] for c in checks if c["status"] == "fail"]
        report = {"tool": "unilab-doctor", "verdict": "fail" if failed or interrupted else "pass", "complete": complete}
        report.update(running=running, interrupted=interrupted, failed=failed, device="cuda:0", checks=checks)
        write_json(self.out, report)

    @staticmethod
    def check(name: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "physics only": {"physics_only_env_steps_per_s": 2.0e6},
            "whole step captures": {"capture_ids": [7, 7]},
            "replay equals eager (deterministic)": {"steps_with_resets": 60, "max_abs_diff": {"reward": 0.0}},
            "throughput and phases": {"num_envs": 4096, "env_steps_per_s": 1.8e6, "physics_only_env_steps_per_s": 2e6},
            "solver early exit A/B": {"saving": 0.03, "split_capture": False},
        }.get(name, {})
        status = "info" if name in ("physics only", "throughput and phases", "solver early exit A/B") else "pass"
        return {"name": name, "status": status, "detail": "stub", "data": data}

    @staticmethod
    def update_mode(mode: str) -> str:
        """How bench_update's mode ran its updates (what it reports as ``update_mode``)."""
        return "captured" if mode.startswith("captured") else mode

    def finish(self, interrupted: bool) -> None:
        program = self.program()
        if program == "doctor":
            running = None if len(self.done) >= len(DOCTOR_CHECKS) else DOCTOR_CHECKS[len(self.done)]
            if interrupted:
                self.write_doctor(False, running, f"SIGINT during '{running}'")
            else:
                self.write_doctor(True, None)
        elif program == "pytest" and self.out is not None:  # pytest writes its report at the end, interrupted too
            cases = "".join(f'<testcase classname="tests.{TESTS[i]}" name="test_{i}"/>' for i in self.done)
            xml = f'<testsuites><testsuite name="pytest" tests="{len(self.done)}" failures="0" errors="0" skipped="0">'
            self.out.write_text(xml + cases + "</testsuite></testsuites>\n")
        elif program in ("warm", "bench_update") and not interrupted:
            report = json.loads(self.out.read_text())
            report["complete"] = True
            write_json(self.out, report)


def environment(mode: str) -> int:
    facts = {"cuda_usable": mode != "no_cuda", "torch": "2.11.0+cu130 (stub)", "devices": 1}
    if mode == "hang":
        while True:
            time.sleep(3600)
    if mode == "no_cuda":
        print("gpu_check: FAILED: torch (stub) sees no CUDA device", file=sys.stderr)
        print(json.dumps(facts))
        return 1
    triton = mode not in ("no_triton", "triton_timeout")
    facts.update(torch_compile=triton, triton_libcuda_path=None, nvrtc="/stub/libnvrtc.so.13")
    facts["triton_timed_out"] = mode == "triton_timeout"
    facts["triton"] = {
        "no_triton": "Triton: cannot build (stub): compile=false",
        "triton_timeout": "Triton: the kernel probe timed out (stub): compile=false below; CUDA itself is usable",
    }.get(mode, "Triton: built and launched a kernel")
    print(facts["triton"], file=sys.stderr)
    print(json.dumps(facts))
    return 0


def main(argv: list[str]) -> int:
    block, command = argv[0], argv[argv.index("--") + 1 :]
    mode, count = mode_of(block)
    if block == "environment":
        return environment(mode)
    stub = Stub(block, command)
    step = float(os.environ.get("GPU_CHECK_STUB_STEP", "0.2"))
    total = {"ok": stub.steps(), "fail": stub.steps(), "cut": 1}.get(mode, min(count, stub.steps()))
    if mode == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for i in range(total):
            time.sleep(step)
            stub.measure(i)
        if mode in ("hang", "stubborn"):
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        stub.finish(interrupted=True)
        print(f"gpu_check_stub: {block} interrupted after {len(stub.done)} measurements", flush=True)
        return 130
    stub.finish(interrupted=False)
    return {"fail": 1, "cut": 75}.get(mode, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
