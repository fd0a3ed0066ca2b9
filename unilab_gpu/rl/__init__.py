"""Off-policy RL: SAC and FlashSAC agents, replay, and the trainer that runs them.

The agents and the replay buffer are environment-independent and keep their state on the device:
acting, replay writes, sampling and updates never read a tensor back to the host, so a training
loop can stay free of host syncs except for periodic logging.

Map (each algorithm reads top to bottom in its own file, over the shared update and its pieces):
    off_policy        what the SAC and FlashSAC updates compose: soft bootstrap target, C51 critic
                      loss, twin Q, the optimizers' step, OffPolicyAgent (shared state, update(),
                      checkpointed state)
    sac               SacConfig, FastSAC-style networks, observation normaliser, SacAgent and its
                      whole update
    flashsac          FlashSacConfig, FlashSacAgent and its whole update (norm projections after
                      each step), over its networks, reward scaler and held noise
    distributional    C51: categorical support, projection, cross-entropy, expected value
    value_range       the critics' support as a checkpointed buffer, sized from the rewards
                      (algo.value_range: reward_scale)
    symmetry          left-right mirror images of part of every batch (algo.mirror_fraction);
                      the maps are envs.mirror_map's
    squashed_gaussian the actors' tanh-squashed Gaussian (sample, log-density, bounded log-std)
    optimization      cosine learning-rate schedule as a device tensor, AdamW, clipping, Polyak
    running_moments   running mean/variance merged in place (observation and reward statistics)
    config            typed algo configs from YAML mappings (config_from_dict, check_field)
    agents            algo config -> agent, checkpoint -> agent, the smallest agents (TINY_CONFIGS)
    replay            ReplayBuffer: device ring, final-obs side table, n-step returns
    trainer           the Trainer protocol both trainers follow, TrainerSettings, and
                      OffPolicyTrainer (act -> env.step -> replay -> updates, logging every K)
    evaluation        deterministic rollouts of a fixed policy, summarised per episode
    logger            TensorBoard + console progress
    checkpoint        checkpoint files: written atomically, loaded checked, non-finite entries named
    distributed       data-parallel training under torchrun: gradient averaging, merged
                      statistics, fleet-wide logging and failure handling
    ppo               PPO through RSL-RL's OnPolicyRunner (PpoTrainer, PpoConfig; needs the rsl extra)

A whole run (config, folder and its lock, resume checks, signals) is :mod:`unilab_gpu.training`.
"""
