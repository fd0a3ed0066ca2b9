"""Build warp-lang's ``warp/bin/warp.so`` for the GPU bundle from the sources its own wheel ships.

    python scripts/gpu_bundle_warp.py build WARP_WHEEL NVRTC_WHEEL PTXCOMPILER_WHEEL WARP_SOURCE OUT \
        [--cuda-path DIR] [--jobs N]
    python scripts/gpu_bundle_warp.py key WARP_WHEEL NVRTC_WHEEL PTXCOMPILER_WHEEL [--cuda-path DIR]
    python scripts/gpu_bundle_warp.py from-cache SHARED_CACHE OUT    # OUT: .../warp-KEY.so

NVIDIA's warp.so (298 MB for warp-lang 1.19.0) links NVRTC and the PTX compiler statically and
carries native code for nine GPU architectures; it compresses only to 77 MB, too much for one
64 MiB transfer. The GPU machine already has NVRTC: its torch (cu130) depends on
``nvidia-cuda-nvrtc``, which installs ``nvidia/cu13/lib/libnvrtc.so.13``. So this builds the
same library with Warp's own build code (``warp/_src/build_dll.py`` of the wheel, the version
the Python side expects) with three differences:

- NVRTC is linked dynamically (``libnvrtc.so.13``, found at run time through LD_LIBRARY_PATH,
  which ``scripts/gpu_check.sh`` points at the machine's ``nvidia/cu13/lib``); the CUDA
  runtime and the PTX compiler stay static as in NVIDIA's build;
- native CUDA code for sm_90 (H100/H200) only, plus its PTX;
- without libmathdx (Warp then takes its own non-MathDx tile GEMM/Cholesky path, as on the CPU)
  and without the experimental cuBQL BVH builder (``WP_DISABLE_CUBQL``; its headers are not in
  the wheel; MJWarp builds its BVHs with ``"sah"``).

NVRTC's and the PTX compiler's headers and libraries come from the wheels given (the versions
torch 2.11.0+cu130 pins: ``cuda-toolkit[nvrtc]==13.0.2`` requires ``nvidia-cuda-nvrtc==13.0.88``);
nvcc, the CUDA runtime and CCCL from the toolkit at ``--cuda-path`` (default CUDA_HOME or
/usr/local/cuda). The wheel ships Warp's native sources but not two headers of NanoVDB that
``volume.cpp`` includes through ``nanovdb/NanoVDB.h``: they come from WARP_SOURCE, a checkout of
NVIDIA/warp whose ``warp/native/nanovdb/NanoVDB.h`` must equal the wheel's byte for byte (so
the headers are of the same NanoVDB version). The result must export every symbol NVIDIA's
warp.so exports (checked: the Python side binds them by name) and need ``libnvrtc.so.13`` but
no other CUDA library.

``build`` writes OUT (atomically) and OUT.json (the build's inputs, the libraries it needs and
how long it took). ``key`` prints what the library depends on (the wheels, nvcc's version and
the build options, hashed): scripts/gpu_bundle.sh keeps built libraries under that name and
builds again only when it changes.

``from-cache`` takes a library built before from a shared cache folder (default
``../shared/gpu_bundle_cache``) instead of building it: ``warp-KEY.so.xz`` (``xz -9e`` of the
library) and ``warp-KEY.so.json`` (its build record) for OUT's own ``KEY``. It unpacks the
library to OUT, checks its sha256 against the record (a mismatch is refused, nothing is left at
OUT), and puts the record and the xz beside OUT (the xz no older than OUT, so the bundle reuses it
instead of compressing again). Exit status 0 and one line when it did; 1 and one line when the
folder holds no build for that key.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
import zipfile
from pathlib import Path

LIBRARY = "warp/bin/warp.so"
GENCODE = ["-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"]
DEFINES = ["-DWP_DISABLE_CUBQL"]
NVRTC_SONAME = "libnvrtc.so.13"
NANOVDB_MISSING = ("util/Util.h", "math/Math.h")
VERSION_SCRIPT = "{\n  global:\n    wp_*;\n  local:\n    *;\n};\n"
"""Export Warp's C API (every symbol NVIDIA's warp.so exports starts with ``wp_``) and hide the rest."""


def build_key(wheels: list[Path], cuda_path: Path) -> str:
    """What the built library depends on: the wheels, nvcc's version and the build options."""
    digest = hashlib.sha256()
    for path in wheels:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(subprocess.check_output([str(cuda_path / "bin" / "nvcc"), "--version"]))
    digest.update(json.dumps([GENCODE, DEFINES, VERSION_SCRIPT, NANOVDB_MISSING]).encode())
    return digest.hexdigest()[:16]


def _extract(wheel: Path, dest: Path, prefix: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(prefix):
                archive.extract(name, dest)


def _cuda_home(cuda_path: Path, nvidia: Path, dest: Path) -> Path:
    """The toolkit with NVRTC's and the PTX compiler's headers and libraries added (symlinks)."""
    dest.mkdir()
    for entry in cuda_path.iterdir():
        if entry.name not in ("include", "lib64"):
            (dest / entry.name).symlink_to(entry)
    for sub in ("include", "lib64"):
        (dest / sub).mkdir()
        for entry in (cuda_path / sub).iterdir():
            if not entry.name.startswith(("libcudart.so", "libnvrtc")):  # the runtime is linked statically
                (dest / sub / entry.name).symlink_to(entry)
    for header in ("nvrtc.h", "nvPTXCompiler.h"):
        (dest / "include" / header).symlink_to(nvidia / "include" / header)
    (dest / "lib64" / "libnvptxcompiler_static.a").symlink_to(nvidia / "lib" / "libnvptxcompiler_static.a")
    (dest / "lib64" / "libnvrtc.so").symlink_to(nvidia / "lib" / NVRTC_SONAME)  # records NEEDED libnvrtc.so.13
    (dest / "lib64" / "libcudart.a").symlink_to(cuda_path / "lib64" / "libcudart_static.a")  # -lcudart, static
    return dest


def _add_nanovdb(warp_source: Path, native: Path) -> None:
    theirs, ours = warp_source / "warp" / "native" / "nanovdb", native / "nanovdb"
    if not (theirs / "NanoVDB.h").is_file() or (theirs / "NanoVDB.h").read_bytes() != (ours / "NanoVDB.h").read_bytes():
        raise SystemExit(f"gpu_bundle_warp: {theirs}/NanoVDB.h is missing or differs from the wheel's: another NanoVDB")
    for name in NANOVDB_MISSING:
        (ours / name).parent.mkdir(exist_ok=True)
        shutil.copy(theirs / name, ours / name)


def _exports(library: Path) -> set[str]:
    out = subprocess.check_output(["nm", "-D", "--defined-only", str(library)], text=True)
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def _needed(library: Path) -> list[str]:
    out = subprocess.check_output(["readelf", "-d", str(library)], text=True)
    return re.findall(r"\(NEEDED\).*\[(.+)\]", out)


def build(
    warp_wheel: Path, nvrtc_wheel: Path, ptx_wheel: Path, warp_source: Path, out: Path, cuda_path: Path, jobs: int
) -> dict:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="warp_build_") as tmp:
        work = Path(tmp)
        _extract(warp_wheel, work / "src", "warp/")
        for wheel in (nvrtc_wheel, ptx_wheel):
            _extract(wheel, work, "nvidia/")
        cuda_home = _cuda_home(cuda_path, work / "nvidia" / "cu13", work / "cuda")
        src = work / "src" / "warp"
        (src / "native" / "warp.map").write_text(VERSION_SCRIPT)
        _add_nanovdb(warp_source, src / "native")
        reference = src / "bin" / "warp.so"
        reference.rename(work / "nvidia_warp.so")
        (src / "bin" / "warp-clang.so").unlink(missing_ok=True)

        sys.path.insert(0, str(work / "src"))
        from warp._src import build_dll  # noqa: PLC0415  (the wheel's own build code, same version)

        # sm_90 and its PTX only; the defines and the headers added to the toolkit (nvcc itself only
        # looks in the real toolkit's include) ride along with nvcc's architecture options.
        nvcc_extra = [*GENCODE, *DEFINES, f'-I"{cuda_home / "include"}"']
        build_dll._get_architectures_cu13 = lambda *args, **kwargs: (nvcc_extra, [])
        args = types.SimpleNamespace(
            mode="release",
            cuda_path=str(cuda_home),
            quick=False,
            verbose=True,
            jobs=jobs,
            libmathdx_path=None,
            fast_math=False,
            verify_fp=False,
            sanitize=None,
            compile_time_trace=False,
            use_dynamic_cuda=True,
            clang_build_toolchain=False,
            llvm_path=None,
            # g++ as build_lib.py finds it, with the GCC ABI flag build_dll adds for a bare "g++".
            host_compiler=f"{shutil.which('g++') or 'g++'} -fabi-version=13 {' '.join(DEFINES)}",
        )
        native = src / "native"
        cpp = sorted(str(p) for p in native.glob("*.cpp"))
        cu = sorted(str(p) for p in native.glob("*.cu") if p.name != "apic.cu")  # warp.cu #includes apic.cu
        library = src / "bin" / "warp.so"
        build_dll.build_dll(args, dll_path=str(library), cpp_paths=cpp, cu_paths=cu)

        missing = _exports(work / "nvidia_warp.so") - _exports(library)
        if missing:
            raise SystemExit(f"gpu_bundle_warp: the built warp.so lacks {len(missing)} exports: {sorted(missing)[:5]}")
        needed = _needed(library)
        cuda_libs = [name for name in needed if name.startswith(("libcu", "libnv"))]
        if cuda_libs != [NVRTC_SONAME]:
            raise SystemExit(f"gpu_bundle_warp: the built warp.so needs {cuda_libs}, expected only {NVRTC_SONAME}")
        partial = out.with_name(out.name + ".part")
        shutil.copy(library, partial)
        os.replace(partial, out)
    info = {
        "warp_wheel": warp_wheel.name,
        "nvrtc_wheel": nvrtc_wheel.name,
        "ptxcompiler_wheel": ptx_wheel.name,
        "nvcc": re.search(
            r"release .*", subprocess.check_output([str(cuda_path / "bin" / "nvcc"), "--version"], text=True)
        )[0],
        "gencode": GENCODE,
        "defines": DEFINES,
        "needed": needed,
        "bytes": out.stat().st_size,
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        "build_seconds": round(time.monotonic() - start),
        "jobs": jobs,
    }
    out.with_name(out.name + ".json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def from_cache(cache: Path, out: Path) -> dict | None:
    """Unpack ``cache/OUT.name.xz`` to ``out`` (sha256 checked against its record); ``None`` if absent."""
    import lzma

    xz, record = cache / (out.name + ".xz"), cache / (out.name + ".json")
    if not (xz.is_file() and record.is_file()):
        return None
    info = json.loads(record.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")
    digest = hashlib.sha256()
    with lzma.open(xz) as src, open(partial, "wb") as dest:
        while chunk := src.read(1 << 22):
            digest.update(chunk)
            dest.write(chunk)
    if digest.hexdigest() != info["sha256"]:
        partial.unlink()
        raise SystemExit(
            f"gpu_bundle_warp: {xz}: the unpacked library's sha256 is {digest.hexdigest()}, its record {record.name} "
            f"says {info['sha256']}; not used"
        )
    os.chmod(partial, 0o755)
    os.replace(partial, out)
    shutil.copyfile(record, out.with_name(out.name + ".json"))
    copy = out.with_name(out.name + ".xz")
    shutil.copyfile(xz, copy)
    os.utime(copy)  # newer than the library: the bundle reuses it rather than compressing again
    return info


def main(argv: list[str]) -> int:
    if argv[:1] == ["from-cache"]:
        if len(argv) != 3:
            raise SystemExit("usage: gpu_bundle_warp.py from-cache SHARED_CACHE OUT")
        cache, out = Path(argv[1]), Path(argv[2])
        info = from_cache(cache, out)
        if info is None:
            print(f"gpu_bundle: warp.so: no cached build for key {out.stem.removeprefix('warp-')} in {cache}")
            return 1
        print(
            f"gpu_bundle: warp.so: using the cached build {cache / (out.name + '.xz')} (key "
            f"{out.stem.removeprefix('warp-')}: same wheels, nvcc and options; sha256 checked; built in "
            f"{info.get('build_seconds', '?')} s there)"
        )
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "key"])
    parser.add_argument("wheels", type=Path, nargs=3, metavar="WHEEL", help="warp-lang, NVRTC, PTX compiler")
    parser.add_argument("paths", type=Path, nargs="*", metavar="WARP_SOURCE OUT", help="for build")
    parser.add_argument("--cuda-path", type=Path, default=Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if not (args.cuda_path / "bin" / "nvcc").is_file():
        parser.error(f"--cuda-path: no bin/nvcc under {args.cuda_path} (a CUDA 13 toolkit is needed)")
    if args.command == "key":
        print(build_key(args.wheels, args.cuda_path))
        return 0
    if len(args.paths) != 2:
        parser.error("build needs WARP_SOURCE and OUT after the three wheels")
    info = build(*args.wheels, *args.paths, args.cuda_path, args.jobs)
    print(f"gpu_bundle_warp: {args.paths[1]}: {info['bytes'] / 2**20:.1f} MiB, built in {info['build_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
