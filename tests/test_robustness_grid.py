"""Faults injected in the robot-side runtime (unilab_gpu/deploy/faults.py) and the robustness grid
(unilab_gpu/export/sim2sim/robustness.py, ``unilab-sim2sim --robustness``), each checked against a
direct computation on the committed G1 velocity policy in MuJoCo C."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from unilab_gpu.cli.sim2sim import main  # noqa: E402
from unilab_gpu.deploy import Controller, DeploymentError, Faults, PolicyFile  # noqa: E402
from unilab_gpu.deploy.faults import FaultInjector  # noqa: E402
from unilab_gpu.export.sim2sim.robustness import (  # noqa: E402
    LEVELS,
    NOMINAL,
    PUSH_PERIOD_S,
    Cell,
    WorldFaults,
    failing_levels,
    first_failures,
    inert_faults,
    robustness_grid,
    run_cell,
)
from unilab_gpu.export.sim2sim.scenario import Scenario  # noqa: E402
from unilab_gpu.paths import robot_asset  # noqa: E402

POLICY = Path(__file__).resolve().parents[1] / "docs" / "policies" / "g1_velocity_sac.onnx"


@pytest.fixture(scope="module")
def policy() -> PolicyFile:
    return PolicyFile(POLICY)


def _controller(policy: PolicyFile) -> tuple[Controller, mujoco.MjData]:
    model = mujoco.MjModel.from_xml_path(str(robot_asset(policy.metadata["robot_model"])))
    controller = Controller(policy, model, None)
    controller.command = [0.5, 0.0, 0.0]
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "stand"))
    controller.reset(data)
    return controller, data


def _columns(meta: dict, name: str) -> slice:
    term = next(t for t in meta["observation_terms"] if t["name"] == name)
    return slice(term["start"], term["stop"])


def test_delay_line_sends_the_targets_of_d_steps_ago_and_the_first_while_it_fills() -> None:
    targets = [np.full(3, float(k)) for k in range(8)]
    for delay in (0, 1, 3):
        injector = FaultInjector(Faults(delay_steps=delay), np.arange(3))
        sent = [injector.command(t)[0] for t in targets]
        assert sent == [float(max(k - delay, 0)) for k in range(8)]
        injector.reset()  # a new episode starts its line afresh
        assert injector.command(np.full(3, 9.0))[0] == 9.0


def test_delay_in_the_command_path_reaches_ctrl_late_and_leaves_the_observation_and_action(policy) -> None:
    """With delay 2, ctrl after step k holds the target the controller computed at step k - 2; the
    policy's own last action (what it observes) is this step's, as on a robot."""
    clean, clean_data = _controller(policy)
    delayed, data = _controller(policy)
    delayed.faults = Faults(delay_steps=2)
    delayed.reset(data)
    computed = []
    for k in range(6):
        step = delayed.step(data)
        computed.append(step.target)
        np.testing.assert_array_equal(data.ctrl[delayed.actuators], computed[max(k - 2, 0)])
        np.testing.assert_array_equal(delayed.context.last_action, step.action.astype(np.float64))
    # The first step saw the same state in both: same observation, action and computed target.
    first = clean.step(clean_data)
    np.testing.assert_array_equal(first.target, computed[0])


def test_no_faults_and_zero_levels_are_the_runtime_bit_for_bit(policy) -> None:
    runs = []
    for faults in (None, Faults(delay_steps=0, encoder_bias=0.0, noise_scale=0.0)):
        controller, data = _controller(policy)
        if faults is not None:
            controller.faults = faults
            controller.reset(data)
        runs.append((np.stack([controller.step(data).obs for _ in range(20)]), data.qpos.copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_encoder_bias_shifts_the_joint_readings_and_nothing_else(policy) -> None:
    """The biased observation equals the clean runtime's observation of a state whose joint angles
    are offset by the bias (the encoder's report); the true state is left as it was."""
    meta = policy.metadata
    bias = np.linspace(-0.05, 0.05, len(meta["joint_names"]))
    biased, data = _controller(policy)
    biased.faults = Faults(encoder_bias=bias)
    data.qpos[biased.joint_qpos] += 0.1 * np.sin(np.arange(bias.size))
    mujoco.mj_forward(biased.model, data)
    before = data.qpos.copy()
    obs = biased.observe(data)
    np.testing.assert_array_equal(data.qpos, before)

    clean, _ = _controller(policy)
    shifted = mujoco.MjData(clean.model)
    shifted.qpos[:], shifted.qvel[:] = data.qpos, data.qvel
    mujoco.mj_forward(clean.model, shifted)
    sensordata = shifted.sensordata.copy()
    shifted.qpos[clean.joint_qpos] += bias  # the encoders' report; IMU readings stay the true state's
    shifted.sensordata[:] = sensordata
    np.testing.assert_array_equal(obs, clean.observe(shifted))
    reference, _ = _controller(policy)
    truth = reference.observe(data)
    joints = _columns(meta, "joint_pos")
    np.testing.assert_allclose(obs[joints] - truth[joints], bias, atol=1e-6)
    rest = np.ones(obs.size, bool)
    rest[joints] = False
    np.testing.assert_array_equal(obs[rest], truth[rest])


def test_observation_noise_is_the_training_noise_times_the_scale(policy) -> None:
    """Each noisy term gets ``scale * U(low, high)`` drawn in term order from the seed's generator,
    before the term's scale (joint_vel: x 0.05), as training adds it; the other terms stay exact."""
    meta = policy.metadata
    noisy, data = _controller(policy)
    noisy.faults = Faults(noise_scale=2.0, seed=7)
    obs = noisy.observe(data)
    clean, _ = _controller(policy)
    truth = clean.observe(data)
    rng = np.random.default_rng(7)
    expected = truth.astype(np.float64).copy()
    for term in meta["observation_terms"]:
        if term["noise"] is not None:
            draw = 2.0 * rng.uniform(term["noise"]["low"], term["noise"]["high"], term["dim"])
            expected[term["start"] : term["stop"]] += draw * term["scale"]
    np.testing.assert_allclose(obs, expected, atol=2e-6)
    assert [t["name"] for t in meta["observation_terms"] if t["noise"]] == ["joint_pos", "joint_vel"]
    assert not np.allclose(obs[_columns(meta, "joint_pos")], truth[_columns(meta, "joint_pos")])


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (dict(delay_steps=-1), "delay_steps must be an integer in [0, 50], got -1"),
        (dict(delay_steps=1.5), "delay_steps must be an integer in [0, 50], got 1.5"),
        (dict(encoder_bias=math.nan), "encoder_bias must be a finite number or one per joint, got nan"),
        (dict(noise_scale=-1.0), "noise_scale must be a finite number >= 0, got -1.0"),
    ],
)
def test_bad_faults_are_one_line(faults, message) -> None:
    with pytest.raises(DeploymentError) as error:
        Faults(**faults)
    assert str(error.value) == f"faults: {message}"


def test_encoder_bias_of_the_wrong_length_is_refused(policy) -> None:
    controller, _ = _controller(policy)
    with pytest.raises(DeploymentError, match="encoder_bias has 3 values, the robot has 29 joints"):
        controller.faults = Faults(encoder_bias=[0.0, 0.1, 0.2])


def test_world_faults_change_friction_payload_and_pushes_and_restore_the_model(policy) -> None:
    model = mujoco.MjModel.from_xml_path(str(robot_asset(policy.metadata["robot_model"])))
    friction, mass, subtree = model.geom_friction.copy(), model.body_mass.copy(), model.body_subtreemass.copy()
    torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    restore = WorldFaults(friction=0.3, payload_kg=6.0, payload_body="torso_link").apply(model)
    assert np.all(model.geom_friction[:, 0] == 0.3)
    np.testing.assert_array_equal(model.geom_friction[:, 1:], friction[:, 1:])
    assert model.body_mass[torso] == pytest.approx(mass[torso] + 6.0)
    assert model.body_subtreemass[0] == pytest.approx(subtree[0] + 6.0)  # mj_setConst recomputed it
    others = np.arange(model.nbody) != torso
    np.testing.assert_array_equal(model.body_mass[others], mass[others])
    restore()
    np.testing.assert_array_equal(model.geom_friction, friction)
    np.testing.assert_array_equal(model.body_mass, mass)
    np.testing.assert_allclose(model.body_subtreemass, subtree)

    data = mujoco.MjData(model)
    push = WorldFaults(push_mps=1.5)
    period = round(PUSH_PERIOD_S / 0.02)
    changes = {}
    for step in range(1, 4 * period + 1):
        before = data.qvel.copy()
        push.push(data, step, 0.02)
        if np.any(data.qvel != before):
            changes[step] = data.qvel - before
    assert sorted(changes) == [period // 2 + k * period for k in range(4)]
    directions = [[1.5, 0.0], [0.0, 1.5], [-1.5, 0.0], [0.0, -1.5]]
    for change, direction in zip(changes.values(), directions, strict=True):
        np.testing.assert_array_equal(change[:2], direction)
        assert not np.any(change[2:])


def test_first_failing_level_is_the_smallest_in_magnitude() -> None:
    cells = [
        {"fault": "delay_steps", "level": 3, "failed": True},
        {"fault": "delay_steps", "level": 2, "failed": True},
        {"fault": "delay_steps", "level": 1, "failed": False},
        {"fault": "encoder_bias_rad", "level": 0.05, "failed": True},
        {"fault": "encoder_bias_rad", "level": -0.02, "failed": True},
        {"fault": "friction", "level": 1.6, "failed": False},
        {"fault": "push_mps", "level": 0.5, "failed": False},
    ]
    first = first_failures(cells)
    assert first["delay_steps"] == 2 and first["encoder_bias_rad"] == -0.02
    assert first["friction"] is None and first["push_mps"] is None
    # Friction counts from the middle of its levels, 1.0: 1.6 is nearer than 0.3.
    cells += [{"fault": "friction", "level": 0.3, "failed": True}, {"fault": "friction", "level": 1.6, "failed": True}]
    assert first_failures(cells)["friction"] == 1.6
    assert failing_levels(cells)["friction"] == [1.6, 0.3] and failing_levels(cells)["delay_steps"] == [2, 3]


def test_a_diverged_cell_is_reported_as_diverged_never_as_nan() -> None:
    """A push MuJoCo C cannot hold (1e4 m/s, past the task's divergence envelope) diverges: the cell
    counts it, fails, and its error is the mean of the steps that did not diverge."""
    prepared = Scenario(POLICY, [0.5, 0.0, 0.0]).prepare()
    cell = Cell("push_mps", 1e4, world=WorldFaults(push_mps=1e4))
    result = run_cell(prepared, cell, [[0.5, 0.0, 0.0]], 1.2)
    assert result["diverged"] >= 1 and result["failed"] and result["falls"] >= result["diverged"]
    assert result["error"] is not None and math.isfinite(result["error"])
    assert prepared.controller.faults == Faults()  # the runtime is left without faults


def test_the_grid_command_writes_json_and_heat_map(tmp_path, capsys) -> None:
    out, plot = tmp_path / "grid.json", tmp_path / "grid.png"
    args = [str(POLICY), "--robustness", "--command", "0.5,0,0", "--seconds", "0.4", "--out", str(out)]
    assert main([*args, "--plot", str(plot)]) == 0
    report = json.loads(out.read_text())
    cells = report["cells"]
    assert len(cells) == sum(len(v) for v in LEVELS.values())
    assert [(c["fault"], c["level"]) for c in cells] == [(f, lv) for f, levels in LEVELS.items() for lv in levels]
    nominal = [c for c in cells if NOMINAL.get(c["fault"]) == c["level"]]
    assert len(nominal) == 5 and len({(c["falls"], c["error"], c["steps"]) for c in nominal}) == 1
    assert all(c["steps"] == 20 for c in cells)
    assert set(report["first_failing_level"]) == set(LEVELS) and report["machine"]["python"]
    assert report["inert_faults"] == {}  # our policies carry their training noise: the noise row injects it
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert printed.count("falls,") == len(cells) and "first failing level:" in printed


def test_grid_options_that_do_not_apply_are_refused(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main([str(POLICY), "--robustness", "--video", str(tmp_path / "v.mp4")])
    assert "drop --video" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(POLICY), "--command", "0.5,0,0", "--plot", str(tmp_path / "g.png")])
    assert "--plot draws the robustness grid: add --robustness" in capsys.readouterr().err


def test_grid_runs_a_tracking_policy_on_its_reference(tmp_path) -> None:
    clip = Path(__file__).resolve().parents[2] / "shared" / "motions" / "g1" / "largebox_carry.npz"
    if not clip.exists():
        pytest.skip(f"{clip} is absent (the shared motions)")
    policy = POLICY.parent / "g1_tracking_sac.onnx"
    report = robustness_grid(policy, motion=str(clip), seconds=0.2)
    assert report["error"] == "body_pos_error_anchored_m" and report["commands"] is None
    assert report["payload_body"] == "torso_link" and all(c["steps"] == 10 for c in report["cells"])


def test_a_single_run_injects_the_faults_of_the_grid_cell_of_the_same_level(tmp_path, capsys) -> None:
    """``--delay-steps 1 --encoder-bias 0.02`` runs what the grid's cells inject (one code path:
    the run equals ``run_cell`` on a cell carrying both faults) and says so in its report."""
    out = tmp_path / "faulty.json"
    args = [str(POLICY), "--command", "0.5,0,0", "--seconds", "0.6", "--out", str(out)]
    assert main([*args, "--delay-steps", "1", "--encoder-bias", "0.02"]) == 0
    report = json.loads(out.read_text())
    assert report["faults"] == {"delay_steps": 1, "encoder_bias_rad": 0.02, "noise_scale": 0.0, "noise_seed": 0}
    assert "faults: delay_steps 1, encoder_bias_rad 0.02" in capsys.readouterr().out
    prepared = Scenario(POLICY, command=[0.5, 0.0, 0.0], seconds=0.6).prepare(print)
    both = Faults(delay_steps=1, encoder_bias=0.02)
    cell = run_cell(prepared, Cell("both", 1.0, both, WorldFaults(payload_body="torso_link")), [[0.5, 0.0, 0.0]], 0.6)
    assert report["summary"]["lin_vel_error_mps"] == pytest.approx(cell["error"], abs=1e-5)
    nominal = tmp_path / "nominal.json"
    assert main([*args[:-1], str(nominal)]) == 0
    clean = json.loads(nominal.read_text())
    assert clean["faults"] is None
    assert clean["summary"]["lin_vel_error_mps"] != pytest.approx(report["summary"]["lin_vel_error_mps"], abs=1e-6)


def test_single_run_faults_are_refused_with_the_grid_and_checked(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main([str(POLICY), "--robustness", "--delay-steps", "1"])
    assert "drop --delay-steps" in capsys.readouterr().err
    assert main([str(POLICY), "--command", "0.5,0,0", "--seconds", "0.1", "--delay-steps", "-1"]) == 2
    assert "delay_steps must be an integer in [0, 50], got -1" in capsys.readouterr().err


def test_noise_is_inert_only_where_no_observation_term_names_its_noise() -> None:
    noisy = {"observation_terms": [{"name": "a"}, {"name": "b", "noise": {"low": -0.1, "high": 0.1}}]}
    assert inert_faults(noisy) == {}
    assert list(inert_faults({"observation_terms": [{"name": "a", "noise": None}]})) == ["noise_scale"]
