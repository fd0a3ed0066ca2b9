"""The two file steps of scripts/gpu_bundle.sh: strip warp-lang, and split the bundle into parts.

    python scripts/gpu_bundle_layout.py strip-warp DOWNLOAD BUNDLE [PREVIOUS]
    python scripts/gpu_bundle_layout.py split BUNDLE DEST PART_BYTES

``strip-warp`` copies every wheel of DOWNLOAD into BUNDLE/wheels; the warp-lang wheel is rebuilt
(build tag ``1cudaonly``) without ``warp/bin/warp-clang.so`` (the compiler of Warp's *CPU*
kernels), examples and tests, and without ``warp/bin/warp.so``, which goes to
BUNDLE/files/warp.so.xz (``xz -9e``) with its line in BUNDLE/unpack.txt. The wheel's RECORD
keeps warp.so's line: the unpacked file is the same bytes. When PREVIOUS (an earlier bundle)
holds the xz of a library with the same sha256, that file is reused: compressing takes minutes.

``split`` lays the bundle out for transfers of at most PART_BYTES each: DEST/1, DEST/2, ...
Every part holds the small files (install.sh, SHA256SUMS, unpack.txt, python_version,
pieces.txt) and its share of the rest; a file too large for one part is cut into pieces
``<path>.1``, ``<path>.2``, ... (listed in pieces.txt) that ``install.sh --stage`` joins again.
"""

from __future__ import annotations

import base64
import csv
import io
import lzma
import shutil
import sys
import zipfile
from pathlib import Path

DROP = ("warp/bin/warp-clang.so", "warp/examples/", "warp/tests/")
LIBRARY = "warp/bin/warp.so"
SMALL = ("install.sh", "SHA256SUMS", "unpack.txt", "python_version")
"""Files every part carries (a few kB): what ``install.sh`` needs to stage and check."""


def strip_warp(download: Path, bundle: Path, previous: Path | None = None) -> None:
    (bundle / "wheels").mkdir(parents=True, exist_ok=True)
    (bundle / "files").mkdir(exist_ok=True)
    for wheel in sorted(download.glob("*.whl")):
        if not wheel.name.startswith("warp_lang-"):
            shutil.copy(wheel, bundle / "wheels" / wheel.name)
            continue
        name, version, *tags = wheel.stem.split("-")
        stripped = bundle / "wheels" / ("-".join([name, version, "1cudaonly", *tags[-3:]]) + ".whl")
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(stripped, "w", zipfile.ZIP_DEFLATED) as out:
            record_path = f"{name}-{version}.dist-info/RECORD"
            rows = [r for r in csv.reader(io.StringIO(src.read(record_path).decode())) if r]
            digest = dict(r[:2] for r in rows)[LIBRARY].removeprefix("sha256=")
            line = f"files/warp.so.xz {LIBRARY} {base64.urlsafe_b64decode(digest + '==').hex()}\n"
            _write_library(src, bundle / "files" / "warp.so.xz", line, previous)
            (bundle / "unpack.txt").write_text(line)
            for info in src.infolist():
                if info.filename.startswith(DROP) or info.filename == LIBRARY:
                    continue
                data = src.read(info)
                if info.filename == record_path:
                    text = io.StringIO()
                    csv.writer(text, lineterminator="\n").writerows(r for r in rows if not r[0].startswith(DROP))
                    data = text.getvalue().encode()
                out.writestr(info, data)


def _write_library(src: zipfile.ZipFile, dest: Path, line: str, previous: Path | None) -> None:
    if previous is not None and (previous / "unpack.txt").is_file() and (previous / "unpack.txt").read_text() == line:
        shutil.copy(previous / "files" / "warp.so.xz", dest)  # install.sh checks the unpacked sha256
        print(f"gpu_bundle: {LIBRARY}: reusing {previous}/files/warp.so.xz (same library sha256)")
        return
    print(f"gpu_bundle: {LIBRARY}: xz -9e (many minutes) ...", flush=True)
    with src.open(LIBRARY) as lib, lzma.open(dest, "wb", preset=9 | lzma.PRESET_EXTREME) as xz:
        while chunk := lib.read(1 << 22):
            xz.write(chunk)


def split(bundle: Path, dest: Path, part_bytes: int) -> int:
    """Lay ``bundle`` out as parts ``dest/1..n`` of at most ``part_bytes`` each; returns ``n``."""
    small = sum((bundle / name).stat().st_size for name in SMALL) + 4096  # + pieces.txt, part
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
    if len(argv) in (3, 4) and argv[0] == "strip-warp":
        strip_warp(Path(argv[1]), Path(argv[2]), Path(argv[3]) if len(argv) == 4 else None)
        return 0
    if len(argv) == 4 and argv[0] == "split":
        print(split(Path(argv[1]), Path(argv[2]), int(argv[3])))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
