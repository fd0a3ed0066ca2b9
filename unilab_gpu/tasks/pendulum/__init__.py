"""Torque-limited pendulum swing-up: the tiny task for fast RL tests and the minimal example."""
