"""Off-policy RL: networks, replay, SAC and FlashSAC agents, and the trainer that runs them.

The agents and the replay buffer are environment-independent and keep their state on the device: acting, replay
writes, sampling and updates never read a tensor back to the host, so a training loop can stay
free of host syncs except for periodic logging.

Map:
    config          SacConfig / FlashSacConfig (keys of configs/algo/*.yaml)
    sac, flashsac   SacAgent, FlashSacAgent (act, update, state_dict)
    agent           shared distributional soft actor-critic update
    replay          ReplayBuffer: device ring, final-obs side table, n-step sampling
    sac_networks, flashsac_networks, squashed_gaussian   networks and policy distribution
    distributional, nstep, reward_scaler, exploration, schedules, obs_norm, weight_norm,
    temperature, optimization, compiling                 one concept each
    factory         algo config mapping -> agent
    trainer         Trainer: act -> env.step -> replay -> updates, logging every K iterations
    checkpoint, logger, progress, evaluate               atomic checkpoints, TensorBoard, console, rollouts
    ppo             PPO through RSL-RL's OnPolicyRunner (PpoTrainer, PpoConfig; needs the rsl extra)
"""
