"""Training log sink: TensorBoard scalars plus the console progress report.

The trainer hands over plain floats it has already read from the device at a logging point;
this module never touches a tensor, so it adds no host sync of its own.
"""

from __future__ import annotations

import time
from pathlib import Path

from unilab_gpu.rl.progress import Progress


class TrainLogger:
    """Writes each logging point to TensorBoard (x axis: env steps) and to the console.

    Args:
        log_dir: folder for TensorBoard event files; ``None`` writes no events.
        progress: console report; ``None`` prints nothing.
    """

    def __init__(self, log_dir: str | Path | None, progress: Progress | None = None) -> None:
        self.progress = progress
        self.writer = None
        if log_dir is not None:
            # Imported here: TensorBoard takes a second to import and play/eval never need it.
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        """Record ``scalars`` (tag -> value) at ``env_steps``; report progress at ``iteration``."""
        if self.writer is not None:
            for tag, value in scalars.items():
                self.writer.add_scalar(tag, value, global_step=env_steps)
            self.writer.flush()
        if self.progress is not None:
            self.progress.update(iteration, env_steps, scalars)

    def message(self, text: str) -> None:
        """A line on the console (without breaking a progress bar)."""
        if self.progress is not None:
            self.progress.message(text)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.progress is not None:
            self.progress.close()


class RecordingLogger:
    """Keeps every logging point, ``(env_steps, time.perf_counter(), scalars)``, and forwards it
    to ``inner`` (scripts that measure a run: ``scripts/gpu_train_check.py``,
    ``scripts/learning_curve.py``)."""

    def __init__(self, inner: TrainLogger) -> None:
        self.inner = inner
        self.points: list[tuple[int, float, dict[str, float]]] = []

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        self.points.append((env_steps, time.perf_counter(), scalars))
        self.inner.log(iteration, env_steps, scalars)

    def message(self, text: str) -> None:
        self.inner.message(text)

    def close(self) -> None:
        self.inner.close()
