"""Bad input to motion loading, ``unilab-motion`` and ``unilab-bench`` (issue 11, cases 5, 6, 7):
one-line errors naming the file and field, nothing written where it should not be, and no
measurement lost to an unwritable output or a failed plot."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from unilab_gpu.cli import bench as bench_cli
from unilab_gpu.cli.motion import main as motion_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.motion.assemble import build_clip
from unilab_gpu.motion.canonical import save_motion
from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.loader import load_motion
from unilab_gpu.motion.source import MotionSource
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


def test_convert_into_an_existing_folder_writes_nothing(tmp_path, capsys, clip):
    source = save_motion(clip, tmp_path / "in.npz")
    folder = tmp_path / "out"
    folder.mkdir()
    code, err = _motion(capsys, "convert", str(source), str(folder))
    assert code == 2 and f"output: {folder} is a folder" in err and len(err.strip().splitlines()) == 1
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
    with pytest.raises(
        SystemExit, match=rf"--plot: {tmp_path} is a folder; give a file path, e.g. {tmp_path}/bench.png"
    ):
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


# -- issue 25: motion outputs are never lost or renamed; absurd or mislabelled input is named --


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_synth_into_an_existing_file_needs_force(tmp_path, capsys):
    out = tmp_path / "clip.npz"
    assert _motion(capsys, "synth", str(out), "--seconds", "0.1")[0] == 0
    before = _tree(tmp_path)
    code, err = _motion(capsys, "synth", str(out), "--seconds", "0.2", "--seed", "1")
    assert code == 2 and f"output: {out} exists; pass --force to replace it" in err and err.count("\n") == 1
    assert _tree(tmp_path) == before
    assert _motion(capsys, "synth", str(out), "--seconds", "0.2", "--force")[0] == 0
    assert load_motion(out, kinematics=RobotKinematics.from_robot("g1")).num_frames == 11  # replaced: 0.2 s at 50 fps


def test_convert_never_writes_over_its_input_or_a_run_file(tmp_path, capsys, clip):
    source = save_motion(clip, tmp_path / "in.npz")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: pendulum\n")
    (run / "checkpoint.pt").write_bytes(b"weights")
    before = _tree(tmp_path)
    code, err = _motion(capsys, "convert", str(source), str(source), "--force")
    assert code == 2 and f"output: {source} is this command's own input" in err
    for name in ("checkpoint.pt", "config.yaml"):
        code, err = _motion(capsys, "convert", str(source), str(run / name), "--force")
        assert code == 2 and f"is the {name} of the run folder {run}; no output ever replaces it" in err
    assert _tree(tmp_path) == before


def test_output_suffix_is_never_renamed(tmp_path, capsys, clip):
    code, err = _motion(capsys, "synth", str(tmp_path / "clip.zip"), "--seconds", "0.1")
    assert code == 2 and f"output {tmp_path / 'clip.zip'} must end in .npz, e.g. {tmp_path / 'clip.zip'}.npz" in err
    with pytest.raises(MotionFormatError, match=r"must end in \.npz"):
        save_motion(clip, tmp_path / "clip")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_keeps_the_earlier_clip(tmp_path, monkeypatch, clip, capsys):
    out = save_motion(clip, tmp_path / "clip.npz")
    before = _tree(tmp_path)
    real_savez = np.savez

    def savez_then_disk_full(file, **arrays):
        real_savez(file, **arrays)
        file.truncate(100)  # half a zip on disk ...
        raise OSError(28, "No space left on device")  # ... and the disk is full

    monkeypatch.setattr(np, "savez", savez_then_disk_full)
    code, err = _motion(capsys, "synth", str(out), "--seconds", "0.1", "--force")
    assert code == 2 and "No space left on device" in err
    assert _tree(tmp_path) == before  # the good clip is intact and no temporary file is left


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["synth", "x.npz", "--seed", "-1"], "--seed: must be >= 0, got -1"),
        (["synth", "x.npz", "--seconds", "1e12"], "a synthetic clip of 1e+12 s asks for 5e+13 frames"),
    ],
)
def test_impossible_sizes_and_seeds_are_refused_before_allocating(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, err = _motion(capsys, *argv)
    assert code == 2 and message in err.strip().splitlines()[-1], err  # argparse's usage, then one line
    assert list(tmp_path.iterdir()) == []


def test_resampling_estimates_the_size_before_allocating(clip, kin):
    two_frames = replace(MotionSource.from_clip(_one_frame(clip)), fps=1e-6)  # 1e6 s apart ...
    two_frames = replace(two_frames, **{k: np.repeat(v, 2, axis=0) for k, v in vars(two_frames).items()
                                        if isinstance(v, np.ndarray)})  # fmt: skip
    with pytest.raises(MotionFormatError, match="resampling to 1000 fps asks for 1e\\+09 frames, about"):
        build_clip(two_frames, kin, fps=1000.0)  # ... at 1000 fps: terabytes


def test_wrong_content_for_the_extension_and_folders_are_named(tmp_path, capsys, clip, kin):
    text_npz = tmp_path / "walk.npz"
    text_npz.write_text("0,0,0.8,0,0,0,1\n")
    with pytest.raises(MotionFormatError, match=rf"{text_npz}: not an .npz archive: it is a text file \(a CSV\?"):
        load_motion(text_npz, kinematics=kin)
    binary_csv = tmp_path / "walk.csv"
    binary_csv.write_bytes(save_motion(clip, tmp_path / "c.npz").read_bytes())
    with pytest.raises(MotionFormatError, match=rf"{binary_csv}: not a text CSV file: it holds binary data"):
        load_motion(binary_csv, kinematics=kin)
    folder = tmp_path / "clips.npz"
    folder.mkdir()
    code, err = _motion(capsys, "convert", str(folder), str(tmp_path / "o.npz"))
    assert code == 2 and f"{folder} is a folder, expected a motion file" in err
    short = tmp_path / "short.csv"
    short.write_text(",".join(["0"] * 29) + "\n" + ",".join(["0"] * 29) + "\n")  # 7 root + 22 joints
    with pytest.raises(MotionFormatError, match="CSV rows have 29 columns, expected 36: 7 root columns"):
        load_motion(short, kinematics=kin)


def test_bad_quaternion_names_frame_and_body(tmp_path, clip, kin):
    data = _beyondmimic(clip)
    data["body_quat_w"] = data["body_quat_w"].copy()
    data["body_quat_w"][3, 5] = 0.0
    np.savez(tmp_path / "q.npz", **data)
    name = kin.body_names[5]
    with pytest.raises(MotionFormatError, match=rf"'body_quat_w' is not a unit quaternion at frame 3, body '{name}'"):
        load_motion(tmp_path / "q.npz", kinematics=kin)


@pytest.mark.parametrize(
    ("field", "index", "value", "message"),
    [
        ("joint_pos", (4, 3), 1e30, "'joint_pos' at frame 4, joint '{joint}': 1e+30 rad is far outside"),
        ("body_pos_w", (2, 0, 0), 1e12, "'root_pos' at frame 2: 1e+12 m is outside the plausible range"),
        ("body_lin_vel_w", (1, 7, 2), 5e3, "'body_lin_vel_w' at frame 1, body '{body}': 5000 m/s is outside"),
    ],
)
def test_absurd_motion_values_are_refused_naming_frame_and_joint(tmp_path, capsys, clip, kin, field, index, value,
                                                                 message):  # fmt: skip
    data = _beyondmimic(clip)
    data[field] = data[field].copy()
    data[field][index] = value
    path = tmp_path / "absurd.npz"
    np.savez(path, **data)
    code, err = _motion(capsys, "convert", str(path), str(tmp_path / "out.npz"), "--fps", "50")
    expected = message.format(joint=kin.joint_names[3], body=kin.body_names[7])
    assert code == 2 and expected in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["absurd.npz"]


def test_bench_never_replaces_a_report_without_force(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_cli, "bench_env", lambda *a, **k: pytest.fail("measured before checking --out"))
    out = tmp_path / "bench.json"
    out.write_text('{"earlier": "measurements"}')
    with pytest.raises(SystemExit, match=rf"^--out: {out} exists; pass --force to replace it$"):
        bench_cli.main([*BENCH, "--out", str(out)])
    assert out.read_text() == '{"earlier": "measurements"}'


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--num-envs", "2", "--force-resets", "3"],
            "--force-resets must be in [0, 2] (the smallest --num-envs), got 3",
        ),
        (
            ["--override", "rewards.angle.weight=nan"],
            "unilab-bench: error: --task pendulum --num-envs 64: env config: 'rewards.angle.weight' must be a finite",
        ),
    ],
)
def test_bench_flags_and_overrides_are_named_as_typed(tmp_path, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        bench_cli.main([*BENCH, "--out", str(tmp_path / "b.json"), *argv])
    assert str(exit_info.value).startswith(message) or message in str(exit_info.value)
    assert "\n" not in str(exit_info.value) and list(tmp_path.iterdir()) == []


# -- issue 46: arrays with the wrong number of axes, robots clips cannot describe --


@pytest.mark.parametrize(
    ("key", "reshape", "message"),
    [
        (
            "joint_pos",
            lambda a: np.stack([a, a], axis=1),
            r"'joint_pos' has shape \(11, 2, 29\), expected \(frames, "
            r"joint columns\) with at least one frame",
        ),
        ("body_pos_w", lambda a: a[:, :, 0], r"'body_pos_w' has shape \(11, 30\), expected \(frames, bodies, 3\)"),
    ],
)
def test_an_array_with_the_wrong_number_of_axes_is_named_with_its_layout(tmp_path, clip, kin, key, reshape, message):
    arrays = _beyondmimic(clip)
    arrays[key] = reshape(arrays[key])
    arrays["joint_names"] = np.array(kin.joint_names)  # names that agree with a 2-D joint_pos's columns
    path = tmp_path / "bad_axes.npz"
    np.savez(path, **arrays)
    with pytest.raises(MotionFormatError, match=message) as error:
        load_motion(path, kinematics=kin)
    assert "\n" not in str(error.value)


def test_mirror_for_a_robot_without_a_floating_base_is_one_line(tmp_path, capsys):
    code, err = _motion(capsys, "mirror", str(tmp_path / "in.npz"), str(tmp_path / "out.npz"), "--robot", "pendulum")
    assert code == 2 and err.strip().count("\n") == 0
    assert "--robot pendulum: RobotKinematics needs a model whose first joint is a free joint" in err
