"""Task-independent term functions: observations, rewards, terminations, events."""
