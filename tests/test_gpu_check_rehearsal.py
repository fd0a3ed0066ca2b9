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
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


DEFAULT_BLOCKS = [
    "environment",
    "warm",
    "doctor",
    "capture_rough",
    "update_tests",
    "bench_capture",
    "train",
    "gpu_tests",
]
"""The blocks of the default call, in the order of what we most need to know."""

KEY_FACTS = {
    "environment": lambda f: f["cuda_usable"] is True and f["triton"] is not None,
    "warm": lambda f: f["warm_modules"] == 4,
    "doctor": lambda f: f["capture_works"] and f["replay_equals_eager"] and f["no_sync_in_replay"],
    "capture_rough": lambda f: f["capture_rough"]["capture_works"] and f["capture_rough"]["no_sync_in_replay"],
    "update_tests": lambda f: f["update_tests"]["tests"] == 5,
    "bench_capture": lambda f: [row["num_envs"] for row in f["bench_capture"]] == [8192, 4096],
    "train": lambda f: f["train_env_steps_per_s"] == 5e5 and f["train_update_mode"] == "captured",
    "gpu_tests": lambda f: f["gpu_tests"]["tests"] == 5,
}
"""Per block of the default call: its key facts in gpu_check.json once it has finished."""

RETURN_LIMIT = 16 * 1024 * 1024
"""The device machine returns no file of this size or more (and at most 8 files, two folders down)."""


def _start(out: Path, seconds: int = 120, **env: str) -> subprocess.Popen:
    out.mkdir(parents=True)
    settings = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "OUT": str(out),
        "GPU_CHECK_WORK": str(_work(out)),
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


def _work(out: Path) -> Path:
    """The scenario's working folder (GPU_CHECK_WORK), beside its OUT."""
    return out.with_name(out.name + "_work")


def _returned(out: Path, most: int = 8) -> list[str]:
    """What the device machine would return of OUT: every file, at most 8 of them (``most``) in at
    most two folder levels, each under 16 MiB (its limits; anything else is left behind)."""
    files = sorted(str(path.relative_to(out)) for path in out.rglob("*") if not path.is_dir())
    assert len(files) <= most and all(name.count("/") <= 1 for name in files), files
    sizes = {name: (out / name).stat().st_size for name in files}
    assert all(size < RETURN_LIMIT for size in sizes.values()), sizes
    return files


def _joined(out: Path, name: str) -> Path:
    """``NAME`` whole again from ``NAME.part0``, ``NAME.part1``, ... with docs/gpu_check.md's
    command (``cat NAME.part* > NAME``), in a folder beside OUT."""
    joined = out.with_name(out.name + "_joined")
    joined.mkdir(exist_ok=True)
    subprocess.run(f"cat {out}/{name}.part* > {joined}/{name}", shell=True, check=True)
    return joined


def _packed(out: Path, archive: str = "gpu_check_details.tar.gz") -> dict[str, bytes]:
    with tarfile.open(out / archive) as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _blocks(out: Path) -> dict[str, dict[str, str]]:
    return {b["block"]: b for b in json.loads((out / "gpu_check.json").read_text())["blocks"]}


def _facts(out: Path) -> dict:
    return json.loads((out / "gpu_check.json").read_text())


@pytest.fixture(scope="module")
def rehearsals(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """Every scenario's exit status, output and OUT folder."""
    base = tmp_path_factory.mktemp("rehearsal")
    peers = base / "peers"  # where the dance call finds holosoma's policy (the stub does not read it)
    (peers / "holosoma").mkdir(parents=True)
    (peers / "holosoma" / "ppo_g1_29dof_dancing.onnx").write_bytes(b"")
    started = {
        "ok": _start(base / "ok"),
        # The doctor hangs after two checks; the 40 s deadline (before its budget) cuts it and leaves
        # no time for the rest.
        "deadline": _start(
            base / "deadline", seconds=40, GPU_CHECK_STUB="doctor=hang@2", GPU_CHECK_BUDGETS="doctor=1000"
        ),
        # pytest hangs after two tests and is cut at its 4 s budget; the rough capture fails (a
        # failure, reported); training, compiled all the same, hangs ignoring SIGINT and is killed.
        "budgets": _start(
            base / "budgets",
            GPU_CHECK_STUB="gpu_tests=hang@2;capture_rough=fail;train=stubborn@1",
            GPU_CHECK_BUDGETS="gpu_tests=4 train=5",
        ),
        # The device call's own limit: the whole check is stopped from outside during the doctor.
        "outside": _start(base / "outside", GPU_CHECK_STUB="doctor=hang@3"),
        # Block 0 hangs (CUDA's start, say): cut at its budget, reported as such, nothing else runs.
        "environment_hangs": _start(
            base / "environment_hangs", GPU_CHECK_STUB="environment=hang", GPU_CHECK_BUDGETS="environment=2"
        ),
        # The Triton probe ran out of block 0's budget: CUDA is usable, the run goes on uncompiled.
        # The training run then stops itself before a steady window: cut short, not failed.
        "probe_timeout": _start(base / "probe_timeout", GPU_CHECK_STUB="environment=triton_timeout;train=cut"),
        # The further calls, together: run folders of real runs' sizes come back packed and split
        # into parts under 16 MiB; the rough curve is cut by its budget and keeps its points.
        "own_calls": _start(
            base / "own_calls",
            seconds=570,
            SKIP_CHECKS="1",
            LEARNING_CURVES="1",
            ROUGH="1",
            ROUGH_LEARNING="1",
            GPU_CHECK_STUB="curve_rough=hang@2",
            GPU_CHECK_BUDGETS="curve_rough=15",
        ),
        # The dance call and the update call: the clip extracted, learned and evaluated; the
        # update's modes, its captured mode captured.
        "dance": _start(
            base / "dance", seconds=570, SKIP_CHECKS="1", DANCE_LEARNING="1", UPDATE="1", GPU_CHECK_PEERS=str(peers)
        ),
        # Without ../shared/peers the dance blocks are skipped, with the reason; without Triton (block
        # 0's proof) the update call compares eager with the captured uncompiled update.
        "no_peers": _start(
            base / "no_peers",
            SKIP_CHECKS="1",
            DANCE_LEARNING="1",
            UPDATE="1",
            GPU_CHECK_PEERS=str(base / "no_peers_here"),
            GPU_CHECK_STUB="environment=no_triton",
        ),
        # Each block of the default call in turn hangs until the deadline cuts it.
        **{
            f"deadline_{name}": _start(
                base / f"deadline_{name}", seconds=60, GPU_CHECK_STUB=f"{name}=hang@1", GPU_CHECK_BUDGETS=f"{name}=1000"
            )
            for name in DEFAULT_BLOCKS[1:]
        },
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
        output, _ = process.communicate(timeout=600)  # minutes only on a machine loaded many times over
        results[name] = (process.returncode, output, base / name)
    return results


def test_a_run_that_finishes_in_time_exits_0_with_every_key_fact(rehearsals) -> None:
    status, output, out = rehearsals["ok"]
    assert status == 0, output
    blocks = _blocks(out)
    assert list(blocks) == DEFAULT_BLOCKS
    assert all(b["exit"] == "0" for b in blocks.values())
    facts = _facts(out)
    assert facts["capture_works"] and facts["replay_equals_eager"] and facts["no_sync_in_replay"]
    assert facts["physics_only_env_steps_per_s_at_num_envs"] == 2.0e6 and facts["split_capture"] is False
    assert [row["num_envs"] for row in facts["bench_capture"]] == [8192, 4096]  # the size a cut loses, first
    assert facts["gpu_tests"]["tests"] == 5 and facts["train_failures"] == [] and facts["warm_modules"] == 4
    assert all(KEY_FACTS[name](facts) for name in DEFAULT_BLOCKS)
    assert facts["compiled_equals_eager"] is None  # the ROUGH call's, not the default call's
    assert facts["train_compile"] is True and facts["train_cut"] is False
    assert "Triton: built and launched a kernel" in output
    # What comes back: the key facts, the summary and one archive of every block's files.
    assert _returned(out, most=4) == ["gpu_check.json", "gpu_check_details.tar.gz", "summary.txt"]
    packed = _packed(out)
    assert json.loads(packed["warm.json"])["complete"] is True
    for name in ("environment.json", "doctor.json", "capture_rough.json", "update_tests.xml", "gpu_tests.xml"):
        assert packed[name] == (_work(out) / name).read_bytes()
    assert packed["summary.txt"] == (out / "summary.txt").read_bytes()
    # The update tests run alone, first; the rest of the GPU tests leave them out.
    commands = {b: json.loads(packed["train_check.json"])["command"] for b in ("train",)}
    assert "algo.capture_update=true" in commands["train"] and "--log-every" in commands["train"]
    # ... and the key facts are on stdout too, one per line
    assert "gpu_check: replay_equals_eager = true" in output.splitlines()
    assert 'gpu_check: update_tests = {"tests": 5, "failures": 0, "errors": 0, "skipped": 0}' in output.splitlines()


def test_a_block_cut_by_the_deadline_keeps_its_json_and_the_rest_is_skipped(rehearsals) -> None:
    status, output, out = rehearsals["deadline"]
    assert status == 4, output  # nothing failed; something was cut or skipped for want of time
    blocks = _blocks(out)
    assert blocks["doctor"]["exit"] == "cut_deadline"
    assert all(blocks[name]["exit"] == "skipped" for name in ("bench_capture", "gpu_tests", "train"))
    assert blocks["train"]["reason"] == "out_of_time"
    assert json.loads(_packed(out)["doctor.json"])["checks"][1]["name"] == "whole step captures"
    _returned(out, most=4)
    facts = _facts(out)  # what the doctor measured before the cut
    assert facts["physics_only_env_steps_per_s_at_num_envs"] == 2.0e6 and facts["capture_works"] is True
    assert facts["replay_equals_eager"] is None
    assert facts["doctor_interrupted"] == "SIGINT during 'replay equals eager (deterministic)'"


def test_budgets_cut_pytest_with_sigint_and_kill_a_stuck_block_and_a_failure_wins(rehearsals) -> None:
    status, output, out = rehearsals["budgets"]
    assert status == 1, output  # the rough capture failed: that outranks the cuts
    blocks = _blocks(out)
    assert blocks["gpu_tests"]["exit"] == "cut_budget" and blocks["gpu_tests"]["budget"] == "4"
    assert blocks["capture_rough"]["exit"] == "1"
    assert blocks["train"]["exit"] == "killed"  # ignored SIGINT: SIGKILL after the grace period
    facts = _facts(out)
    assert facts["gpu_tests"] == {"tests": 2, "failures": 0, "errors": 0, "skipped": 0}  # pytest's report on SIGINT
    assert facts["train_env_steps_per_s"] == 5e5  # written before it got stuck
    train = json.loads(_packed(out)["train_check.json"])
    # A failed rough capture is reported; the training run is compiled all the same (its
    # throughput is the fact), and so is its report.
    assert "compile=false" not in train["command"] and train["update_mode"] == "captured"
    assert "gpu_tests was cut at 4 s (SIGINT)" in output and "train was cut at 5 s and killed 1 s later" in output
    _returned(out, most=4)


def test_a_check_stopped_from_outside_still_writes_the_facts_so_far(rehearsals) -> None:
    status, output, out = rehearsals["outside"]
    assert status == 4, output
    assert "gpu_check: stopped from outside" in (out / "summary.txt").read_text()
    facts = _facts(out)
    assert facts["capture_works"] is True and facts["replay_equals_eager"] is True
    assert facts["no_sync_in_replay"] is None  # the doctor was in its fourth check
    assert "doctor" not in _blocks(out)
    assert "doctor.json" in _packed(out) and "gpu_check: capture_works = true" in output.splitlines()
    _returned(out, most=4)


def test_a_hanging_block_0_is_reported_as_cut_not_as_unusable_cuda(rehearsals) -> None:
    status, output, out = rehearsals["environment_hangs"]
    assert status == 2, output
    assert _blocks(out)["environment"]["exit"] == "cut_budget"
    assert "block 0 ran past its 2 s budget before it could tell whether CUDA is usable" in output
    assert "CUDA is not usable" not in output
    _returned(out, most=4)


def test_a_triton_probe_timeout_is_reported_as_such_and_the_run_goes_on_uncompiled(rehearsals) -> None:
    status, output, out = rehearsals["probe_timeout"]
    assert status == 4, output  # the training run was cut short
    assert _blocks(out)["train"]["exit"] == "cut_short" and _blocks(out)["gpu_tests"]["exit"] == "0"
    assert "train stopped itself before it could measure (cut short, not failed)" in output
    facts = _facts(out)
    assert facts["cuda_usable"] is True and "the kernel probe timed out" in facts["triton"]
    assert facts["environment"]["triton_timed_out"] is True
    # Block 0's proof decides for every block, whether or not triton imports here.
    train = json.loads(_packed(out)["train_check.json"])
    assert facts["train_compile"] is False and "compile=false" in train["command"]


def test_the_calls_of_their_own_return_their_run_folders_packed(rehearsals) -> None:
    status, output, out = rehearsals["own_calls"]
    assert status == 4, output  # the rough curve was cut at its budget
    # Two run folders of real runs' sizes (42 MB): three parts under 16 MiB, which cat joins.
    assert _returned(out) == sorted(
        ["gpu_check.json", "gpu_check_details.tar.gz", "summary.txt"]
        + [f"gpu_check_runs.tar.gz.part{k}" for k in range(3)]
    )
    blocks = _blocks(out)
    assert blocks["curve_rough"]["exit"] == "cut_budget" and blocks["eval_rough"]["exit"] == "0"
    assert [name for name in blocks if name.startswith("dist")] == []  # DIST=1 was not asked for
    assert blocks["compiled_eager"]["exit"] == "0"  # the ROUGH call's
    assert _facts(out)["compiled_equals_eager"] == {"g1_tracking": True, "go2_velocity_rough": True}
    runs = _packed(_joined(out, "gpu_check_runs.tar.gz"), "gpu_check_runs.tar.gz")
    assert sorted(runs) == [
        "g1_tracking_sac_gpu_run/checkpoint.pt",
        "g1_tracking_sac_gpu_run/config.yaml",
        "go2_rough_gpu_run/checkpoint.pt",
        "go2_rough_gpu_run/config.yaml",
    ]
    assert runs["go2_rough_gpu_run/checkpoint.pt"] == (_work(out) / "go2_rough_gpu_run" / "checkpoint.pt").read_bytes()
    details = _packed(out)
    assert not any(name.endswith("_run") or "_run/" in name for name in details)
    assert json.loads(details["go2_velocity_rough_sac_gpu.json"])["env_steps"] == 2 * 4096 * 50  # the cut curve
    assert _facts(out)["rough_learning"]["mean_level_last"] == 2.0


@pytest.mark.parametrize("cut", DEFAULT_BLOCKS[1:])
def test_the_deadline_may_cut_any_block_and_every_block_still_has_a_status(rehearsals, cut) -> None:
    status, output, out = rehearsals[f"deadline_{cut}"]
    assert status == 4, output
    blocks = _blocks(out)
    assert list(blocks) == DEFAULT_BLOCKS, output
    at = DEFAULT_BLOCKS.index(cut)
    assert [blocks[name]["exit"] for name in DEFAULT_BLOCKS] == ["0"] * at + ["cut_deadline"] + ["skipped"] * (
        len(DEFAULT_BLOCKS) - at - 1
    )
    facts = _facts(out)
    assert [name for name in DEFAULT_BLOCKS[:at] if not KEY_FACTS[name](facts)] == []  # every finished block's
    _returned(out, most=4)


def test_the_dance_and_update_calls_return_the_clips_learning_and_the_updates_ratios(rehearsals) -> None:
    status, output, out = rehearsals["dance"]
    assert status == 0, output
    blocks = _blocks(out)
    assert list(blocks) == ["environment", "warm_update", "train_update", "dance_clip", "warm_dance", "curve_dance"] + [
        "eval_dance"
    ]
    facts = _facts(out)
    assert facts["update"]["update_mode"] == {"eager": "eager", "compiled": "compiled", "captured": "captured"}
    assert facts["update"]["ratios"]["gpu"]["captured_update_time_over_eager"] == 0.25
    assert 'gpu_check: update = {"update_mode": {"eager": "eager"' in output
    dance = facts["dance_learning"]
    assert dance["env_steps"] == 3 * 4096 * 50 and dance["success_rate_from_start"] == 0.5
    work = _work(out)
    curve = json.loads(_packed(out)["g1_dance_sac_gpu.json"])
    assert curve["env_steps"] == dance["env_steps"] and (work / "g1_dance_clip.npz").is_file()
    # One G1 run folder (24 MB): two parts.
    assert _returned(out) == sorted(
        ["gpu_check.json", "gpu_check_details.tar.gz", "summary.txt"]
        + [f"gpu_check_runs.tar.gz.part{k}" for k in range(2)]
    )
    runs = _packed(_joined(out, "gpu_check_runs.tar.gz"), "gpu_check_runs.tar.gz")
    assert runs["g1_dance_gpu_run/checkpoint.pt"] == (work / "g1_dance_gpu_run" / "checkpoint.pt").read_bytes()


def test_without_the_peers_the_dance_blocks_are_skipped_with_the_reason(rehearsals) -> None:
    status, output, out = rehearsals["no_peers"]
    assert status == 0, output  # nothing this machine could run failed
    blocks = _blocks(out)
    assert [(name, b["exit"], b.get("reason")) for name, b in blocks.items() if "dance" in name] == [
        (name, "skipped", "no_shared_peers") for name in ("dance_clip", "warm_dance", "curve_dance", "eval_dance")
    ]
    assert "ppo_g1_29dof_dancing.onnx is not on this machine" in output
    # Block 0 found no Triton: the update call's modes follow its proof (the dance call's, with
    # Triton proven, are eager, compiled and captured whether or not triton imports where it runs).
    assert list(_facts(out)["update"]["update_mode"]) == ["eager", "captured_eager"]
    _returned(out, most=4)
