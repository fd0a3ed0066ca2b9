"""MotionLibrary: concatenated device tables, name-based selection and one-gather reads."""

import numpy as np
import pytest
import torch

from unilab_gpu.motion.assemble import resample_clip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.library import MotionFrame, MotionLibrary
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.motion.validation import MotionFormatError

BODIES = ["torso_link", "pelvis", "left_ankle_roll_link", "right_wrist_yaw_link"]


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module")
def clips(kin):
    return [synthesize_clip(seconds=s, seed=i, kinematics=kin) for i, s in enumerate((1.0, 0.5, 2.0))]


@pytest.fixture(scope="module")
def lib(clips):
    return MotionLibrary(clips, body_names=BODIES)


def test_table_layout(lib, clips):
    lengths = [c.num_frames for c in clips]
    assert lengths == [51, 26, 101]
    assert lib.num_clips == 3 and lib.num_frames == sum(lengths) and lib.fps == 50.0 and lib.dt == 0.02
    assert lib.clip_start.tolist() == [0, 51, 77] and lib.clip_length.tolist() == lengths
    assert lib.clip_start.dtype == lib.clip_length.dtype == torch.int64
    assert lib.joint_pos.shape == (178, 29) and lib.joint_vel.shape == (178, 29)
    assert lib.root_pos.shape == (178, 3) and lib.root_quat.shape == (178, 4)
    assert lib.body_pos_w.shape == (178, 4, 3) and lib.body_quat_w.shape == (178, 4, 4)
    assert lib.body_lin_vel_w.shape == lib.body_ang_vel_w.shape == (178, 4, 3)
    assert all(getattr(lib, f).dtype == torch.float32 for f in MotionFrame._fields)


def test_gather_returns_the_clip_frames(lib, clips):
    clip_ids = torch.tensor([[0, 2], [1, 2]])
    frames = torch.tensor([[50, 0], [13, 77]])
    got = lib.gather(clip_ids, frames)
    body = [clips[0].body_names.index(n) for n in BODIES]
    for (i, j), c, f in zip([(0, 0), (0, 1), (1, 0), (1, 1)], [0, 2, 1, 2], [50, 0, 13, 77], strict=True):
        clip = clips[c]
        for name in MotionFrame._fields:
            ref = getattr(clip, name)[f]
            if name.startswith("body_"):
                ref = ref[body]
            value = getattr(got, name)[i, j]
            assert value.shape == ref.shape
            np.testing.assert_allclose(value.numpy(), ref, rtol=1e-6, atol=1e-6, err_msg=name)


def test_frame_index_clamps_into_the_clip(lib):
    rows = lib.frame_index(torch.tensor([0, 0, 1, 2]), torch.tensor([-3, 60, 25, 101]))
    assert rows.tolist() == [0, 50, 76, 177]


def test_joints_mapped_by_name_onto_the_robot_order(clips):
    order = list(reversed(clips[0].joint_names))
    lib = MotionLibrary(clips[:1], joint_names=order)
    np.testing.assert_allclose(lib.joint_pos.numpy(), clips[0].joint_pos[:, ::-1], atol=1e-6)
    assert lib.body_pos_w.shape[1] == 30 and lib.body_names == clips[0].body_names


def test_errors(clips, kin):
    with pytest.raises(MotionFormatError, match="at least one clip"):
        MotionLibrary([])
    slow = resample_clip(clips[0], 30.0, kin)
    with pytest.raises(MotionFormatError, match="clip 1 has 'fps' = 30, expected 50"):
        MotionLibrary([clips[0], slow])
    with pytest.raises(MotionFormatError, match="missing from the file: \\['torso' \\(close: 'torso_link'"):
        MotionLibrary(clips, body_names=["torso"])
    names = list(clips[0].joint_names)
    names[0] = "left_hip_pitch"
    with pytest.raises(MotionFormatError, match="'joint_names' do not match the robot model"):
        MotionLibrary(clips, joint_names=names)


def test_gather_compiles_without_graph_breaks(lib):
    compiled = torch.compile(lib.gather, fullgraph=True, dynamic=False, backend="eager")
    c, f = torch.tensor([0, 1, 2]), torch.tensor([3, 30, 99])
    for got, ref in zip(compiled(c, f), lib.gather(c, f), strict=True):
        torch.testing.assert_close(got, ref)
