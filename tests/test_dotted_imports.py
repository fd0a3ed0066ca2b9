"""``utils.imports.import_dotted``: what a config may name by dotted path, and why a path is refused."""

import pytest

from unilab_gpu.terrain.sub_terrains import pyramid_stairs
from unilab_gpu.utils.imports import RefusedPath, import_dotted


@pytest.mark.parametrize(
    "path", ["unilab_gpu.terrain.sub_terrains.pyramid_stairs", "unilab_gpu.terrain.sub_terrains:pyramid_stairs"]
)
def test_both_spellings_import_the_same_object(path):
    assert import_dotted(path) is pyramid_stairs


@pytest.mark.parametrize(
    ("path", "listed", "reason", "module_name", "attr"),
    [
        (None, "", "syntax", "", ""),
        (" . :", "", "syntax", "", ""),
        ("json.dumps", "", "outside", "json", "dumps"),
        ("flat", "", "outside", "", "flat"),  # no module part
        ("unilab_gpu.terrain.nothing.flat", "", "import", "unilab_gpu.terrain.nothing", "flat"),
        ("unilab_gpu.terrain.sub_terrains.stairz", "", "missing", "unilab_gpu.terrain.sub_terrains", "stairz"),
    ],
)
def test_refusals_say_why(monkeypatch, path, listed, reason, module_name, attr):
    monkeypatch.setenv("UNILAB_TERM_MODULES", listed)
    with pytest.raises(RefusedPath) as info:
        import_dotted(path)
    assert (info.value.reason, info.value.module_name, info.value.attr) == (reason, module_name, attr)


def test_listed_packages_are_allowed_and_refused_ones_are_not_imported(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    monkeypatch.setenv("UNILAB_TERM_MODULES", "")
    with pytest.raises(RefusedPath) as info:
        import_dotted("colorsys.rgb_to_hsv")
    assert info.value.allowed == ("unilab_gpu",) and "colorsys" not in sys.modules
    monkeypatch.setenv("UNILAB_TERM_MODULES", " json , colorsys")
    assert import_dotted("colorsys:rgb_to_hsv")(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
