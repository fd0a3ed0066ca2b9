"""The doctor's JSON report, rewritten after every check so that a cut run keeps what it measured.

The GPU check gives the doctor a time budget; a run cut at its budget (``SIGINT``, then
``SIGKILL``) or killed outright must not lose the checks already done. So the report is written
(atomically: a reader sees the previous version or the new one) before the first check, when a
check starts (``running`` names it) and after each one, with ``complete: false`` until the last.
A verdict so far is always there: ``fail`` if any finished check failed. Each check is one
:class:`Check`, a line of that verdict.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.utils.files import write_json_atomic


@dataclass
class Check:
    """One line of the verdict: ``pass``, ``fail``, ``skip`` (could not be checked here) or ``info``."""

    name: str
    status: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


class DoctorReport:
    """The checks so far of one doctor run and the JSON file that holds them.

    Args:
      path: the JSON file, rewritten after every change; ``None`` keeps the report in memory
        (the ranks of a fleet other than rank 0).
      device: the device the checks run on.
    """

    def __init__(self, path: Path | None, device: torch.device) -> None:
        self.path = path
        self.device = device
        self.checks: list[Check] = []
        self.running: str | None = None
        self.interrupted: str | None = None
        self._start = time.perf_counter()
        self._machine = machine_info(str(device))
        self._write(complete=False)

    def starting(self, name: str) -> None:
        """``name`` starts now: a run cut from here on names it as the check it was in."""
        self.running = name
        self._write(complete=False)

    def add(self, check: Check) -> None:
        """A finished check, written at once."""
        self.checks.append(check)
        self.running = None
        self._write(complete=False)

    def interrupt(self, reason: str) -> dict[str, Any]:
        """The run was stopped (``reason``, e.g. ``SIGINT``) inside :attr:`running`: written as such."""
        self.interrupted = f"{reason} during '{self.running}'" if self.running else reason
        return self._write(complete=False)

    def finish(self, checks: list[Check] | None = None) -> dict[str, Any]:
        """The final report (``checks`` replaces the list, e.g. merged over a fleet's ranks)."""
        if checks is not None:
            self.checks = list(checks)
        self.running = None
        return self._write(complete=True)

    def as_dict(self, complete: bool) -> dict[str, Any]:
        failed = [c.name for c in self.checks if c.status == "fail"]
        return {
            "tool": "unilab-doctor",
            "verdict": "fail" if failed or self.interrupted else "pass",
            "complete": complete,
            "running": self.running,
            "interrupted": self.interrupted,
            "failed": failed,
            "device": str(self.device),
            "seconds": time.perf_counter() - self._start,
            "machine": self._machine,
            "checks": [asdict(c) for c in self.checks],
        }

    def _write(self, complete: bool) -> dict[str, Any]:
        result = self.as_dict(complete)
        if self.path is not None:
            write_json_atomic(self.path, result)
        return result


def table(checks: list[Check]) -> str:
    """The verdict table: one line per check, status first."""
    if not checks:
        return "(no check finished)"
    width = max(len(c.name) for c in checks)
    return "\n".join(f"{c.status.upper():5}  {c.name:<{width}}  {c.detail}" for c in checks)
