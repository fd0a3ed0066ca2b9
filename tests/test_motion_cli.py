"""``unilab-motion``: convert / info / synth, and one-line errors with exit code 2."""

import json

import numpy as np
import pytest
from motion_helpers import run_motion_cli

from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.loader import load_motion
from unilab_gpu.motion.synthetic import synthesize_clip

G1 = RobotKinematics.from_robot("g1")


def test_synth_then_info(tmp_path, capsys):
    out_path = tmp_path / "synth.npz"
    code, out, _ = run_motion_cli(capsys, "synth", str(out_path), "--seconds", "1.5", "--seed", "3")
    assert code == 0 and "76 frames at 50 fps (1.50 s) of robot g1" in out
    reference = synthesize_clip(seconds=1.5, seed=3, kinematics=G1)
    np.testing.assert_array_equal(load_motion(out_path, kinematics=G1).body_pos_w, reference.body_pos_w)
    code, out, _ = run_motion_cli(capsys, "info", str(out_path))
    assert code == 0
    assert json.loads(out) == {"frames": 76, "fps": 50.0, "duration_s": 1.5, "joints": 29, "bodies": 30,
                               "format": "canonical", "robot": "g1"}  # fmt: skip


def test_convert_csv_resamples_to_50_fps(tmp_path, capsys):
    clip30 = synthesize_clip(seconds=1.0, seed=1, fps=30.0, kinematics=G1)
    quat_xyzw = np.concatenate((clip30.root_quat[:, 1:], clip30.root_quat[:, :1]), axis=1)
    csv = tmp_path / "m.csv"
    np.savetxt(csv, np.concatenate((clip30.root_pos, quat_xyzw, clip30.joint_pos), axis=1), delimiter=",")
    code, out, _ = run_motion_cli(capsys, "info", str(csv), "--input-fps", "30")
    info = json.loads(out)
    assert code == 0 and (info["frames"], info["fps"], info["format"]) == (31, 30.0, "csv")
    out_path = tmp_path / "m.npz"
    code, out, _ = run_motion_cli(capsys, "convert", str(csv), str(out_path), "--input-fps", "30")
    assert code == 0 and "51 frames at 50 fps" in out
    converted = load_motion(out_path, fps=None, kinematics=G1)
    assert converted.fps == 50.0 and converted.num_frames == 51
    np.testing.assert_allclose(converted.joint_pos[::5], clip30.joint_pos[::3], atol=1e-12)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["convert", "{tmp}/missing.npz", "{tmp}/o.npz"], "motion file not found"),
        (["info", "{tmp}/bad.csv"], "CSV rows have 3 columns"),
        (["convert", "{tmp}/nan.npz", "{tmp}/o.npz"], "'joint_pos' has a NaN or inf value at frame 2"),
        (["convert", "{tmp}/nan.npz", "{tmp}/o.npz", "--format", "holosoma"], "missing key 'joint_names'"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "bad.csv").write_text("1,2,3\n")
    clip = synthesize_clip(seconds=0.2, seed=0, kinematics=G1)
    joint_pos = clip.joint_pos.copy()
    joint_pos[2, 0] = np.nan
    bodies = {k: getattr(clip, k) for k in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")}
    np.savez(tmp_path / "nan.npz", fps=50, joint_pos=joint_pos, joint_vel=clip.joint_vel, **bodies)
    code, _, err = run_motion_cli(capsys, *(a.format(tmp=tmp_path) for a in argv))
    assert code == 2
    assert err.startswith("unilab-motion: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_arguments_exit_2(capsys):
    code, _, err = run_motion_cli(capsys, "synth", "x.npz", "--seconds", "-1")
    assert code == 2 and "must be positive" in err
