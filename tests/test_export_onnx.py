"""ONNX export: onnxruntime reproduces the torch actor (normaliser folded in) within 1e-5, the
deployment metadata round-trips and matches the MuJoCo model, ``unilab-export`` writes the run's
file and ``unilab-play --onnx`` rolls it out."""

from __future__ import annotations

import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from rl_agent_helpers import TINY_FLASHSAC_OVERRIDES  # noqa: E402

from unilab_gpu.cli.export import main as export_main  # noqa: E402
from unilab_gpu.cli.play import main as play_main  # noqa: E402
from unilab_gpu.cli.train import main as train_main  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.evaluation.rollout import agent_policy, evaluate  # noqa: E402
from unilab_gpu.export.export_run import export_agent  # noqa: E402
from unilab_gpu.export.metadata import deployment_metadata  # noqa: E402
from unilab_gpu.export.onnx_policy import OnnxPolicy, read_metadata  # noqa: E402
from unilab_gpu.paths import robot_asset  # noqa: E402
from unilab_gpu.rl.agents import agent_from_checkpoint  # noqa: E402
from unilab_gpu.rl.checkpoint import load_checkpoint  # noqa: E402
from unilab_gpu.rl.sac import (
    SacAgent,  # noqa: E402
    SacConfig,  # noqa: E402
)

TINY_FLASHSAC = TINY_FLASHSAC_OVERRIDES
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("export_run")
    args = ["task=pendulum", "env.num_envs=4", "total_env_steps=64", "progress=lines", f"run_dir={path}"]
    assert train_main(args + TINY_FLASHSAC) == 0
    assert (path / "policy.onnx").is_file()  # exported at the end of training by default
    return path


def test_g1_sac_export_matches_torch_and_the_model(tmp_path) -> None:
    env = make_env("g1_tracking", num_envs=8, device="cpu", compile=False, seed=3)
    obs_dim = env.observation_dims["policy"]
    cfg = SacConfig(actor_hidden_dims=(32, 16), critic_hidden_dims=(8,), compile=False)
    agent = SacAgent(cfg, obs_dim, env.observation_dims["critic"], env.action_dim)
    obs = env.reset()
    real = [obs["policy"].clone()]
    for _ in range(3):
        real.append(env.step(agent.act(obs["policy"])).obs["policy"].clone())
    real = torch.cat(real)
    # Statistics far from identity, so a normaliser left out of the file would show.
    agent.policy_norm.update(real * 3.0 + 1.0)
    path = export_agent(env, agent, "g1_tracking", "sac", tmp_path / "g1.onnx")

    policy = OnnxPolicy(path)
    random_obs = torch.randn(64, obs_dim) * 2.0
    for batch in (random_obs, real, real[:1]):
        expected = agent.act(batch, deterministic=True).numpy()
        np.testing.assert_allclose(policy.run(batch.numpy()), expected, atol=1e-5, rtol=0)

    meta = read_metadata(path)
    assert meta == deployment_metadata(env, "g1_tracking", "sac", [])  # round trip through the file
    assert str(ROOT).encode() not in path.read_bytes()  # the exporter's stack traces name source files
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    names = [model.joint(int(model.actuator_trnid[a, 0])).name for a in range(model.nu)]
    assert meta["joint_names"] == names and len(names) == 29 == meta["action_dim"]
    np.testing.assert_allclose(meta["default_joint_pos"], model.key("stand").qpos[7:], atol=1e-6)
    np.testing.assert_allclose(meta["stiffness"], model.actuator_gainprm[:, 0], rtol=1e-6)  # kp
    np.testing.assert_allclose(meta["damping"], -model.actuator_biasprm[:, 2], rtol=1e-6)  # kv
    np.testing.assert_allclose(meta["effort_limit"], model.actuator_forcerange[:, 1])
    # Residual actions about the reference: scale 0.25 * effort / kp, offset read from the
    # observation's reference joint positions; the metadata alone rebuilds the env's targets.
    np.testing.assert_allclose(
        meta["action_scale"], 0.25 * model.actuator_forcerange[:, 1] / model.actuator_gainprm[:, 0], rtol=1e-6
    )
    assert meta["action_scale_negative"] == meta["action_scale"]
    columns = meta["action_offset_observation_columns"]
    command = env.command_manager.get("motion")
    action = agent.act(obs["policy"])
    policy_obs = obs["policy"].clone().numpy()  # the env's buffer is rewritten by the step
    np.testing.assert_allclose(policy_obs[:, columns], command.joint_pos.numpy(), atol=1e-6)  # robot = action order
    env.step(action)
    clipped = np.clip(action.numpy(), meta["action_low"], meta["action_high"])
    target = policy_obs[:, columns] + np.asarray(meta["action_scale"]) * clipped
    bounds = np.asarray(meta["action_bounds"], dtype=np.float64)
    target = np.clip(target, bounds[:, 0], bounds[:, 1])
    np.testing.assert_allclose(env.sim.state.ctrl.numpy(), target, atol=1e-5)
    assert meta["control_dt"] == pytest.approx(0.02) and meta["decimation"] * meta["physics_dt"] == pytest.approx(0.02)
    assert meta["task"] == "g1_tracking" and meta["motion"].startswith("synthetic")
    terms = meta["observation_terms"]
    assert terms[0]["start"] == 0 and terms[-1]["stop"] == obs_dim == meta["observation_dim"]
    assert all(a["stop"] == b["start"] for a, b in zip(terms, terms[1:], strict=False))
    assert [t["name"] for t in terms] == env.observation_manager.groups["policy"].term_names


def test_residual_actions_need_the_raw_reference_in_the_policy_observation() -> None:
    env = make_env(
        "g1_tracking",
        num_envs=2,
        device="cpu",
        compile=False,
        overrides=["+observations.policy.terms.command.scale=2.0"],
    )
    with pytest.raises(ValueError, match="actions are residuals about command 'motion'.*no raw"):
        deployment_metadata(env, "g1_tracking", "sac", [])


def test_cli_export_and_play_onnx(run_dir, tmp_path, capsys) -> None:
    out = tmp_path / "pendulum.onnx"
    assert export_main([str(run_dir), "--out", str(out)]) == 0
    before = (run_dir / "policy.onnx").read_bytes()  # written at the end of training
    assert export_main([str(run_dir)]) == 2 and (run_dir / "policy.onnx").read_bytes() == before
    assert "policy.onnx exists; pass --force to replace it" in capsys.readouterr().err
    assert export_main([str(run_dir), "--force"]) == 0 and (run_dir / "policy.onnx").is_file()
    checkpoint = load_checkpoint(run_dir)
    agent = agent_from_checkpoint(checkpoint, "cpu")
    obs = torch.randn(32, 3) * 3.0
    np.testing.assert_allclose(
        OnnxPolicy(out).run(obs.numpy()), agent.act(obs, deterministic=True).numpy(), atol=1e-5, rtol=0
    )
    meta = read_metadata(out)
    assert meta["task"] == "pendulum" and meta["algo"] == "flashsac" and meta["motion"] is None
    assert meta["joint_names"] == ["hinge"] and meta["actuator_names"] == ["torque"]
    assert meta["action_bounds"] == [[-1.0, 1.0]]  # ctrlrange
    assert meta["action_low"] == [-1.0] and meta["action_high"] == [1.0]  # YAML clip
    assert meta["stiffness"] == [0.0] and meta["effort_limit"] == [None]  # a motor, no force limit
    assert [t["name"] for t in meta["observation_terms"]] == ["angle", "velocity"]
    assert meta["observation_terms"][1] == {
        "name": "velocity",
        "start": 2,
        "stop": 3,
        "dim": 1,
        "history": 1,
        "scale": 0.125,
        "clip": None,
        "func": "unilab_gpu.envs.mdp.observations.joint_vel",  # metadata_version 3: what to compute
        "params": {},
        "noise": None,
    }

    capsys.readouterr()
    assert play_main(["--onnx", str(out), "--num-envs", "2", "--device", "cpu"]) == 0
    onnx_out = capsys.readouterr().out
    assert "pendulum / flashsac exported to" in onnx_out and str(out) in onnx_out
    # Reference: the torch agent on the env play builds (same seed, agent built beforehand so
    # that its initialisation does not move the env's random starts).
    env = make_env("pendulum", 2, "cpu", ["randomize_initial_episode_length=false"], seed=0, compile=False)
    expected = evaluate(env, agent_policy(agent), env.max_episode_length)
    for key in ("episode/return", "reward/angle", "episode/count"):
        printed = float(re.search(rf"^\s+{re.escape(key)}\s+(\S+)$", onnx_out, re.M).group(1))
        assert printed == pytest.approx(expected[key], rel=1e-3), key


def test_export_of_a_missing_run_is_one_line(tmp_path, capsys) -> None:
    assert export_main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "checkpoint not found" in err and "Traceback" not in err


def test_export_onnx_flag_must_be_a_boolean(tmp_path, capsys) -> None:
    assert train_main(["task=pendulum", "export_onnx=maybe", f"run_root={tmp_path}"]) == 2
    assert "'export_onnx' must be true or false, got 'maybe'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before a run folder was made


@pytest.mark.parametrize("policy", sorted((ROOT / "docs" / "policies").glob("*.onnx")), ids=lambda p: p.name)
def test_committed_policies_name_no_machine_path(policy) -> None:
    # A shipped policy must not carry the exporting machine's paths (stack traces, motion files).
    data = policy.read_bytes()
    assert not re.search(rb"/(work|tmp|home|root|Users)/", data), policy.name
