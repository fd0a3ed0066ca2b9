"""Evaluating policies, the one home of every evaluation the commands, training and scripts run.

Map:
    rollout   a fixed policy rolled out on an env, its finished episodes summarised (``evaluate``,
              ``agent_policy``, ``uniform_random_policy``: ``unilab-play``, tests)
    policies  a trained policy read from a run folder, a checkpoint or an ONNX file
    metrics   the tracking metric functions (MPKPE, R-MPKPE, joint and end-effector errors)
    tracking  the full-clip tracking evaluation of ``unilab-eval``
    periodic  that evaluation every ``eval.every`` iterations of a training run
    terrain   a velocity policy walked on a terrain (``unilab-eval --terrain``)
    episodes  a policy's episodes as the learning curves score them (errors by episode age,
              actions at their bound: ``scripts/learning_curve.py``)
    clean     the clean tracking evaluation from fixed starts (``scripts/learning_curve.py``)
"""
