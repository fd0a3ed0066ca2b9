"""Hostile or careless run folders and overrides (issue 36): a run's ``config.yaml`` is read with
bounds (an alias bomb, a Python tag, a huge file: one line, at once), ``resume seed=N`` keeps the
run's recorded seed, and an override Hydra's grammar refuses is named with how to quote it."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import yaml
from test_cli_train import TINY

from unilab_gpu.cli.train import main
from unilab_gpu.envs.make_env import load_task_cfg
from unilab_gpu.rl.checkpoint import load_checkpoint
from unilab_gpu.training.run_folder import RUN_CONFIG_MAX_BYTES, RunFolderError, load_run_config
from unilab_gpu.utils.overrides import override_syntax_problem
from unilab_gpu.utils.yaml_files import expanded_values


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """About 0.4 kB of YAML whose aliases expand to ``width ** levels`` values."""
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "seed: 0\n" + "\n".join(lines) + "\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    path = _write(tmp_path, alias_bomb())
    assert path.stat().st_size < 1024
    # Hand count: l0 is a list and its 9 items; each next list holds 9 copies of the one before;
    # the root mapping, the seed key and value, and one key per list.
    sizes = [1 + 9]
    for _ in range(8):
        sizes.append(1 + 9 * sizes[-1])
    values = 1 + 2 + sum(1 + size for size in sizes)
    start = time.perf_counter()
    with pytest.raises(RunFolderError) as refused:
        load_run_config(path)
    assert time.perf_counter() - start < 2.0  # OmegaConf alone takes minutes on it
    assert str(refused.value).startswith(f"{path} expands to {values:,} values through YAML aliases")
    assert "\n" not in str(refused.value)


def test_a_few_aliases_still_load(tmp_path):
    from omegaconf._utils import get_yaml_loader

    text = "a: &a [x, y, z]\nb: [*a, *a, *a]\n"
    # root (1), keys a and b (2), list a with 3 items (4), list b (1) holding 3 copies of list a (12)
    assert expanded_values(yaml.compose(text, Loader=get_yaml_loader())) == 1 + 2 + 4 + 1 + 12
    assert load_run_config(_write(tmp_path, text)).b[2][1] == "y"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "seed: 0\nx: !!python/object/apply:os.system ['echo owned']\n",
            "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system' "
            "(line 2, column 4); a run's config.yaml holds plain values, never tagged Python objects",
        ),
        ("a: &a [*a]\n", "nests itself (a recursive YAML alias"),
        ("a: [1, 2\n", "is not valid YAML: expected ',' or ']', but got '<stream end>' (line 2, column 1)"),
        ("- 1\n- 2\n", "is not a mapping of config keys (found a list)"),
        ("5\n", "is not a mapping of config keys (found the single value '5')"),  # was an AssertionError
        ("", "is empty"),
        ("a: 1\na: 2\n", "found duplicate key a (line 2, column 1)"),
        ("[" * 100_000, "nests itself (a recursive YAML alias, or nesting too deep to read)"),
    ],
)
def test_hostile_config_files_are_one_line(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(RunFolderError) as refused:
        load_run_config(path)
    assert str(refused.value).startswith(str(path)) and message in str(refused.value), refused.value
    assert "\n" not in str(refused.value)


def test_a_huge_or_binary_config_is_not_read(tmp_path):
    path = _write(tmp_path, "a: 1\n" + "#" * RUN_CONFIG_MAX_BYTES)
    with pytest.raises(RunFolderError, match="is larger than 1024 kB, but a run's config.yaml holds a few kB"):
        load_run_config(path)
    path.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(RunFolderError, match=r"is not UTF-8 text \(invalid start byte at byte 3\)"):
        load_run_config(path)


def test_plain_configs_load_as_omegaconf_reads_them(tmp_path):
    """Same values as ``OmegaConf.load`` (its number formats: 1e-3 is a float)."""
    from omegaconf import OmegaConf

    path = _write(tmp_path, "seed: 3\nalgo: {lr: 1e-3, dims: [64, 64]}\nrun_dir: null\n")
    assert load_run_config(path) == OmegaConf.load(path)
    assert isinstance(load_run_config(path).algo.lr, float)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "run"
    assert main([*TINY, "total_env_steps=8", f"run_dir={run_dir}", "export_onnx=false"]) == 0
    return run_dir


@pytest.fixture
def run_dir(trained_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace(str(trained_run), str(copy)))
    return copy


def test_resume_of_an_alias_bomb_config_is_one_line_and_writes_nothing(run_dir, capsys):
    config = run_dir / "config.yaml"
    config.write_text(config.read_text() + alias_bomb())
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    start = time.perf_counter()
    assert main([f"resume={run_dir}", "total_env_steps=16"]) == 2
    assert time.perf_counter() - start < 10.0
    err = capsys.readouterr().err
    assert err.startswith(f"unilab-train: error: {config} expands to ") and err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_resume_of_a_python_tagged_config_is_one_line(run_dir, capsys):
    config = run_dir / "config.yaml"
    config.write_text(config.read_text() + "evil: !!python/object/apply:os.system ['touch owned']\n")
    assert main([f"resume={run_dir}", "total_env_steps=16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "never tagged Python objects" in err and "Traceback" not in err
    assert not Path("owned").exists()


def test_resume_with_another_seed_keeps_the_runs_seed(run_dir, capsys):
    recorded = load_checkpoint(run_dir)["config"]["seed"]
    config = (run_dir / "config.yaml").read_text()
    assert main([f"resume={run_dir}", "total_env_steps=16", f"seed={recorded + 7}"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"unilab-train: error: resume: 'seed={recorded + 7}' would replace the run's recorded seed {recorded}; a "
        "resumed run keeps its seed (and reseeds with seed + the iteration reached); start a new run for another "
        "seed\n"
    )
    assert (run_dir / "config.yaml").read_text() == config
    assert main([f"resume={run_dir}", "total_env_steps=16", f"seed={recorded}"]) == 0  # its own seed: fine
    assert load_checkpoint(run_dir)["config"]["seed"] == recorded


@pytest.mark.parametrize(
    ("override", "fix"),
    [
        ("env.overrides=[episode_length_s=5]", "quote list items and values that hold '='"),
        ("algo.actor_hidden_dims=[64,64", "every '[' and '{' needs its closing ']' and '}'"),
        ("seed=(", "quote a value that holds parentheses"),
    ],
)
def test_an_override_hydra_cannot_parse_is_named_with_its_fix(tmp_path, capsys, override, fix):
    assert main([*TINY, override, f"run_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"unilab-train: error: train config: override '{override}' is not valid Hydra syntax (")
    assert fix in err and err.count("\n") == 1 and not (tmp_path / "run").exists()


def test_task_overrides_hydra_cannot_parse_are_named_too():
    with pytest.raises(ValueError, match=r"^task 'pendulum': override 'rewards.x=\[a=b\]' is not valid Hydra syntax"):
        load_task_cfg("pendulum", ["rewards.x=[a=b]"])
    assert override_syntax_problem(["a=1", "b=['c=d']", "e=[1, 2]"]) is None


@pytest.mark.parametrize(
    "content", [b"", b"random \x00\xff bytes", b"\x80\x02" + bytes(range(200)), b"PK\x03\x04 a damaged zip"]
)
def test_damaged_checkpoints_are_never_called_python_objects(tmp_path, content):
    """Random bytes made torch.load fall back to its legacy pickle reader, and the message said the
    file 'holds a Python object'; it is damaged or not a checkpoint."""
    from unilab_gpu.rl.checkpoint import CheckpointError

    path = tmp_path / "checkpoint.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    assert str(refused.value).startswith(f"checkpoint {path} is corrupt or not a checkpoint: ")
    assert "Python object" not in str(refused.value) and "\n" not in str(refused.value)
