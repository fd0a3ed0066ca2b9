"""``unilab-export``: write a trained policy as ONNX for deployment.

Usage::

    unilab-export RUN_DIR_OR_CHECKPOINT [--out policy.onnx] [--force]
    unilab-export RUN_DIR --convention holosoma [--motion CLIP.npz] --out policy_holosoma.onnx
    unilab-export --upgrade policy.onnx [--out new.onnx] [--force]

Writes the deterministic actor with its observation normaliser folded in; input ``obs`` (the
``policy`` observation group), output ``actions``; deployment metadata (joint names in action
order, default joint positions, action scale/offset/bounds, PD gains, control dt, observation
layout, task and motion) in the file's metadata (see docs/export.md). Default output:
``RUN_DIR/policy.onnx``; an existing file is replaced only with ``--force``, and never the
checkpoint itself or a run's config. A policy with NaN or inf parameters or statistics is refused.
``--convention holosoma`` writes a tracking policy in holosoma's whole-body-tracking convention
instead (its observation, the motion embedded behind a ``time_step`` input; docs/export.md).
``--upgrade FILE`` brings an exported file's metadata to the current version without touching
its network (in place, or to ``--out``): the keys it lacks (``physics``, ``terrain``) are taken
from the env its metadata names, rebuilt, and refused if that is no longer the env it was exported
from (``unilab_gpu.export.upgrade``; docs/export.md).
Needs ``pip install "unilab-gpu[export]"``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from unilab_gpu.rl.checkpoint import CheckpointError
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="unilab-export", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", nargs="?", help="run folder (uses its checkpoint.pt) or checkpoint file")
    parser.add_argument(
        "--upgrade", default=None, metavar="FILE", help="bring an exported file's metadata to the current version"
    )
    parser.add_argument("--out", default=None, help="ONNX file to write (default: RUN_DIR/policy.onnx)")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument(
        "--convention", choices=("unilab", "holosoma"), default="unilab",
        help="the file's convention: ours, or holosoma's whole-body tracking (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--motion", default=None, help="holosoma: the clip to embed (default: the run's clip, when it has one)"
    )
    args = parser.parse_args(argv)
    if (args.checkpoint is None) == (args.upgrade is None):
        parser.error("give a run folder or checkpoint to export, or --upgrade FILE (one of them)")
    if args.upgrade is not None:
        if args.convention != "unilab" or args.motion is not None:
            parser.error("--upgrade rewrites a file's metadata; --convention and --motion go with an export")
        return _upgrade(args.upgrade, args.out, args.force)
    if args.motion is not None and args.convention != "holosoma":
        parser.error("--motion goes with --convention holosoma (the file embeds that clip)")
    if args.motion is not None and not Path(args.motion).is_file():
        parser.error(f"--motion {args.motion}: no such motion file")
    try:
        from unilab_gpu.export.export_run import export_checkpoint

        path = export_checkpoint(args.checkpoint, args.out, args.force, args.convention, args.motion)
    except ModuleNotFoundError as error:
        print(f"unilab-export: error: {error.name} is missing; pip install 'unilab-gpu[export]'", file=sys.stderr)
        return 2
    except (CheckpointError, ValueError, KeyError) as error:
        print(f"unilab-export: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the atomic write removed its temporary file; an existing --out is intact
        print("unilab-export: interrupted; nothing written", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except OSError as error:  # a full disk or a folder that became read-only: the old file is intact
        where = error.filename or args.out or args.checkpoint
        print(
            f"unilab-export: error: cannot write {where}: {error.strerror or error}; nothing was written",
            file=sys.stderr,
        )
        return 1
    print(f"unilab-export: wrote {path}")
    return 0


def _upgrade(path: str, out: str | None, force: bool) -> int:
    """``--upgrade``: rewrite the file's metadata, in one line whatever happens."""
    try:
        from unilab_gpu.deploy.policy_file import METADATA_VERSION, DeploymentError
        from unilab_gpu.export.upgrade import upgrade_policy_file
        from unilab_gpu.utils.files import OutputPathError

        done = upgrade_policy_file(path, out, force)
    except ModuleNotFoundError as error:
        print(f"unilab-export: error: {error.name} is missing; pip install 'unilab-gpu[export]'", file=sys.stderr)
        return 2
    except (DeploymentError, OutputPathError) as error:
        print(f"unilab-export: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("unilab-export: interrupted; nothing written", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except OSError as error:
        where = error.filename or out or path
        print(
            f"unilab-export: error: cannot write {where}: {error.strerror or error}; nothing was written",
            file=sys.stderr,
        )
        return 1
    if not done.added:
        print(f"unilab-export: {path} already has metadata version {done.version}; nothing written")
    else:
        versions = f"metadata version {done.version} -> {METADATA_VERSION}"
        print(f"unilab-export: wrote {done.path} ({versions}, added {', '.join(done.added)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
