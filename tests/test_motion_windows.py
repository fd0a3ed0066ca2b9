"""``clip_windows`` / ``unilab-motion split``: windows are exact slices, overlapping as asked, covering the clip."""

import numpy as np
import pytest
from motion_helpers import run_motion_cli

from unilab_gpu.motion import MotionFormatError, load_motion, synthesize_clip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.windows import clip_windows

G1 = RobotKinematics.from_robot("g1")
CLIP = synthesize_clip(seconds=2.3, seed=2, kinematics=G1)  # 116 frames at 50 fps


@pytest.mark.parametrize(
    "seconds, overlap, bounds",
    [
        (1.0, 0.2, [(0, 51), (40, 91), (80, 116)]),  # 51-frame windows every 40 frames, a 36-frame tail
        (1.0, 0.0, [(0, 51), (50, 101), (100, 116)]),
        (1.1, 0.0, [(0, 56), (55, 111), (110, 116)]),
        (2.3, 0.5, [(0, 116)]),  # one window: the whole clip
        (5.0, 1.0, [(0, 116)]),  # longer than the clip
        (2.28, 0.0, [(0, 115), (114, 116)]),  # the shortest tail: the shared frame and the last
    ],
)
def test_windows_are_exact_slices(seconds, overlap, bounds):
    windows = clip_windows(CLIP, seconds, overlap)
    assert [(w.num_frames) for w in windows] == [b - a for a, b in bounds]
    for window, (a, b) in zip(windows, bounds, strict=True):
        for name, array in CLIP.arrays().items():
            np.testing.assert_array_equal(getattr(window, name), array[a:b], err_msg=name)
        assert window.fps == CLIP.fps and window.joint_names == CLIP.joint_names


@pytest.mark.parametrize(
    "seconds, overlap", [(0.01, 0.0), (1.0, 1.0), (1.0, -0.1), (1.0, float("nan")), (1.0, float("inf"))]
)
def test_bad_windows_are_refused(seconds, overlap):
    with pytest.raises(MotionFormatError, match="'seconds'|'overlap_seconds'"):
        clip_windows(CLIP, seconds, overlap)


def test_split_writes_a_motion_set(tmp_path, capsys):
    from unilab_gpu.motion import save_motion

    save_motion(CLIP, tmp_path / "c.npz")
    code, out, err = run_motion_cli(capsys, "split", str(tmp_path / "c.npz"), str(tmp_path / "w"), "--seconds", "1",
                                    "--overlap", "0.2")  # fmt: skip
    assert code == 0, err
    assert "wrote 3 windows" in out and "the last 0.70 s" in out
    second = load_motion(tmp_path / "w" / "c_001.npz", fps=None, kinematics=G1)
    np.testing.assert_array_equal(second.body_pos_w, CLIP.body_pos_w[40:91])
    code, _, err = run_motion_cli(capsys, "split", str(tmp_path / "c.npz"), str(tmp_path / "w"))
    assert code == 2 and "exists; pass --force" in err
