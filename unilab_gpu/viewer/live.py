"""The live web viewer: a viser server on 127.0.0.1, its controls, and the thread that draws.

:class:`LiveViewer` serves K worlds of a running env (:mod:`unilab_gpu.viewer.scene`) from the
host copies of a :class:`~unilab_gpu.viewer.feed.StateFeed`; a daemon thread reads the latest
copy ``rate_hz`` times a second and redraws while a browser is connected. Two modes:

- ``play`` (``unilab-play --viewer``): :meth:`LiveViewer.on_step`, called after every env step,
  copies the state and paces the rollout: pause, single steps, speed (a real-time factor).
- ``train`` (``unilab-train viewer=true``): the trainer calls the feed's ``maybe_copy`` after each
  iteration (at most ``rate_hz`` copies a second, never a wait); "Pause" only freezes the picture.

Controls, in the panel: pause / step / speed (play), which worlds (the first of the K shown),
per-world numbers (episode step, reward, return, the task's tracking or velocity errors), and
mjviser's camera controls (the world the camera follows, "Track camera").
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import threading
import time
from typing import Any

import viser

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.viewer.checks import HOST, PortInUseError, check_port_free
from unilab_gpu.viewer.feed import StateFeed, WorldSnapshot
from unilab_gpu.viewer.scene import WorldsScene


def _quiet():
    """Hide viser's own banner and log lines unless ``UNILAB_VERBOSE=1``."""
    if os.environ.get("UNILAB_VERBOSE", "") not in ("", "0"):
        return contextlib.nullcontext()
    return contextlib.redirect_stdout(io.StringIO())


SPEED_RANGE = (0.1, 4.0)
"""The play speed's slider range (x real time); a value a client sends is clamped into it."""


def clamp_gui(value: Any, low: float, high: float, fallback: float) -> float:
    """A number from the browser as the server may use it: clamped to ``[low, high]``. Any
    websocket client can send any value, not only what the slider offers (0 would divide the
    pace by zero); NaN or a non-number leaves ``fallback``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return fallback
    return fallback if math.isnan(number) else min(max(number, low), high)


def format_numbers(snapshot: WorldSnapshot) -> str:
    """Markdown table of the per-world numbers: one column per world, one row per quantity."""
    worlds = range(snapshot.first, snapshot.first + len(snapshot.qpos))
    rows = [
        ("episode step", [f"{int(v)}" for v in snapshot.episode_step]),
        ("reward", [f"{v:.3f}" for v in snapshot.reward]),
        ("return", [f"{v:.2f}" for v in snapshot.episode_return]),
    ]
    rows += [(name.replace("_", " "), [f"{v:.3f}" for v in values]) for name, values in snapshot.errors.items()]
    lines = ["| world | " + " | ".join(str(w) for w in worlds) + " |", "|---" * (len(worlds) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(values) + " |" for name, values in rows]
    return "\n".join(lines)


class LiveViewer:
    """A viser server showing ``worlds`` worlds of ``env``; see the module docstring.

    Args:
      env: the running env.
      worlds: K, the number of worlds shown (at most ``env.num_envs``).
      port: TCP port on 127.0.0.1 (0: any free one; :attr:`url` says which).
      mode: ``"play"`` or ``"train"``.
      rate_hz: host copies and redraws per second.
      field: how the user named the port and worlds settings, for error messages
        (``"--"`` for ``unilab-play``'s flags, ``"viewer_"`` for ``unilab-train``'s keys).
    """

    def __init__(
        self,
        env: ManagerBasedRlEnv,
        worlds: int = 4,
        port: int = 8080,
        mode: str = "play",
        rate_hz: float = 10.0,
        field: str = "--",
    ) -> None:
        if mode not in ("play", "train"):
            raise ValueError(f"viewer: mode must be 'play' or 'train', got {mode!r}")
        self.feed = StateFeed(env, worlds, rate_hz, field=field)
        check_port_free(port, f"{field}port")
        self.env, self.mode = env, mode
        self.period = 1.0 / rate_hz
        with _quiet():
            self.server = viser.ViserServer(host=HOST, port=port, verbose=False)
        if port and self.server.get_port() != port:  # taken between the check and the bind
            self.close()
            raise PortInUseError(f"viewer: {field}port {port}: {HOST}:{port} is in use; choose another port")
        self.url = f"http://{HOST}:{self.server.get_port()}"
        feed = self.feed
        on_terrain = env.terrain is not None  # the worlds stand on their sub-terrains: no side-by-side shift
        self.scene = WorldsScene(
            self.server, env.sim.mj_model, worlds, feed.has_reference, feed.has_command, on_terrain=on_terrain
        )
        self.paused = False
        self.speed = 1.0
        self._steps_requested = 0
        self._stop = threading.Event()
        self._add_controls()
        self._drawn = -1
        self.drawn = 0
        """Pictures drawn so far."""
        self._draw_lock = threading.Lock()
        self._thread = threading.Thread(target=self._draw_loop, name="unilab-viewer", daemon=True)
        self._thread.start()

    # -- controls ------------------------------------------------------------------------------
    def _add_controls(self) -> None:
        gui, feed, env = self.server.gui, self.feed, self.env
        # Every value the server reads from the panel is clamped: a websocket client may send anything.
        with gui.add_folder("Run"):
            pause = gui.add_checkbox("Pause", initial_value=False, hint="Hold the rollout (play), the picture (train)")
            pause.on_update(lambda _: setattr(self, "paused", pause.value is True))
            self.pause_control = pause
            if self.mode == "play":
                step = gui.add_button("Step", hint="One env step while paused")
                step.on_click(lambda _: self.request_step())
                low, high = SPEED_RANGE
                speed = gui.add_slider("Speed", min=low, max=high, step=0.1, initial_value=1.0, hint="x real time")
                speed.on_update(lambda _: self._set_speed(speed))
                self.speed_control = speed
        if env.num_envs > feed.worlds:
            with gui.add_folder("Worlds"):
                first = gui.add_slider(
                    "First world",
                    min=0,
                    max=env.num_envs - feed.worlds,
                    step=1,
                    initial_value=0,
                    hint=f"Show worlds first .. first + {feed.worlds - 1} of {env.num_envs}",
                )
                last = env.num_envs - feed.worlds
                first.on_update(lambda _: feed.show_from(round(clamp_gui(first.value, 0, last, feed.first))))
                self.first_world_control = first
        with gui.add_folder("Numbers"):
            self._numbers = gui.add_markdown("waiting for the first step ...")
        self.scene.scene.create_scene_gui(camera_azimuth=135.0, camera_elevation=15.0)

    def _set_speed(self, control) -> None:
        self.speed = clamp_gui(control.value, *SPEED_RANGE, fallback=self.speed)
        if control.value != self.speed:  # show the browser the speed in use
            control.value = self.speed

    def request_step(self) -> None:
        """Advance one env step while paused (play)."""
        self._steps_requested += 1

    # -- drawing -------------------------------------------------------------------------------
    def _draw_loop(self) -> None:
        while not self._stop.wait(self.period):
            if self.paused and self.mode == "train":
                continue
            if self.server.get_clients():  # nobody watching: nothing to draw or send
                self.draw()

    def draw(self) -> bool:
        """Draw the latest copy if it is new; returns whether it drew."""
        with self._draw_lock:  # the drawing thread, or a caller that wants the picture now
            snapshot = self.feed.read()
            if snapshot is None or self.feed.copies == self._drawn:
                return False
            self._drawn = self.feed.copies
            with self.server.atomic():  # one wake-up of the server's thread per picture, not one per part
                self.scene.show(snapshot)
                self._numbers.content = format_numbers(snapshot)
            self.drawn += 1
            return True

    # -- play ----------------------------------------------------------------------------------
    def on_step(self, step: int) -> None:
        """After env step ``step`` of a rollout: copy the state (throttled), keep the pace
        (``step_dt / speed`` of wall time a step) and hold while paused, unless a step is asked."""
        now = time.monotonic()
        if step == 0:
            self._next = now
        self.feed.maybe_copy(force=self.paused)
        self._next = max(self._next + self.env.step_dt / self.speed, now - 0.25)  # catch up at most 0.25 s
        time.sleep(max(0.0, self._next - time.monotonic()))
        if not self.paused:
            return
        while self.paused and not self._steps_requested and not self._stop.is_set():
            time.sleep(0.02)
        if self._steps_requested:
            self._steps_requested -= 1
        self._next = time.monotonic()  # no burst of catch-up steps after a pause

    def close(self) -> None:
        """Stop drawing and the server."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(timeout=2.0)
        with _quiet():
            self.server.stop()
