"""Motion fixtures shared by the motion and tracking tests: the shared real clip, a G1 test clip
(synthetic or real), and a command-line runner for ``unilab-motion``."""

from __future__ import annotations

from pathlib import Path

import pytest

from unilab_gpu.cli.motion import main as motion_main
from unilab_gpu.motion import load_motion, synthesize_clip

REAL_CLIP = Path(__file__).resolve().parents[1].parent / "shared" / "motions" / "g1" / "largebox_carry.npz"
"""The shared holosoma G1 clip (325 frames at 50 fps); tests that need it skip where it is absent."""


def g1_test_clip(kind: str, kinematics, seed: int):
    """``"synthetic"``: a 2 s synthetic clip drawn with ``seed``; ``"largebox_carry"``: the real clip
    (the test is skipped where ``../shared`` is absent)."""
    if kind == "synthetic":
        return synthesize_clip(seconds=2.0, seed=seed, kinematics=kinematics)
    if not REAL_CLIP.is_file():
        pytest.skip(f"the real clip is not at {REAL_CLIP}")
    return load_motion(REAL_CLIP, kinematics=kinematics)


def run_motion_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``unilab-motion argv``: its exit status, stdout and stderr."""
    with pytest.raises(SystemExit) as exc:
        motion_main(list(argv))
        raise SystemExit(0)
    out = capsys.readouterr()
    return exc.value.code or 0, out.out, out.err
