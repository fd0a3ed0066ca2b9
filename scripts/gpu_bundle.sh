#!/usr/bin/env bash
# Build the offline bundle that scripts/gpu_check.sh installs on a GPU machine without network.
#
#   WARP_SOURCE=DIR bash scripts/gpu_bundle.sh [--check] [DIR]   # DIR defaults to .gpu_bundle (git-ignored)
#
# Needs the package index (pip download) and is run here, in the project's environment: it
# bundles the versions installed in PYTHON (default python3), the ones the test suite passed on.
# DIR/bundle receives, for CPython 3.12 on manylinux x86-64, everything the GPU check needs beyond
# what the GPU machine already has (torch 2.11.0+cu130 with its NVRTC, numpy, pytest, ...):
#   wheels/          mujoco + mujoco-core (not mujoco-studio, glfw, pyopengl: `import mujoco`
#                    and mj_step need none of them), mujoco-warp, warp-lang without its CPU
#                    compiler library (warp-clang.so: Warp's CPU kernels only), examples and
#                    tests, and without warp.so; hydra-core, omegaconf, antlr4-python3-runtime
#                    (an sdist on the index: built into a wheel here), PyYAML, packaging,
#                    absl-py, etils, fsspec, typing_extensions, zipp;
#   files/warp.so.xz warp/bin/warp.so built here from the warp-lang wheel's own sources for
#                    sm_90 with NVRTC linked dynamically (scripts/gpu_bundle_warp.py: nvcc 13 at
#                    CUDA_HOME, default /usr/local/cuda; NanoVDB headers from WARP_SOURCE, a
#                    checkout of NVIDIA/warp), xz -9e;
#   nvrtc.txt        the NVRTC that warp.so loads from the machine (libnvrtc.so.13);
#   install.sh       `bash DIR/bundle/install.sh TARGET [PYTHON]`: installs all of it from these
#                    files alone (scripts/gpu_bundle_install.sh);
#   unpack.txt, python_version, SHA256SUMS: what install.sh unpacks and checks.
# The bundle must be at most 60 MiB, and with the repository at most the 64 MiB of one call to
# the GPU machine, which carries DIR/bundle (docs/gpu_check.md).
# DIR/cache keeps the built library and its xz by a key of the inputs (gpu_bundle_warp.py key):
# a rebuild with the same wheels and toolkit neither compiles nor compresses again. A build with
# that key in SHARED_CACHE (default ../shared/gpu_bundle_cache: warp-KEY.so.xz and its record
# warp-KEY.so.json) is used instead of building (23 minutes on two cores); one line says so.
#
# --check then installs DIR/bundle into a temporary directory, and imports warp,
# mujoco, mujoco_warp, hydra and omegaconf from it with a bare CPython 3.12 that has numpy and
# the NVRTC wheel the GPU machine's torch brings (CHECK_PYTHON, default python3.12; with pyenv:
# PYENV_VERSION=3.12.1), loads warp.so with NVRTC found as gpu_check.sh finds it and compiles
# MJWarp's smooth kernels for sm_90 with it (no GPU needed for that). With
# CHECK_TORCH_PYTHON set to a Python 3.12 that has torch, it also imports the project against
# that install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
PYTHON_VERSION=3.12
MAX_BYTES=$((60 * 1024 * 1024))  # the bundle (the call's 64 MiB less the repository)
CALL_BYTES=$((64 * 1024 * 1024))  # what one device call carries: the repository and the bundle
NVRTC=nvidia-cuda-nvrtc==13.0.88  # what torch 2.11.0+cu130 pins (cuda-toolkit[nvrtc]==13.0.2): on the GPU machine
PTXCOMPILER=nvidia-nvptxcompiler==13.0.88  # the PTX compiler of the same CUDA release, linked into warp.so
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
PACKAGES=(mujoco mujoco-core mujoco-warp warp-lang hydra-core omegaconf PyYAML packaging absl-py etils fsspec
  typing_extensions zipp)
ANTLR=antlr4-python3-runtime  # hydra's grammar runtime: only an sdist on the index
fail() { echo "gpu_bundle: $*" >&2; exit 1; }

check=0
DIR=.gpu_bundle
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    -*) fail "unknown option '$arg' (usage: gpu_bundle.sh [--check] [DIR])" ;;
    *) DIR=$arg ;;
  esac
done
"$PY" -c 'import sys' 2>/dev/null ||
  fail "PYTHON '$PY' does not run as a Python interpreter; set PYTHON to the project's (default python3)"
if [ -e "$DIR" ] && [ ! -f "$DIR/bundle/install.sh" ] && [ ! -d "$DIR/cache" ] && [ -n "$(ls -A "$DIR")" ]; then
  fail "DIR '$DIR' exists and is not a bundle (no bundle/install.sh): choose another directory"
fi

versions=$("$PY" - "${PACKAGES[@]}" "$ANTLR" <<'PY'
import sys
from importlib import metadata

for name in sys.argv[1:]:
    try:
        print(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        sys.exit(f"gpu_bundle: {name} is not installed in {sys.executable}; run in the project's environment")
PY
)
echo "gpu_bundle: bundling for CPython $PYTHON_VERSION:" $versions

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/download" "$work/bundle/wheels" "$work/bundle/files"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# shellcheck disable=SC2086  # $versions: one requirement per word
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --implementation cp \
  --python-version "$PYTHON_VERSION" --abi "cp${PYTHON_VERSION/./}" "${platforms[@]}" -d "$work/download" \
  $(echo "$versions" | grep -v "^$ANTLR==")
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary=:all: -d "$work/sdist" \
  "$(echo "$versions" | grep "^$ANTLR==")"
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$work/download" "$work"/sdist/*
# What warp.so is built with (not bundled): NVRTC's and the PTX compiler's headers and libraries.
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: "${platforms[@]}" \
  --python-version "$PYTHON_VERSION" -d "$work/inputs" "$NVRTC" "$PTXCOMPILER"
inputs=("$work"/download/warp_lang-*.whl "$work"/inputs/nvidia_cuda_nvrtc-*.whl "$work"/inputs/nvidia_nvptxcompiler-*.whl)

# warp.so from the wheel's sources (sm_90, dynamic NVRTC), kept in DIR/cache by the key of its inputs.
[ -x "$CUDA_HOME/bin/nvcc" ] || fail "no nvcc at CUDA_HOME '$CUDA_HOME' (a CUDA 13 toolkit builds warp.so)"
mkdir -p "$DIR/cache"
library="$DIR/cache/warp-$("$PY" "$ROOT/scripts/gpu_bundle_warp.py" key "${inputs[@]}" --cuda-path "$CUDA_HOME").so"
SHARED_CACHE="${SHARED_CACHE:-$ROOT/../shared/gpu_bundle_cache}"
if [ -f "$library" ]; then
  echo "gpu_bundle: warp.so: reusing $library (same wheels, toolkit and options)"
elif "$PY" "$ROOT/scripts/gpu_bundle_warp.py" from-cache "$SHARED_CACHE" "$library"; then
  :  # unpacked from the shared cache, sha256 checked (its line says so)
else
  [ -f "${WARP_SOURCE:-}/warp/native/nanovdb/NanoVDB.h" ] ||
    fail "WARP_SOURCE must be a checkout of NVIDIA/warp (warp.so needs its NanoVDB headers; docs/gpu_check.md)"
  echo "gpu_bundle: building warp.so for sm_90 (nvcc, about 25 minutes on two busy cores) ..."
  "$PY" "$ROOT/scripts/gpu_bundle_warp.py" build "${inputs[@]}" "$WARP_SOURCE" "$library" --cuda-path "$CUDA_HOME"
fi

# warp-lang without warp.so, its CPU compiler library, examples and tests; the built warp.so as xz.
"$PY" "$ROOT/scripts/gpu_bundle_layout.py" strip-warp "$work/download" "$work/bundle" "$library"
cp "$ROOT/scripts/gpu_bundle_install.sh" "$work/bundle/install.sh"
echo "$PYTHON_VERSION" > "$work/bundle/python_version"
(cd "$work/bundle" && find . -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS)
bytes=$("$PY" "$ROOT/scripts/gpu_bundle_layout.py" check-size "$work/bundle" "$MAX_BYTES")
sizes=$("$PY" "$ROOT/scripts/gpu_bundle_layout.py" check-call "$ROOT" "$work/bundle" "$CALL_BYTES")
read -r repo call <<< "$sizes"
find "$DIR" -mindepth 1 -maxdepth 1 ! -name cache -exec rm -rf {} +
mv "$work/bundle" "$DIR/bundle"
mib() { awk "BEGIN {printf \"%.1f MiB\", $1 / 1048576}"; }
echo "gpu_bundle: $DIR/bundle: $(mib "$bytes"):"
ls -l "$DIR/bundle/wheels" "$DIR/bundle/files" | awk 'NF > 5 {printf "  %9d  %s\n", $5, $NF}'
echo "gpu_bundle: one device call with carry=[\"$DIR/bundle\"]: $(mib "$call") (the repository $(mib "$repo")) of 64 MiB"

[ "$check" = 1 ] || exit 0

# --check: a fresh CPython 3.12 with numpy only, the bundle installed offline, the imports.
CHECK_PY="${CHECK_PYTHON:-python3.12}"
"$CHECK_PY" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null ||
  fail "--check needs CPython 3.12: set CHECK_PYTHON (with pyenv: PYENV_VERSION=3.12.1 python3.12)"
"$CHECK_PY" -m venv "$work/venv"
numpy=$("$PY" -c 'import numpy; print(numpy.__version__)')
# numpy and NVRTC, as on the GPU machine (its torch cu130 brings nvidia-cuda-nvrtc): the built
# warp.so needs libnvrtc.so.13 as soon as it is loaded, even without a GPU.
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "numpy==$numpy" "$work"/inputs/nvidia_cuda_nvrtc-*.whl
nvrtc_dir=$("$work/venv/bin/python" "$ROOT/scripts/gpu_check_facts.py" library "$(cat "$DIR/bundle/nvrtc.txt")")
bash "$DIR/bundle/install.sh" "$work/site" "$work/venv/bin/python"
PYTHONPATH="$work/site" LD_LIBRARY_PATH="$nvrtc_dir" "$work/venv/bin/python" - "$work/site" "$ROOT" "$nvrtc_dir" <<'PY'
import os, sys

site, root, nvrtc_dir = sys.argv[1:]
sys.path.insert(1, os.path.join(root, "scripts"))
import hydra, mujoco, mujoco_warp, omegaconf, warp as wp
from gpu_check_facts import loaded_library

for module in (wp, mujoco, mujoco_warp, hydra, omegaconf):
    assert module.__file__.startswith(site), f"{module.__name__} imported from {module.__file__}, not the bundle"
wp.init()  # loads warp.so (the unpacked library); CUDA kernels need a GPU, CPU kernels warp-clang.so
nvrtc = loaded_library("libnvrtc.so")
assert nvrtc is not None and nvrtc.startswith(nvrtc_dir), f"warp.so loaded NVRTC from {nvrtc}, not {nvrtc_dir}"
# No GPU needed to compile for one: MJWarp's smooth kernels (tile_cholesky among them) to an sm_90 CUBIN.
import tempfile
cubins = wp.compile_aot_module("mujoco_warp._src.smooth", arch=90, use_ptx=False, module_dir=tempfile.mkdtemp())
assert [str(c).endswith(".sm90.cubin") and os.path.getsize(c) > 0 for c in cubins] == [True], cubins
model = mujoco.MjModel.from_xml_path(os.path.join(root, "assets", "robots", "pendulum", "scene.xml"))
data = mujoco.MjData(model)
data.qvel[:] = 1.0
mujoco.mj_step(model, data)
assert data.time > 0 and abs(data.qpos[0]) > 0, "mujoco did not step"
cfg = omegaconf.OmegaConf.create({"a": "${b}", "b": 2})
assert cfg.a == 2
print(f"gpu_bundle --check: bare Python {sys.version.split()[0]} + numpy + NVRTC: warp {wp.__version__} (NVRTC "
      f"from {nvrtc}; MJWarp's smooth kernels compiled for sm_90), mujoco {mujoco.__version__} (stepped), "
      f"mujoco_warp {mujoco_warp.__version__}, hydra "
      f"{hydra.__version__}, omegaconf {omegaconf.__version__}: imported from the bundle")
PY
if [ -n "${CHECK_TORCH_PYTHON:-}" ]; then
  torch_nvrtc=$("$CHECK_TORCH_PYTHON" "$ROOT/scripts/gpu_check_facts.py" library "$(cat "$DIR/bundle/nvrtc.txt")")
  PYTHONPATH="$work/site:$ROOT" LD_LIBRARY_PATH="$torch_nvrtc" "$CHECK_TORCH_PYTHON" - "$work/site" <<'PY'
import sys

site = sys.argv[1]
import torch
import warp, mujoco, mujoco_warp, hydra

import unilab_gpu.cli.doctor, unilab_gpu.envs.make_env  # noqa: F401  (the GPU check's entry points)
from unilab_gpu.training.config import compose_train_config

for module in (warp, mujoco, mujoco_warp, hydra):
    assert module.__file__.startswith(site), f"{module.__name__} imported from {module.__file__}, not the bundle"
compose_train_config(["task=g1_tracking", "algo=flashsac", "device=cuda"])  # Hydra + omegaconf from the bundle
print(f"gpu_bundle --check: torch {torch.__version__}: the project imports from the bundle and composes its config")
PY
fi
