"""The file steps of scripts/gpu_bundle.sh: strip warp-lang, check the size, split into parts.

    python scripts/gpu_bundle_layout.py strip-warp DOWNLOAD BUNDLE LIBRARY
    python scripts/gpu_bundle_layout.py check-size BUNDLE MAX_BYTES
    python scripts/gpu_bundle_layout.py split BUNDLE DEST PART_BYTES

``strip-warp`` copies every wheel of DOWNLOAD into BUNDLE/wheels; the warp-lang wheel is rebuilt
(build tag ``1sm90``) without ``warp/bin/warp-clang.so`` (the compiler of Warp's *CPU*
kernels), examples and tests, and without ``warp/bin/warp.so``: in its place the bundle carries
LIBRARY, the warp.so that scripts/gpu_bundle_warp.py built from the wheel's own sources (sm_90,
NVRTC linked dynamically), as BUNDLE/files/warp.so.xz (``xz -9e``, made once as LIBRARY.xz
beside LIBRARY) with its line in BUNDLE/unpack.txt; the wheel's RECORD gets LIBRARY's sha256
and size in warp.so's line. BUNDLE/nvrtc.txt names the NVRTC library LIBRARY needs (from
LIBRARY.json, the build's record), which scripts/gpu_check.sh looks for on the GPU machine.

``check-size`` prints BUNDLE's size, or fails with one line unless it fits one part of MAX_BYTES.

``split`` lays the bundle out for transfers of at most PART_BYTES each: DEST/1, DEST/2, ...
Every part holds the small files (install.sh, SHA256SUMS, unpack.txt, python_version,
pieces.txt) and its share of the rest; a file too large for one part is cut into pieces
``<path>.1``, ``<path>.2``, ... (listed in pieces.txt) that ``install.sh --stage`` joins again.
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
import sys
import zipfile
from pathlib import Path

DROP = ("warp/bin/warp-clang.so", "warp/examples/", "warp/tests/")
LIBRARY = "warp/bin/warp.so"
BUILD_TAG = "1sm90"
"""The wheel's build tag: warp-lang with its warp.so built for sm_90 and NVRTC linked dynamically."""
SMALL = ("install.sh", "SHA256SUMS", "unpack.txt", "python_version")
"""Files every part carries (a few kB): what ``install.sh`` needs to stage and check."""
BOOKKEEPING = 4096
"""Bytes a part reserves for its own files (pieces.txt, part) beyond the bundle's."""


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


def check_size(bundle: Path, max_bytes: int) -> int:
    """The bundle's size in bytes; exits with one line unless it fits one part of ``max_bytes``."""
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    if size + BOOKKEEPING > max_bytes:
        sys.exit(
            f"gpu_bundle: the bundle is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB that one"
            " device call carries beside the repository (docs/gpu_check.md)"
        )
    return size


def split(bundle: Path, dest: Path, part_bytes: int) -> int:
    """Lay ``bundle`` out as parts ``dest/1..n`` of at most ``part_bytes`` each; returns ``n``."""
    small = sum((bundle / name).stat().st_size for name in SMALL) + BOOKKEEPING
    capacity = part_bytes - small
    payload = sorted(p.relative_to(bundle) for p in bundle.rglob("*") if p.is_file() and p.name not in SMALL)
    parts: list[list[tuple[Path, Path, int, int]]] = [[]]  # (source, name in the part, offset, size)
    free = capacity
    pieces: dict[Path, int] = {}
    for path in sorted(payload, key=lambda p: (bundle / p).stat().st_size):  # small files first, in part 1
        size, offset = (bundle / path).stat().st_size, 0
        if size <= free:
            parts[-1].append((path, path, 0, size))
            free -= size
            continue
        while offset < size:
            if free == 0:
                parts.append([])
                free = capacity
            take = min(free, size - offset)
            pieces[path] = pieces.get(path, 0) + 1
            parts[-1].append((path, Path(f"{path}.{pieces[path]}"), offset, take))
            offset += take
            free -= take
    for k, files in enumerate(parts, start=1):
        part = dest / str(k)
        part.mkdir(parents=True)
        for name in SMALL:
            shutil.copy(bundle / name, part / name)
        (part / "pieces.txt").write_text("".join(f"{path} {n}\n" for path, n in sorted(pieces.items())))
        (part / "part").write_text(f"{k} {len(parts)}\n")
        for source, name, offset, size in files:
            (part / name).parent.mkdir(parents=True, exist_ok=True)
            with open(bundle / source, "rb") as src, open(part / name, "wb") as out:
                src.seek(offset)
                out.write(src.read(size))
    return len(parts)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "strip-warp":
        strip_warp(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        return 0
    if len(argv) == 3 and argv[0] == "check-size":
        print(check_size(Path(argv[1]), int(argv[2])))
        return 0
    if len(argv) == 4 and argv[0] == "split":
        print(split(Path(argv[1]), Path(argv[2]), int(argv[3])))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
