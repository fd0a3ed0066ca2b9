"""Training log sink: TensorBoard scalars (and, with ``logger=wandb``, a Weights & Biases run) plus
the console progress report.

The trainer hands over plain floats it has already read from the device at a logging point;
this module never touches a tensor, so it adds no host sync of its own.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO


class TrainLogger:
    """Writes each logging point to TensorBoard (x axis: env steps), to a W&B run when given one,
    and to the console.

    Args:
        log_dir: folder for TensorBoard event files; ``None`` writes no events.
        progress: console report; ``None`` prints nothing.
        wandb: a :class:`WandbRun` that gets the same scalars; ``None``: no W&B.
    """

    def __init__(
        self, log_dir: str | Path | None, progress: Progress | None = None, wandb: WandbRun | None = None
    ) -> None:
        self.progress = progress
        self.writer = None
        self.wandb = wandb
        if log_dir is not None:
            # Imported here: TensorBoard takes a second to import and play/eval never need it.
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        """Record ``scalars`` (tag -> value) at ``env_steps``; report progress at ``iteration``."""
        self.record(env_steps, scalars)
        if self.progress is not None:
            self.progress.update(iteration, env_steps, scalars)

    def record(self, env_steps: int, scalars: dict[str, float]) -> None:
        """Write ``scalars`` (tag -> value) to TensorBoard at ``env_steps``, with no progress report
        (results that are not a logging point's, such as a periodic evaluation's)."""
        if self.writer is not None:
            for tag, value in scalars.items():
                self.writer.add_scalar(tag, value, global_step=env_steps)
            self.writer.flush()
        if self.wandb is not None:
            self.wandb.record(env_steps, scalars)

    def message(self, text: str) -> None:
        """A line on the console (without breaking a progress bar)."""
        if self.progress is not None:
            self.progress.message(text)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.close()
        if self.progress is not None:
            self.progress.close()


class WandbRun:
    """A Weights & Biases run beside the TensorBoard events (``logger=wandb``, docs/training.md):
    the same scalars at the same x axis (env steps), the resolved train config as the run's config,
    its files under ``run_dir/wandb``. ``wandb`` is imported here only (an optional dependency,
    ``pip install "unilab-gpu[wandb]"``): a run without it never loads the package. W&B's own
    environment variables apply (``WANDB_MODE=offline``, ``WANDB_API_KEY``...).

    Args:
        run_dir: the training run's folder.
        config: the resolved train config, as plain containers.
        project, entity: where the run goes (``entity`` ``None``: the account's default).
        name: the run's name in W&B.
    """

    def __init__(self, run_dir: str | Path, config: dict, project: str, entity: str | None, name: str) -> None:
        import wandb

        self.run = wandb.init(project=project, entity=entity, name=name, dir=str(run_dir), config=config)

    def record(self, env_steps: int, scalars: dict[str, float]) -> None:
        """Log ``scalars`` at ``env_steps`` (W&B's step; a later call may add to the same step)."""
        self.run.log(dict(scalars), step=env_steps)

    def close(self) -> None:
        self.run.finish()


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

    def record(self, env_steps: int, scalars: dict[str, float]) -> None:
        self.inner.record(env_steps, scalars)

    def message(self, text: str) -> None:
        self.inner.message(text)

    def close(self) -> None:
        self.inner.close()


# ================================================================================================
# Console progress of a training run: a bar on a terminal, plain lines in a log file.
#
# On a TTY the report is a ``tqdm`` bar when ``tqdm`` is installed, else one line rewritten in
# place with ``\r``; elsewhere (CI logs, redirected output) every report is its own line, so
# logs stay readable. Reports come at logging points only; nothing here touches the device.

HEADLINE = (
    ("perf/env_steps_per_s", "steps/s", "{:,.0f}"),
    ("train/reward_mean", "reward", "{:.4g}"),
    ("episode/return", "return", "{:.4g}"),
    ("episode/length", "ep len", "{:.4g}"),
    ("terrain/mean_level", "terrain level", "{:.2f}"),
    ("actions/torque_limit_share", "torque at limit", "{:.1%}"),
)
"""(scalar tag, label, format) shown in each report when the tag is present (the mean terrain
level on a task with a terrain curriculum; the share of actuator-steps whose PD torque demand
reached the motor's limit, docs/robots.md "Torque demand")."""

HEALTH = (
    ("env/non_finite_actions", "non-finite actions", ""),
    ("episode/non_finite_states", "NaN states", ""),
    ("episode/diverged_states", "diverged states", ""),
    ("env/deferred_resets", "deferred resets", ""),
    ("env/solver_iteration_limits", "row-steps at the solver's iteration cap", " (robot config physics.iterations)"),
    ("env/line_search_limits", "row-steps at the line-search cap", " (physics.ls_iterations)"),
)
"""(scalar tag, label, hint) of event counts, shown in a report when non-zero (with the hint: the
setting that raises the cap), and for :data:`SHOWN_AT_ZERO` also when zero."""

SHOWN_AT_ZERO = ("env/solver_iteration_limits",)
"""Health tags reported even when zero, so that a clean solver reads as 0, not as missing."""


class Progress:
    """Progress of iterations ``start .. total``.

    Args:
        total: last iteration of the run.
        start: iteration the run starts at (non-zero when resuming).
        mode: ``"auto"`` (bar on a TTY, else lines), ``"bar"`` or ``"lines"``.
        stream: where to write (default ``sys.stdout``).
    """

    def __init__(self, total: int, start: int = 0, mode: str = "auto", stream: TextIO | None = None) -> None:
        if mode not in ("auto", "bar", "lines"):
            raise ValueError(f"progress must be 'auto', 'bar' or 'lines', got {mode!r}")
        self.stream = stream if stream is not None else sys.stdout
        self.total = total
        self.last = start
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.bar_mode = mode == "bar" or (mode == "auto" and is_tty)
        self._tqdm = None
        self._line_open = False
        if self.bar_mode:
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._tqdm = tqdm(total=total, initial=start, file=self.stream, unit="it", dynamic_ncols=True)

    @staticmethod
    def describe(scalars: dict[str, float]) -> str:
        """``steps/s 12,345 | reward -0.123 | ...`` for the headline tags present."""
        parts = [f"{label} {fmt.format(scalars[tag])}" for tag, label, fmt in HEADLINE if tag in scalars]
        health = [
            f"{scalars[tag]:,.0f} {label}{hint if scalars[tag] else ''}"
            for tag, label, hint in HEALTH
            if scalars.get(tag, 0) or (tag in SHOWN_AT_ZERO and tag in scalars)
        ]
        if health:
            parts.append("health: " + ", ".join(health))
        return " | ".join(parts)

    def update(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        """Report that ``iteration`` iterations (``env_steps`` env steps) are done."""
        text = self.describe(scalars)
        if self._tqdm is not None:
            self._tqdm.update(iteration - self.last)
            self._tqdm.set_postfix_str(text, refresh=True)
        elif self.bar_mode:
            percent = 100.0 * iteration / max(self.total, 1)
            self.stream.write(
                f"\r[{percent:5.1f}%] it {iteration}/{self.total} | env-steps {env_steps:,} | {text}\x1b[K"
            )
            self.stream.flush()
            self._line_open = True
        else:
            self.stream.write(f"it {iteration}/{self.total} | env-steps {env_steps:,} | {text}\n")
            self.stream.flush()
        self.last = iteration

    def message(self, text: str) -> None:
        """Print a line without breaking the bar."""
        if self._tqdm is not None:
            self._tqdm.write(text, file=self.stream)
            return
        self._end_line()
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        self._end_line()

    def _end_line(self) -> None:
        if self._line_open:
            self.stream.write("\n")
            self._line_open = False
