"""Adapters that present a ``ManagerBasedRlEnv`` through other libraries' env interfaces.

Map:
    gymnasium_env   GymVectorEnv: gymnasium 1.x ``VectorEnv``, same-step autoreset, torch in/out
    rsl_rl_env      RslRlVecEnv: rsl_rl's ``VecEnv`` (TensorDict groups, time_outs, episode log)

Each needs its library (extras ``[gym]`` and ``[rsl]``) and imports it on its own.
"""
