"""Algo YAML files and config dataclasses agree key for key and value for value."""

import dataclasses
from pathlib import Path

import pytest

from unilab_gpu.rl.config import config_from_dict, preset_values
from unilab_gpu.rl.flashsac import FlashSacConfig
from unilab_gpu.rl.sac import SacConfig

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "algo"


@pytest.mark.parametrize(("file", "cls"), [("sac.yaml", SacConfig), ("flashsac.yaml", FlashSacConfig)])
def test_yaml_matches_dataclass_defaults(file, cls):
    text = (CONFIGS / file).read_text()
    values = dict(preset_values(file.removesuffix(".yaml")))  # the dataclass's defaults come from here
    assert set(values) == {f.name for f in dataclasses.fields(cls)}
    # The presets decay over the whole run (0, resolved by unilab-train); the dataclass, used by
    # agents built directly, keeps a concrete length.
    assert values["learning_rate_decay_steps"] == 0
    assert config_from_dict(cls, values) == dataclasses.replace(cls(), learning_rate_decay_steps=0)
    # Every key carries a one-line comment.
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert "#" in line, line


def test_unknown_key_and_bad_value_are_named():
    with pytest.raises(ValueError, match="batchsize"):
        config_from_dict(SacConfig, {"batchsize": 3})
    with pytest.raises(ValueError, match="'algo.v_max'"):
        FlashSacConfig(v_min=1.0, v_max=0.0)
    with pytest.raises(ValueError, match="'algo.buffer_capacity_per_env'"):
        SacConfig(n_step=4, buffer_capacity_per_env=4)
    with pytest.raises(ValueError, match="'algo.batch_norm_momentum'"):
        FlashSacConfig(batch_norm_momentum=0.0)
    with pytest.raises(ValueError, match=r"'algo.log_std_max' must be > log_std_min \(-5.0\)"):
        FlashSacConfig(log_std_max=-6.0)
