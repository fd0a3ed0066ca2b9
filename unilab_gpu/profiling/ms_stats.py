"""Summary statistics of per-step times."""

from __future__ import annotations

import numpy as np


def ms_stats(ms: np.ndarray) -> dict[str, float]:
    """``{"median", "p10", "p90", "mean"}`` of ``ms`` ``(steps,)``, as Python floats."""
    if ms.ndim != 1 or ms.size == 0:
        raise ValueError(f"ms must be a non-empty 1-D array, got shape {ms.shape}")
    p10, median, p90 = np.percentile(ms, [10, 50, 90])
    return {"median": float(median), "p10": float(p10), "p90": float(p90), "mean": float(ms.mean())}
