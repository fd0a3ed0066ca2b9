"""A rehearsal of scripts/gpu_check.sh on a CPU: its real control flow (order, budgets, the
deadline, SIGINT then SIGKILL, the key-facts summary after every block, the exit status) with
every block's program replaced by scripts/gpu_check_stub.py (``GPU_CHECK_REHEARSAL=1``), cut at
chosen points. Each block's JSON must survive its cut, and the exit status must say what happened.

The scenarios run at the same time (each takes a few seconds, mostly waiting).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _start(out: Path, seconds: int = 120, **env: str) -> subprocess.Popen:
    out.mkdir(parents=True)
    settings = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "OUT": str(out),
        "PYTHON": sys.executable,
        "GPU_CHECK_REHEARSAL": "1",
        "GPU_CHECK_SECONDS": str(seconds),
        "GPU_CHECK_GRACE": "1",
        "GPU_CHECK_MIN_BLOCK": "1",
        "GPU_CHECK_STUB_STEP": "0.05",
        **env,
    }
    return subprocess.Popen(
        ["bash", "scripts/gpu_check.sh"],
        cwd=ROOT,
        env=settings,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as on the device machine
    )


def _blocks(out: Path) -> dict[str, dict[str, str]]:
    return {b["block"]: b for b in json.loads((out / "gpu_check.json").read_text())["blocks"]}


def _facts(out: Path) -> dict:
    return json.loads((out / "gpu_check.json").read_text())


@pytest.fixture(scope="module")
def rehearsals(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """Every scenario's exit status, output and OUT folder."""
    base = tmp_path_factory.mktemp("rehearsal")
    started = {
        "ok": _start(base / "ok"),
        # The doctor hangs after two checks; the 40 s deadline (before its budget) cuts it and leaves
        # no time for the rest.
        "deadline": _start(
            base / "deadline", seconds=40, GPU_CHECK_STUB="doctor=hang@2", GPU_CHECK_BUDGETS="doctor=1000"
        ),
        # pytest hangs after two tests and is cut at its 4 s budget; the compiled step fails, so
        # training runs without torch.compile, hangs ignoring SIGINT and is killed.
        "budgets": _start(
            base / "budgets",
            GPU_CHECK_STUB="gpu_tests=hang@2;compile=fail;train=stubborn@1",
            GPU_CHECK_BUDGETS="gpu_tests=4 train=5",
        ),
        # The device call's own limit: the whole check is stopped from outside during the doctor.
        "outside": _start(base / "outside", GPU_CHECK_STUB="doctor=hang@3"),
    }
    outside = started["outside"]
    doctor = base / "outside" / "doctor.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not doctor.is_file() or len(json.loads(doctor.read_text() or "{}").get("checks", [])) < 3
    ):
        time.sleep(0.1)
    time.sleep(0.3)
    os.killpg(outside.pid, signal.SIGTERM)
    results = {}
    for name, process in started.items():
        output, _ = process.communicate(timeout=120)
        results[name] = (process.returncode, output, base / name)
    return results


def test_a_run_that_finishes_in_time_exits_0_with_every_key_fact(rehearsals) -> None:
    status, output, out = rehearsals["ok"]
    assert status == 0, output
    blocks = _blocks(out)
    expected = ["environment", "warm", "doctor", "bench_capture", "gpu_tests", "compile", "train", "train_update"]
    assert list(blocks) == expected
    assert all(b["exit"] == "0" for b in blocks.values())
    facts = _facts(out)
    assert facts["capture_works"] and facts["replay_equals_eager"] and facts["no_sync_in_replay"]
    assert facts["physics_only_env_steps_per_s_at_num_envs"] == 2.0e6 and facts["split_capture"] is False
    assert [row["num_envs"] for row in facts["bench_capture"]] == [1024, 4096, 8192]
    assert facts["gpu_tests"]["tests"] == 5 and facts["train_failures"] == [] and facts["warm_modules"] == 4
    assert json.loads((out / "warm.json").read_text())["complete"] is True
    assert "Triton: built and launched a kernel" in output


def test_a_block_cut_by_the_deadline_keeps_its_json_and_the_rest_is_skipped(rehearsals) -> None:
    status, output, out = rehearsals["deadline"]
    assert status == 4, output  # nothing failed; something was cut or skipped for want of time
    blocks = _blocks(out)
    assert blocks["doctor"]["exit"] == "cut_deadline"
    assert all(blocks[name]["exit"] == "skipped" for name in ("bench_capture", "gpu_tests", "train"))
    assert blocks["train"]["reason"] == "out_of_time"
    facts = _facts(out)  # what the doctor measured before the cut
    assert facts["physics_only_env_steps_per_s_at_num_envs"] == 2.0e6 and facts["capture_works"] is True
    assert facts["replay_equals_eager"] is None
    assert facts["doctor_interrupted"] == "SIGINT during 'replay equals eager (deterministic)'"


def test_budgets_cut_pytest_with_sigint_and_kill_a_stuck_block_and_a_failure_wins(rehearsals) -> None:
    status, output, out = rehearsals["budgets"]
    assert status == 1, output  # the compiled step failed: that outranks the cuts
    blocks = _blocks(out)
    assert blocks["gpu_tests"]["exit"] == "cut_budget" and blocks["gpu_tests"]["budget"] == "4"
    assert blocks["compile"]["exit"] == "1"
    assert blocks["train"]["exit"] == "killed"  # ignored SIGINT: SIGKILL after the grace period
    facts = _facts(out)
    assert facts["gpu_tests"] == {"tests": 2, "failures": 0, "errors": 0, "skipped": 0}  # pytest's report on SIGINT
    assert facts["train_env_steps_per_s"] == 5e5  # written before it got stuck
    train = json.loads((out / "train_check.json").read_text())
    assert train["command"][-1] == "compile=false"  # the compiled step failed: training runs eagerly
    assert "gpu_tests was cut at 4 s (SIGINT)" in output and "train was cut at 5 s and killed 1 s later" in output


def test_a_check_stopped_from_outside_still_writes_the_facts_so_far(rehearsals) -> None:
    status, output, out = rehearsals["outside"]
    assert status == 4, output
    assert "gpu_check: stopped from outside" in (out / "summary.txt").read_text()
    facts = _facts(out)
    assert facts["capture_works"] is True and facts["replay_equals_eager"] is True
    assert facts["no_sync_in_replay"] is None  # the doctor was in its fourth check
    assert "doctor" not in _blocks(out)
