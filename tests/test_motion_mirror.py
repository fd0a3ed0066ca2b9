"""Mirroring a clip left-right: pairs and signs from the model, an involution, and consistent with
MuJoCo's forward kinematics of the mirrored joints; ``unilab-motion mirror``."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from motion_helpers import g1_test_clip, run_motion_cli
from robot_models import biped_xml

from unilab_gpu.motion import MotionFormatError, RobotKinematics, build_clip, load_motion, save_motion, synthesize_clip
from unilab_gpu.motion.mirror import RobotMirror
from unilab_gpu.motion.source import MotionSource

M = np.array([1.0, -1.0, 1.0])  # the reflection y -> -y


@pytest.fixture(scope="module")
def g1():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module", params=["synthetic", "largebox_carry"])
def clip(request, g1):
    return g1_test_clip(request.param, g1, seed=4)


def _fk(kin: RobotKinematics, clip):
    return kin.body_states(clip.root_pos, clip.root_quat, clip.joint_pos, clip.root_lin_vel, clip.root_ang_vel,
                           clip.joint_vel)  # fmt: skip


def test_g1_pairs_and_signs(g1) -> None:
    mirror = RobotMirror(g1)
    names = g1.joint_names
    pair = {names[j]: names[p] for j, p in enumerate(mirror.joint_pair)}
    sign = dict(zip(names, mirror.joint_sign, strict=True))
    assert pair["left_knee_joint"] == "right_knee_joint" and pair["right_wrist_yaw_joint"] == "left_wrist_yaw_joint"
    assert pair["waist_yaw_joint"] == "waist_yaw_joint"
    # A reflection through x-z keeps rotations about y (pitch) and flips those about x and z.
    for joint, expected in {"left_hip_pitch_joint": 1, "left_hip_roll_joint": -1, "left_hip_yaw_joint": -1,
                            "left_knee_joint": 1, "left_ankle_roll_joint": -1, "waist_yaw_joint": -1,
                            "waist_roll_joint": -1, "waist_pitch_joint": 1, "right_shoulder_pitch_joint": 1,
                            "right_shoulder_roll_joint": -1, "right_elbow_joint": 1}.items():  # fmt: skip
        assert sign[joint] == expected, joint
    bodies = g1.body_names
    assert bodies[mirror.body_pair[bodies.index("left_ankle_roll_link")]] == "right_ankle_roll_link"
    assert mirror.body_pair[bodies.index("pelvis")] == bodies.index("pelvis")


def test_mirroring_twice_gives_the_clip_back(g1, clip) -> None:
    mirror = RobotMirror(g1)
    twice = mirror.mirror(mirror.mirror(clip))
    for name, value in clip.arrays().items():
        np.testing.assert_array_equal(getattr(twice, name), value, err_msg=name)


def test_mirrored_bodies_are_where_the_mirrored_joints_put_them(g1, clip) -> None:
    """MuJoCo's FK of the mirrored root and joints against the mirrored body states, and against
    the reflected FK of the original: the G1 model is symmetric to 1e-5 m."""
    mirrored = RobotMirror(g1).mirror(clip)
    fk, fk_original = _fk(g1, mirrored), _fk(g1, clip)
    left, right = g1.body_names.index("left_wrist_yaw_link"), g1.body_names.index("right_wrist_yaw_link")
    np.testing.assert_allclose(fk.pos[:, left], fk_original.pos[:, right] * M, atol=2e-5)
    np.testing.assert_allclose(fk.pos[:, right], fk_original.pos[:, left] * M, atol=2e-5)
    # The clip's own bodies lie as far from its FK after mirroring as before (the real clip's
    # waist offsets differ from our model's by up to 10 mm; the synthetic clip is our FK).
    before = np.linalg.norm(clip.body_pos_w - fk_original.pos, axis=-1).max()
    after = np.linalg.norm(mirrored.body_pos_w - fk.pos, axis=-1).max()
    assert after <= before + 2e-5
    angle = 2.0 * np.arccos(np.clip(np.abs((mirrored.body_quat_w * fk.quat).sum(axis=-1)), 0.0, 1.0))
    assert angle.max() < 1e-6  # rad
    if np.allclose(clip.body_lin_vel_w, fk_original.lin_vel, atol=1e-9):  # FK's velocities (synthetic clip)
        np.testing.assert_allclose(mirrored.body_lin_vel_w, fk.lin_vel, atol=1e-4)
        np.testing.assert_allclose(mirrored.body_ang_vel_w, fk.ang_vel, atol=1e-9)


def _fk_clip(kin: RobotKinematics, seed: int = 0):
    """A clip of any free-floating robot: smooth random joints inside their ranges, FK bodies."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 2.0, 101)[:, None]
    low, high = kin.joint_range[:, 0], kin.joint_range[:, 1]
    joints = (low + high) / 2 + 0.4 * (high - low) * np.sin(2.0 * t + rng.uniform(0, 6, kin.num_joints))
    yaw = 0.5 * np.sin(t[:, 0])
    root_quat = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=1)
    root_pos = np.concatenate([0.3 * t, 0.2 * np.sin(t), 0.5 + 0 * t], axis=1)
    source = MotionSource("test", 50.0, joints, root_pos, root_quat, joint_names=kin.joint_names)
    return build_clip(source, kin, fps=None)


def _biped(**replacements: str) -> RobotKinematics:
    xml = biped_xml()
    for old, new in replacements.items():
        xml = xml.replace(old, new)
    return RobotKinematics(mujoco.MjModel.from_xml_string(xml))


def test_another_symmetric_robot_mirrors_by_its_own_names_and_axes() -> None:
    biped = _biped()
    clip = _fk_clip(biped)
    mirrored = RobotMirror(biped).mirror(clip)
    np.testing.assert_allclose(_fk(biped, mirrored).pos, mirrored.body_pos_w, atol=1e-9)
    left = biped.body_names.index("left_foot")
    np.testing.assert_allclose(mirrored.body_pos_w[:, biped.body_names.index("right_foot")],
                               clip.body_pos_w[:, left] * M, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize(
    ("replacements", "message"),
    [
        (
            {"left": "port", "right": "starboard"},
            r"^the robot has no left/right joint pairs \(no joint names with "
            r"'left'-'right'\); expected a robot symmetric",
        ),
        (
            {'"right_thigh" pos="0 -0.07': '"right_thigh" pos="0 -0.09'},
            r"^the robot is not mirror-symmetric: body 'right_thigh' is not the mirror image of 'left_thigh'",
        ),
        (
            {'name="right_knee" axis="0 1 0"': 'name="right_knee" axis="1 0 0"'},
            r"^the robot is not mirror-symmetric: joint 'right_knee' does not turn about the mirror image",
        ),
        ({'"right_shin"': '"rightshin"'}, r"^the robot's body 'left_shin' has no mirror body 'right_shin'"),
    ],
)
def test_robots_that_cannot_be_mirrored_are_refused(replacements, message) -> None:
    with pytest.raises(MotionFormatError, match=message):
        RobotMirror(_biped(**replacements))


@pytest.mark.parametrize(
    ("range_", "twin"),
    [
        ('range="-0.43 2.5"', "[-0.43, 2.5] rad"),  # issue 60: a mirrored pose put the knee 0.43 rad past its limit
        ('range="0.01 2.5"', "[0.01, 2.5] rad"),  # beyond the 0.001 rad tolerance
        ("", "unlimited"),
    ],
)
def test_twin_joints_with_ranges_that_are_not_mirror_images_are_refused(range_, twin) -> None:
    """Mirroring ``right_knee = -0.3`` (inside ``[-0.43, 2.5]``) would set ``left_knee = -0.3``, 0.3 rad past
    its ``[0, 2.5]``: the robot is refused (by ``unilab-motion mirror`` and ``algo.mirror_fraction`` alike)."""
    with pytest.raises(MotionFormatError) as caught:
        RobotMirror(
            _biped(**{'name="right_knee" axis="0 1 0" range="0 2.5"': f'name="right_knee" axis="0 1 0" {range_}'})
        )
    assert str(caught.value) == (
        f"the robot is not mirror-symmetric: joint 'left_knee' has range [0.0, 2.5] rad, its twin 'right_knee' {twin}; "
        "expected the twin's range times the mirror sign (+1) to be the joint's, within 0.001 rad"
    )
    RobotMirror(
        _biped(**{'name="right_knee" axis="0 1 0" range="0 2.5"': 'name="right_knee" axis="0 1 0" range="0.0005 2.5"'})
    )


def test_a_flipped_twin_s_range_is_compared_negated() -> None:
    """A roll hinge's twin turns the other way (sign -1): ``[-0.5, 1.2]`` on the left mirrors ``[-1.2, 0.5]``."""
    roll = {
        'name="left_hip" axis="0 1 0" range="-1.5 1.5"': 'name="left_hip" axis="1 0 0" range="-0.5 1.2"',
        'name="right_hip" axis="0 1 0" range="-1.5 1.5"': 'name="right_hip" axis="1 0 0" range="-1.2 0.5"',
    }
    mirror = RobotMirror(_biped(**roll))
    assert mirror.joint_sign[mirror.joint_names.index("left_hip")] == -1.0
    with pytest.raises(MotionFormatError, match=r"joint 'left_hip' has range \[-0.5, 1.2\] rad, its twin 'right_hip' "
                       r"\[-0.5, 1.2\] rad; expected the twin's range times the mirror sign \(-1\)"):  # fmt: skip
        RobotMirror(_biped(**{**roll, 'range="-1.2 0.5"': 'range="-0.5 1.2"'}))


def test_cli_mirror_writes_the_mirror_image(tmp_path, capsys, g1) -> None:
    clip = synthesize_clip(seconds=1.0, seed=2, fps=30.0, kinematics=g1)
    source = save_motion(clip, tmp_path / "walk.npz")
    code, out, _ = run_motion_cli(capsys, "mirror", str(source), str(tmp_path / "walk_mirrored.npz"))
    assert code == 0 and out.startswith(f"wrote {tmp_path / 'walk_mirrored.npz'}: the mirror image of {source}")
    assert "31 frames at 30 fps" in out  # at the file's own rate
    written = load_motion(tmp_path / "walk_mirrored.npz", fps=None, kinematics=g1)
    expected = RobotMirror(g1).mirror(clip)
    for name, value in expected.arrays().items():
        np.testing.assert_allclose(getattr(written, name), value, atol=1e-12, err_msg=name)
    code, _, _ = run_motion_cli(capsys, "mirror", str(tmp_path / "walk_mirrored.npz"), str(tmp_path / "back.npz"))
    back = load_motion(tmp_path / "back.npz", fps=None, kinematics=g1)
    assert code == 0 and np.allclose(back.body_pos_w, clip.body_pos_w, atol=1e-12)


def test_cli_mirror_for_a_robot_without_pairs_writes_nothing(tmp_path, capsys, monkeypatch) -> None:
    robot = tmp_path / "user" / "assets" / "robots" / "plank"
    robot.mkdir(parents=True)
    (robot / "scene.xml").write_text(biped_xml().replace("left", "port").replace("right", "starboard"))
    monkeypatch.setenv("UNILAB_PATH", str(tmp_path / "user"))
    source = save_motion(_fk_clip(RobotKinematics.from_robot("plank")), tmp_path / "in.npz")
    code, _, err = run_motion_cli(capsys, "mirror", str(source), str(tmp_path / "out.npz"), "--robot", "plank")
    assert code == 2 and err.startswith("unilab-motion: error: the robot has no left/right joint pairs")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out.npz").exists()


def test_cli_mirror_reads_the_pairs_the_robot_config_declares(tmp_path, capsys) -> None:
    """The Go2 names its legs FL/FR/RL/RR: configs/robot/go2.yaml declares the pairs."""
    go2 = RobotKinematics.from_robot("go2")
    with pytest.raises(MotionFormatError, match="no left/right joint pairs"):
        RobotMirror(go2)
    clip = synthesize_clip(seconds=1.0, seed=1, kinematics=go2)
    source = save_motion(clip, tmp_path / "trot.npz")
    code, out, _ = run_motion_cli(capsys, "mirror", str(source), str(tmp_path / "trot_mirrored.npz"), "--robot", "go2")
    assert code == 0 and "of robot go2" in out
    written = load_motion(tmp_path / "trot_mirrored.npz", fps=None, kinematics=go2)
    names = go2.joint_names
    fr_hip, fl_hip = names.index("FR_hip_joint"), names.index("FL_hip_joint")
    rr_thigh, rl_thigh = names.index("RR_thigh_joint"), names.index("RL_thigh_joint")
    np.testing.assert_allclose(written.joint_pos[:, fr_hip], -clip.joint_pos[:, fl_hip], atol=1e-12)  # abduction
    np.testing.assert_allclose(written.joint_pos[:, rr_thigh], clip.joint_pos[:, rl_thigh], atol=1e-12)  # pitch
    np.testing.assert_allclose(_fk(go2, written).pos, written.body_pos_w, atol=1e-5)


def test_cli_mirror_of_a_user_robot_with_declared_pairs(tmp_path, capsys, monkeypatch) -> None:
    user = tmp_path / "user"
    (user / "assets" / "robots" / "plank").mkdir(parents=True)
    (user / "configs" / "robot").mkdir(parents=True)
    (user / "assets" / "robots" / "plank" / "scene.xml").write_text(
        biped_xml().replace("left", "port").replace("right", "starboard")
    )
    (user / "configs" / "robot" / "plank.yaml").write_text("mirror_name_pairs: [[port, starboard]]\n")
    monkeypatch.setenv("UNILAB_PATH", str(user))
    plank = RobotKinematics.from_robot("plank")
    clip = _fk_clip(plank)
    source = save_motion(clip, tmp_path / "in.npz")
    code, _, _ = run_motion_cli(capsys, "mirror", str(source), str(tmp_path / "out.npz"), "--robot", "plank")
    written = load_motion(tmp_path / "out.npz", fps=None, kinematics=plank)
    port = plank.body_names.index("port_foot")
    assert code == 0
    np.testing.assert_allclose(written.body_pos_w[:, plank.body_names.index("starboard_foot")],
                               clip.body_pos_w[:, port] * M, atol=1e-12)  # fmt: skip
