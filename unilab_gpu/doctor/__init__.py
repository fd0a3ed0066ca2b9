"""The self-check behind ``unilab-doctor`` (``cli/doctor.py`` parses its arguments).

- :mod:`~unilab_gpu.doctor.checks`: each check (host-sync audits, CUDA capture, replay equals
  eager, no host sync in replay, physics alone, the solver's early-exit A/B, throughput) and
  :func:`~unilab_gpu.doctor.checks.run_checks`, which runs them in the order that yields the key
  facts first;
- :mod:`~unilab_gpu.doctor.report`: the JSON report, rewritten after every check so that a run cut
  short keeps what it measured;
- :mod:`~unilab_gpu.doctor.warm`: compiles the Warp modules a run will load in parallel
  processes, so that the doctor itself starts on a warm kernel cache.
"""
