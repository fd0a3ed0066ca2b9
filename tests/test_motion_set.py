"""Motion sets: files, folders and globs with weights, resolved in a fixed order; the tracking task
trains on them (clips at any frame rate, resampled), draws clips by weight and reports per-clip
episode statistics."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.motion import MotionFormatError, RobotKinematics, save_motion, synthesize_clip
from unilab_gpu.motion.motion_set import clip_names, resolve_motion_set
from unilab_gpu.utils.sync_audit import no_host_sync

KEY = "commands.motion.params.motion_files"
WEIGHTS = "commands.motion.params.motion_weights"


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module")
def library(tmp_path_factory, kin) -> Path:
    """walks/{a,b}.npz at 50 fps, dances/c.npz at 30 fps, dances/notes.txt."""
    root = tmp_path_factory.mktemp("clips")
    (root / "walks").mkdir()
    (root / "dances").mkdir()
    save_motion(synthesize_clip(seconds=1.0, seed=0, kinematics=kin), root / "walks" / "a.npz")
    save_motion(synthesize_clip(seconds=1.5, seed=1, kinematics=kin), root / "walks" / "b.npz")
    save_motion(synthesize_clip(seconds=2.0, seed=2, fps=30.0, kinematics=kin), root / "dances" / "c.npz")
    (root / "dances" / "notes.txt").write_text("not a clip")
    return root


def test_files_folders_and_globs_resolve_in_order_with_weights(library) -> None:
    entries = [str(library / "dances" / "c.npz"), str(library / "walks"), str(library / "**" / "b.np?")]
    with pytest.raises(MotionFormatError, match=r"names .*b.npz twice \(entries 1 and 2\)"):
        resolve_motion_set(entries)
    clips = resolve_motion_set(entries[:2], [2.0, 0.5])
    assert [c.path for c in clips] == [library / "dances" / "c.npz", library / "walks" / "a.npz",
                                       library / "walks" / "b.npz"]  # fmt: skip
    assert [c.weight for c in clips] == [2.0, 0.5, 0.5] and [c.name for c in clips] == ["c", "a", "b"]
    # A glob: what Python's glob finds, motion files only (notes.txt is left out), sorted.
    pattern = str(library / "**" / "*")
    expected = sorted(p for p in glob.glob(pattern, recursive=True) if p.endswith(".npz"))
    assert [str(c.path) for c in resolve_motion_set([pattern])] == expected and len(expected) == 3


def test_clip_names_stay_unique() -> None:
    assert clip_names([Path("/d/walks/run.npz"), Path("/d/dances/run.npz")]) == ["walks/run", "dances/run"]
    assert clip_names([Path("/d/run.npz"), Path("/d/run.csv")]) == ["run.npz", "run.csv"]


@pytest.mark.parametrize(
    ("entries", "weights", "message"),
    [
        ([], None, rf"^'{KEY}' is empty; expected at least one motion file, folder or glob$"),
        (["{empty}"], None, rf"^'{KEY}\[0\]' = '.*empty' is a folder without .npz or .csv files; expected a folder"),
        (["{root}/*/*.bvh"], None, rf"^'{KEY}\[0\]' = '.*\*\.bvh' matches no .npz or .csv file; expected a glob"),
        (["{root}/walks", "{root}/dances"], [1.0, 0.0], rf"^'{WEIGHTS}\[1\]' must be a finite number > 0, got 0.0$"),
        (["{root}/walks"], [1.0, -2.0], rf"^'{WEIGHTS}' has 2 weights, expected 1 \(one per {KEY} entry\)$"),
        (["{root}/walks"], [float("nan")], rf"^'{WEIGHTS}\[0\]' must be a finite number > 0, got nan$"),
    ],
)
def test_bad_motion_sets_are_refused_in_one_line(library, tmp_path, entries, weights, message) -> None:
    (tmp_path / "empty").mkdir()
    entries = [e.format(root=library, empty=tmp_path / "empty") for e in entries]
    with pytest.raises(MotionFormatError, match=message) as error:
        resolve_motion_set(entries, weights, key=KEY, weights_key=WEIGHTS)
    assert "\n" not in str(error.value)


def _env(files: str, weights: str | None = None, extra: tuple[str, ...] = ()):
    overrides = [f"{KEY}={files}", "events.push=null", *extra]
    if weights is not None:
        overrides.append(f"{WEIGHTS}={weights}")
    return make_env("g1_tracking", num_envs=8, compile=False, seed=0, announce=False, overrides=overrides)


def test_the_task_trains_on_a_folder_and_a_file_at_another_rate(library) -> None:
    """c.npz is stored at 30 fps: resampled to the 50 Hz control rate like every clip."""
    env = _env(f"[{library / 'walks'},{library / 'dances' / 'c.npz'}]", "[1.0,3.0]",
               ("terminations.anchor_height.params.threshold=0.001",))  # fmt: skip
    motion = env.command_manager.get("motion")
    lib = motion.library
    assert lib.clip_names == ("a", "b", "c") and lib.fps == 50.0
    assert lib.clip_length.tolist() == [51, 76, (61 - 1) * 50 // 30 + 1]  # 61 frames at 30 fps
    assert lib.clip_weight.tolist() == [1.0, 1.0, 3.0]
    env.reset()
    buffers = {name: t.data_ptr() for name, t in env.persistent_buffers().items()}
    with no_host_sync():
        for _ in range(6):  # a 1 mm anchor-height threshold ends nearly every episode at once
            env.step(torch.zeros(env.num_envs, env.action_dim))
    assert {name: t.data_ptr() for name, t in env.persistent_buffers().items()} == buffers
    summary = env.stats.summary()
    per_clip = {name: summary[f"motion/{name}/episodes"] for name in lib.clip_names}
    assert sum(per_clip.values()) == summary["episode/count"] > 0
    lengths = sum(summary[f"motion/{n}/episode_length"] * per_clip[n] for n in lib.clip_names)
    failures = sum(summary[f"motion/{n}/failure_rate"] * per_clip[n] for n in lib.clip_names)
    assert lengths == pytest.approx(summary["episode/length"] * summary["episode/count"])
    assert failures == pytest.approx(summary["episode/terminated_rate"] * summary["episode/count"])
    state = env.learning_state()["commands.motion"]
    assert state["sampler.clip_bins"].tolist() == [2, 2, 3]  # 51, 76, 101 frames in 50-frame bins


def test_one_clip_adds_no_per_clip_keys(library) -> None:
    env = _env(f"[{library / 'walks' / 'a.npz'}]")
    assert env.command_manager.get("motion").library.clip_names == ("a",)
    assert not [k for k in env.stats.summary() if k.startswith("motion/a/")]


def test_motion_files_given_as_a_string_is_refused(library) -> None:
    with pytest.raises(ValueError, match=rf"^{KEY} must be a list of paths, e.g. motion_files=\[.*walks\]"):
        _env(str(library / "walks"))


def test_a_resume_with_another_motion_set_is_refused(library) -> None:
    a, c = library / "walks" / "a.npz", library / "dances" / "c.npz"
    first, second = _env(f"[{a},{c}]"), _env(f"[{c},{a}]")  # as many bins, in another order
    state = first.learning_state()
    assert state["commands.motion"]["sampler.failure_ema"].shape == (5,)
    with pytest.raises(ValueError, match=r"has \[2, 3\] bins per clip, this motion library \[3, 2\]"):
        second.load_learning_state(state)


def test_weights_without_files_are_refused() -> None:
    with pytest.raises(ValueError, match=f"{WEIGHTS} needs motion_files"):
        make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=[f"{WEIGHTS}=[2.0]"])


def test_weights_scale_how_often_a_clip_starts(library) -> None:
    env = _env(f"[{library / 'walks' / 'a.npz'},{library / 'walks' / 'b.npz'}]", "[4.0,1.0]",
               ("commands.motion.params.sampling=start",))  # fmt: skip
    sampler = env.command_manager.get("motion").sampler
    clip, _ = sampler.sample(40_000)
    share = np.bincount(clip.numpy(), minlength=2) / 40_000
    assert share == pytest.approx([0.8, 0.2], abs=0.01)
