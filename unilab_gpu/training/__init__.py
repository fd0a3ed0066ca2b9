"""A training run as a library: what ``unilab-train`` does, importable without its command line.

Map:
    config    ``configs/train.yaml`` composed with Hydra, a run's saved config for a resume, the
              ``auto`` choices resolved for this machine, top-level keys checked (ConfigError)
    run       Run (folder, config, trainer, lock), build_run (env, agent, trainer, run folder,
              resume checks), make_trainer (SAC/FlashSAC's off-policy loop or RSL-RL's PPO)
    run_folder  a run folder created whole under a lock, reopened for a resume (RunLock, RunFolderError),
              its config.yaml read back bounded
    resume_check  what a resumed run must share with its checkpoint (ResumeError)
    signals   Ctrl-C, SIGTERM and SIGHUP: stop after the iteration, never cut a checkpoint write
"""
