"""scripts/gpu_check.sh fails loudly where CUDA is unusable, and so does ``pytest -m gpu`` under it;
it installs the offline bundle when one is there; its facts script (Triton's build needs, the key
facts summary) on hand-made inputs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from script_helpers import load_script
from test_gpu_bundle import _write_sums, bundle  # noqa: F401  (the fake bundle fixture, its sums)

ROOT = Path(__file__).resolve().parents[1]
CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
facts = load_script("gpu_check_facts")


def _gpu_check(
    out: Path, bundle_dir: Path, target: Path | None = None, **extra_env: str
) -> subprocess.CompletedProcess:
    env = {**CPU_ONLY, "OUT": str(out), "PYTHON": sys.executable, "BUNDLE": str(bundle_dir), **extra_env}
    env.setdefault("GPU_CHECK_WORK", str(_work(out)))
    # Block 0's real imports (torch, Warp, MJWarp) on a shared CPU can outlast its 40 s budget (the GPU machine's).
    env.setdefault("GPU_CHECK_BUDGETS", "environment=180")
    if target is not None:
        env["BUNDLE_TARGET"] = str(target)
    return subprocess.run(
        ["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _work(out: Path) -> Path:
    return out.with_name(out.name + "_work")


def test_gpu_check_stops_with_an_error_before_running_anything_without_cuda(tmp_path) -> None:
    run = _gpu_check(tmp_path, tmp_path / "no_bundle")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "sees no CUDA device" in run.stdout + run.stderr
    assert "CUDA is not usable here; nothing else was run" in (tmp_path / "summary.txt").read_text()
    assert not (_work(tmp_path) / "doctor.json").exists()
    assert "sees no CUDA device" in (_work(tmp_path) / "environment.txt").read_text()
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert summary["cuda_usable"] is False and summary["capture_works"] is None and summary["blocks"] == []


def test_gpu_check_installs_the_carried_bundle_first(bundle, tmp_path) -> None:  # noqa: F811
    """Installed, the machine's NVRTC found for the bundle's library, then (no CUDA here) exit 2."""
    (bundle / "nvrtc.txt").write_text("libnvrtc.so.99\n")  # its library loads NVRTC from the machine
    _write_sums(bundle)
    machine = tmp_path / "machine_site"  # the machine's site-packages, where torch cu130 put NVRTC
    (machine / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (machine / "nvidia" / "cu13" / "lib" / "libnvrtc.so.99").write_bytes(b"")
    out, target = tmp_path / "out", tmp_path / "site"
    run = _gpu_check(out, bundle, target, PYTHONPATH=str(machine))
    assert run.returncode == 2, run.stdout + run.stderr  # installed; then no CUDA here
    assert f"installed into {target}" in run.stdout
    assert (target / "tinypkg" / "__init__.py").is_file() and (target / "tinypkg" / "bin" / "lib.so").is_file()
    first_line = (out / "summary.txt").read_text().splitlines()[0]
    assert first_line.startswith("bundle exit=0 ") and first_line.endswith(f"target={target}")
    nvrtc_folder = str(machine / "nvidia" / "cu13" / "lib")  # found, and put on LD_LIBRARY_PATH
    assert f" nvrtc={nvrtc_folder} " in first_line
    summary = json.loads((out / "gpu_check.json").read_text())
    assert summary["blocks"][0]["block"] == "bundle" and summary["nvrtc"] == nvrtc_folder


def test_gpu_check_stops_on_a_broken_bundle(bundle, tmp_path) -> None:  # noqa: F811
    (bundle / "unpack.txt").write_text("tampered\n")  # no longer matches SHA256SUMS
    run = _gpu_check(tmp_path / "out", bundle, tmp_path / "site")
    assert run.returncode == 3
    assert "does not match its SHA256SUMS line" in run.stderr
    assert "did not install; nothing else was run" in (tmp_path / "out" / "summary.txt").read_text()
    assert not (tmp_path / "out_work" / "environment.txt").exists()  # block 0 never started


def test_gpu_check_stops_before_cuda_when_the_machine_lacks_the_bundles_nvrtc(bundle, tmp_path) -> None:  # noqa: F811
    (bundle / "nvrtc.txt").write_text("libnvrtc.so.99\n")  # a version no machine has
    _write_sums(bundle)
    out = tmp_path / "out"
    run = _gpu_check(out, bundle, tmp_path / "site", CUDA_HOME=str(tmp_path / "no_toolkit"))
    assert run.returncode == 3, run.stdout + run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("gpu_check:")] == [  # pip may warn too
        "gpu_check: the bundle needs libnvrtc.so.99 (NVRTC: pip package nvidia-cuda-nvrtc, which torch cu130 depends"
        f" on): not in the nvidia packages of {sys.executable}, $CUDA_HOME/lib64 or /usr/local/cuda/lib64; nothing"
        " else was run"
    ]
    assert (out / "summary.txt").read_text().startswith("bundle exit=3 ")
    assert json.loads((out / "gpu_check.json").read_text())["nvrtc"] == "missing"
    assert not (_work(out) / "environment.txt").exists()


def test_find_library_looks_in_the_nvidia_packages_first_then_in_the_toolkit(monkeypatch, tmp_path) -> None:
    site, toolkit = tmp_path / "site", tmp_path / "cuda"
    for folder, names in (
        (site / "nvidia" / "cu13" / "lib", ["libx.so.1"]),
        (toolkit / "lib64", ["libx.so.1", "liby.so.2"]),
    ):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_bytes(b"")
    monkeypatch.setattr(facts.sys, "path", ["", str(site)])
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    assert facts.find_library("libx.so.1") == str(site / "nvidia" / "cu13" / "lib")
    assert facts.find_library("liby.so.2") == str(toolkit / "lib64")
    assert facts.find_library("libz.so.3") is None


def test_loaded_library_names_the_file_this_process_mapped() -> None:
    import ctypes
    import ctypes.util

    libm = ctypes.util.find_library("m")  # the loader's name for it, e.g. libm.so.6
    ctypes.CDLL(libm)
    path = facts.loaded_library("libm.so")
    assert path is not None and os.path.isfile(path) and os.path.basename(path) == libm
    assert facts.loaded_library("libunilab_no_such_library") is None


def test_required_gpu_tests_error_instead_of_skipping_without_cuda() -> None:
    args = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/test_capture.py"]
    run = subprocess.run(args, cwd=ROOT, env={**CPU_ONLY, "UNILAB_REQUIRE_GPU": "1"}, capture_output=True, text=True)
    assert (
        run.returncode != 0 and "UNILAB_REQUIRE_GPU=1 but torch sees no usable CUDA device" in run.stderr + run.stdout
    )
    run = subprocess.run(args, cwd=ROOT, env=CPU_ONLY, capture_output=True, text=True)
    assert run.returncode == 0 and "skipped" in run.stdout  # without the flag: skips, as on CI


def test_triton_build_needs_a_compiler_and_python_headers(monkeypatch, tmp_path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    monkeypatch.setattr(facts.sysconfig, "get_paths", lambda scheme=None: {"include": str(include)})
    monkeypatch.setattr(facts.shutil, "which", lambda name: None)
    monkeypatch.delenv("CC", raising=False)
    assert facts.triton_build_missing() == ["a C compiler (CC, gcc or clang)", f"Python.h in {include}"]
    (include / "Python.h").write_text("")
    monkeypatch.setattr(facts.shutil, "which", lambda name: "/usr/bin/clang" if name == "clang" else None)
    assert facts.triton_build_missing() == []
    monkeypatch.setattr(facts.shutil, "which", lambda name: None)
    monkeypatch.setenv("CC", "/opt/cc")  # Triton takes $CC first
    assert facts.triton_build_missing() == []


def test_the_summary_holds_the_key_facts_of_the_blocks_that_ran(tmp_path) -> None:
    (tmp_path / "environment.json").write_text(
        json.dumps({"cuda_usable": True, "torch": "2.11.0+cu130", "nvrtc": "/lib/libnvrtc.so.13"})
    )
    checks = [
        {"name": "whole step captures", "status": "pass", "detail": "", "data": {"capture_ids": [5, 5]}},
        {"name": "replay equals eager (deterministic)", "status": "fail", "detail": "", "data": {}},
        {"name": "no host sync during replay", "status": "pass", "detail": "", "data": {}},
        {"name": "throughput and phases", "status": "info", "data": {"num_envs": 4096, "env_steps_per_s": 1e5}},
    ]
    (tmp_path / "doctor.json").write_text(json.dumps({"verdict": "fail", "checks": checks}))
    (tmp_path / "summary.txt").write_text(
        "bundle exit=0 seconds=12 nvrtc=/lib target=/tmp/site\nenvironment exit=0 seconds=3 budget=90\n"
        "gpu_check: doctor was cut at 130 s (SIGINT)\ndoctor exit=cut_budget seconds=130 budget=130\n"
        "train exit=skipped seconds=0 budget=100 reason=out_of_time\n"
    )
    got = facts.summary(tmp_path)
    printed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check_facts.py"), "summary", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert json.loads(printed.stdout) == got
    assert (got["cuda_usable"], got["capture_works"], got["replay_equals_eager"], got["no_sync_in_replay"]) == (
        True,
        True,
        False,
        True,
    )
    assert got["nvrtc"] == "/lib/libnvrtc.so.13"  # the file Warp loaded, over the folder the bundle line names
    assert got["capture_ids"] == [5, 5] and got["env_steps_per_s"] == 1e5 and got["num_envs"] == 4096
    assert [b["block"] for b in got["blocks"]] == ["bundle", "environment", "doctor", "train"]
    assert got["blocks"][2] == {"block": "doctor", "exit": "cut_budget", "seconds": "130", "budget": "130"}
    assert got["blocks"][3]["reason"] == "out_of_time"


def test_the_summary_of_a_run_that_wrote_nothing_yet_is_all_unknown(tmp_path) -> None:
    got = facts.summary(tmp_path)
    assert got["cuda_usable"] is None and got["capture_works"] is None and got["blocks"] == []


def test_triton_is_proven_by_a_kernel_and_retried_with_links_to_the_loaded_libcuda(monkeypatch, tmp_path) -> None:
    """Block 0 runs a Triton kernel in a fresh process; if linking -lcuda fails, it links the
    driver library this process loaded into a folder and retries with TRITON_LIBCUDA_PATH."""
    monkeypatch.setattr(facts, "triton_build_missing", lambda: [])
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    libcuda = tmp_path / "driver" / "libcuda.so.1"
    libcuda.parent.mkdir()
    libcuda.write_bytes(b"")
    links = tmp_path / "links"
    tries = []

    def needs_links(env, timeout):
        tries.append(env.get("TRITON_LIBCUDA_PATH"))
        path = env.get("TRITON_LIBCUDA_PATH")
        ok = path is not None and os.path.realpath(Path(path) / "libcuda.so") == str(libcuda)
        return ok, "" if ok else "/usr/bin/ld: cannot find -lcuda", False

    got = facts.triton_facts(links, str(libcuda), run=needs_links)
    assert tries == [None, str(links)] and got["torch_compile"] and got["triton_libcuda_path"] == str(links)
    assert (links / "libcuda.so.1").resolve() == libcuda and (links / "libcuda.so").resolve() == libcuda
    assert got["triton"].startswith(f"Triton: built and launched a kernel with TRITON_LIBCUDA_PATH={links}")
    assert "cannot find -lcuda" in got["triton"] and "\n" not in got["triton"]

    assert facts.triton_facts(links, str(libcuda), run=lambda env, t: (True, "", False))["triton_libcuda_path"] is None
    never = facts.triton_facts(links, str(libcuda), run=lambda env, t: (False, "boom", False))
    assert not never["torch_compile"] and never["triton"].endswith("compile=false")
    monkeypatch.setattr(facts, "triton_build_missing", lambda: ["a C compiler (CC, gcc or clang)"])
    missing = facts.triton_facts(links, str(libcuda), run=lambda env, t: pytest.fail("must not run"))
    assert not missing["torch_compile"] and "missing a C compiler" in missing["triton"]


def test_the_summary_reads_pytests_junit_report_and_the_bench_rows(tmp_path) -> None:
    (tmp_path / "gpu_tests.xml").write_text(
        '<testsuites><testsuite tests="7" failures="1" errors="0" skipped="2"></testsuite></testsuites>'
    )
    bench = {"results": [{"num_envs": 1024, "env_steps_per_s": 5e5, "physics_only_ms": 1.6, "overhead_ratio": 1.3}]}
    (tmp_path / "bench_gpu_capture.json").write_text(json.dumps(bench))
    got = facts.summary(tmp_path)
    assert got["gpu_tests"] == {"tests": 7, "failures": 1, "errors": 0, "skipped": 2}
    (row,) = got["bench_capture"]
    assert row["physics_only_env_steps_per_s"] == pytest.approx(1024 / 1.6e-3) and row["overhead_ratio"] == 1.3
    (tmp_path / "gpu_tests.xml").write_text("<testsuites><testsuite")  # a report cut mid-write
    assert facts.summary(tmp_path)["gpu_tests"] is None


def test_the_rough_learning_block_reports_levels_and_success_per_sub_terrain(tmp_path) -> None:
    # Block 10 (ROUGH_LEARNING=1): the curve's mean terrain level (only the points that logged one)
    # and the terrain evaluation's success per sub-terrain; absent when the block did not run.
    assert "rough_learning" not in facts.summary(tmp_path)
    curve = {
        "env_steps": 4096 * 300,
        "curve": [
            {"env_steps": 0, "train/reward_mean": 0.1},
            {"env_steps": 4096, "terrain/mean_level": 2.5},
            {"env_steps": 8192, "terrain/mean_level": 4.25},
            {"env_steps": 12288, "terrain/mean_level": 3.75},
        ],
    }
    (tmp_path / "go2_velocity_rough_sac_gpu.json").write_text(json.dumps(curve))
    got = facts.summary(tmp_path)["rough_learning"]
    assert (got["mean_level_first"], got["mean_level_last"], got["mean_level_max"]) == (2.5, 3.75, 4.25)
    assert got["env_steps"] == 4096 * 300 and got["success_rate"] is None  # the evaluation did not run
    walk = {"sub_terrains": {"stairs_up": {"success_rate": 0.8125}, "slope_down": {"success_rate": 1.0}}}
    (tmp_path / "go2_velocity_rough_gpu_terrain_eval.json").write_text(json.dumps(walk))
    got = facts.summary(tmp_path)["rough_learning"]
    assert got["success_rate"] == {"stairs_up": 0.8125, "slope_down": 1.0}
    assert got["stairs_heights_success_rate"] is None  # the stairs-by-height evaluation did not run
    stairs = {"sub_terrains": {"stairs_up_4cm": {"success_rate": 1.0}, "stairs_up_10cm": {"success_rate": 0.25}}}
    (tmp_path / "go2_velocity_rough_gpu_stairs_heights_eval.json").write_text(json.dumps(stairs))
    got = facts.summary(tmp_path)["rough_learning"]
    assert got["stairs_heights_success_rate"] == {"stairs_up_4cm": 1.0, "stairs_up_10cm": 0.25}
    assert got["success_rate"] == {"stairs_up": 0.8125, "slope_down": 1.0}


def test_the_rough_block_gets_facts_of_its_own(tmp_path) -> None:
    # Block 9 (ROUGH=1) writes doctor_rough.json and bench_gpu_rough.json: summarised under "rough",
    # beside (not over) the key task's facts; absent when the block did not run.
    assert "rough" not in facts.summary(tmp_path)
    checks = [
        {"name": "whole step captures", "status": "pass", "detail": "", "data": {"capture_ids": [3, 3]}},
        {"name": "replay equals eager (deterministic)", "status": "pass", "data": {"steps_with_resets": 41}},
        {"name": "no host sync during replay", "status": "fail", "detail": "", "data": {}},
    ]
    (tmp_path / "doctor_rough.json").write_text(json.dumps({"verdict": "fail", "checks": checks}))
    bench = {"results": [{"num_envs": 4096, "env_steps_per_s": 2e5, "physics_only_ms": 16.0, "overhead_ratio": 1.2}]}
    (tmp_path / "bench_gpu_rough.json").write_text(json.dumps(bench))
    got = facts.summary(tmp_path)
    rough = got["rough"]
    assert (rough["capture_works"], rough["replay_equals_eager"], rough["no_sync_in_replay"]) == (True, True, False)
    assert rough["replay_steps_with_resets"] == 41 and rough["doctor_verdict"] == "fail"
    assert rough["bench"][0]["physics_only_env_steps_per_s"] == pytest.approx(4096 / 16e-3)
    assert got["capture_works"] is None and got["bench_capture"] == []  # the key task's blocks did not run


def test_the_triton_probe_lives_within_block_0s_budget_and_a_timeout_says_so(monkeypatch, tmp_path) -> None:
    """Both tries share what block 0 leaves them; a try that runs out is reported as a timeout of
    the probe and not retried (a hang is not the -lcuda failure the retry is for)."""
    monkeypatch.setattr(facts, "triton_build_missing", lambda: [])
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    libcuda = tmp_path / "libcuda.so.1"
    libcuda.write_bytes(b"")
    limits = []

    def hangs(env, timeout):
        limits.append(timeout)
        return False, f"no answer in {timeout:.0f} s", True

    got = facts.triton_facts(tmp_path / "links", str(libcuda), run=hangs, seconds=40)
    assert len(limits) == 1 and 39 < limits[0] <= 40  # one try, given the whole allotment
    assert not got["torch_compile"] and got["triton_timed_out"] is True
    assert got["triton"].startswith("Triton: the kernel probe timed out (no answer in 40 s)")
    assert got["triton"].endswith("compile=false below; CUDA itself is usable")

    limits.clear()

    def fails_then_hangs(env, timeout):
        limits.append(timeout)
        if len(limits) == 1:
            time.sleep(0.3)
            return False, "/usr/bin/ld: cannot find -lcuda", False
        return False, "no answer", True

    got = facts.triton_facts(tmp_path / "links", str(libcuda), run=fails_then_hangs, seconds=10)
    assert limits[0] == pytest.approx(10, abs=0.1) and limits[1] < 9.8  # the second gets what is left
    assert "in its second try" in got["triton"] and got["triton_timed_out"] is True
    spent = facts.triton_facts(tmp_path / "links", str(libcuda), run=lambda e, t: pytest.fail("no time"), seconds=0.5)
    assert spent["triton_timed_out"] is True and "before it started" in spent["triton"]


def test_a_probe_past_its_limit_is_stopped_and_reported_as_timed_out() -> None:
    # The real probe in a fresh interpreter: importing torch alone takes longer than 0.05 s.
    ok, error, timed_out = facts.run_triton_kernel(dict(os.environ), 0.05)
    assert (ok, error, timed_out) == (False, "no answer in 0 s", True)


def _rehearse(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    settings = {**CPU_ONLY, "PYTHON": sys.executable, "GPU_CHECK_REHEARSAL": "1", "GPU_CHECK_STUB_STEP": "0.01"}
    settings.update({"GPU_CHECK_GRACE": "1", "GPU_CHECK_MIN_BLOCK": "1", **env})
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")], cwd=cwd, env=settings, capture_output=True, text=True
    )


def test_relative_out_and_work_folders_are_the_callers(tmp_path) -> None:
    run = _rehearse(tmp_path, OUT="results/gpu", GPU_CHECK_WORK="scratch")
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((tmp_path / "results" / "gpu" / "gpu_check.json").read_text())["capture_works"] is True
    assert (tmp_path / "scratch" / "doctor.json").is_file()
    assert not (ROOT / "results").exists() and not (ROOT / "scratch").exists()
    assert f"results in {tmp_path / 'results' / 'gpu'}" in run.stdout


@pytest.mark.parametrize(
    "setting,line",
    [
        ({"GPU_CHECK_GRACE": "x"}, "GPU_CHECK_GRACE must be a whole number of seconds >= 1, got 'x'"),
        ({"GPU_CHECK_SECONDS": "abc"}, "GPU_CHECK_SECONDS must be a whole number of seconds >= 1, got 'abc'"),
        ({"GPU_CHECK_SECONDS": "0"}, "GPU_CHECK_SECONDS must be a whole number of seconds >= 1, got '0'"),
        ({"GPU_CHECK_MIN_BLOCK": "1.5"}, "GPU_CHECK_MIN_BLOCK must be a whole number of seconds >= 1, got '1.5'"),
        (
            {"GPU_CHECK_BUDGETS": "doctor=ten"},
            "GPU_CHECK_BUDGETS's doctor must be a whole number of seconds >= 1, got 'ten'",
        ),
        (
            {"GPU_CHECK_BUDGETS": "doctor"},
            "GPU_CHECK_BUDGETS: 'doctor' must be NAME=SECONDS with NAME one of: bench_capture ",
        ),
        ({"GPU_CHECK_BUDGETS": "docter=5"}, "GPU_CHECK_BUDGETS: 'docter=5' must be NAME=SECONDS with NAME one of: "),
        ({"ROUGH": "yes"}, "ROUGH must be 0 or 1, got 'yes'"),
        ({"PYTHON": "/bin/false"}, "PYTHON=/bin/false does not run as a Python 3.10 or newer interpreter; set PYTHON"),
        ({"GPU_CHECK_WORK": "out/work"}, "GPU_CHECK_WORK="),
    ],
)
def test_a_wrong_setting_is_one_line_naming_it_and_nothing_runs(tmp_path, setting, line) -> None:
    run = _rehearse(tmp_path, OUT="out", **setting)
    assert run.returncode == 5, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("gpu_check: " + line), run.stderr
    assert not (tmp_path / "out" / "gpu_check.json").exists() and "environment" not in run.stdout


def _plan(**env: str) -> tuple[int, int, list[tuple[str, int]]]:
    """A call's deadline, the ``budget_left_s`` it needs and its blocks with their budgets (``--plan``)."""
    run = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--plan"], cwd=ROOT, env={**CPU_ONLY, **env}, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    rows = [(name, int(seconds)) for name, seconds in (line.split() for line in run.stdout.splitlines())]
    assert [name for name, _ in rows[:2]] == ["deadline", "needs_budget_left_s"]
    return rows[0][1], rows[1][1], rows[2:]


DOCUMENTED_CALL = re.compile(
    r'run\(command="OUT=\$OUT ((?:[A-Z_]+=\w+ )*)bash scripts/gpu_check.sh", carry=\[".gpu_bundle/bundle"\], '
    r"timeout_s=(\d+)\)`?(?: \| (\d+) \|)?"
)
"""A device call in docs/gpu_check.md: its settings, its ``timeout_s`` and, for a further call, the
``budget_left_s`` it is documented to need."""


def _documented_calls() -> list[tuple[dict[str, str], int, int | None]]:
    text = (ROOT / "docs" / "gpu_check.md").read_text()
    calls = []
    for settings, timeout, needs in DOCUMENTED_CALL.findall(text):
        env = dict(item.split("=", 1) for item in settings.split())
        calls.append((env, int(timeout), int(needs) if needs else None))
    return calls


def test_the_docs_name_the_default_call_first_and_every_further_call() -> None:
    calls = _documented_calls()
    assert calls[0] == ({}, 510, None)  # the one call, in the first lines
    head = (ROOT / "docs" / "gpu_check.md").read_text().split("\n## ")[0]
    assert "One call" in head and "at most 4 files" in head and "Next, if time is left" in head
    flags = {key for env, _, _ in calls for key, value in env.items() if value == "1" and key != "SKIP_CHECKS"}
    assert flags == {"ROUGH", "UPDATE", "DANCE_LEARNING", "ROUGH_LEARNING", "LEARNING_CURVES", "DIST"}
    assert all(env.get("SKIP_CHECKS") == "1" and needs is not None for env, _, needs in calls[1:])


@pytest.mark.parametrize("call", _documented_calls(), ids=lambda call: " ".join(call[0]) or "default")
def test_every_documented_calls_budgets_fit_its_deadline_and_one_device_call(call) -> None:
    """docs/gpu_check.md's calls: the blocks' budgets, the bundle's install counted, add up to at
    most the deadline less 10 s (the summaries between blocks); the deadline leaves the call's
    ``timeout_s`` 30 s for the files' return, within a 600 s command; a further call's documented
    ``budget_left_s`` threshold is what ``--plan`` says it needs."""
    env, timeout, needs = call
    deadline, needed, blocks = _plan(**env)
    assert blocks[:2] == [("bundle", 40), ("environment", 40)]
    assert sum(seconds for _, seconds in blocks) <= deadline - 10, blocks
    assert deadline + 30 == timeout <= 600 and needed == timeout
    if needs is not None:
        assert needs == needed
    if not env:  # the default call: every key fact in at most 8 minutes, in the order we need them
        assert deadline == 480 and [name for name, _ in blocks] == [
            "bundle",
            "environment",
            "warm",
            "doctor",
            "capture_rough",
            "update_tests",
            "bench_capture",
            "train",
            "gpu_tests",
        ]
        assert sum(seconds for _, seconds in blocks) <= 470
        assert dict(blocks)["train"] >= 90  # the compiled training run's cold compile and capture fit


def test_compiled_equals_eager_is_reported_per_task_and_an_unfinished_task_is_unknown(tmp_path) -> None:
    assert facts.summary(tmp_path)["compiled_equals_eager"] is None  # the block did not run
    checks = [
        {"name": "compiled equals eager: g1_tracking", "status": "fail", "detail": "", "data": {"task": "g1_tracking"}}
    ]
    report = {"tasks": ["g1_tracking", "go2_velocity_rough"], "checks": checks, "complete": False}
    (tmp_path / "compiled_eager.json").write_text(json.dumps(report))
    assert facts.summary(tmp_path)["compiled_equals_eager"] == {"g1_tracking": False, "go2_velocity_rough": None}
    train = {"env_steps_per_s": 3e5, "compile": True, "update_mode": "compiled", "failures": []}
    (tmp_path / "train_check.json").write_text(json.dumps(train))
    got = facts.summary(tmp_path)
    assert (got["train_env_steps_per_s"], got["train_compile"], got["train_update_mode"]) == (3e5, True, "compiled")
    lines = facts.brief(got)
    assert 'gpu_check: compiled_equals_eager = {"g1_tracking": false, "go2_velocity_rough": null}' in lines
    assert not any(line.startswith(("gpu_check: blocks", "gpu_check: environment")) for line in lines)


def test_the_update_calls_facts_say_how_each_mode_ran_and_its_ratios(tmp_path) -> None:
    # Block 11 (UPDATE=1): a mode that asked for capture but fell back says so; the ratios are
    # bench_update.py's own; absent when the block did not run.
    assert "update" not in facts.summary(tmp_path)
    rows = [
        {"preset": "gpu", "mode": "eager", "update_mode": "eager", "update_ms": 8.0},
        {"preset": "gpu", "mode": "captured", "update_mode": "compiled", "update_ms": 4.0},
    ]
    report = {"results": rows, "ratios": {"gpu": {"captured_update_time_over_eager": 0.5}}, "complete": False}
    (tmp_path / "bench_gpu_update.json").write_text(json.dumps(report))
    got = facts.summary(tmp_path)["update"]
    assert got["update_mode"] == {"eager": "eager", "captured": "compiled"} and got["complete"] is False
    assert got["update_ms"] == {"eager": 8.0, "captured": 4.0} and got["ratios"] == report["ratios"]


def test_a_tracking_calls_facts_are_its_steps_and_full_clip_success(tmp_path) -> None:
    start = {"overall": {"success_rate": 0.25, "mpkpe_m": 0.08}}
    spread = {"overall": {"success_rate": 0.75, "mpkpe_m": 0.04}}
    (tmp_path / "g1_dance_sac_gpu_eval.json").write_text(json.dumps({"start": start, "spread": spread}))
    got = facts.summary(tmp_path)
    assert "tracking_learning" not in got
    assert got["dance_learning"] == {
        "env_steps": None,  # the curve's file is not there (cut before its first point)
        "success_rate_from_start": 0.25,
        "success_rate_from_spread": 0.75,
        "mpkpe_m_from_start": 0.08,
        "mpkpe_m_from_spread": 0.04,
    }
