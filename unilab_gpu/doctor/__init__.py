"""The self-check behind ``unilab-doctor`` (``cli/doctor.py`` parses its arguments).

- :mod:`~unilab_gpu.doctor.checks`: :func:`~unilab_gpu.doctor.checks.run_checks`, which runs the
  checks in the order that yields the key facts first, and the data-parallel checks;
- :mod:`~unilab_gpu.doctor.captured_step`: the captured step's checks (physics alone, CUDA capture,
  replay equals eager, no host sync in replay, throughput, the solver's early-exit A/B);
- :mod:`~unilab_gpu.doctor.sync_audits`: the host-sync audits of each task's step and of the
  training loop;
- :mod:`~unilab_gpu.doctor.report`: the JSON report, rewritten after every check so that a run cut
  short keeps what it measured;
- :mod:`~unilab_gpu.doctor.warm`: compiles the Warp modules a run will load in parallel
  processes, so that the doctor itself starts on a warm kernel cache.
"""
