"""Bad input to motion loading, ``unilab-motion`` and ``unilab-bench`` (issue 11, cases 5, 6, 7):
one-line errors naming the file and field, nothing written where it should not be, and no
measurement lost to an unwritable output or a failed plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from unilab_gpu.cli import bench as bench_cli
from unilab_gpu.cli.motion import main as motion_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.motion.canonical import save_motion
from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.loader import load_motion
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.motion.validation import MotionFormatError


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module")
def clip(kin):
    return synthesize_clip(seconds=0.2, seed=4, kinematics=kin)


def _one_frame(clip: MotionClip) -> MotionClip:
    fields = {k: v[:1] for k, v in clip.arrays().items()}
    return MotionClip(fps=clip.fps, joint_names=clip.joint_names, body_names=clip.body_names, **fields)


def _beyondmimic(clip: MotionClip, frames: slice = slice(None), fps: np.ndarray | None = None) -> dict[str, np.ndarray]:
    keys = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
    return {"fps": np.array([50]) if fps is None else fps, **{k: getattr(clip, k)[frames] for k in keys}}


def _motion(capsys, *argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        motion_main(list(argv))
        raise SystemExit(0)
    return exc.value.code or 0, capsys.readouterr().err


# -- case 5: one-frame clips --


def test_one_frame_canonical_clip_is_refused_naming_the_file(tmp_path, clip, kin):
    path = save_motion(_one_frame(clip), tmp_path / "still.npz")
    with pytest.raises(MotionFormatError, match=rf"{path}: canonical: the clip has 1 frame\(s\), expected at least 2"):
        load_motion(path, kinematics=kin)


def test_one_frame_beyondmimic_clip_is_refused_naming_the_file(tmp_path, clip, kin):
    path = tmp_path / "still_bm.npz"
    np.savez(path, **_beyondmimic(clip, slice(0, 1)))
    with pytest.raises(MotionFormatError, match=rf"{path}: beyondmimic: the clip has 1 frame\(s\)"):
        load_motion(path, kinematics=kin)


# -- case 7: motion files --


def test_non_numeric_header_fields_are_one_line_errors(tmp_path, clip, kin):
    path = tmp_path / "bad_fps.npz"
    np.savez(path, **_beyondmimic(clip, fps=np.array(["fast"])))
    with pytest.raises(
        MotionFormatError, match=rf"{path}: 'fps' must be a number of frames per second, got \['fast'\]"
    ):
        load_motion(path, kinematics=kin)
    good = save_motion(clip, tmp_path / "good.npz")
    data = dict(np.load(good))
    data["schema_version"] = np.array("one")
    np.savez(tmp_path / "bad_version.npz", **data)
    with pytest.raises(MotionFormatError, match="'schema_version' must be a single whole number, got 'one'"):
        load_motion(tmp_path / "bad_version.npz", kinematics=kin)


def test_npy_renamed_npz_is_a_one_line_error(tmp_path, kin):
    path = tmp_path / "clip.npz"
    with path.open("wb") as file:
        np.save(file, np.zeros((3, 4)))
    with pytest.raises(MotionFormatError, match=rf"{path}: not an .npz archive but a single ndarray"):
        load_motion(path, kinematics=kin)


def test_empty_csv_says_empty(tmp_path, kin):
    path = tmp_path / "empty.csv"
    path.write_text("\n")
    with pytest.raises(MotionFormatError, match="the CSV file is empty"):
        load_motion(path, kinematics=kin)


def test_motion_error_names_the_bad_file_among_several(tmp_path, clip):
    good = save_motion(clip, tmp_path / "good.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, **_beyondmimic(clip, slice(0, 1)))
    files = f"commands.motion.params.motion_files=[{good},{bad}]"
    with pytest.raises(MotionFormatError, match=rf"^{bad}: beyondmimic: the clip has 1 frame"):
        make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=[files])


def test_motion_files_given_as_a_string_is_refused(tmp_path, clip):
    good = save_motion(clip, tmp_path / "good.npz")
    with pytest.raises(ValueError, match=r"motion_files must be a list of paths, e.g. motion_files=\[.*good.npz\]"):
        make_env("g1_tracking", num_envs=2, compile=False, announce=False,
                 overrides=[f"commands.motion.params.motion_files={good}"])  # fmt: skip


def test_convert_into_an_existing_folder_writes_nothing(tmp_path, capsys, clip):
    source = save_motion(clip, tmp_path / "in.npz")
    folder = tmp_path / "out"
    folder.mkdir()
    code, err = _motion(capsys, "convert", str(source), str(folder))
    assert code == 2 and f"output {folder} is a folder" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz", "out"] and not any(folder.iterdir())


@pytest.mark.parametrize("command", [["synth", "x.npz"], ["convert", "in.npz", "out.npz"]])
def test_absurd_fps_is_refused_before_allocating(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    code, err = _motion(capsys, *command, "--fps", "1e9")
    assert code == 2 and "--fps: must be at most 1000 frames per second, got 1e9" in err
    assert list(tmp_path.iterdir()) == []


def test_absurd_fps_is_refused_by_the_library_too(tmp_path, clip, kin):
    path = save_motion(clip, tmp_path / "c.npz")
    with pytest.raises(MotionFormatError, match="'fps' must be a positive number of frames per second up to 1000"):
        load_motion(path, fps=1e9, kinematics=kin)


# -- case 6: unilab-bench --

BENCH = ["--task", "pendulum", "--steps", "2", "--warmup", "0", "--window", "2", "--no-compile", "--device", "cpu"]


def test_bench_checks_outputs_before_measuring(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_cli, "bench_env", lambda *a, **k: pytest.fail("measured before checking --out"))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(SystemExit, match=rf"--out: cannot write {blocker / 'bench.json'}: "):
        bench_cli.main([*BENCH, "--out", str(blocker / "bench.json")])
    with pytest.raises(SystemExit, match=rf"--plot: cannot write {tmp_path}: it is a folder"):
        bench_cli.main([*BENCH, "--out", str(tmp_path / "b.json"), "--plot", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # the probes left nothing


def test_failed_plot_does_not_stop_the_measurements(tmp_path, monkeypatch, capsys):
    def broken_plot(report, path: Path) -> None:
        raise RuntimeError("no space left on device")

    monkeypatch.setattr(bench_cli, "_save_plot", broken_plot)
    out = tmp_path / "bench.json"
    code = bench_cli.main([*BENCH, "--num-envs", "2", "3", "--out", str(out), "--plot", str(tmp_path / "b.png")])
    assert code == 1
    assert [row["num_envs"] for row in json.loads(out.read_text())["results"]] == [2, 3]  # both sizes measured
    assert "the plot failed: RuntimeError: no space left on device" in capsys.readouterr().err
