"""evaluation/clean.py: the clean tracking evaluation's starts, thresholds and report on a tiny run."""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.evaluation.clean import CLEAN_HORIZON, clean_evaluation, clean_start_frames, within_thresholds


def test_within_thresholds_counts_rows_by_their_first_failure() -> None:
    # First failure ages of six rows (0: never): at age 10 rows 0, 30, 31, 50 are still within.
    first = torch.tensor([0, 5, 10, 30, 31, 50])
    assert within_thresholds(first, 10) == 4 / 6
    assert within_thresholds(first, 30) == 3 / 6
    assert within_thresholds(first, 50) == 1 / 6


def test_clean_starts_are_one_seeded_draw_per_stratum_of_the_clip() -> None:
    frames = clean_start_frames(325, 16, seed=1)
    span = 325 - 1 - CLEAN_HORIZON  # a start leaves 50 more frames inside the clip
    assert frames.dtype == torch.int64 and frames.shape == (16,)
    for i, frame in enumerate(frames.tolist()):
        assert i * span / 16 <= frame + 1e-9 and frame < (i + 1) * span / 16
    assert frames.tolist() == clean_start_frames(325, 16, seed=1).tolist()  # shared by both policies
    assert frames.tolist() != clean_start_frames(325, 16, seed=2).tolist()
    with pytest.raises(SystemExit, match="fewer than 52"):
        clean_start_frames(51, 4, seed=0)


def test_clean_evaluation_of_a_tiny_run() -> None:
    """Keys and ages as the report promises, failures evaluated on the side with terminations off,
    and the zero action at the clip's own joints (residual actions) at age 10 better than at 50."""
    from unilab_gpu.rl.sac import SacAgent, SacConfig

    agent = SacAgent(SacConfig(actor_hidden_dims=(16,), critic_hidden_dims=(8,), compile=False), 160, 286, 29)
    overrides = ["commands.motion.params.synthetic_seconds=3.0"]
    reports = [clean_evaluation("g1_tracking", overrides, agent, 4, "cpu", 3, trained) for trained in (False, True)]
    for report in reports:
        assert report["failure_terms"] == ["anchor_height", "anchor_orientation", "end_effector_height"]
        assert report["clip_frames"] == 151  # 3 s at 50 Hz, both ends
        assert report["start_frames"] == clean_start_frames(151, 4, seed=3).tolist()
        for key in ("anchored_body_pos_error_by_age_m", "world_body_pos_error_by_age_m", "joint_pos_error_by_age_rad"):
            assert list(report[key]) == ["10", "30", "50"] and all(v >= 0 for v in report[key].values())
        within = report["within_thresholds_by_age"]
        assert 1.0 >= within["10"] >= within["30"] >= within["50"] >= 0.0
        every_age = report["anchored_body_pos_error_every_age_m"]
        assert len(every_age) == 50 and every_age[9] == report["anchored_body_pos_error_by_age_m"]["10"]
        assert report["action_std"] > 0
    untrained = reports[0]["anchored_body_pos_error_by_age_m"]
    assert untrained["10"] < untrained["50"]  # the zero action falls in time
