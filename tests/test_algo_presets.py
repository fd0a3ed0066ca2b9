"""The algo presets resolve (Hydra defaults lists: ``base/off_policy`` -> ``sac``/``flashsac`` ->
the preset's own keys) to the values they had when each still repeated every key.

``tests/data/algo_presets.json`` holds every preset's resolved ``algo`` config as it was before the
presets inherited from a base (written by ``python tests/test_algo_presets.py``, run only when a
preset's value changes on purpose).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from unilab_gpu.rl.agents import algo_config
from unilab_gpu.rl.sac import SacConfig
from unilab_gpu.training.config import algo_preset

SNAPSHOT = Path(__file__).parent / "data" / "algo_presets.json"
PRESETS = sorted(path.stem for path in (Path(__file__).resolve().parents[1] / "configs" / "algo").glob("*.yaml"))

ADDED_BY_INHERITANCE = {"sac_velocity": {"critic_target", "actor_q"}}
"""Keys a preset did not state before it inherited ``sac.yaml`` (it took the dataclass defaults,
which ``sac.yaml`` states: the typed config is the same, tested below)."""


def test_the_snapshot_covers_every_preset() -> None:
    assert sorted(json.loads(SNAPSHOT.read_text())) == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_resolves_to_its_values_before_inheritance(name: str) -> None:
    expected = json.loads(SNAPSHOT.read_text())[name]
    got = algo_preset(name)
    added = ADDED_BY_INHERITANCE.get(name, set())
    assert set(got) == set(expected) | added
    assert {key: value for key, value in got.items() if key not in added} == expected, (
        f"configs/algo/{name}.yaml resolves to other values than tests/data/algo_presets.json: "
        "if the change is meant, rewrite the snapshot with `python tests/test_algo_presets.py`"
    )
    if added:  # the keys it gained are what the dataclass gave it before
        before = algo_config({k: v for k, v in expected.items() if k != "task_overrides"})
        assert algo_config({k: v for k, v in got.items() if k != "task_overrides"}) == before
        assert {key: got[key] for key in added} == {key: getattr(SacConfig(), key) for key in added}


def test_derived_presets_state_only_what_differs_from_their_base() -> None:
    derived = [("sac_velocity", "sac"), ("sac_reference", "sac")]
    derived += [("flashsac_velocity", "flashsac"), ("flashsac_reference", "flashsac")]
    for name, base in derived:
        text = (SNAPSHOT.parent.parent.parent / "configs" / "algo" / f"{name}.yaml").read_text()
        stated = {line.split(":")[0] for line in text.splitlines() if line and not line.startswith(("#", " "))}
        resolved, parent = algo_preset(name), algo_preset(base)
        assert stated - {"defaults"} == {key for key in resolved if resolved[key] != parent.get(key)}, name


def main() -> None:
    SNAPSHOT.write_text(json.dumps({name: algo_preset(name) for name in PRESETS}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)


if __name__ == "__main__":
    main()
