"""Stand-in for every program of scripts/gpu_check.sh in a rehearsal (``GPU_CHECK_REHEARSAL=1``).

    python scripts/gpu_check_stub.py BLOCK -- COMMAND...    # what gpu_check.sh runs instead of COMMAND

No CUDA, no bundle, the standard library only (starts in a fraction of a second). It writes what
the real program writes, where the real command line says (``--out X``, ``--junitxml=X``, stdout
for ``environment``), with the schema gpu_check_facts.py reads, one measurement at a time with
``GPU_CHECK_STUB_STEP`` seconds (default 0.2) between them, each file rewritten atomically after
every measurement, as the real programs do. ``GPU_CHECK_STUB`` says how each block behaves,
``;``-separated ``BLOCK=MODE`` (default ``ok``):

- ``ok``: every measurement, exit 0; ``fail``: every measurement, exit 1;
- ``hang@K``: K measurements, then waits; ``SIGINT`` ends it as the real program ends (pytest
  writes its report of the tests so far, the doctor names the check it was in), exit 130;
- ``stubborn@K``: K measurements, then waits and ignores ``SIGINT`` (a program stuck in CUDA):
  only the ``SIGKILL`` after the grace period ends it;
- ``no_cuda`` / ``no_triton`` / ``triton_timeout`` (``environment``): CUDA unusable (exit 1) /
  Triton cannot build / the Triton probe ran out of block 0's budget (CUDA usable, exit 0);
  ``hang`` (``environment``): never answers (a start that hangs).

Besides ``--out``, a command's ``--keep-run DIR`` gets a run folder (``config.yaml``,
``checkpoint.pt``) and ``--plot X`` a file, as the learning-curve blocks leave them.
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

    def steps(self) -> int:
        fixed = {"warm": 4, "doctor": len(DOCTOR_CHECKS), "gpu_tests": len(TESTS), "train": 4}
        fixed["compiled_eager"] = len(self.tasks())
        return fixed.get(self.block, len(sizes(self.command)) if "bench" in " ".join(self.command) else 3)

    def tasks(self) -> list[str]:
        words = self.command[self.command.index("--tasks") + 1 :] if "--tasks" in self.command else []
        return words[: next((i for i, w in enumerate(words) if w.startswith("--")), len(words))]

    def measure(self, i: int) -> None:
        self.done.append(i)
        if self.block == "doctor":
            self.write_doctor(complete=False, running=None)
        elif self.block == "warm":
            results = [
                {"worker": k, "modules": [f"m{k}@256"], "compiled": 1, "seconds": 1.0, "errors": {}} for k in self.done
            ]
            write_json(self.out, {"workers": 4, "results": results, "modules": len(results), "complete": False})
        elif self.out is not None and self.block in ("bench_capture", "compile"):
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
            report = {"check": "gpu_train_check", "env_steps_per_s": 5e5, "failures": [], "partial": True}
            report.update(compile=compiled, update_mode="compiled" if compiled else "eager")
            write_json(self.out, {**report, "command": self.command})
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
            (run_dir / "checkpoint.pt").write_bytes(os.urandom(4096))
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

    def finish(self, interrupted: bool) -> None:
        if self.block == "doctor":
            running = None if len(self.done) >= len(DOCTOR_CHECKS) else DOCTOR_CHECKS[len(self.done)]
            if interrupted:
                self.write_doctor(False, running, f"SIGINT during '{running}'")
            else:
                self.write_doctor(True, None)
        elif self.block == "gpu_tests" and self.out is not None:  # pytest writes its report at the end, interrupted too
            cases = "".join(f'<testcase classname="tests.{TESTS[i]}" name="test_{i}"/>' for i in self.done)
            xml = f'<testsuites><testsuite name="pytest" tests="{len(self.done)}" failures="0" errors="0" skipped="0">'
            self.out.write_text(xml + cases + "</testsuite></testsuites>\n")
        elif self.block == "warm" and not interrupted:
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
    total = stub.steps() if mode in ("ok", "fail") else min(count, stub.steps())
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
    return 1 if mode == "fail" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
