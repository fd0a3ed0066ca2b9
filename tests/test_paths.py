"""Data folders are found from a source checkout."""

from __future__ import annotations

import pytest

from unilab_gpu.paths import ASSETS_DIR, CONFIGS_DIR, robot_asset


def test_robot_asset_resolves_and_errors_name_the_robots() -> None:
    assert robot_asset("g1") == ASSETS_DIR / "robots" / "g1" / "scene.xml"
    assert robot_asset("g1").is_file()
    assert CONFIGS_DIR.is_dir()
    with pytest.raises(FileNotFoundError, match="robots: .*'g1'") as error:
        robot_asset("h1")
    assert "UNILAB_PATH=<folder>" in str(error.value) and "--model path/to/scene.xml" in str(error.value)
