"""The file steps of scripts/gpu_bundle.sh: strip warp-lang, check the sizes.

    python scripts/gpu_bundle_layout.py strip-warp DOWNLOAD BUNDLE LIBRARY
    python scripts/gpu_bundle_layout.py check-size BUNDLE MAX_BYTES
    python scripts/gpu_bundle_layout.py check-call REPOSITORY BUNDLE CALL_BYTES

``strip-warp`` copies every wheel of DOWNLOAD into BUNDLE/wheels; the warp-lang wheel is rebuilt
(build tag ``1sm90``) without ``warp/bin/warp-clang.so`` (the compiler of Warp's *CPU*
kernels), examples and tests, and without ``warp/bin/warp.so``: in its place the bundle carries
LIBRARY, the warp.so that scripts/gpu_bundle_warp.py built from the wheel's own sources (sm_90,
NVRTC linked dynamically), as BUNDLE/files/warp.so.xz (``xz -9e``, made once as LIBRARY.xz
beside LIBRARY) with its line in BUNDLE/unpack.txt; the wheel's RECORD gets LIBRARY's sha256
and size in warp.so's line. BUNDLE/nvrtc.txt names the NVRTC library LIBRARY needs (from
LIBRARY.json, the build's record), which scripts/gpu_check.sh looks for on the GPU machine.

``check-size`` prints BUNDLE's size, or fails with one line when it is over MAX_BYTES.

``check-call`` prints the size of what one device call carries from REPOSITORY (its tracked
files and the untracked ones git does not ignore) and that size with BUNDLE added, or fails
with one line when the sum is over CALL_BYTES.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

DROP = ("warp/bin/warp-clang.so", "warp/examples/", "warp/tests/")
LIBRARY = "warp/bin/warp.so"
BUILD_TAG = "1sm90"
"""The wheel's build tag: warp-lang with its warp.so built for sm_90 and NVRTC linked dynamically."""


def strip_warp(download: Path, bundle: Path, library: Path) -> None:
    (bundle / "wheels").mkdir(parents=True, exist_ok=True)
    (bundle / "files").mkdir(exist_ok=True)
    digest = hashlib.sha256(library.read_bytes()).digest()
    record_line = [
        LIBRARY,
        "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("="),
        str(library.stat().st_size),
    ]
    for wheel in sorted(download.glob("*.whl")):
        if not wheel.name.startswith("warp_lang-"):
            shutil.copy(wheel, bundle / "wheels" / wheel.name)
            continue
        name, version, *tags = wheel.stem.split("-")
        stripped = bundle / "wheels" / ("-".join([name, version, BUILD_TAG, *tags[-3:]]) + ".whl")
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(stripped, "w", zipfile.ZIP_DEFLATED) as out:
            record_path = f"{name}-{version}.dist-info/RECORD"
            rows = [r for r in csv.reader(io.StringIO(src.read(record_path).decode())) if r]
            rows = [record_line if r[0] == LIBRARY else r for r in rows if not r[0].startswith(DROP)]
            for info in src.infolist():
                if info.filename.startswith(DROP) or info.filename == LIBRARY:
                    continue
                data = src.read(info)
                if info.filename == record_path:
                    text = io.StringIO()
                    csv.writer(text, lineterminator="\n").writerows(rows)
                    data = text.getvalue().encode()
                out.writestr(info, data)
    shutil.copy(_compressed(library), bundle / "files" / "warp.so.xz")
    (bundle / "unpack.txt").write_text(f"files/warp.so.xz {LIBRARY} {digest.hex()}\n")
    needed = json.loads(library.with_name(library.name + ".json").read_text())["needed"]
    nvrtc = [soname for soname in needed if soname.startswith("libnvrtc")]
    if nvrtc:
        (bundle / "nvrtc.txt").write_text(nvrtc[0] + "\n")


def _compressed(library: Path) -> Path:
    """``library.xz`` (``xz -9e``), made once: a rebuild of the bundle reuses it."""
    xz = library.with_name(library.name + ".xz")
    if xz.is_file() and xz.stat().st_mtime >= library.stat().st_mtime:
        print(f"gpu_bundle: {LIBRARY}: reusing {xz}")
        return xz
    print(f"gpu_bundle: {LIBRARY}: xz -9e (minutes) ...", flush=True)
    partial = xz.with_name(xz.name + ".part")
    with open(library, "rb") as lib, lzma.open(partial, "wb", preset=9 | lzma.PRESET_EXTREME) as out:
        while chunk := lib.read(1 << 22):
            out.write(chunk)
    os.replace(partial, xz)
    return xz


def _size(files: Iterable[Path]) -> int:
    return sum(p.stat().st_size for p in files if p.is_file())


def check_size(bundle: Path, max_bytes: int) -> int:
    """The bundle's size in bytes; exits with one line when it is over ``max_bytes``."""
    size = _size(bundle.rglob("*"))
    if size > max_bytes:
        sys.exit(
            f"gpu_bundle: the bundle is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB that one"
            " device call carries beside the repository (docs/gpu_check.md)"
        )
    return size


def check_call(repository: Path, bundle: Path, call_bytes: int) -> tuple[int, int]:
    """``(repository bytes, repository + bundle bytes)`` of one device call that carries ``bundle``;
    exits with one line when the sum is over ``call_bytes``. The repository's share is what the
    device tool copies: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repository,
        capture_output=True,
        check=True,
    ).stdout
    repo = _size(repository / name for name in listed.decode().split("\0") if name)
    call = repo + _size(bundle.rglob("*"))
    if call > call_bytes:
        sys.exit(
            f"gpu_bundle: the repository ({repo / 2**20:.1f} MiB) and the bundle make {call / 2**20:.1f} MiB,"
            f" over the {call_bytes / 2**20:.0f} MiB of one device call (docs/gpu_check.md)"
        )
    return repo, call


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "strip-warp":
        strip_warp(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        return 0
    if len(argv) == 3 and argv[0] == "check-size":
        print(check_size(Path(argv[1]), int(argv[2])))
        return 0
    if len(argv) == 4 and argv[0] == "check-call":
        print(*check_call(Path(argv[1]), Path(argv[2]), int(argv[3])))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
