"""The bundle's install.sh (scripts/gpu_bundle_install.sh) and its layout
(scripts/gpu_bundle_layout.py) on a tiny fake bundle: offline install, checksums, the Python
version guard, the unpacked files, the self-built warp.so in place of NVIDIA's, the size limits
of the bundle and of one device call. No network: the real bundle is built and checked by
``bash scripts/gpu_bundle.sh --check`` (docs/gpu_check.md)."""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from script_helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = random.Random(0).randbytes(30_000)  # incompressible, as a built library nearly is
layout = load_script("gpu_bundle_layout")


def _wheel(path: Path) -> None:
    """A pure-Python wheel ``tinypkg 0.3`` whose module reads a file next to it."""
    files = {
        "tinypkg/__init__.py": "from pathlib import Path\nLIB = Path(__file__).parent / 'bin' / 'lib.so'\n",
        "tinypkg-0.3.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.3\n",
        "tinypkg-0.3.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "tinypkg-0.3.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
        wheel.writestr("tinypkg-0.3.dist-info/RECORD", record)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """What gpu_bundle.sh lays out, for this interpreter: wheels/, files/*.xz, unpack.txt,
    python_version, install.sh and SHA256SUMS over all of them."""
    root = tmp_path / "bundle"
    (root / "wheels").mkdir(parents=True)
    (root / "files").mkdir()
    _wheel(root / "wheels" / "tinypkg-0.3-py3-none-any.whl")
    (root / "files" / "lib.so.xz").write_bytes(lzma.compress(LIBRARY, preset=1))
    (root / "unpack.txt").write_text(f"files/lib.so.xz tinypkg/bin/lib.so {hashlib.sha256(LIBRARY).hexdigest()}\n")
    (root / "python_version").write_text(f"{sys.version_info[0]}.{sys.version_info[1]}\n")
    shutil.copy(ROOT / "scripts" / "gpu_bundle_install.sh", root / "install.sh")
    _write_sums(root)
    return root


def _write_sums(root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  ./{p.relative_to(root)}\n" for p in files]
    (root / "SHA256SUMS").write_text("".join(lines))


def _install(bundle: Path, target: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        ["bash", str(bundle / "install.sh"), str(target), python], capture_output=True, text=True, env=env, timeout=120
    )


def test_install_puts_wheels_and_unpacked_files_into_target_offline(bundle: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    run = _install(bundle, target)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"installed into {target}" in run.stdout
    assert "  tinypkg 0.3\n" in run.stdout and "  tinypkg/bin/lib.so (" in run.stdout
    probe = "import tinypkg; print(tinypkg.__file__); print(tinypkg.LIB.read_bytes() == LIB)"
    imported = subprocess.run(
        [sys.executable, "-c", f"LIB = {LIBRARY!r}\n{probe}"],
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
    )
    assert imported.stdout.split() == [str(target / "tinypkg" / "__init__.py"), "True"], imported.stderr
    assert (target / "tinypkg-0.3.dist-info" / "METADATA").is_file()

    again = _install(bundle, target)  # the same bundle twice: nothing to do
    assert again.returncode == 0 and f"already installed into {target}" in again.stdout


def test_a_corrupted_file_stops_the_install_before_anything_is_written(bundle: Path, tmp_path: Path) -> None:
    wheel = bundle / "wheels" / "tinypkg-0.3-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes()[:-10])  # a truncated copy
    target = tmp_path / "site"
    run = _install(bundle, target)
    assert run.returncode == 1
    assert "does not match its SHA256SUMS line" in run.stderr and "nothing was installed" in run.stderr
    assert not target.exists()


def test_an_unpacked_file_must_match_its_checksum(bundle: Path, tmp_path: Path) -> None:
    (bundle / "unpack.txt").write_text(f"files/lib.so.xz tinypkg/bin/lib.so {'0' * 64}\n")
    _write_sums(bundle)  # a consistent bundle whose unpack.txt is wrong
    target = tmp_path / "site"
    run = _install(bundle, target)
    assert run.returncode == 1
    assert f"files/lib.so.xz: sha256 of the unpacked file is {hashlib.sha256(LIBRARY).hexdigest()}" in run.stderr
    assert not (target / "tinypkg" / "bin" / "lib.so").exists()
    assert not (target / ".unilab-bundle").exists()  # a rerun installs again


def test_a_python_of_another_version_is_refused_with_one_line(bundle: Path, tmp_path: Path) -> None:
    (bundle / "python_version").write_text("3.12\n" if sys.version_info[:2] != (3, 12) else "3.11\n")
    _write_sums(bundle)
    run = _install(bundle, tmp_path / "site")
    want = (bundle / "python_version").read_text().strip()
    have = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"install.sh: this bundle is for Python {want}; PYTHON '{sys.executable}' is Python {have}"
    )


def test_bad_arguments_get_a_usage_line(bundle: Path) -> None:
    run = subprocess.run(["bash", str(bundle / "install.sh")], capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.strip() == "install.sh: usage: install.sh TARGET [PYTHON]"
    run = _install(bundle, bundle / "site", python="no-such-python")
    assert run.returncode == 1 and run.stderr.strip() == "install.sh: PYTHON 'no-such-python' not found"


def test_the_bundle_builder_refuses_a_directory_that_is_not_a_bundle(tmp_path: Path) -> None:
    """gpu_bundle.sh replaces DIR: it never deletes a folder that holds something else (checked
    before any download)."""
    (tmp_path / "keep.txt").write_text("mine")
    script = ROOT / "scripts" / "gpu_bundle.sh"
    run = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"gpu_bundle: DIR '{tmp_path}' exists and is not a bundle (no bundle/install.sh): choose another directory"
    )
    assert (tmp_path / "keep.txt").read_text() == "mine"


def _warp_wheel(path: Path, library: bytes) -> None:
    """A warp-lang 1.19.0 wheel as NVIDIA ships it: warp.so, warp-clang.so, examples, tests."""
    files = {
        "warp/__init__.py": b"",
        "warp/bin/warp.so": library,
        "warp/bin/warp-clang.so": b"clang",
        "warp/examples/demo.py": b"",
        "warp/tests/test_demo.py": b"",
        "warp_lang-1.19.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: warp-lang\nVersion: 1.19.0\n",
        "warp_lang-1.19.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-manylinux_2_28_x86_64\n",
    }

    def row(name: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        return f"{name},sha256={digest},{len(data)}\n"

    record = "".join(row(name, data) for name, data in files.items()) + "warp_lang-1.19.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("warp_lang-1.19.0.dist-info/RECORD", record)


def test_the_built_warp_library_replaces_nvidias_in_the_bundle_and_installs(tmp_path: Path) -> None:
    """strip-warp: the wheel loses warp.so, warp-clang.so, examples and tests; the self-built library
    travels as xz, and once installed it is the file the wheel's RECORD names (hash and size)."""
    download, bundle, built = tmp_path / "download", tmp_path / "bundle", LIBRARY[:20_000]
    download.mkdir()
    _warp_wheel(download / "warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl", library=b"nvidia's, 298 MB")
    _wheel(download / "tinypkg-0.3-py3-none-any.whl")
    library = tmp_path / "cache" / "warp-0123.so"
    library.parent.mkdir()
    library.write_bytes(built)
    library.with_name("warp-0123.so.json").write_text('{"needed": ["libnvrtc.so.13", "libm.so.6", "libc.so.6"]}')

    layout.strip_warp(download, bundle, library)
    assert sorted(p.name for p in (bundle / "wheels").iterdir()) == [
        "tinypkg-0.3-py3-none-any.whl",
        "warp_lang-1.19.0-1sm90-py3-none-manylinux_2_28_x86_64.whl",
    ]
    with zipfile.ZipFile(bundle / "wheels" / "warp_lang-1.19.0-1sm90-py3-none-manylinux_2_28_x86_64.whl") as wheel:
        assert not [n for n in wheel.namelist() if n.startswith(("warp/bin/", "warp/examples/", "warp/tests/"))]
        record = wheel.read("warp_lang-1.19.0.dist-info/RECORD").decode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(built).digest()).decode().rstrip("=")
    assert f"warp/bin/warp.so,sha256={digest},{len(built)}\n" in record
    assert "warp-clang.so" not in record and "examples" not in record and "tests/" not in record
    assert lzma.decompress((bundle / "files" / "warp.so.xz").read_bytes()) == built
    assert (
        bundle / "unpack.txt"
    ).read_text() == f"files/warp.so.xz warp/bin/warp.so {hashlib.sha256(built).hexdigest()}\n"
    assert (bundle / "nvrtc.txt").read_text() == "libnvrtc.so.13\n"
    assert library.with_name("warp-0123.so.xz").is_file()  # kept beside the library: a rebuild reuses it

    (bundle / "python_version").write_text(f"{sys.version_info[0]}.{sys.version_info[1]}\n")
    shutil.copy(ROOT / "scripts" / "gpu_bundle_install.sh", bundle / "install.sh")
    _write_sums(bundle)
    target = tmp_path / "site"
    run = _install(bundle, target)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  warp_lang 1.19.0\n" in run.stdout and "  needs libnvrtc.so.13 from the machine" in run.stdout
    assert (target / "warp" / "bin" / "warp.so").read_bytes() == built
    assert not (target / "warp" / "bin" / "warp-clang.so").exists()
    installed = (target / "warp_lang-1.19.0.dist-info" / "RECORD").read_text()
    assert f"warp/bin/warp.so,sha256={digest},{len(built)}" in installed


def _layout(*args: object) -> subprocess.CompletedProcess:
    script = ROOT / "scripts" / "gpu_bundle_layout.py"
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True)


def test_a_bundle_over_the_limit_is_refused_with_one_line(bundle: Path) -> None:
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert layout.check_size(bundle, size) == size  # exactly at the limit: fits
    run = _layout("check-size", bundle, size - 1)
    assert run.returncode == 1
    assert run.stderr == (
        f"gpu_bundle: the bundle is {size / 2**20:.1f} MiB, over the {(size - 1) / 2**20:.0f} MiB that one device"
        " call carries beside the repository (docs/gpu_check.md)\n"
    )


def test_the_repository_and_the_bundle_must_fit_one_device_call(bundle: Path, tmp_path: Path) -> None:
    """What the device tool copies: tracked files and untracked ones git does not ignore (not the
    ignored bundle folder itself), plus the carried bundle."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=git)
    (repo / ".gitignore").write_text(".gpu_bundle/\n")  # 13 bytes
    (repo / "tracked.py").write_bytes(b"x" * 1000)
    subprocess.run(["git", "add", "tracked.py"], cwd=repo, check=True, env=git)
    (repo / "untracked.txt").write_bytes(b"y" * 200)
    (repo / ".gpu_bundle").mkdir()
    (repo / ".gpu_bundle" / "ignored.bin").write_bytes(b"z" * 5000)
    repo_bytes = 13 + 1000 + 200
    call = repo_bytes + sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert layout.check_call(repo, bundle, call) == (repo_bytes, call)
    run = _layout("check-call", repo, bundle, call)
    assert run.returncode == 0 and run.stdout.split() == [str(repo_bytes), str(call)]
    run = _layout("check-call", repo, bundle, call - 1)
    assert run.returncode == 1
    assert run.stderr == (
        f"gpu_bundle: the repository ({repo_bytes / 2**20:.1f} MiB) and the bundle make {call / 2**20:.1f} MiB,"
        f" over the {(call - 1) / 2**20:.0f} MiB of one device call (docs/gpu_check.md)\n"
    )


def test_a_non_empty_target_that_is_no_install_of_the_bundle_is_refused_untouched(bundle: Path, tmp_path: Path) -> None:
    """A user's folder named like a bundled package inside TARGET: pip --target --upgrade used to
    replace it (and print "installed"); now the install is refused and nothing in TARGET changes."""
    target = tmp_path / "site"
    (target / "tinypkg").mkdir(parents=True)
    (target / "tinypkg" / "my_notes.txt").write_text("the user's own file")
    run = _install(bundle, target)
    assert run.returncode == 1, run.stdout
    assert run.stderr.strip() == (
        f"install.sh: TARGET '{target}' is not empty and holds no install of this project's bundle (no "
        ".unilab-bundle): choose a new or empty folder; nothing was installed"
    )
    assert (target / "tinypkg" / "my_notes.txt").read_text() == "the user's own file"
    assert sorted(p.name for p in target.iterdir()) == ["tinypkg"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site.")]  # no staging folder left


def test_an_empty_target_and_a_previous_install_are_installed_into(bundle: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _install(bundle, empty).returncode == 0 and (empty / "tinypkg" / "bin" / "lib.so").is_file()
    (bundle / "python_version").write_text((bundle / "python_version").read_text() + "\n")  # another bundle
    _write_sums(bundle)
    again = _install(bundle, empty)
    assert again.returncode == 0 and f"installed into {empty}" in again.stdout and "already" not in again.stdout
    assert (empty / ".unilab-bundle").read_text().strip() == hashlib.sha256(
        (bundle / "SHA256SUMS").read_bytes()
    ).hexdigest()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".empty.")]


def test_a_wheel_the_sums_do_not_list_is_refused(bundle: Path, tmp_path: Path) -> None:
    """A wheel dropped into wheels/ after the bundle was made passed the checksum check (which
    reads only the listed files) and was installed; now it is refused by name."""
    extra = bundle / "wheels" / "evil-1.0-py3-none-any.whl"
    shutil.copy(bundle / "wheels" / "tinypkg-0.3-py3-none-any.whl", extra)
    target = tmp_path / "site"
    run = _install(bundle, target)
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"install.sh: {bundle} holds files SHA256SUMS does not list (not part of this bundle): "
        "./wheels/evil-1.0-py3-none-any.whl  ; nothing was installed"
    )
    assert not target.exists()


@pytest.mark.parametrize("program", ["true", "bash", "echo"])
def test_a_program_that_is_not_python_gets_one_line(bundle: Path, tmp_path: Path, program: str) -> None:
    run = _install(bundle, tmp_path / "site", python=shutil.which(program))
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"install.sh: PYTHON '{shutil.which(program)}' is not a Python interpreter (it did not run: "
        f"{shutil.which(program)} -c 'import sys'); nothing was installed"
    )
    assert not (tmp_path / "site").exists()


def test_a_cached_build_is_used_when_its_key_matches(tmp_path: Path) -> None:
    """gpu_bundle_warp.py from-cache: the shared cache's xz and record for OUT's key are unpacked
    (sha256 checked) with one line; a record that does not match is refused; no entry: exit 1."""
    script = [sys.executable, str(ROOT / "scripts" / "gpu_bundle_warp.py"), "from-cache"]
    cache, out = tmp_path / "shared", tmp_path / "cache" / "warp-0123456789abcdef.so"
    cache.mkdir()
    missing = subprocess.run([*script, str(cache), str(out)], capture_output=True, text=True)
    assert missing.returncode == 1 and "no cached build for key 0123456789abcdef" in missing.stdout
    (cache / "warp-0123456789abcdef.so.xz").write_bytes(lzma.compress(LIBRARY, preset=1))
    record = {"sha256": hashlib.sha256(LIBRARY).hexdigest(), "needed": ["libnvrtc.so.13"], "build_seconds": 1347}
    (cache / "warp-0123456789abcdef.so.json").write_text(json.dumps(record))
    used = subprocess.run([*script, str(cache), str(out)], capture_output=True, text=True)
    assert used.returncode == 0, used.stderr
    assert used.stdout.strip().startswith(
        f"gpu_bundle: warp.so: using the cached build {cache / 'warp-0123456789abcdef.so.xz'} (key 0123456789abcdef"
    )
    assert out.read_bytes() == LIBRARY and json.loads(Path(f"{out}.json").read_text()) == record
    assert Path(f"{out}.xz").stat().st_mtime >= out.stat().st_mtime  # reused, not compressed again
    out.unlink()
    (cache / "warp-0123456789abcdef.so.json").write_text(json.dumps({**record, "sha256": "0" * 64}))
    refused = subprocess.run([*script, str(cache), str(out)], capture_output=True, text=True)
    assert refused.returncode == 1 and "sha256" in refused.stderr and "not used" in refused.stderr
    assert not out.exists() and not Path(f"{out}.part").exists()


def test_a_newer_bundle_over_a_previous_install_keeps_files_the_user_added(bundle: Path, tmp_path: Path) -> None:
    """Replacing a previous install deleted everything in it; now a file the user added there
    refuses the install (by name) and stays, while Python's own __pycache__ does not count."""
    target = tmp_path / "site"
    assert _install(bundle, target).returncode == 0
    listed = (target / ".unilab-bundle-files").read_text().split()
    assert "tinypkg/__init__.py" in listed and "tinypkg/bin/lib.so" in listed
    (target / "tinypkg" / "__pycache__").mkdir()
    (target / "tinypkg" / "__pycache__" / "__init__.cpython.pyc").write_bytes(b"cache")  # written by using it
    (bundle / "python_version").write_text((bundle / "python_version").read_text() + "\n")  # a newer bundle
    _write_sums(bundle)
    (target / "tinypkg" / "my_notes.txt").write_text("the user's own file")
    run = _install(bundle, target)
    assert run.returncode == 1, run.stdout
    assert run.stderr.strip() == (
        f"install.sh: TARGET '{target}' holds files its previous install did not write (tinypkg/my_notes.txt): "
        "move them out or choose a new folder; nothing was installed"
    )
    assert (target / "tinypkg" / "my_notes.txt").read_text() == "the user's own file"
    (target / "tinypkg" / "my_notes.txt").unlink()
    again = _install(bundle, target)  # the cache alone does not stop it
    assert again.returncode == 0 and f"installed into {target}" in again.stdout, again.stderr
    (target / ".unilab-bundle-files").unlink()  # as an older install.sh left it
    (bundle / "python_version").write_text((bundle / "python_version").read_text() + "\n")
    _write_sums(bundle)
    old = _install(bundle, target)
    assert old.returncode == 1 and "holds an install by an older install.sh, which kept no list" in old.stderr
    assert (target / "tinypkg" / "bin" / "lib.so").is_file()


def test_the_bundle_builder_with_a_python_that_does_not_run_is_one_line(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "gpu_bundle.sh"
    env = {**os.environ, "PYTHON": "/bin/false"}
    run = subprocess.run(["bash", str(script), str(tmp_path / "b")], capture_output=True, text=True, env=env)
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "gpu_bundle: PYTHON '/bin/false' does not run as a Python interpreter; set PYTHON to the project's "
        "(default python3)"
    )
    assert not (tmp_path / "b").exists()
