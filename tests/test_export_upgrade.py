"""``unilab-export --upgrade``: an exported file's metadata brought to the current version, the keys it
lacks taken from the env its metadata names (the physics options checked against MuJoCo C's reading
of the MJCF and of the robot config's overrides), the network byte for byte, and refusals in one line."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest

from unilab_gpu.cli.export import main
from unilab_gpu.deploy.physics import physics_options
from unilab_gpu.deploy.policy_file import METADATA_VERSION
from unilab_gpu.export.upgrade import upgrade_policy_file
from unilab_gpu.paths import robot_asset

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
GO2 = ROOT / "docs" / "policies" / "go2_velocity_sac.onnx"
OLD_KEYS = ("terrain", "terrain_sha256", "physics")
"""Keys a version-3 file lacks."""


def _old_file(tmp_path: Path, overrides: list[str] | None = None, **changed) -> Path:
    """The committed Go2 policy as a version-3 export would have written it (``physics`` and the
    terrain keys absent), with ``overrides`` as its training overrides and ``changed`` keys."""
    model = onnx.load(str(GO2))
    meta = {prop.key: json.loads(prop.value) for prop in model.metadata_props if prop.key not in OLD_KEYS}
    meta.update({"metadata_version": 3, **changed})
    if overrides is not None:
        meta["env_overrides"] = overrides
    onnx.helper.set_model_props(model, {key: json.dumps(value) for key, value in meta.items()})
    path = tmp_path / "old.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _props(path: Path) -> dict[str, str]:
    return {prop.key: prop.value for prop in onnx.load(str(path)).metadata_props}


def _actions(path: Path, obs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: obs})[0]


def test_an_old_file_gets_the_physics_of_its_robot_config_and_keeps_its_network(tmp_path, capsys):
    iterations = ["robot.physics.iterations=60", "robot.physics.ls_iterations=30"]
    path = _old_file(tmp_path, overrides=iterations)
    before = onnx.load(str(path))
    props_before = _props(path)
    assert main(["--upgrade", str(path)]) == 0
    versions = f"metadata version 3 -> {METADATA_VERSION}"
    assert capsys.readouterr().out.strip() == f"unilab-export: wrote {path} ({versions}, added {', '.join(OLD_KEYS)})"
    after = onnx.load(str(path))
    assert after.graph.SerializeToString() == before.graph.SerializeToString()  # weights and all, byte for byte
    props = _props(path)
    assert {k: v for k, v in props.items() if k in props_before and k != "metadata_version"} == {
        k: v for k, v in props_before.items() if k != "metadata_version"
    }
    assert json.loads(props["metadata_version"]) == METADATA_VERSION
    # MuJoCo C's reading of the Go2's MJCF, with the overrides' solver budget on top.
    scene = mujoco.MjModel.from_xml_path(str(robot_asset("go2", "scene.xml")))
    expected = {**physics_options(scene), "iterations": 60, "ls_iterations": 30}
    assert json.loads(props["physics"]) == expected and expected["timestep"] == 0.005
    assert json.loads(props["terrain"]) is None and json.loads(props["terrain_sha256"]) is None
    obs = np.random.default_rng(0).standard_normal((4, json.loads(props["observation_dim"]))).astype(np.float32)
    np.testing.assert_array_equal(_actions(path, obs), _actions(GO2, obs))
    # Once current, nothing is left to add: nothing is written.
    assert main(["--upgrade", str(path)]) == 0
    assert "already has metadata version" in capsys.readouterr().out
    assert upgrade_policy_file(path).added == {}


def test_an_upgrade_to_out_leaves_the_input_alone(tmp_path):
    path = _old_file(tmp_path)
    original = path.read_bytes()
    done = upgrade_policy_file(path, tmp_path / "new.onnx")
    assert path.read_bytes() == original and done.path == tmp_path / "new.onnx" and done.version == 3
    assert list(done.added) == list(OLD_KEYS)
    scene = mujoco.MjModel.from_xml_path(str(robot_asset("go2", "scene.xml")))
    assert json.loads(_props(done.path)["physics"]) == physics_options(scene)  # the MJCF's own options


def _one_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and err.startswith("unilab-export: error: ")
    return err


def test_a_file_its_config_no_longer_builds_is_refused_and_left_alone(tmp_path, capsys):
    path = _old_file(tmp_path, stiffness=[1.0] * 12, control_dt=0.04)
    original = path.read_bytes()
    err = _one_line(capsys, ["--upgrade", str(path)])
    assert "no longer builds the env it was exported from (stiffness, control_dt differ)" in err
    assert "re-export the run with unilab-export" in err and path.read_bytes() == original
    # A version-3 file means flat ground: a task that now has a terrain is not the one it trained on.
    rough = _old_file(tmp_path, task="go2_velocity_rough", overrides=["terrain=rough_cpu"])
    assert "(terrain, terrain_sha256 differ)" in _one_line(capsys, ["--upgrade", str(rough)])


def test_bad_upgrade_input_is_one_line(tmp_path, capsys):
    assert "no such policy file" in _one_line(capsys, ["--upgrade", str(tmp_path / "none.onnx")])
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    assert "not a readable ONNX policy" in _one_line(capsys, ["--upgrade", str(junk)])
    future = _old_file(tmp_path, metadata_version=METADATA_VERSION + 1)
    assert f"metadata_version {METADATA_VERSION + 1} is not one this runtime reads" in _one_line(
        capsys, ["--upgrade", str(future)]
    )
    unknown = _old_file(tmp_path, task="no_such_task")
    assert "cannot rebuild its env (task 'no_such_task'" in _one_line(capsys, ["--upgrade", str(unknown)])
    taken = tmp_path / "taken.onnx"
    taken.write_bytes(b"x")
    assert "exists; pass --force" in _one_line(capsys, ["--upgrade", str(_old_file(tmp_path)), "--out", str(taken)])
    with pytest.raises(SystemExit):
        main(["--upgrade", str(junk), str(tmp_path)])  # an export and an upgrade at once
    with pytest.raises(SystemExit):
        main(["--upgrade", str(junk), "--convention", "holosoma"])
