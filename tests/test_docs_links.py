"""The Markdown pages point at things that exist: files, headings, and the repository paths
CONTRIBUTING.md names; CHANGELOG.md runs newest first.

Code moves (a module split, a page renamed) leave links behind that no other test reads; this one
fails naming the page and the link.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings (outside code blocks); a repeated heading gets ``-1``, ``-2``..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", text), re.MULTILINE):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(f"{base}-{count}" if count else base)
    return found


def broken_links(page: Path) -> list[str]:
    """Relative links of ``page`` whose file is missing or whose ``#anchor`` is no heading there."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path) if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_resolves() -> None:
    assert len(PAGES) > 15 and ROOT / "docs" / "architecture.md" in PAGES  # the walk found the docs
    broken = {str(page.relative_to(ROOT)): links for page in PAGES if (links := broken_links(page))}
    assert broken == {}


def test_slug_and_link_checker_against_hand_cases(tmp_path: Path) -> None:
    assert slug("Output files and `--force`") == "output-files-and---force"
    assert slug("Critic targets and symmetry (levers of issue 48, off by default)") == (
        "critic-targets-and-symmetry-levers-of-issue-48-off-by-default"
    )
    assert anchors("# A\n## A\n```\n# not a heading\n```\n### b_c\n") == {"a", "a-1", "b_c"}
    (tmp_path / "other.md").write_text("# Here\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#here) [self](#top) [web](https://x.org/y) [file](missing.md) [anchor](other.md#gone)\n"
        "# Top\n```\n[in code](nowhere.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "other.md#gone (no such heading)"]


def test_contributing_names_paths_that_exist() -> None:
    """Backticked repository paths in CONTRIBUTING.md (placeholders like ``<task>`` aside) exist."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    tops = ("unilab_gpu/", "tests/", "scripts/", "configs/", "docs/", "assets/", "examples/", ".ci/")
    paths = [p for p in re.findall(r"`([^`\s]+)`", text) if p.startswith(tops) and "<" not in p]
    assert "tests/test_import_layers.py" in paths and "unilab_gpu/envs/mirror_map.py" in paths
    missing = [p for p in paths if not any(ROOT.glob(p.rstrip("/")))]
    assert missing == []


def test_changelog_is_newest_first() -> None:
    sections = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert sections[0] == "Unreleased"
    dates = sections[1:]
    assert dates and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d) for d in dates), dates
    assert dates == sorted(dates, reverse=True) and len(set(dates)) == len(dates)
