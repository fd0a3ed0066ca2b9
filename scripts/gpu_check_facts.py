"""The facts scripts/gpu_check.sh records: block 0's environment, and the key facts so far.

    python scripts/gpu_check_facts.py environment [LINKS [SECONDS]]  # JSON on stdout; exit 1 unless CUDA is usable
    python scripts/gpu_check_facts.py summary WORK         # the key facts so far, JSON on stdout
    python scripts/gpu_check_facts.py brief GPU_CHECK_JSON # the key facts as one line each
    python scripts/gpu_check_facts.py library SONAME       # the folder holding SONAME on this machine
    python scripts/gpu_check_facts.py triton-kernel        # build and launch one Triton kernel (exit 0 if it ran)

``environment`` prints (JSON) whether CUDA is usable (a real launch, not a device count), the
versions of torch, Warp, MuJoCo and MJWarp and where Warp was imported from (the bundle's
install or not), the file NVRTC was loaded from (``nvrtc``), and whether Triton can build and
launch a kernel here (``torch_compile``), proven by doing it (``triton-kernel``, in a fresh process:
Triton caches a failed driver build for the life of its process). Triton compiles a C driver at
first use with ``$CC``, else ``gcc``, else ``clang``, against this interpreter's ``Python.h``
(``triton/runtime/build.py``) and links it with ``-lcuda`` from the folders ``ldconfig -p`` lists
for ``libcuda.so.1``, or from ``$TRITON_LIBCUDA_PATH``. When the first try fails, a folder
``LINKS`` (default ``/tmp/unilab_libcuda``) gets ``libcuda.so`` and ``libcuda.so.1`` links to the
driver library this process loaded, and the kernel is tried again with ``TRITON_LIBCUDA_PATH`` set
to it; if that works, ``triton_libcuda_path`` names it (gpu_check.sh exports it for every later
block). Both tries together get what is left of ``SECONDS`` (block 0's budget, default 60) less
5 s: a probe that runs out of it is reported as a timeout of the probe (``triton_timed_out``,
Triton off below), not as unusable CUDA. One line says which (``triton``). The same in words
goes to stderr.

``summary`` prints, as JSON, the key facts of what the blocks wrote so far into gpu_check.sh's
working folder WORK (``environment.json``, ``warm.json``, ``doctor.json``,
``capture_rough.json``, ``update_tests.xml``, ``bench_gpu_capture.json``, ``gpu_tests.xml``,
``compiled_eager.json``, ``train_check.json``, ``summary.txt``, and the further calls' reports):
CUDA usable, Triton, physics alone, capture works (and its capture ids), replay == eager over
steps with resets, no sync in replay, env-steps/s of the captured step against physics alone (the
doctor's size and every bench size), the solver A/B, the rough-terrain capture checks
(``capture_rough``), the captured-update tests' and the other GPU tests' counts, compiled == eager
per task, the training run (throughput over its steady windows, compiled or not, how its updates
ran: ``train_update_mode``, whether it was cut short), and every
block's exit status and seconds; a missing or partial file leaves its facts ``null`` (a cut
doctor's report says which check it was in: ``doctor_interrupted``); the further calls' facts under
``rough`` (block 9), ``rough_learning`` (10), ``update`` (11: each mode's update mode and ms, the
ratios against eager), ``tracking_learning`` (8) and ``dance_learning`` (12: env steps, full-clip
success rates and MPKPE).
gpu_check.sh runs it after every block and renames its output over ``OUT/gpu_check.json`` (as it
does with ``environment.json``): the standard library only, so it costs a fraction of a second.
``brief`` prints those facts one per line, for the check's stdout.

``library`` finds a shared library the bundle's files load from the machine (its ``nvrtc.txt``;
the bundle's self-built ``warp.so`` needs NVRTC, ``libnvrtc.so.13``), before any CUDA work:
first in the ``nvidia`` pip packages this interpreter sees (torch cu130 depends on
``nvidia-cuda-nvrtc``, which installs ``nvidia/cu13/lib/libnvrtc.so.13``), then in the CUDA
toolkit (``$CUDA_HOME/lib64``, ``/usr/local/cuda/lib64``). It prints the folder, which
gpu_check.sh puts on ``LD_LIBRARY_PATH``, or one line on stderr and exits 1.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any


def triton_build_missing() -> list[str]:
    """What Triton lacks to build its C driver with this interpreter; empty when it can."""
    scheme = sysconfig.get_default_scheme()
    include = sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    missing = [] if compiler else ["a C compiler (CC, gcc or clang)"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        missing.append(f"Python.h in {include}")
    return missing


def find_library(soname: str) -> str | None:
    """The folder holding ``soname`` in this interpreter's ``nvidia`` packages or the CUDA toolkit."""
    candidates = [os.path.join(entry, "nvidia", "*", "lib") for entry in sys.path if entry]
    toolkits = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    candidates += [os.path.join(toolkit, "lib64") for toolkit in toolkits if toolkit]
    for pattern in candidates:
        for folder in sorted(glob.glob(pattern)):
            if os.path.isfile(os.path.join(folder, soname)):
                return os.path.abspath(folder)
    return None


def loaded_library(prefix: str) -> str | None:
    """The file of a shared library this process has loaded whose name starts with ``prefix``."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return None
    return next((path for path in sorted(paths) if os.path.basename(path).startswith(prefix)), None)


def environment(links: Path = Path("/tmp/unilab_libcuda"), seconds: float = 60.0) -> tuple[dict[str, Any], int]:
    """The facts of block 0 and the exit status (1: CUDA unusable); the words go to stderr.

    ``seconds``: block 0's budget. The Triton probe gets what is left of it, less
    :data:`PROBE_MARGIN`, so that a probe that hangs is reported as a timeout of the probe (Triton
    off below) instead of running the whole block past its budget.
    """
    started = time.monotonic()
    import torch

    facts: dict[str, Any] = {"cuda_usable": False, "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    facts["python"] = sys.version.split()[0]
    if not torch.cuda.is_available():
        say(f"gpu_check: FAILED: torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no CUDA device")
        return facts, 1
    (torch.ones(1, device="cuda") + 1).cpu()  # a real launch and copy back
    import mujoco
    import mujoco_warp
    import warp as wp

    wp.init()
    facts.update(
        cuda_usable=True,
        devices=torch.cuda.device_count(),
        device_name=torch.cuda.get_device_name(0),
        cuda_driver=".".join(map(str, wp.get_cuda_driver_version() or ())),
        warp=wp.__version__,
        warp_file=wp.__file__,
        warp_cuda_output=os.environ.get("UNILAB_WARP_CUDA_OUTPUT") or "Warp's choice",
        mujoco=mujoco.__version__,
        mujoco_warp=mujoco_warp.__version__,
        nvrtc=loaded_library("libnvrtc.so"),  # Warp compiles its CUDA kernels with NVRTC
    )
    probe_seconds = seconds - (time.monotonic() - started) - PROBE_MARGIN
    facts.update(triton_facts(links, loaded_library("libcuda.so"), seconds=probe_seconds))
    say(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {facts['devices']} x {facts['device_name']}")
    say(f"warp {wp.__version__} (driver {facts['cuda_driver']}) from {wp.__file__}")
    say(f"mujoco {mujoco.__version__}, mujoco_warp {mujoco_warp.__version__}")
    say(f"NVRTC loaded from {facts['nvrtc'] or 'no file (linked into warp.so)'}")
    say(facts["triton"])
    return facts, 0


PROBE_MARGIN = 5.0
"""Seconds of block 0's budget kept back from the Triton probe (the facts' printing, the exit)."""


def triton_facts(links: Path, libcuda: str | None, run=None, seconds: float = 60.0) -> dict[str, Any]:
    """Whether Triton builds and launches a kernel here, and with which ``TRITON_LIBCUDA_PATH``.

    ``libcuda``: the driver library this process loaded (``libcuda.so.1``), linked into ``links``
    for the second try. ``run(env, timeout)``: runs the kernel in a fresh process, returns ``(ok,
    last error line, timed out)`` (default :func:`run_triton_kernel`; a test passes its own).
    ``seconds``: both tries together; a try that runs out of it is reported as a timeout of the
    probe (``triton_timed_out``), not retried, and Triton counts as unusable below.
    """
    run = run or run_triton_kernel
    deadline = time.monotonic() + seconds
    missing = triton_build_missing()
    facts: dict[str, Any] = {"torch_compile": False, "torch_compile_missing": missing, "triton_libcuda_path": None}
    facts["triton_timed_out"] = False
    if missing:
        facts["triton"] = "Triton: cannot build its driver, missing " + ", ".join(missing) + ": compile=false below"
        return facts

    def timed_out(after: str) -> dict[str, Any]:
        facts["triton_timed_out"] = True
        facts["triton"] = (
            f"Triton: the kernel probe timed out {after} (block 0's budget leaves it {seconds:.0f} s): compile=false "
            "below; CUDA itself is usable"
        )
        return facts

    if seconds < 1:
        return timed_out("before it started")
    preset = os.environ.get("TRITON_LIBCUDA_PATH")
    ok, error, late = run(dict(os.environ), seconds)
    if late:
        return timed_out(f"({error})")
    if ok:
        facts.update(torch_compile=True, triton_libcuda_path=preset)
        facts["triton"] = "Triton: built and launched a kernel" + (f" (TRITON_LIBCUDA_PATH={preset})" if preset else "")
        return facts
    if libcuda is None or preset:
        facts["triton"] = f"Triton: cannot build and launch a kernel ({error}): compile=false below"
        return facts
    links.mkdir(parents=True, exist_ok=True)
    for name in ("libcuda.so", "libcuda.so.1"):
        link = links / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(libcuda)
    left = deadline - time.monotonic()
    if left < 1:
        return timed_out(f"before its second try (the first: {error})")
    ok, second, late = run({**os.environ, "TRITON_LIBCUDA_PATH": str(links)}, left)
    if late:
        return timed_out(f"in its second try, with TRITON_LIBCUDA_PATH={links} (the first: {error})")
    if ok:
        facts.update(torch_compile=True, triton_libcuda_path=str(links))
        facts["triton"] = (
            f"Triton: built and launched a kernel with TRITON_LIBCUDA_PATH={links} (links to {libcuda}; "
            f"the default -lcuda failed: {error})"
        )
    else:
        facts["triton"] = f"Triton: cannot build and launch a kernel ({error}; with {links}: {second}): compile=false"
    return facts


def run_triton_kernel(env: dict[str, str], timeout: float) -> tuple[bool, str, bool]:
    """``triton-kernel`` in a fresh process with ``env``: whether it ran, its last error line, and
    whether it was stopped at ``timeout`` seconds."""
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "triton-kernel"],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, f"no answer in {timeout:.0f} s", True
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return done.returncode == 0, (lines[-1] if lines else f"exit {done.returncode}")[:300], False


def triton_kernel() -> int:
    """Build and launch one Triton kernel (x + 1 on 1000 floats) and check its result."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, n, block: tl.constexpr):
        offsets = tl.program_id(0) * block + tl.arange(0, block)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1.0, mask=mask)

    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    add_one[(triton.cdiv(1000, 256),)](x, 1000, block=256)
    if not torch.equal(x.cpu(), torch.arange(1000, dtype=torch.float32) + 1.0):
        say("triton-kernel: the kernel ran but its result is wrong")
        return 1
    return 0


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def blocks(summary: str) -> list[dict[str, str]]:
    """``summary.txt`` lines (``NAME key=value ...``) as dicts; other lines are left out."""
    rows = [line.split() for line in summary.splitlines() if "=" in line]
    return [{"block": words[0], **dict(w.split("=", 1) for w in words[1:] if "=" in w)} for words in rows]


def junit_counts(path: Path) -> dict[str, int] | None:
    """Tests, failures, errors and skipped of a JUnit XML report (pytest's), or ``None``."""
    import xml.etree.ElementTree as ElementTree

    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    keys = ("tests", "failures", "errors", "skipped")
    return {key: sum(int(suite.get(key, 0)) for suite in suites) for key in keys}


def bench_rows(report: Any) -> list[dict[str, Any]]:
    """Per size of a ``unilab-bench`` report: env-steps/s captured against physics alone."""
    rows = []
    for row in (report or {}).get("results", []):
        physics_ms = row.get("physics_only_ms")
        rows.append(
            {
                "num_envs": row.get("num_envs"),
                "env_steps_per_s": row.get("env_steps_per_s"),
                "physics_only_env_steps_per_s": row["num_envs"] / (physics_ms / 1e3) if physics_ms else None,
                "overhead_ratio": row.get("overhead_ratio"),
                "captured": row.get("captured"),
            }
        )
    return rows


def doctor_facts(doctor: Any) -> dict[str, Any]:
    """The key facts of a ``unilab-doctor`` report (``None`` where a check did not run)."""
    checks = {c["name"]: c for c in (doctor or {}).get("checks", [])}

    def passed(name: str) -> bool | None:
        return checks[name]["status"] == "pass" if name in checks else None

    def data(name: str) -> dict[str, Any]:
        return checks.get(name, {}).get("data", {})

    throughput = data("throughput and phases")
    return {
        "physics_only_env_steps_per_s_at_num_envs": data("physics only").get("physics_only_env_steps_per_s"),
        "capture_works": passed("whole step captures"),
        "capture_ids": data("whole step captures").get("capture_ids"),
        "replay_equals_eager": passed("replay equals eager (deterministic)"),
        "replay_steps_with_resets": data("replay equals eager (deterministic)").get("steps_with_resets"),
        "no_sync_in_replay": passed("no host sync during replay"),
        "env_steps_per_s": throughput.get("env_steps_per_s"),
        "num_envs": throughput.get("num_envs"),
        "physics_only_env_steps_per_s": throughput.get("physics_only_env_steps_per_s"),
        "solver_early_exit_saving": data("solver early exit A/B").get("saving"),
        "split_capture": data("solver early exit A/B").get("split_capture"),
        "doctor_verdict": None if doctor is None else doctor["verdict"],
        "doctor_interrupted": None if doctor is None else doctor.get("interrupted"),
    }


def rough_learning_facts(curve: Any, walk: Any, stairs: Any) -> dict[str, Any]:
    """Block 10's facts: the Go2's rough-terrain training (env steps, its mean terrain level at the
    first and last point that logged one, and its highest) and the clean evaluations' success rate
    per sub-terrain, on slopes and 10 cm stairs (``walk``) and on stairs by riser height
    (``stairs``; ``None`` where a file is missing or cut short)."""

    def success(report: Any) -> dict[str, float] | None:
        return {name: row.get("success_rate") for name, row in (report or {}).get("sub_terrains", {}).items()} or None

    curve = curve or {}
    levels = [p["terrain/mean_level"] for p in curve.get("curve", []) if "terrain/mean_level" in p]
    return {
        "env_steps": curve.get("env_steps"),
        "mean_level_first": levels[0] if levels else None,
        "mean_level_last": levels[-1] if levels else None,
        "mean_level_max": max(levels) if levels else None,
        "success_rate": success(walk),
        "stairs_heights_success_rate": success(stairs),
    }


def optional(read: Any, path: Path) -> Any:
    """``read`` of the JSON at ``path``, or ``None`` where the block that writes it did not run."""
    report = _read(path)
    return None if report is None else read(report)


def update_facts(report: Any) -> dict[str, Any]:
    """Block 11's facts (``bench_update.py``): per mode, how its updates ran (``captured`` only where
    the CUDA graphs were made) and its update ms, and every mode's ratios against eager."""
    rows = report.get("results", [])
    return {
        "update_mode": {row["mode"]: row.get("update_mode") for row in rows},
        "update_ms": {row["mode"]: row.get("update_ms") for row in rows},
        "ratios": report.get("ratios", {}),
        "complete": report.get("complete", True),
    }


def tracking_learning_facts(curve: Any, evaluation: Any) -> dict[str, Any]:
    """A tracking curve's env steps and its policy's full-clip evaluation: success rate and MPKPE
    from frame 0 (``start``) and from spread starts (``None`` where a file is missing)."""

    def overall(name: str, key: str) -> float | None:
        return ((evaluation or {}).get(name) or {}).get("overall", {}).get(key)

    return {
        "env_steps": (curve or {}).get("env_steps"),
        "success_rate_from_start": overall("start", "success_rate"),
        "success_rate_from_spread": overall("spread", "success_rate"),
        "mpkpe_m_from_start": overall("start", "mpkpe_m"),
        "mpkpe_m_from_spread": overall("spread", "mpkpe_m"),
    }


def compiled_eager_facts(report: Any) -> dict[str, bool | None] | None:
    """Per task of ``compiled_eager.json``: whether the compiled step equalled the eager one
    (``None`` for a task whose comparison did not finish); ``None`` without the file."""
    if report is None:
        return None
    results = {c["data"].get("task", c["name"].split(": ")[-1]): c["status"] == "pass" for c in report["checks"]}
    return results | {task: None for task in report.get("tasks", []) if task not in results}


def summary(work: Path) -> dict[str, Any]:
    """The key facts of the blocks' files in ``work`` (gpu_check.sh's working folder)."""
    env = _read(work / "environment.json")
    train, warm = _read(work / "train_check.json"), _read(work / "warm.json")
    summary_txt = work / "summary.txt"
    facts = {
        "cuda_usable": None if env is None else env["cuda_usable"],
        "triton": None if env is None else env.get("triton"),
        **doctor_facts(_read(work / "doctor.json")),
        "bench_capture": bench_rows(_read(work / "bench_gpu_capture.json")),
        "capture_rough": optional(doctor_facts, work / "capture_rough.json"),
        "update_tests": junit_counts(work / "update_tests.xml"),
        "gpu_tests": junit_counts(work / "gpu_tests.xml"),
        "compiled_equals_eager": compiled_eager_facts(_read(work / "compiled_eager.json")),
        "train_env_steps_per_s": None if train is None else train.get("env_steps_per_s"),
        "train_compile": None if train is None else train.get("compile"),
        "train_update_mode": None if train is None else train.get("update_mode"),
        "train_steady_windows": None if train is None else train.get("steady_windows"),
        "train_cut": None if train is None else train.get("cut"),
        "train_failures": None if train is None else train.get("failures"),
        "warm_modules": None if warm is None else warm.get("modules"),
        "blocks": blocks(summary_txt.read_text()) if summary_txt.is_file() else [],
        "environment": env,
    }
    rough = _read(work / "doctor_rough.json")
    if rough is not None or (work / "bench_gpu_rough.json").is_file():  # block 9 (ROUGH=1) ran
        facts["rough"] = {**doctor_facts(rough), "bench": bench_rows(_read(work / "bench_gpu_rough.json"))}
    curve = _read(work / "go2_velocity_rough_sac_gpu.json")
    walk = _read(work / "go2_velocity_rough_gpu_terrain_eval.json")
    stairs = _read(work / "go2_velocity_rough_gpu_stairs_heights_eval.json")
    if curve is not None or walk is not None:  # block 10 (ROUGH_LEARNING=1) ran
        facts["rough_learning"] = rough_learning_facts(curve, walk, stairs)
    update = _read(work / "bench_gpu_update.json")
    if update is not None:  # block 11 (UPDATE=1) ran
        facts["update"] = update_facts(update)
    for key, stem in (("tracking_learning", "g1_tracking_sac_gpu"), ("dance_learning", "g1_dance_sac_gpu")):
        curve, evaluation = _read(work / f"{stem}.json"), _read(work / f"{stem}_eval.json")
        if curve is not None or evaluation is not None:  # block 8 (LEARNING_CURVES=1) / 12 (DANCE_LEARNING=1) ran
            facts[key] = tracking_learning_facts(curve, evaluation)
    bundle = next((b for b in facts["blocks"] if b["block"] == "bundle"), {})
    # The NVRTC file Warp loaded (block 0), else the folder gpu_check.sh found it in or "missing".
    facts["nvrtc"] = (env or {}).get("nvrtc") or bundle.get("nvrtc")
    return facts


def brief(facts: dict[str, Any]) -> list[str]:
    """The key facts as ``gpu_check: KEY = VALUE`` lines for stdout (the device call's output comes
    back even where its files do not): every fact but ``blocks`` (summary.txt's lines, printed
    beside) and ``environment`` (of which the versions and the device)."""
    env = facts.get("environment") or {}
    versions = ("device_name", "torch", "warp", "mujoco_warp", "cuda_driver")
    lines = [f"gpu_check: environment = {json.dumps({k: env.get(k) for k in versions})}"] if env else []
    skip = ("blocks", "environment")
    return lines + [f"gpu_check: {key} = {json.dumps(value)}" for key, value in facts.items() if key not in skip]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["environment"] and len(args) <= 3:
        links = Path(args[1]) if len(args) > 1 else Path("/tmp/unilab_libcuda")
        facts, status = environment(links, *(float(a) for a in args[2:]))
        print(json.dumps(facts, indent=2))
        return status
    if args == ["triton-kernel"]:
        return triton_kernel()
    if len(args) == 2 and args[0] == "summary":
        print(json.dumps(summary(Path(args[1])), indent=2))
        return 0
    if len(args) == 2 and args[0] == "brief":
        print("\n".join(brief(json.loads(Path(args[1]).read_text()))))
        return 0
    if len(args) == 2 and args[0] == "library":
        folder = find_library(args[1])
        if folder is None:
            hint = " (NVRTC: pip package nvidia-cuda-nvrtc, which torch cu130 depends on)" if "nvrtc" in args[1] else ""
            say(
                f"gpu_check: the bundle needs {args[1]}{hint}: not in the nvidia packages of {sys.executable}, "
                "$CUDA_HOME/lib64 or /usr/local/cuda/lib64; nothing else was run"
            )
            return 1
        print(folder)
        return 0
    say(
        "usage: gpu_check_facts.py environment [LINKS [SECONDS]] | summary WORK | brief GPU_CHECK_JSON | "
        "library SONAME | triton-kernel"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
