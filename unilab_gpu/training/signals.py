"""Stop signals of a command: in a training run the first one ends the run after its iteration
(which then saves a checkpoint), a second one stops at once, and none cuts a checkpoint write
short; in every other command that reports what it did before a Ctrl-C (``unilab-eval``,
``unilab-sim2sim``, ``unilab-doctor``, the benchmark scripts) a SIGTERM or SIGHUP ends it as Ctrl-C
does (:func:`stop_signals_interrupt`), so a scheduler's or a device budget's stop gets the report too."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, the SIGTERM with which torchrun, a job scheduler or ``kill`` ask a run to end, and the
SIGHUP of a closed terminal or SSH session: each saves a checkpoint, then exits."""

INTERRUPTED_EXIT_CODE = 130
"""Exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report an interrupted
command: ``unilab-train`` and ``unilab-sim2sim`` exit with it."""


@contextmanager
def stop_on_signals() -> Iterator[list[bool]]:
    """While active, the first SIGINT, SIGTERM or SIGHUP sets ``flag[0]`` (the loop stops after its
    iteration, at the next point where every rank agrees, and saves); a second one raises
    ``KeyboardInterrupt``."""
    flag = [False]
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def handler(signum, frame) -> None:
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True

    installed = True
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, handler)
    except ValueError:  # not the main thread: keep the default behaviour
        installed = False
    try:
        yield flag
    finally:
        if installed:
            for signum, old in previous.items():
                signal.signal(signum, old)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While active, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` (its argument the signal's name,
    ``"SIGTERM"``) where the program is, as Ctrl-C does: one ``except KeyboardInterrupt`` writes the
    report of a run stopped by any of them. Outside the main thread it changes nothing."""

    def interrupt(signum: int, frame) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    try:
        previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread (a test's worker): leave the handlers alone
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """A SIGINT, SIGTERM or SIGHUP that arrives inside the block goes to the handler in place before it
    only once the block is done (so a checkpoint write is never cut short)."""
    received: list[int] = []
    try:
        previous = {signum: signal.signal(signum, lambda s, frame: received.append(s)) for signum in STOP_SIGNALS}
    except ValueError:  # not the main thread: signals go to the main thread anyway
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    for signum in received:
        if callable(previous[signum]):
            previous[signum](signum, None)
        elif previous[signum] == signal.SIG_DFL:  # e.g. SIGTERM outside a run: end the process now
            signal.raise_signal(signum)
