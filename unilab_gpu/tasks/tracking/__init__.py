"""Whole-body motion tracking (BeyondMimic-style) on the project's G1; see docs/tasks/tracking.md."""
