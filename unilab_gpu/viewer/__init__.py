"""The live web viewer (``unilab-play --viewer``, ``unilab-train viewer=true``).

Map:
    checks  before a viewer starts: the port is free, the extra is installed
    feed    StateFeed: throttled, non-blocking host copies of K worlds' state (no viser needed)
    scene   WorldsScene: K worlds side by side (on a terrain: where they stand), reference ghosts, command arrows
    live    LiveViewer: the server on 127.0.0.1, its controls, the drawing thread, play pacing

``scene`` and ``live`` need the ``viewer`` extra (``pip install "unilab-gpu[viewer]"``).
"""
