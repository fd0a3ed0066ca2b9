"""Tasks: task-specific terms; each task's configuration is ``configs/task/<task>.yaml``."""
