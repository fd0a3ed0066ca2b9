#!/usr/bin/env bash
# Install an offline bundle made by scripts/gpu_bundle.sh (this file is its install.sh):
#
#   bash DIR/install.sh TARGET [PYTHON]      # DIR: the bundle (.gpu_bundle/bundle); PYTHON defaults to python3
#
# Installs every wheel of DIR/wheels into TARGET for PYTHON (pip --target, no index, no build
# step), then decompresses each file listed in DIR/unpack.txt into TARGET. Use the result with
# PYTHONPATH=TARGET. Nothing is read from the network. Before anything is written it checks
# DIR/SHA256SUMS (every file of the bundle, and no file of DIR that it does not list: a wheel
# dropped into wheels/ is refused) and the Python version the bundle was made for
# (DIR/python_version); every decompressed file is checked against its sha256 in unpack.txt.
# Everything is installed into a new folder beside TARGET and moved into place at the end, so a
# failed install leaves TARGET as it was. TARGET must be new, empty or a previous install of a
# bundle of this project (its .unilab-bundle file): anything else is refused, never overwritten
# (pip --target --upgrade would replace whole folders named like a bundled package). A previous
# install is replaced only if it holds nothing but its own files (.unilab-bundle-files lists them;
# Python's __pycache__ folders aside): a file a user added there is never deleted, the install is
# refused naming it. A TARGET that already holds this very bundle is left as it is. Prints what it
# installed, and
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
unlisted=$(cd "$DIR" && find . -type f ! -name SHA256SUMS | sort | while read -r file; do
  awk -v f="$file" '$2 == f { found = 1 } END { exit !found }' SHA256SUMS || echo "$file"
done)
[ -z "$unlisted" ] ||
  fail "$DIR holds files SHA256SUMS does not list (not part of this bundle): $(echo "$unlisted" | tr '\n' ' ')" \
    "; nothing was installed"

want=$(cat "$DIR/python_version")
have=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || have=""
[[ "$have" =~ ^[0-9]+\.[0-9]+$ ]] ||
  fail "PYTHON '$PY' is not a Python interpreter (it did not run: $PY -c 'import sys'); nothing was installed"
[ "$have" = "$want" ] || fail "this bundle is for Python $want; PYTHON '$PY' is Python $have"

stamp=$(sha256sum "$DIR/SHA256SUMS" | cut -d' ' -f1)
if [ -e "$TARGET" ] && [ ! -d "$TARGET" ]; then
  fail "TARGET '$TARGET' exists and is not a folder; nothing was installed"
fi
if [ -d "$TARGET" ] && [ ! -f "$TARGET/.unilab-bundle" ] && [ -n "$(ls -A "$TARGET")" ]; then
  fail "TARGET '$TARGET' is not empty and holds no install of this project's bundle (no .unilab-bundle):" \
    "choose a new or empty folder; nothing was installed"
fi
if [ -f "$TARGET/.unilab-bundle" ] && [ "$(cat "$TARGET/.unilab-bundle")" != "$stamp" ]; then
  # Replacing a previous install deletes it: only if it holds nothing but what it installed.
  [ -f "$TARGET/.unilab-bundle-files" ] ||
    fail "TARGET '$TARGET' holds an install by an older install.sh, which kept no list of its files, so" \
      "files added there cannot be told apart: remove it or choose a new folder; nothing was installed"
  added=$(cd "$TARGET" && find . -name __pycache__ -prune -o \( -type f -o -type l \) -print | sed 's|^\./||' |
    { grep -vxF -e .unilab-bundle -e .unilab-bundle-files -f .unilab-bundle-files || true; } | sort | head -5 | tr '\n' ' ')
  [ -z "$added" ] ||
    fail "TARGET '$TARGET' holds files its previous install did not write (${added% }): move them out or" \
      "choose a new folder; nothing was installed"
fi
if [ "$(cat "$TARGET/.unilab-bundle" 2>/dev/null)" != "$stamp" ]; then
  parent=$(dirname "$TARGET")
  mkdir -p "$parent"
  staging=$(mktemp -d "$parent/.$(basename "$TARGET").installing.XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation --only-binary=:all: --no-compile \
    --no-cache-dir --disable-pip-version-check --target "$staging" "$DIR"/wheels/*.whl ||
    fail "pip could not install the wheels of $DIR/wheels; nothing was installed into $TARGET"
  # unpack.txt: one line per compressed file: <file under DIR> <path under TARGET> <sha256 of the result>
  "$PY" - "$DIR" "$staging" <<'PY' || fail "a file of $DIR/unpack.txt could not be unpacked (see above); nothing was installed"
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
  (cd "$staging" && find . \( -type f -o -type l \) -print | sed 's|^\./||' | sort) > "$staging/.unilab-bundle-files"
  echo "$stamp" > "$staging/.unilab-bundle"
  # Into place: an empty TARGET or a previous install of a bundle (checked above) is replaced.
  if [ -d "$TARGET" ]; then
    old=$(mktemp -d "$parent/.$(basename "$TARGET").old.XXXXXX")
    mv "$TARGET" "$old/install"
    mv "$staging" "$TARGET"
    rm -rf "$old"
  else
    mv "$staging" "$TARGET"
  fi
  trap - EXIT
  verb=installed
else
  verb="already installed"
fi
TARGET="$(cd "$TARGET" && pwd)"

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
