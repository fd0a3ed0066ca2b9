"""Timing and benchmark helpers.

``PhaseProfiler`` (true per-phase timing of the env step), ``bench_env`` (one ``unilab-bench``
row), ``ForcedResets`` (a termination for benchmarking the reset path), ``machine_info``.
"""
