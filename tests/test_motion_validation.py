"""Bad motion input gives errors that name the field and the expected shape or value."""

import re

import numpy as np
import pytest

from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.loader import load_motion
from unilab_gpu.motion.names import column_order, covers
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.motion.validation import MotionFormatError, check_array, check_fps, check_names, unit_quat


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module")
def clip(kin):
    return synthesize_clip(seconds=0.5, seed=2, kinematics=kin)


def _beyondmimic(clip, **override):
    bodies = {k: getattr(clip, k) for k in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")}
    data = dict(fps=np.array([50]), joint_pos=clip.joint_pos, joint_vel=clip.joint_vel, **bodies)
    data.update(override)
    return {k: v for k, v in data.items() if v is not None}


def _holosoma(clip, **override):
    data = dict(
        fps=np.array([50]),
        joint_names=np.array(clip.joint_names),
        body_names=np.array(clip.body_names),
        joint_pos=np.concatenate((clip.root_pos, clip.root_quat, clip.joint_pos), axis=1),
        joint_vel=np.concatenate((clip.root_lin_vel, clip.root_ang_vel, clip.joint_vel), axis=1),
        body_pos_w=clip.body_pos_w,
        body_quat_w=clip.body_quat_w,
    )
    data.update(override)
    return {k: v for k, v in data.items() if v is not None}


def _load(tmp_path, data, kin, **kwargs):
    path = tmp_path / "m.npz"
    np.savez(path, **data)
    return load_motion(path, kinematics=kin, **kwargs)


def test_missing_key_is_named(tmp_path, clip, kin):
    with pytest.raises(MotionFormatError, match="missing key 'body_ang_vel_w'"):
        _load(tmp_path, _beyondmimic(clip, body_ang_vel_w=None), kin, format="beyondmimic")
    with pytest.raises(MotionFormatError, match="missing key 'joint_vel'"):
        _load(tmp_path, _holosoma(clip, joint_vel=None), kin)


def test_wrong_shape_names_field_and_expected_shape(tmp_path, clip, kin):
    t = clip.num_frames
    with pytest.raises(MotionFormatError, match=re.escape(f"'joint_vel' has shape ({t}, 28), expected ({t}, 29)")):
        _load(tmp_path, _beyondmimic(clip, joint_vel=clip.joint_vel[:, :28]), kin)
    with pytest.raises(
        MotionFormatError, match=re.escape(f"'body_quat_w' has shape ({t}, 30, 3), expected ({t}, 30, 4)")
    ):
        _load(tmp_path, _beyondmimic(clip, body_quat_w=clip.body_quat_w[..., :3]), kin)
    holosoma_width = "holosoma 'joint_pos' has 35 columns, expected 36: 7 root columns (position, quaternion wxyz)"
    with pytest.raises(MotionFormatError, match=re.escape(holosoma_width)):
        _load(tmp_path, _holosoma(clip, joint_pos=np.zeros((t, 35))), kin, format="holosoma")


def test_a_holosoma_width_mistake_names_both_layouts(tmp_path, clip, kin):
    """A holosoma file with a column too few no longer reads as holosoma; the error gives the width
    each layout would need (not only BeyondMimic's, which named the wrong width)."""
    t = clip.num_frames
    short = _holosoma(clip)
    short["joint_pos"] = short["joint_pos"][:, :-1]
    expected = (
        "'joint_pos' has 35 columns and 'joint_names' names 29 joints; expected 29 (BeyondMimic: one column per "
        "joint) or 36 (holosoma: 7 root columns, position and quaternion wxyz, in front of the joints)"
    )
    with pytest.raises(MotionFormatError, match=re.escape(expected)):
        _load(tmp_path, short, kin)
    velocities = _holosoma(clip, joint_vel=np.zeros((t, 34)))
    with pytest.raises(MotionFormatError, match=re.escape("holosoma 'joint_vel' has 34 columns, expected 35: 6 root")):
        _load(tmp_path, velocities, kin)


def test_bodies_that_do_not_follow_the_joints_are_refused(tmp_path, clip, kin):
    """Every body at the origin (or bodies that are not where the clip's own root and joints put
    them) was accepted and tracked as the reference."""
    zeros = np.zeros_like(clip.body_pos_w)
    with pytest.raises(MotionFormatError) as refused:
        _load(tmp_path, _beyondmimic(clip, body_pos_w=zeros), kin)
    message = str(refused.value)
    assert "'body_pos_w' at frame " in message and "where the clip's own root and joint positions put it" in message
    assert message.endswith("(every body at one point: are the bodies missing?)")
    # The distance named is the largest one, computed here without the loader's kinematics: the root
    # is body 0, now at the origin, so each body's true place is as far from it as in the clip.
    distance = np.linalg.norm(clip.body_pos_w - clip.root_pos[:, None], axis=-1)
    assert f"is {distance.max():.3g} m from" in message
    moved = clip.body_pos_w.copy()
    moved[7, 3] += [0.0, 0.0, 0.3]  # one body 0.3 m off in one frame
    with pytest.raises(
        MotionFormatError, match=rf"^.*'body_pos_w' at frame 7, body '{clip.body_names[3]}': .* is 0\.3 m"
    ):
        _load(tmp_path, _beyondmimic(clip, body_pos_w=moved), kin)
    moved[7, 3] -= [0.0, 0.0, 0.2]  # 0.1 m: within the tolerance
    _load(tmp_path, _beyondmimic(clip, body_pos_w=moved), kin)


def test_bytes_that_are_not_an_npz_are_not_called_python_objects(tmp_path, kin):
    path = tmp_path / "m.npz"
    path.write_bytes(b"PK" + np.random.default_rng(0).bytes(500))  # numpy would try it as a pickle
    with pytest.raises(MotionFormatError, match=re.escape(f"{path}: not an .npz archive: it is not a zip archive")):
        load_motion(path, kinematics=kin)
    np.savez(path, fps=np.array(50.0), joint_pos=np.array([[object()]], dtype=object))
    with pytest.raises(MotionFormatError, match=re.escape(f"{path}: array 'joint_pos' holds Python objects")):
        load_motion(path, kinematics=kin)


def test_unnamed_joint_columns_must_match_the_model(tmp_path, clip, kin):
    data = _beyondmimic(clip, joint_pos=clip.joint_pos[:, :27], joint_vel=clip.joint_vel[:, :27])
    with pytest.raises(MotionFormatError, match="'joint_pos' has 27 joint columns .* expected 29"):
        _load(tmp_path, data, kin)


def test_nan_names_field_and_first_bad_frame(tmp_path, clip, kin):
    bad = clip.joint_pos.copy()
    bad[7, 3] = np.nan
    bad[9, 0] = np.inf
    with pytest.raises(MotionFormatError, match="'joint_pos' has a NaN or inf value at frame 7"):
        _load(tmp_path, _beyondmimic(clip, joint_pos=bad), kin)
    pos = clip.body_pos_w.copy()
    pos[4, 12, 2] = np.inf
    with pytest.raises(MotionFormatError, match="'body_pos_w' has a NaN or inf value at frame 4"):
        _load(tmp_path, _holosoma(clip, body_pos_w=pos), kin)


@pytest.mark.parametrize("fps", [0.0, -30.0, np.nan])
def test_non_positive_fps(tmp_path, clip, kin, fps):
    with pytest.raises(MotionFormatError, match="'fps' must be a positive number"):
        _load(tmp_path, _beyondmimic(clip, fps=np.array([fps])), kin)


def test_input_fps_may_not_contradict_the_file(tmp_path, clip, kin):
    with pytest.raises(MotionFormatError, match="stores 'fps' = 50, but an input fps of 30 was given"):
        _load(tmp_path, _beyondmimic(clip), kin, input_fps=30)
    assert _load(tmp_path, _beyondmimic(clip), kin, input_fps=50).num_frames == clip.num_frames


def test_single_frame_cannot_be_resampled(tmp_path, clip, kin):
    two = {k: (v[:2] if k != "fps" else np.array([1000])) for k, v in _beyondmimic(clip).items()}
    with pytest.raises(MotionFormatError, match="yield fewer than 2 output frames"):
        _load(tmp_path, two, kin)
    # A single frame is refused at any rate (issue 11: it would end every episode on every step).
    one = {k: (v[:1] if k != "fps" else np.array([30])) for k, v in _beyondmimic(clip).items()}
    for fps in (50.0, None):
        with pytest.raises(MotionFormatError, match=r"the clip has 1 frame\(s\), expected at least 2"):
            _load(tmp_path, one, kin, fps=fps)


def test_wrong_joint_names_listed_with_close_matches(tmp_path, clip, kin):
    names = list(clip.joint_names)
    names[3] = "left_knee"  # model: left_knee_joint
    names[20] = "left_wrist_pich_joint"  # model: left_wrist_pitch_joint
    with pytest.raises(MotionFormatError) as err:
        _load(tmp_path, _holosoma(clip, joint_names=np.array(names)), kin)
    msg = str(err.value)
    assert "'joint_names' do not match the robot model" in msg
    assert "missing from the file: ['left_knee_joint' (close: 'left_knee'" in msg
    assert "'left_wrist_pitch_joint' (close: 'left_wrist_pich_joint'" in msg
    assert "unknown to the robot model: ['left_knee' (close: 'left_knee_joint'" in msg


def test_duplicate_and_empty_names():
    with pytest.raises(MotionFormatError, match=r"'joint_names' repeats names \['a'\]"):
        check_names("joint_names", ["a", "b", "a"])
    with pytest.raises(MotionFormatError, match="'body_names' must be a non-empty list"):
        check_names("body_names", [])


def test_column_order_and_covers():
    model = ["a", "b", "c"]
    np.testing.assert_array_equal(column_order("joint", ["c", "a", "b"], model), [1, 2, 0])
    np.testing.assert_array_equal(column_order("body", ["x", "c", "b", "a"], model, extra_ok=True), [3, 2, 1])
    with pytest.raises(MotionFormatError, match="unknown to the robot model: \\['x'\\]"):
        column_order("body", ["x", "c", "b", "a"], model)
    assert covers(["c", "b", "a", "x"], model) and not covers(["a", "b"], model)


def test_non_unit_quaternion_rejected(tmp_path, clip, kin):
    holo = _holosoma(clip)
    holo["joint_pos"] = holo["joint_pos"].copy()
    holo["joint_pos"][5, 3:7] = 0.0
    with pytest.raises(MotionFormatError, match="'root_quat' is not a unit quaternion at frame 5"):
        _load(tmp_path, holo, kin)
    q = np.tile([[2.0, 0, 0, 0]], (3, 1))
    with pytest.raises(MotionFormatError, match="frame 0"):
        unit_quat("q", q)
    np.testing.assert_allclose(unit_quat("q", q * 0.5005), q * 0.5)


def test_unknown_format_and_undetectable_file(tmp_path, kin):
    path = tmp_path / "x.npz"
    np.savez(path, something=np.zeros(3))
    with pytest.raises(MotionFormatError, match="cannot tell the motion format from keys \\['something'\\]"):
        load_motion(path, kinematics=kin)
    with pytest.raises(MotionFormatError, match="unknown motion format 'bvh'"):
        load_motion(path, format="bvh", kinematics=kin)
    with pytest.raises(FileNotFoundError, match="motion file not found"):
        load_motion(tmp_path / "none.npz", kinematics=kin)
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(MotionFormatError, match="not an .npz archive: it is a text file"):
        load_motion(tmp_path / "junk.npz", kinematics=kin)


def test_csv_errors(tmp_path, kin):
    path = tmp_path / "m.csv"
    path.write_text("0,0,0.8,0,0,0,1,0.1\n0,0,0.8,0,0,0,1,abc\n")
    with pytest.raises(MotionFormatError, match="comma-separated numbers"):
        load_motion(path, kinematics=kin)
    path.write_text("0,0,0.8,0,0,0,1," + ",".join(["0"] * 29) + "\n" + "0,0,nan,0,0,0,1," + ",".join(["0"] * 29) + "\n")
    with pytest.raises(MotionFormatError, match="'csv rows' has a NaN or inf value at frame 1"):
        load_motion(path, kinematics=kin)
    with pytest.raises(MotionFormatError, match="'input_fps' must be a positive number"):
        load_motion(path, input_fps=0, kinematics=kin)


def test_motion_clip_validates_its_fields(clip):
    fields = {**clip.arrays(), "fps": clip.fps, "joint_names": clip.joint_names, "body_names": clip.body_names}
    with pytest.raises(MotionFormatError, match=re.escape("'root_quat' has shape (26, 3), expected (26, 4)")):
        MotionClip(**{**fields, "root_quat": clip.root_quat[:, :3]})
    with pytest.raises(MotionFormatError, match="'body_lin_vel_w' has shape"):
        MotionClip(**{**fields, "body_names": clip.body_names[:-1], "body_pos_w": clip.body_pos_w[:, :-1],
                      "body_quat_w": clip.body_quat_w[:, :-1]})  # fmt: skip
    with pytest.raises(MotionFormatError, match="'fps' must be a positive number"):
        MotionClip(**{**fields, "fps": 0})


def test_check_helpers():
    assert check_fps(np.array([30])) == 30.0
    with pytest.raises(MotionFormatError, match="'fps' must be a single number"):
        check_fps(np.array([30, 50]))
    with pytest.raises(MotionFormatError, match="'x' must be numeric"):
        check_array("x", np.array(["a"]), (1,))
    with pytest.raises(MotionFormatError, match=re.escape("'x' has shape (2, 3), expected (*, 4)")):
        check_array("x", np.zeros((2, 3)), (None, 4))


def test_wrong_schema_version_names_the_field(clip, kin, tmp_path):
    from unilab_gpu.motion.canonical import save_motion

    path = save_motion(clip, tmp_path / "clip.npz")
    data = dict(np.load(path))
    data["schema_version"] = np.array(7)
    np.savez(path, **data)
    with pytest.raises(MotionFormatError, match="'schema_version' is 7, expected 1"):
        load_motion(path, kinematics=kin)
