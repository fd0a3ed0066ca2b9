"""Session rules for the test suite.

The test-only term modules are allowed as term sources (``UNILAB_TERM_MODULES``).

``UNILAB_REQUIRE_GPU=1`` (set by ``scripts/gpu_check.sh``) turns "no CUDA device" from a reason to
skip every ``gpu`` test into an error, so a GPU check on a machine whose CUDA is unusable fails
loudly instead of reporting a green run of skipped tests.
"""

from __future__ import annotations

import os

import pytest
import torch

# Tests name their own terms (tests/env_test_terms.py and a term of test_phase_profiler.py); terms
# may only come from the project and the modules listed here (``managers.term.TERM_MODULES_ENV``).
os.environ.setdefault("UNILAB_TERM_MODULES", "env_test_terms,test_phase_profiler")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("UNILAB_REQUIRE_GPU") == "1" and not torch.cuda.is_available():
        raise pytest.UsageError(
            "UNILAB_REQUIRE_GPU=1 but torch sees no usable CUDA device "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); the gpu tests cannot run"
        )
