"""The facts scripts/gpu_check.sh records: block 0's environment, and the key facts so far.

    python scripts/gpu_check_facts.py environment       # JSON on stdout; exit 1 unless CUDA is usable
    python scripts/gpu_check_facts.py summary OUT       # the key facts so far, JSON on stdout
    python scripts/gpu_check_facts.py library SONAME    # the folder holding SONAME on this machine

``environment`` prints (JSON) whether CUDA is usable (a real launch, not a device count), the
versions of torch, Warp, MuJoCo and MJWarp and where Warp was imported from (the bundle's
install or not), the file NVRTC was loaded from (``nvrtc``), and whether Triton can build its
driver here (``torch_compile``): Triton
compiles a C file at first use with ``$CC``, else ``gcc``, else ``clang``, against this
interpreter's ``Python.h`` (``triton/runtime/build.py``). The same in words goes to stderr.

``summary`` prints, as JSON, the key facts of what the blocks wrote so far (``environment.json``,
``doctor.json``, ``summary.txt``): CUDA usable, capture works (and its capture ids), replay ==
eager, no sync in replay, env-steps/s of the captured step and at how many envs, and every
block's exit status and seconds; a missing file leaves its facts ``null``. gpu_check.sh runs it
after every block and renames its output over ``OUT/gpu_check.json`` (as it does with
``environment.json``): the standard library only, so it costs a fraction of a second.

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


def environment() -> tuple[dict[str, Any], int]:
    """The facts of block 0 and the exit status (1: CUDA unusable); the words go to stderr."""
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

    missing = triton_build_missing()
    facts.update(
        cuda_usable=True,
        devices=torch.cuda.device_count(),
        device_name=torch.cuda.get_device_name(0),
        cuda_driver=".".join(map(str, wp.get_cuda_driver_version() or ())),
        warp=wp.__version__,
        warp_file=wp.__file__,
        mujoco=mujoco.__version__,
        mujoco_warp=mujoco_warp.__version__,
        torch_compile=not missing,
        torch_compile_missing=missing,
        nvrtc=loaded_library("libnvrtc.so"),  # Warp compiles its CUDA kernels with NVRTC
    )
    say(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {facts['devices']} x {facts['device_name']}")
    say(f"warp {wp.__version__} (driver {facts['cuda_driver']}) from {wp.__file__}")
    say(f"mujoco {mujoco.__version__}, mujoco_warp {mujoco_warp.__version__}")
    say(f"NVRTC loaded from {facts['nvrtc'] or 'no file (linked into warp.so)'}")
    say("Triton can build its driver: " + ("yes" if not missing else "no, missing " + ", ".join(missing)))
    return facts, 0


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


def summary(out: Path) -> dict[str, Any]:
    env, doctor = _read(out / "environment.json"), _read(out / "doctor.json")
    checks = {c["name"]: c for c in (doctor or {}).get("checks", [])}

    def passed(name: str) -> bool | None:
        return checks[name]["status"] == "pass" if name in checks else None

    throughput = checks.get("throughput and phases", {}).get("data", {})
    summary_txt = out / "summary.txt"
    facts = {
        "cuda_usable": None if env is None else env["cuda_usable"],
        "capture_works": passed("whole step captures"),
        "capture_ids": checks.get("whole step captures", {}).get("data", {}).get("capture_ids"),
        "replay_equals_eager": passed("replay equals eager (deterministic)"),
        "no_sync_in_replay": passed("no host sync during replay"),
        "env_steps_per_s": throughput.get("env_steps_per_s"),
        "num_envs": throughput.get("num_envs"),
        "physics_only_env_steps_per_s": throughput.get("physics_only_env_steps_per_s"),
        "doctor_verdict": None if doctor is None else doctor["verdict"],
        "blocks": blocks(summary_txt.read_text()) if summary_txt.is_file() else [],
        "environment": env,
    }
    bundle = next((b for b in facts["blocks"] if b["block"] == "bundle"), {})
    # The NVRTC file Warp loaded (block 0), else the folder gpu_check.sh found it in or "missing".
    facts["nvrtc"] = (env or {}).get("nvrtc") or bundle.get("nvrtc")
    return facts


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["environment"]:
        facts, status = environment()
        print(json.dumps(facts, indent=2))
        return status
    if len(args) == 2 and args[0] == "summary":
        print(json.dumps(summary(Path(args[1])), indent=2))
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
    say("usage: gpu_check_facts.py environment | summary OUT | library SONAME")
    return 2


if __name__ == "__main__":
    sys.exit(main())
