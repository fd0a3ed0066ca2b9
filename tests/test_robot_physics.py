"""A robot config owns the physics its robot needs (envs.robot_model, docs/robots.md): its
``physics`` options and MJCF edits are applied to the user's untouched MJCF at load, the env
refuses a ``decimation x timestep`` that is not the task's ``control_dt``, the exported metadata
records the options the model ran with, and MJWarp's solver-cap warnings are counted, not printed."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch
from robot_models import biped_xml

from unilab_gpu.deploy import DeploymentError
from unilab_gpu.deploy.model_check import check_model
from unilab_gpu.deploy.physics import apply_physics_options, physics_options
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.robot_cfg import FeetCfg, ImuCfg, PhysicsCfg, RobotCfg
from unilab_gpu.envs.robot_model import robot_edit
from unilab_gpu.export.metadata import deployment_metadata
from unilab_gpu.paths import robot_asset
from unilab_gpu.rl.logger import Progress
from unilab_gpu.sim.overflow import SOLVER_LIMITS

OPTIONS = [
    "robot.physics.timestep=0.002",
    "decimation=10",
    "robot.physics.iterations=60",
    "robot.physics.ls_iterations=30",
]
"""Other options over the Go2: 2 ms (10 substeps make the task's 20 ms), a larger solver budget. (An
elliptic cone or another impratio changes the friction forces at rest, so the Go2's keyframe would
no longer hold: a robot with them comes with its own key, tests/test_robot_recipe.py.)"""


def _biped(**changes) -> RobotCfg:
    robot = RobotCfg(
        model="biped",
        torso_body="torso",
        imu=ImuCfg(gyro="imu_gyro", velocimeter="imu_linvel"),
        base_height=0.45,
        fall_height=0.25,
        feet=FeetCfg(sites=["left_sole"], bodies=["left_foot"], geoms=[".*_(heel|toe)"], swing_height=0.05),
    )
    for key, value in changes.items():
        setattr(robot, key, value)
    return robot


def _edited(xml: str, robot: RobotCfg) -> mujoco.MjModel:
    spec = mujoco.MjSpec.from_string(xml)
    robot_edit(robot)(spec)
    return spec.compile()


def test_physics_options_are_written_over_the_mjcf_as_the_mjcf_would_write_them() -> None:
    physics = PhysicsCfg(timestep=0.002, iterations=70, ls_iterations=35, cone="elliptic", impratio=50.0)
    edited = _edited(biped_xml(), _biped(physics=physics))
    # The reference: MuJoCo's own compile of the same options written in the MJCF by hand.
    written = biped_xml().replace(
        '<option timestep="0.005" integrator="implicitfast"/>',
        '<option timestep="0.002" integrator="implicitfast" iterations="70" ls_iterations="35" cone="elliptic" '
        'impratio="50"/>',
    )
    reference = mujoco.MjModel.from_xml_string(written)
    for key in ("timestep", "iterations", "ls_iterations", "cone", "impratio", "integrator"):
        assert getattr(edited.opt, key) == getattr(reference.opt, key), key
    # Options the config leaves null keep the MJCF's values.
    untouched = _edited(biped_xml(), _biped(physics=PhysicsCfg(iterations=70)))
    assert untouched.opt.timestep == 0.005 and untouched.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL


def test_missing_imu_sensors_and_foot_contacts_are_added_as_the_config_says() -> None:
    bare = (
        biped_xml()
        .replace('<gyro name="imu_gyro" site="imu"/>', "")
        .replace('<velocimeter name="imu_linvel" site="imu"/>', "")
    )
    bare = bare.replace('<site name="imu"/>', "")
    imu = ImuCfg(gyro="imu_gyro", velocimeter="imu_linvel", site="imu", body="torso", pos=[0.01, 0.0, 0.02])
    feet = FeetCfg(sites=[], bodies=[], geoms=[".*_heel"], swing_height=0.05, condim=6, friction=[1.1, 0.02, 0.003])
    model = _edited(bare, _biped(imu=imu, feet=feet))
    reference = mujoco.MjModel.from_xml_string(biped_xml())  # the biped as written with its IMU
    for name, kind in (("imu_gyro", mujoco.mjtSensor.mjSENS_GYRO), ("imu_linvel", mujoco.mjtSensor.mjSENS_VELOCIMETER)):
        sensor = model.sensor(name)
        assert sensor.type[0] == kind and sensor.objtype[0] == mujoco.mjtObj.mjOBJ_SITE
        assert model.site(int(sensor.objid[0])).name == "imu"
    site = model.site("imu")
    assert model.body(int(site.bodyid[0])).name == "torso"
    np.testing.assert_allclose(site.pos, [0.01, 0.0, 0.02])
    assert model.nsensordata == reference.nsensordata == 6
    for side in ("left", "right"):
        heel, toe = model.geom(f"{side}_heel"), model.geom(f"{side}_toe")
        assert heel.condim[0] == 6 and toe.condim[0] == 3  # only what the pattern names
        np.testing.assert_allclose(heel.friction, [1.1, 0.02, 0.003])
    # Sensors the MJCF has already are left alone (no second copy).
    assert _edited(biped_xml(), _biped(imu=imu)).nsensor == reference.nsensor


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"imu": ImuCfg(gyro="g", velocimeter="v", site="nowhere")}, "'imu.site': the MJCF has no site 'nowhere'"),
        (
            {"imu": ImuCfg(gyro="g", velocimeter="v", site="imu2", body="tail")},
            "'imu.body': the MJCF has no body 'tail'",
        ),
        (
            {"feet": FeetCfg(sites=[], bodies=[], geoms=["paw"], swing_height=0.05, condim=3)},
            "'feet.geoms': patterns ['paw'] match no geom",
        ),
    ],
)
def test_an_edit_the_mjcf_cannot_take_names_the_key(changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as error:
        _edited(biped_xml(), _biped(**changes))
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["robot.physics.timestep=0.002"],
            "env config: 'decimation' x timestep = 4 x 0.002 s = 0.008 s (125 Hz), but the task's 'control_dt' is "
            "0.02 s (50 Hz); set decimation: 10 or the robot config's physics.timestep: 0.005",
        ),
        (
            ["robot.physics.timestep=0.003"],  # 20 ms is no whole number of 3 ms steps: only the timestep fix
            "= 0.012 s (83.3333 Hz), but the task's 'control_dt' is 0.02 s (50 Hz); set the robot config's "
            "physics.timestep: 0.005",
        ),
        (["robot.physics.cone=conic"], "'robot.physics.cone' must be one of pyramidal, elliptic (or null)"),
        (["robot.physics.iterations=0"], "'robot.physics.iterations' must be an integer in [1, 10,000]"),
        (["control_dt=-0.02"], "'control_dt' must be a finite number > 0 (s), got -0.02"),
    ],
)
def test_a_control_rate_or_physics_option_that_does_not_fit_is_refused_in_one_line(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ValueError) as error:
        make_env("go2_velocity", num_envs=2, compile=False, overrides=overrides, announce=False)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.fixture(scope="module")
def optioned_env():
    return make_env("go2_velocity", num_envs=2, compile=False, overrides=OPTIONS, announce=False)


def test_the_env_runs_the_robot_configs_physics_and_exports_them(optioned_env) -> None:
    env = optioned_env
    opt = env.sim.mj_model.opt
    assert (opt.timestep, opt.iterations, opt.ls_iterations, opt.impratio) == (0.002, 60, 30, 1.0)
    assert env.step_dt == pytest.approx(0.02)
    assert env.sim.model.opt.iterations == 60 and env.sim.model.opt.ls_iterations == 30  # MJWarp's
    meta = deployment_metadata(env, "go2_velocity", "sac", OPTIONS)
    assert meta["physics"] == {
        "timestep": 0.002,
        "iterations": 60,
        "ls_iterations": 30,
        "cone": "pyramidal",
        "impratio": 1.0,
    }
    assert meta["decimation"] == 10 and meta["physics_dt"] == 0.002
    # The pristine MJCF runs other options: the runtime refuses it until the metadata's are written.
    model = mujoco.MjModel.from_xml_path(str(robot_asset("go2")))
    with pytest.raises(DeploymentError, match=r"MJCF does not match the policy: timestep 0.005 s"):
        check_model(model, meta)
    model.opt.timestep = 0.002
    with pytest.raises(DeploymentError, match=r"iterations 10, the policy's 60 \(metadata physics.iterations\)"):
        check_model(model, meta)
    apply_physics_options(model, meta["physics"])
    assert physics_options(model) == meta["physics"]


def test_solver_caps_are_counted_into_the_stats_and_not_printed(capfd) -> None:
    starved = ["robot.physics.iterations=1", "robot.physics.ls_iterations=1"]
    counts = {}
    for name, overrides in (("starved", starved), ("ample", ["robot.physics.iterations=200"])):
        env = make_env("go2_velocity", num_envs=2, compile=False, overrides=overrides, announce=False, seed=3)
        env.reset()
        env.stats.clear()
        for _ in range(4):
            env.step(torch.rand(2, env.action_dim) * 2 - 1)
            assert int((env.sim.overflow & SOLVER_LIMITS).abs().sum()) == 0  # cleared every step
        summary = env.stats.summary()
        counts[name] = (summary["env/solver_iteration_limits"], summary["env/line_search_limits"])
    assert 0 < counts["starved"][0] <= 2 * 4  # row-steps: at most rows x steps
    assert counts["ample"][0] == 0
    printed = capfd.readouterr()
    assert "iterations limit reached" not in printed.out + printed.err
    line = Progress.describe({"env/solver_iteration_limits": 8.0, "env/line_search_limits": 0.0})
    assert line == "health: 8 row-steps at the solver's iteration cap (robot config physics.iterations)"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"physics": PhysicsCfg(iterations=2**31)}, "'robot.physics.iterations' must be an integer in [1, 10,000]"),
        ({"physics": PhysicsCfg(timestep=1.0)}, "'robot.physics.timestep' must be in (0, 0.05] s"),
        ({"physics": PhysicsCfg(impratio=1e9)}, "'robot.physics.impratio' must be in (0, 1000]"),
        ({"physics": PhysicsCfg(impratio=float("nan"))}, "'robot.physics.impratio' must be in (0, 1000]"),
        (
            {"imu": ImuCfg(gyro="g", velocimeter="v", site="s", body="torso", pos=[0.0, 0.0, float("nan")])},
            "'robot.imu.pos' must be three finite numbers within +-10 m",
        ),
        ({"imu": ImuCfg(gyro="g", velocimeter="v", site="s", body="torso", pos=[1e9, 0, 0])}, "'robot.imu.pos'"),
        ({"imu": ImuCfg(gyro="g", velocimeter="v", site="s", body="world")}, "'robot.imu.body' must be a body of the"),
        (
            {"feet": FeetCfg(sites=[], bodies=[], geoms=[".*_heel"], swing_height=0.05, friction=[-1.0, 0.0, 0.0])},
            "'robot.feet.friction' must be [sliding, torsional, rolling]: three finite numbers >= 0",
        ),
        (
            {"feet": FeetCfg(sites=[], bodies=[], geoms=[".*_heel"], swing_height=0.05, friction=[1.0, 0.1])},
            "'robot.feet.friction' must be",
        ),
        (
            {"feet": FeetCfg(sites=[], bodies=[], geoms=[".*_heel"], swing_height=0.05, condim=5)},
            "'robot.feet.condim' must be one of 1, 3, 4, 6",
        ),
    ],
)
def test_values_no_robot_has_are_refused_before_mujoco_meets_them(changes: dict, message: str) -> None:
    """The poor-answer classes "nonsense accepted", "tracebacks" and "misleading" of the robot
    config: a pybind TypeError (iterations >= 2**31, a friction of two numbers), a negative friction,
    NaN or 1e9 m IMU positions, an IMU on the world body, and a condim MuJoCo would blame on the
    untouched scene file are one line naming the robot config's key, for every model build."""
    with pytest.raises(ValueError) as error:
        _edited(biped_xml(), _biped(**changes))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_imu_site_on_the_world_body_is_refused(tmp_path) -> None:
    """An MJCF whose IMU site (and its sensors) sits on the world body reads 0 every step: refused."""
    from unilab_gpu.envs.robot_check import check_robot

    xml = biped_xml().replace("<worldbody>", '<worldbody><site name="fixed_imu"/>', 1)
    robot = _biped(imu=ImuCfg(gyro="world_gyro", velocimeter="world_vel", site="fixed_imu"))
    model = _edited(xml, robot)
    with pytest.raises(ValueError, match="sensor 'world_gyro' of scene.xml sits on the world body") as error:
        check_robot(robot, model, "biped.yaml", "scene.xml")
    assert "\n" not in str(error.value)
