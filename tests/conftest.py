"""Session rules for the test suite.

One torch thread per test process unless ``OMP_NUM_THREADS`` says otherwise: the README's test
command runs one worker per core (``-n 2`` on the 2-core CI machine), and two threads in each
would only contend. The suite sets it itself so that the README's command is all a newcomer and CI
run (tests/test_readme_commands.py); the learning tests pass at 1 and 2 threads either way
(tests/data/learning_spread.json). Subprocesses the tests start inherit the setting.

The test-only term modules are allowed as term sources (``UNILAB_TERM_MODULES``).

``UNILAB_REQUIRE_GPU=1`` (set by ``scripts/gpu_check.sh``) turns "no CUDA device" from a reason to
skip every ``gpu`` test into an error, so a GPU check on a machine whose CUDA is unusable fails
loudly instead of reporting a green run of skipped tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: its thread pools read it

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# Tests name their own terms (tests/env_test_terms.py and a term of test_phase_profiler.py); terms
# may only come from the project and the modules listed here (``managers.term.TERM_MODULES_ENV``).
os.environ.setdefault("UNILAB_TERM_MODULES", "env_test_terms,test_phase_profiler")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("UNILAB_REQUIRE_GPU") == "1" and not torch.cuda.is_available():
        raise pytest.UsageError(
            "UNILAB_REQUIRE_GPU=1 but torch sees no usable CUDA device "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); the gpu tests cannot run"
        )
