"""What MJWarp's per-world overflow bitmask means: a buffer too small, or a solver at its cap.

A capacity overflow (contacts, constraint rows, ...) makes a world's physics wrong and is an
error; a solver that stopped at its iteration cap is what the fixed-iteration solver of a
captured step does by design, and is only counted.
"""

from __future__ import annotations

import mujoco_warp as mjw
import numpy as np

SOLVER_LIMITS = int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
"""MJWarp's overflow bits of a solver that stopped at its iteration or line-search cap. MJWarp
prints a line per world and substep for each (44,904 lines in one training log); the simulator
silences those prints, the env counts the bits into its statistics and clears them every step
(``ManagerBasedRlEnv``), and training reports the count once per log interval."""


CAPACITY_OVERFLOWS = int(mjw.OverflowType.ALL & ~(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS))
"""The bits of MJWarp's overflow mask that mean a buffer was too small (contacts, constraints, ...)."""


class SimulationOverflowError(RuntimeError):
    """MJWarp ran out of contact or constraint capacity in at least one world."""


def check_capacity(flags: np.ndarray, njmax: int, nconmax: int) -> None:
    """Raise ``SimulationOverflowError`` if any world ran out of contact/constraint capacity.

    MJWarp's solver flags (``ITERATIONS``, ``LS_ITERATIONS``: an iteration cap reached, which
    the fixed-iteration solver of a captured step reaches by design) are not capacity: left out.

    Args:
      flags: ``(num_envs,)`` MJWarp overflow bitmask per world (``Simulator.overflow_flags``).
      njmax, nconmax: the worlds' constraint rows and contacts per world, named in the message.
    """
    flags = flags & CAPACITY_OVERFLOWS
    bad = np.flatnonzero(flags)
    if bad.size == 0:
        return
    kinds = sorted({f.name for w in bad for f in mjw.OverflowType if f and flags[w] & f})
    raise SimulationOverflowError(
        f"MJWarp capacity overflow ({', '.join(kinds)}) in {bad.size} of {flags.shape[0]} worlds "
        f"(first ids: {bad[:8].tolist()}); raise njmax (now {njmax}) or nconmax "
        f"(now {nconmax} per world)"
    )
