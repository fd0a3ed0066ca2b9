"""Execute a notebook in place, outputs and plots included, so a reader sees them without running it.

Usage::

    CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 python scripts/execute_notebook.py docs/profiling.ipynb \\
        --images docs/images --force  # --force: replace the plots of the previous run

The kernel inherits this process's environment (hide the GPU as above for the CPU run that is
committed) and finds the package from this checkout. With ``--small`` the cell tagged
``parameters`` is replaced by ``SMALL_PARAMETERS`` (the test's sizes, seconds instead of
minutes). ``--images DIR`` also writes the notebook's plots as ``DIR/<notebook>_<n>.png`` (for
the README). The notebook is written atomically: a failed cell leaves the file as it was.

Checked before the kernel starts: the notebook is a regular file holding a Jupyter notebook
(not JSON, or JSON without cells, is one line), ``--timeout`` is a number of seconds > 0, and
the images are new files unless ``--force`` (existing ``<notebook>_<n>.png`` in ``--images``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from pathlib import Path

import nbclient
import nbformat

from unilab_gpu.utils.files import OutputPathError, check_output, non_regular_kind, write_atomic

ROOT = Path(__file__).resolve().parents[1]

SMALL_PARAMETERS = 'TASK = "g1_stand"\nNUM_ENVS = 4\nSIZES = [2, 4]\nSTEPS = 4\nWARMUP = 1\nMODES = ["eager"]\n'
"""Parameters of a quick run (``--small``): a few seconds of stepping, most of the time the
kernel importing torch and Warp."""


def execute(notebook: nbformat.NotebookNode, timeout: int = 1800, small: bool = False) -> nbformat.NotebookNode:
    """Run every cell of ``notebook`` (changed in place and returned) in a ``python3`` kernel
    started in the repository root, with this checkout first on ``PYTHONPATH``."""
    if small:
        params = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
        if len(params) != 1:
            raise ValueError(f"the notebook needs exactly one cell tagged 'parameters', found {len(params)}")
        params[0].source = SMALL_PARAMETERS
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,  # no timestamps in the committed file: a rerun changes only outputs
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute(env=env)  # the kernel's environment (jupyter_client's start_kernel)
    return notebook


def plots(notebook: nbformat.NotebookNode) -> list[bytes]:
    """The PNG bytes of every plot in ``notebook``'s outputs, in order."""
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    return [base64.b64decode(o.data["image/png"]) for o in outputs if "image/png" in o.get("data", {})]


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` (nbformat 4).

    Raises:
        ValueError: it is not JSON, not a notebook, or one nbformat cannot read; the message says which.
    """
    try:
        content = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not JSON, so not a Jupyter notebook ({error})") from None
    if not isinstance(content, dict) or not isinstance(content.get("cells"), list):
        raise ValueError(f"{path} is JSON but not a Jupyter notebook (no list of 'cells' at its top level)")
    try:
        return nbformat.reads(json.dumps(content), as_version=4)
    except Exception as error:  # nbformat's converters and validators raise many types
        reason = " ".join(str(error).split())[:200]
        raise ValueError(f"{path} is not a notebook nbformat can read ({type(error).__name__}: {reason})") from None


def check_images(folder: Path, stem: str, force: bool) -> None:
    """Refuse, before the run, an ``--images`` folder that cannot take ``<stem>_<n>.png`` files, or
    that holds some already (without ``force``; links, FIFOs and devices never)."""
    existing = sorted(folder.glob(f"{stem}_*.png")) if folder.is_dir() else []
    for path in existing or [folder / f"{stem}_1.png"]:
        check_output(path, "--images", force=force, example=f"{stem}_1.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one cell may take (default 1800)")
    parser.add_argument("--small", action="store_true", help="the test's sizes (not for the committed copy)")
    parser.add_argument("--images", type=Path, default=None, help="also write the plots as PNG files here")
    parser.add_argument("--force", action="store_true", help="replace existing plots in --images")
    args = parser.parse_args(argv)
    try:
        if not (args.timeout > 0):
            raise ValueError(f"--timeout must be a number of seconds > 0, got {args.timeout}")
        kind = non_regular_kind(args.notebook)
        if kind is not None:
            raise ValueError(f"{args.notebook} is {kind}; the notebook is rewritten in place, give the file itself")
        if not args.notebook.is_file():
            raise ValueError(f"no notebook at {args.notebook}")
        notebook = read_notebook(args.notebook)
        if args.images is not None:
            check_images(args.images, args.notebook.stem, args.force)
    except (ValueError, OutputPathError) as error:
        print(f"execute_notebook: error: {error}", file=sys.stderr)
        return 2
    print(f"execute_notebook: running {args.notebook} ({len(notebook.cells)} cells)", flush=True)
    start = time.perf_counter()
    try:
        execute(notebook, args.timeout, args.small)
    except nbclient.exceptions.CellExecutionError as error:
        first = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        print(f"execute_notebook: error: a cell failed ({first}); {args.notebook} left unchanged", file=sys.stderr)
        return 1
    write_atomic(args.notebook, lambda file: file.write(nbformat.writes(notebook).encode()))
    for number, png in enumerate(plots(notebook) if args.images else [], start=1):
        path = write_atomic(args.images / f"{args.notebook.stem}_{number}.png", lambda file, png=png: file.write(png))
        print(f"execute_notebook: plot {number} -> {path}")
    print(f"execute_notebook: {args.notebook} written with its outputs in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
