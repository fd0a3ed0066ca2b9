"""Reading ``.npz`` motion files into plain dictionaries, with the frame-rate rule shared by all formats."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from unilab_gpu.motion.validation import MotionFormatError, check_fps, require


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path`` (object arrays are refused: no pickles are loaded)."""
    with open(path, "rb") as file:
        head = file.read(6)
    # Exactly what np.load recognises: anything else it would try as a pickle and call "object data".
    if not head.startswith(ZIP_MAGIC + (NPY_MAGIC,)):
        kind = "a text file (a CSV? name it .csv or pass format=csv)" if _is_text(head) else "not a zip archive"
        raise MotionFormatError(f"{path}: not an .npz archive: it is {kind}")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a .npy (or other) file named .npz
            raise MotionFormatError(f"{path}: not an .npz archive but a single {type(loaded).__name__} (a .npy file?)")
        with loaded as data:
            return {key: _array(data, key, path) for key in data.files}
    except MotionFormatError:  # already says what is wrong
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise MotionFormatError(f"{path}: not a readable .npz file ({err})") from err


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
"""First bytes of a zip archive (with files, empty) as ``np.load`` tests them."""

NPY_MAGIC = b"\x93NUMPY"
"""First bytes of a ``.npy`` file."""


def _array(data: np.lib.npyio.NpzFile, key: str, path: str | Path) -> np.ndarray:
    try:
        return data[key]
    except ValueError as err:
        if "allow_pickle" not in str(err):
            raise
        raise MotionFormatError(
            f"{path}: array '{key}' holds Python objects, which are never loaded (no pickles); motion files hold "
            "numbers and names"
        ) from None


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return bool(head) and all(c >= 32 or c in b"\t\r\n" for c in head)


def stored_fps(data: dict[str, Any], input_fps: float | None, source: str) -> float:
    """The file's ``fps``; ``input_fps`` may restate it but not contradict it."""
    fps = check_fps(require(data, "fps", source))
    if input_fps is not None and check_fps(input_fps, "input_fps") != fps:
        raise MotionFormatError(
            f"{source}: the file stores 'fps' = {fps:g}, but an input fps of {input_fps:g} was given"
        )
    return fps
