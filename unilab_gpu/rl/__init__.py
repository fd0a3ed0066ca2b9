"""Off-policy RL: SAC and FlashSAC agents, replay, and the trainer that runs them.

The agents and the replay buffer are environment-independent and keep their state on the device:
acting, replay writes, sampling and updates never read a tensor back to the host, so a training
loop can stay free of host syncs except for periodic logging.

Map (each algorithm reads top to bottom in one file):
    off_policy   OffPolicyConfig and OffPolicyAgent: the distributional soft actor-critic update
                 SAC and FlashSAC share, with its pieces (C51, squashed Gaussian, temperature,
                 schedule, optimizer helpers, running moments)
    sac          SacConfig, FastSAC-style networks, observation normaliser, SacAgent
    flashsac     FlashSacConfig, FlashSAC networks and norm constraints, reward scaler, held
                 noise, FlashSacAgent
    replay       ReplayBuffer: device ring, final-obs side table, n-step returns
    trainer      Trainer (act -> env.step -> replay -> updates, logging every K iterations),
                 algo config -> agent, evaluation rollouts
    logger       TensorBoard + console progress
    checkpoint   atomic checkpoints, run folders and their locks, resume checks
    distributed  data-parallel training under torchrun: gradient averaging, merged statistics,
                 fleet-wide logging and failure handling
    ppo          PPO through RSL-RL's OnPolicyRunner (PpoTrainer, PpoConfig; needs the rsl extra)
"""
