"""Issue 60's poor-answer classes, one mechanism each, each with a test that names the field and
the expected value in one line:

- nonsense accepted: a CLI number outside its range (``cli.arguments.check_bounds``), a policy file
  whose metadata lacks a key its version writes (``deploy.policy_file.OPTIONAL_KEYS``), twin joints
  whose ranges are not mirror images (``motion.mirror.RobotMirror``, in tests/test_motion_mirror.py);
- tracebacks: metadata names that are not names, keyframe-tool poses and models, a CUDA device the
  machine lacks, tracking levers of the wrong type or range (``tasks.tracking.levers``);
- misleading: an ``algo.*`` typo answered with Hydra's "use +key" hint, a robot config's bad key
  named ``''`` (``envs.robot_model.load_robot_cfg``);
- signals: SIGTERM stops ``unilab-eval`` and ``unilab-sim2sim`` as Ctrl-C does
  (``training.signals.stop_signals_interrupt``);
- run-folder files: no output replaces a file training writes into a run folder (``utils.files.RUN_FILES``).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from robot_models import BIPED_POSE, biped_xml
from script_helpers import load_script

from unilab_gpu.cli.eval import main as eval_main
from unilab_gpu.cli.sim2sim import main as sim2sim_main
from unilab_gpu.utils.files import OutputPathError, check_output

ROOT = Path(__file__).resolve().parents[1]
VELOCITY = ROOT / "docs" / "policies" / "go2_velocity_sac.onnx"  # metadata version 5 (upgraded from 3)
TRACKING = ROOT / "docs" / "policies" / "g1_tracking_sac.onnx"  # metadata version 5, with physics


def _last_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    return err.splitlines()[-1] if err else ""


# -- nonsense accepted -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seconds", "1e30"], "--seconds must be a number in (0, 3600] (simulated seconds), got 1e+30"),
        (["--seconds", "0"], "--seconds must be a number in (0, 3600] (simulated seconds), got 0"),
        (["--command", "1e30,0,0"], "--command must be a number in [-10, 10] (each of vx, vy, wz, m/s and rad/s)"),
    ],
)
def test_sim2sim_numbers_outside_their_range_are_one_line(capsys, argv, message) -> None:
    """Before, ``--seconds 1e30`` ran without end and ``--command 1e30,0,0`` simulated it."""
    base = ["--command", "0.5,0,0"] if "--command" not in argv else []
    with pytest.raises(SystemExit) as stop:
        sim2sim_main([str(VELOCITY), *base, *argv])
    assert stop.value.code == 2 and message in _last_error_line(capsys)


@pytest.mark.parametrize(
    ("command", "argv", "message"),
    [
        ("unilab-play", ["--seconds", "1e30", "--video", "v.mp4"], "--seconds must be a number in (0, 3600] (video "
         "length in env seconds), got 1e+30"),
        ("unilab-play", ["--seed", "-5"], "--seed must be a whole number in [0, 2**63 - 1], got -5"),
        ("unilab-play", ["--port", "99999", "--viewer"], "--port must be a whole number in [0, 65535] (a TCP port; 0: "
         "any free one), got 99999"),
        ("unilab-play", ["--env", "16", "--video", "v.mp4"], "--env 16 is not a world of the env's 16 (--num-envs); "
         "expected 0 to 15"),
        ("sim2sim_benchmark", ["--seconds", "1e30"], "--seconds must be a number in (0, 3600] (simulated seconds per "
         "case), got 1e+30"),
        ("sim2sim_benchmark", ["--commands", "0.5,0,0", "20,0,0"], "--commands must be a number in [-10, 10] (each of "
         "vx, vy, wz, m/s and rad/s), got 20"),
        ("sim2sim_benchmark", ["--commands", "fast"], "argument --commands: expected three numbers vx,vy,wz such as "
         "0.5,0,0, got 'fast'"),
        ("peers_benchmark", ["--trials", "0"], "--trials must be a whole number in [1, 65536] (tracking: trials per "
         "set), got 0"),
        ("peers_benchmark", ["--seconds", "nan"], "--seconds must be a number in (0, 3600] (locomotion: simulated "
         "seconds per command), got nan"),
        ("unilab-doctor", ["--num-envs", "2.5"], "argument --num-envs: expected a whole number, got '2.5'"),
        ("unilab-bench", ["--seed", "-1"], "--seed must be a whole number in [0, 2**63 - 1], got -1"),
        ("bench_distributed", ["--ranks", "2", "0"], "--ranks must be a whole number >= 1 (processes of one world "
         "size), got 0"),
    ],
)  # fmt: skip
def test_every_command_bounds_its_numbers_in_one_line(tmp_path, capsys, monkeypatch, command, argv, message) -> None:
    """Before: ``unilab-play --seconds 1e30 --video`` rendered without end and ``--seed -5`` was a TypeError
    traceback; the benchmark scripts ran ``--seconds 1e30``, parsed ``--commands fast`` into a ValueError
    traceback and started ``--ranks 0``. Every one goes through ``cli.arguments.check_bounds``."""
    monkeypatch.chdir(tmp_path)
    policy = [str(VELOCITY)]
    if command == "unilab-play":
        from unilab_gpu.cli.play import main as play_main

        run = lambda: play_main(["--onnx", *policy, *argv])  # noqa: E731
    elif command in ("unilab-doctor", "unilab-bench"):
        from unilab_gpu.cli.bench import main as bench_main
        from unilab_gpu.cli.doctor import main as doctor_main

        main = doctor_main if command == "unilab-doctor" else bench_main
        run = lambda: main(["--out", "o.json", *argv])  # noqa: E731
    elif command == "sim2sim_benchmark":
        run = lambda: load_script(command).main([*policy, "--out", "o.json", *argv])  # noqa: E731
    elif command == "peers_benchmark":
        run = lambda: load_script(command).main(["--out", "o.json", *argv])  # noqa: E731
    else:
        monkeypatch.setattr("sys.argv", [f"{command}.py", "--out", "o.json", *argv])
        run = load_script(command).main
    with pytest.raises(SystemExit) as stop:
        run()
    assert stop.value.code == 2 and _last_error_line(capsys) == f"{command}: error: {message}"
    assert list(tmp_path.iterdir()) == []


def test_sim2sim_benchmark_answers_a_policy_s_refusal_in_one_line(tmp_path, capsys) -> None:
    """``--seconds 0.001`` (under one control step) was a DeploymentError traceback."""
    out = tmp_path / "o.json"
    argv = [str(VELOCITY), "--out", str(out), "--commands", "0.5,0,0", "--seconds", "0.001"]
    assert load_script("sim2sim_benchmark").main(argv) == 2
    assert _last_error_line(capsys) == (
        "sim2sim_benchmark: error: --seconds 0.001 is less than one control step of the policy (0.02 s); "
        "nothing would run"
    )
    assert not out.exists()


def test_eval_reads_whole_numbers_as_written(capsys, monkeypatch) -> None:
    """``--rows-per-column 1e8`` was argparse's "invalid int value"; it is the number it writes, which the
    evaluation then bounds by the terrain's columns and levels."""
    import unilab_gpu.cli.eval as cli

    class Loading(Exception):
        """The arguments passed their checks: the evaluation loads the policy."""

    def loading(run, onnx):
        raise Loading

    monkeypatch.setattr(cli, "load_policy", loading)
    walk = ["--onnx", str(VELOCITY), "--terrain", "slopes_stairs_eval", "--seed", "1e3"]
    with pytest.raises(Loading):
        eval_main([*walk, "--rows-per-column", "1e8"])
    with pytest.raises(SystemExit):
        eval_main([*walk, "--rows-per-column", "2.5"])
    assert "argument --rows-per-column: expected a whole number, got '2.5'" in _last_error_line(capsys)


def test_bounds_read_and_word_numbers_as_written() -> None:
    from unilab_gpu.cli.arguments import Bound, whole

    assert whole("1e8") == 100_000_000 and whole("16") == 16 and whole("2.0") == 2
    assert Bound(0, 3600, low_open=True).expected() == "a number in (0, 3600]"
    assert Bound(1, integer=True).expected() == "a whole number >= 1"
    assert Bound(0, (1 << 63) - 1, integer=True).expected() == "a whole number in [0, 2**63 - 1]"
    assert Bound(high=5.0).expected() == "a number <= 5" and Bound().expected() == "a finite number"
    bound = Bound(0, 1, low_open=True, integer=False)
    assert not bound.holds(0) and bound.holds(1) and not bound.holds(1.5) and not bound.holds(float("nan"))
    assert not Bound(0, 10, integer=True).holds(2.5)


def _edited_policy(tmp_path: Path, source: Path, edit) -> Path:
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(source))
    meta = edit({p.key: json.loads(p.value) for p in model.metadata_props})
    del model.metadata_props[:]
    onnx.helper.set_model_props(model, {k: json.dumps(v) for k, v in meta.items()})
    out = tmp_path / "edited.onnx"
    onnx.save(model, str(out))
    return out


def test_a_version_5_policy_without_its_physics_is_refused(tmp_path) -> None:
    """It ran on the scene's own solver options, which the policy never trained with."""
    pytest.importorskip("onnxruntime")
    from unilab_gpu.deploy.policy_file import OPTIONAL_KEYS, DeploymentError, PolicyFile

    assert PolicyFile(TRACKING).metadata["physics"]["timestep"] > 0  # the file as exported has them
    edited = _edited_policy(tmp_path, TRACKING, lambda m: {k: v for k, v in m.items() if k != "physics"})
    with pytest.raises(DeploymentError, match=r"metadata lacks \['physics'\], which metadata_version 5 has") as caught:
        PolicyFile(edited)
    assert "\n" not in str(caught.value)
    version_3 = _edited_policy(  # a version-3 file lacks physics by right: the MJCF's options, as documented
        tmp_path, VELOCITY, lambda m: {**{k: v for k, v in m.items() if k not in OPTIONAL_KEYS}, "metadata_version": 3}
    )
    assert PolicyFile(version_3).metadata["physics"] is None


# -- tracebacks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("robot_model", 5, "'robot_model' must be null or a robot name such as 'go2'"),
        ("task", None, "'task' must be a task name such as 'go2_velocity', got None"),
        ("env_overrides", "terrain=rough", "'env_overrides' must be null or a list of 'key=value' strings"),
    ],
)
def test_metadata_names_of_the_wrong_type_are_one_line(tmp_path, capsys, key, value, expected) -> None:
    """``robot_model: 5`` was a TypeError from a path join; ``task: null`` an "unknown task None"."""
    pytest.importorskip("onnxruntime")
    edited = _edited_policy(tmp_path, TRACKING, lambda m: {**m, key: value})
    assert sim2sim_main([str(edited), "--seconds", "0.04"]) == 2
    line = _last_error_line(capsys)
    assert line.startswith("unilab-sim2sim: error: ") and expected in line, line


@pytest.fixture(scope="module")
def keyframe_tool():
    return load_script("stand_keyframe")


@pytest.mark.parametrize(
    ("pose", "message"),
    [
        ([".*_hip=nan", ".*_knee=0.8"], "--pose: '.*_hip=nan' must be REGEX=ANGLE"),
        ([".*_hip=-0.4", ".*_knee=3.0"], "--pose: left_knee = 3 rad is outside its range [0, 2.5] rad"),
    ],
)
def test_keyframe_tool_poses_are_checked(tmp_path, keyframe_tool, pose, message) -> None:
    model = tmp_path / "biped.xml"
    model.write_text(biped_xml())
    with pytest.raises(SystemExit) as stop:
        keyframe_tool.main([str(model), "--pose", *pose])
    assert message in str(stop.value.code) and "\n" not in str(stop.value.code)


def test_keyframe_tool_write_config_on_a_full_disk_is_one_line(tmp_path, keyframe_tool, monkeypatch) -> None:
    folder = tmp_path / "user"
    (folder / "configs" / "robot").mkdir(parents=True)
    (folder / "assets" / "robots" / "biped").mkdir(parents=True)
    (folder / "assets" / "robots" / "biped" / "scene.xml").write_text(biped_xml())
    config = folder / "configs" / "robot" / "biped.yaml"
    text = (
        "model: biped\ntorso_body: torso\nimu: {gyro: imu_gyro, velocimeter: imu_linvel}\nbase_height: 0.45\n"
        "fall_height: 0.25\nfeet: {sites: [left_sole], bodies: [left_foot], geoms: ['.*_(heel|toe)'], "
        "swing_height: 0.05}\n"
    )
    config.write_text(text)
    monkeypatch.setenv("UNILAB_PATH", str(folder))

    def full(path, write, **kwargs):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(keyframe_tool, "write_atomic", full)
    with pytest.raises(SystemExit) as stop:
        keyframe_tool.main(["biped", "--pose", *BIPED_POSE, "--write-config"])
    assert str(stop.value.code) == (
        f"stand_keyframe: --write-config: cannot write {config}: No space left on device; nothing written"
    )
    assert config.read_text() == text


def test_bench_update_names_a_cuda_device_the_machine_lacks(tmp_path, capsys) -> None:
    bench = load_script("bench_update")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--device", "cuda:7", "--out", str(tmp_path / "update.json")])
    message = str(stop.value.code)
    assert message.startswith("bench_update: error: --device: device 'cuda:7'") and "\n" not in message
    assert not (tmp_path / "update.json").exists()


_SHARE = "a number in [0, 1] (share of episodes that start at frame 0)"
_BLEND = "a number in [0, 10] (seconds from the standing keyframe into frame 0; 0: no blend)"
_CURRICULUM_KEYS = "['start_scale', 'tighten_below', 'loosen_above', 'step', 'ema_rate']"
LEVER_CASES = {
    "first_frame_share=abc": f"'first_frame_share' must be {_SHARE}, got 'abc'",
    "first_frame_share=null": f"'first_frame_share' must be {_SHARE}, got None",
    "blend_in_seconds=null": f"'blend_in_seconds' must be {_BLEND}, got None",
    "blend_in_seconds=1e9": f"'blend_in_seconds' must be {_BLEND}, got 1000000000.0",
    "soft_joint_limit_ratio=abc": "'soft_joint_limit_ratio' must be a number in (0, 1] (share of each joint's "
    "range), got 'abc'",
    "termination_curriculum=5": f"'termination_curriculum' must be null or a mapping with keys {_CURRICULUM_KEYS}, "
    "got 5",
    "termination_curriculum={start_scal: 2}": "'termination_curriculum.start_scal' is not a key of "
    f"termination_curriculum (did you mean 'start_scale'?); expected one of {_CURRICULUM_KEYS}",
    "termination_curriculum={start_scale: abc}": "'termination_curriculum.start_scale' must be a finite number, "
    "got 'abc'",
    "adaptive={bin_seconds: null}": "'adaptive.bin_seconds' must be a finite number, got None",
}
"""Before: TypeErrors from comparisons and ``**``, a MemoryError for 1e9 s, a null blend taken as 0."""


@pytest.mark.parametrize("override", list(LEVER_CASES))
def test_tracking_levers_of_the_wrong_type_or_range_are_one_line(override) -> None:
    from omegaconf import OmegaConf

    from unilab_gpu.tasks.tracking.levers import check_levers

    key, text = override.split("=", 1)
    value = OmegaConf.to_container(OmegaConf.from_dotlist([f"v={text}"]))["v"]
    with pytest.raises(ValueError) as caught:
        check_levers(**{key: value})
    assert str(caught.value) == LEVER_CASES[override]


def test_a_huge_blend_in_is_refused_by_the_tracking_env_before_allocating() -> None:
    """``blend_in_seconds=1e9`` was a MemoryError for 373 GiB; every lever reaches ``check_levers``."""
    from unilab_gpu.envs.make_env import make_env

    override = "commands.motion.params.blend_in_seconds=1e9"
    with pytest.raises(ValueError) as caught:
        make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=[override])
    assert str(caught.value) == f"commands.motion.params: {LEVER_CASES['blend_in_seconds=1e9']}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-envs", "0"], "--num-envs must be a whole number in [1, 1048576] (simulated G1s), got 0"),
        (["--steps", "1e9"], "--steps must be a whole number in [1, 100000] (env steps), got 1000000000"),
    ],
)
def test_demo_numbers_outside_their_range_are_one_line(capsys, argv, message) -> None:
    """``unilab-demo --num-envs 0`` was a Warp error; ``--steps 1e9`` argparse's "invalid int value"."""
    from unilab_gpu.cli.demo import main as demo_main

    with pytest.raises(SystemExit) as stop:
        demo_main(argv)
    assert stop.value.code == 2 and _last_error_line(capsys) == f"unilab-demo: error: {message}"


def test_ctrl_c_during_an_export_is_one_line_and_keeps_the_old_file(tmp_path, capsys, monkeypatch) -> None:
    """Ctrl-C while ``unilab-export`` writes: exit 130 in one line, the earlier file intact, no temporary left."""
    pytest.importorskip("onnx")
    from test_cli_train import TINY

    from unilab_gpu.cli.export import INTERRUPTED_EXIT_CODE
    from unilab_gpu.cli.export import main as export_main
    from unilab_gpu.cli.train import main as train_main

    run_dir = tmp_path / "run"
    assert train_main([*TINY, "total_env_steps=8", f"run_dir={run_dir}", "export_onnx=false"]) == 0
    out = tmp_path / "policy.onnx"
    out.write_bytes(b"old policy")
    capsys.readouterr()

    def ctrl_c(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", ctrl_c)  # the atomic write's last step before the rename
    assert export_main([str(run_dir), "--out", str(out), "--force"]) == INTERRUPTED_EXIT_CODE == 130
    assert capsys.readouterr().err == "unilab-export: interrupted; nothing written\n"
    assert out.read_bytes() == b"old policy" and sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx", "run"]


# -- misleading --------------------------------------------------------------------------------


@pytest.mark.parametrize("override", ["algo.batch_sise=8", "+algo.batch_sise=8"])
def test_an_algo_key_typo_names_the_close_key_not_hydras_plus_hint(override) -> None:
    from unilab_gpu.training.config import ConfigError, compose_train_config

    with pytest.raises(ConfigError) as caught:
        compose_train_config(["algo=sac", override])
    line = str(caught.value)
    assert f"'{override}' names 'algo.batch_sise', which the sac algorithm has no key for" in line, line
    assert "did you mean 'algo.batch_size'?" in line and "use +algo" not in line and "\n" not in line
    assert compose_train_config(["algo=sac", "algo.batch_size=8"]).algo.batch_size == 8


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("imu: {gyro: imu_gyro, velocimeter: imu_linvel}", "imu: [1, 2]"),
         "bad key 'imu': Merge error: list is not a subclass of ImuCfg. value: [1, 2]"),
        (("fall_height: 0.15", "fall_height: 0.15\n'': 3"), "a key with an empty name (''): Key '' not in 'RobotCfg'"),
        (("fall_height: 0.15", "fall_height: [1]"), "bad key 'fall_height': "),
    ],
)  # fmt: skip
def test_a_robot_config_s_bad_key_is_named_never_as_empty(tmp_path, monkeypatch, edit, message) -> None:
    """An ``imu`` list was "bad key ''": OmegaConf names no key for a mapping merged onto a dataclass field."""
    from unilab_gpu.envs.make_env import make_env

    robots = tmp_path / "configs" / "robot"
    robots.mkdir(parents=True)
    config = robots / "go2x.yaml"
    text = (ROOT / "configs" / "robot" / "go2.yaml").read_text()
    assert edit[0] in text
    config.write_text(text.replace(edit[0], edit[1]))
    monkeypatch.setenv("UNILAB_PATH", str(tmp_path))
    with pytest.raises(ValueError) as caught:
        make_env("go2_velocity", num_envs=2, compile=False, announce=False, overrides=["robot=go2x"])
    line = str(caught.value)
    assert line.startswith(f"task 'go2_velocity': robot config {config}: {message}"), line
    assert "bad key ''" not in line and "\n" not in line


# -- signals -----------------------------------------------------------------------------------


@pytest.fixture
def sigterm_ignored():
    """SIGTERM swallowed by the test process unless a command installs its own handler: without
    one, the command goes on as if nothing came (where the default would end pytest itself)."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_stops_sim2sim_and_writes_its_report(tmp_path, capsys, monkeypatch, sigterm_ignored) -> None:
    import unilab_gpu.cli.sim2sim as cli

    class TermAfter30:  # a scheduler's SIGTERM as the 30th control step ends
        def __call__(self, done, steps, falls):
            if done == 30:
                os.kill(os.getpid(), signal.SIGTERM)
            assert done < 40, "SIGTERM did not stop unilab-sim2sim"

    monkeypatch.setattr(cli, "_Progress", TermAfter30)
    out = tmp_path / "report.json"
    code = sim2sim_main([str(VELOCITY), "--command", "0.5,0,0", "--seconds", "3600", "--out", str(out)])
    assert code == cli.INTERRUPTED_EXIT_CODE
    assert "interrupted; the report covers the 0.6 s simulated before it" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["interrupted"] is True and report["seconds"] == 0.6


def test_sigterm_stops_eval_as_ctrl_c_does(capsys, monkeypatch, sigterm_ignored) -> None:
    import unilab_gpu.cli.eval as cli

    def loaded_then_terminated(run, onnx):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop unilab-eval")

    monkeypatch.setattr(cli, "load_policy", loaded_then_terminated)
    assert eval_main(["--onnx", str(VELOCITY), "--terrain", "slopes_stairs_eval"]) == cli.INTERRUPTED_EXIT_CODE
    assert _last_error_line(capsys) == "unilab-eval: interrupted; no report written"
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the test's own handler is back


# -- run-folder files --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["scene.xml", "events.out.tfevents.1765000000.host.1.0", "config.until_4096.yaml"])
def test_no_output_replaces_a_file_training_wrote_into_a_run_folder(tmp_path, capsys, name) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: go2_velocity\n")
    (run / name).write_bytes(b"the run's own file")
    argv = [str(VELOCITY), "--command", "0.5,0,0", "--seconds", "0.04", "--out", str(run / name), "--force"]
    assert sim2sim_main(argv) == 2
    line = _last_error_line(capsys)
    assert f"--out: {run / name} is the {name} of the run folder {run}; no output ever replaces it" in line, line
    assert (run / name).read_bytes() == b"the run's own file"
    check_output(run / "eval.json", "--out")  # a report of one's own in the run folder is fine
    from unilab_gpu.utils.files import POLICY_NAME

    with pytest.raises(OutputPathError, match="is the policy.onnx of the run folder"):
        check_output(run / POLICY_NAME, "--out", force=True)
    check_output(run / POLICY_NAME, "--out", force=True, rewrites=POLICY_NAME)  # unilab-export rewrites it
