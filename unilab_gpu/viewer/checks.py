"""Checks made before a viewer starts, so that bad input fails in one line before the env is built."""

from __future__ import annotations

import importlib.util
import socket

HOST = "127.0.0.1"
"""The viewer listens on the loopback interface only (reach it from elsewhere with an SSH tunnel)."""


class PortInUseError(ValueError):
    """The requested viewer port is taken."""


def check_port_free(port: int, field: str = "--port") -> None:
    """Raise :class:`PortInUseError` (one line naming ``field``) when ``HOST:port`` is taken.

    viser would silently move on to the next free port; a URL other than the one asked for is
    worse than a clear error. Port 0 asks for any free port."""
    if not 0 <= port <= 65535:
        raise ValueError(f"viewer: {field} must be in [0, 65535] (0: any free port), got {port}")
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind((HOST, port))
        except OSError:
            raise PortInUseError(
                f"viewer: {field} {port}: {HOST}:{port} is in use; choose another port (0 picks a free one)"
            ) from None


def check_viewer_extra(what: str = "--viewer") -> None:
    """Raise ``ValueError`` (one line) when the ``viewer`` extra (mjviser, viser) is missing."""
    missing = [name for name in ("viser", "mjviser") if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"{what} needs {', '.join(missing)}: pip install 'unilab-gpu[viewer]'")
