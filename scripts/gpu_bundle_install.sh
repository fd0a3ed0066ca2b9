#!/usr/bin/env bash
# Install an offline bundle made by scripts/gpu_bundle.sh (this file is its install.sh):
#
#   bash DIR/install.sh TARGET [PYTHON]      # DIR: the bundle (.gpu_bundle/bundle); PYTHON defaults to python3
#
# Installs every wheel of DIR/wheels into TARGET for PYTHON (pip --target, no index, no build
# step), then decompresses each file listed in DIR/unpack.txt into TARGET. Use the result with
# PYTHONPATH=TARGET. Nothing is read from the network. Before anything is written it checks
# DIR/SHA256SUMS (every file of the bundle) and the Python version the bundle was made for
# (DIR/python_version); every decompressed file is checked against its sha256 in unpack.txt.
# A TARGET that already holds this very bundle is left as it is. Prints what it installed, and
# the shared library the unpacked warp.so loads from the machine (DIR/nvrtc.txt: NVRTC, which
# scripts/gpu_check.sh finds and puts on LD_LIBRARY_PATH).
set -euo pipefail
fail() { echo "install.sh: $*" >&2; exit 1; }
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

[ $# -ge 1 ] && [ $# -le 2 ] || fail "usage: install.sh TARGET [PYTHON]"
TARGET=$1
PY=${2:-python3}
command -v "$PY" >/dev/null || fail "PYTHON '$PY' not found"

(cd "$DIR" && sha256sum --check --quiet --strict SHA256SUMS) ||
  fail "a file of $DIR does not match its SHA256SUMS line (incomplete or corrupted copy); nothing was installed"

want=$(cat "$DIR/python_version")
have=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$have" = "$want" ] || fail "this bundle is for Python $want; PYTHON '$PY' is Python $have"

stamp=$(sha256sum "$DIR/SHA256SUMS" | cut -d' ' -f1)
mkdir -p "$TARGET"
TARGET="$(cd "$TARGET" && pwd)"
if [ "$(cat "$TARGET/.unilab-bundle" 2>/dev/null)" != "$stamp" ]; then
  "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation --only-binary=:all: --no-compile \
    --no-cache-dir --disable-pip-version-check --upgrade --target "$TARGET" "$DIR"/wheels/*.whl ||
    fail "pip could not install the wheels of $DIR/wheels into $TARGET"
  # unpack.txt: one line per compressed file: <file under DIR> <path under TARGET> <sha256 of the result>
  "$PY" - "$DIR" "$TARGET" <<'PY' || fail "a file of $DIR/unpack.txt could not be unpacked (see above)"
import hashlib, lzma, os, sys

bundle, target = sys.argv[1:]
for line in open(os.path.join(bundle, "unpack.txt")):
    if not line.strip():
        continue
    source, dest, sha256 = line.split()
    dest = os.path.join(target, dest)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    digest, partial = hashlib.sha256(), dest + ".part"
    with lzma.open(os.path.join(bundle, source)) as src, open(partial, "wb") as out:
        while chunk := src.read(1 << 22):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != sha256:
        os.remove(partial)
        sys.exit(f"{source}: sha256 of the unpacked file is {digest.hexdigest()}, expected {sha256}")
    os.replace(partial, dest)
PY
  echo "$stamp" > "$TARGET/.unilab-bundle"
  verb=installed
else
  verb="already installed"
fi

echo "install.sh: $verb into $TARGET for Python $have:"
for wheel in "$DIR"/wheels/*.whl; do
  name=$(basename "$wheel")
  echo "  ${name%%-*} $(echo "$name" | cut -d- -f2)"
done
while read -r _ dest _; do
  [ -n "$dest" ] && echo "  $dest ($(du -h "$TARGET/$dest" | cut -f1), unpacked)"
done < "$DIR/unpack.txt"
if [ -f "$DIR/nvrtc.txt" ]; then
  echo "  needs $(cat "$DIR/nvrtc.txt") from the machine (NVRTC, e.g. torch's nvidia/cu13/lib) on LD_LIBRARY_PATH"
fi
