"""A training run as a library: what ``unilab-train`` does, importable without its command line.

Map:
    config    ``configs/train.yaml`` composed with Hydra, a run's saved config for a resume, the
              ``auto`` choices resolved for this machine, top-level keys checked (ConfigError)
    run       Run (folder, config, trainer, lock), build_run (env, agent, trainer, run folder,
              resume checks), make_trainer (SAC/FlashSAC's off-policy loop or RSL-RL's PPO)
    signals   Ctrl-C, SIGTERM and SIGHUP: stop after the iteration, never cut a checkpoint write
"""
