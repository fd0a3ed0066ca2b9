"""The live web viewer: bad input in one line, the training viewer's copies, the scene's arrows,
and a page rendered by headless Chromium (robot pixels on the canvas, not a blank page).

``python tests/test_viewer.py docs/images/viewer.png`` regenerates the picture in docs/viewer.md
(G1 tracking, 4 worlds, the reference ghosts), with the same browser helper.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("mjviser")

from PIL import Image  # noqa: E402
from test_cli_train import TINY  # noqa: E402

from unilab_gpu.cli import train as train_cli  # noqa: E402
from unilab_gpu.cli.play import main as play_main  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.viewer.feed import WorldSnapshot  # noqa: E402
from unilab_gpu.viewer.live import LiveViewer, format_numbers  # noqa: E402
from unilab_gpu.viewer.scene import heading_arrows  # noqa: E402


@pytest.fixture
def busy_port():
    """A port on 127.0.0.1 that another socket listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


# -- bad input ---------------------------------------------------------------------------------
def test_play_viewer_on_a_busy_port_is_one_line(busy_port, tmp_path, capsys) -> None:
    assert play_main([str(tmp_path), "--viewer", "--port", str(busy_port)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--port {busy_port}: 127.0.0.1:{busy_port} is in use" in line


def test_play_viewer_of_a_run_without_checkpoint_is_one_line(tmp_path, capsys) -> None:
    assert play_main([str(tmp_path), "--viewer", "--port", "0"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("unilab-play: error:") and "checkpoint" in line and str(tmp_path) in line


def test_play_viewer_with_more_worlds_than_envs_is_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        play_main([str(tmp_path), "--viewer", "--worlds", "5", "--num-envs", "4"])
    assert exit_info.value.code == 2
    assert "--worlds 5 is larger than the env's 4 worlds (--num-envs)" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("viewer_worlds=5", "'viewer_worlds' 5 is larger than the env's 4 worlds (env.num_envs)"),
        ("viewer_worlds=0", "'viewer_worlds' must be >= 1, got 0"),
        ("viewer_port=70000", "'viewer_port' must be a port in [0, 65535]"),
    ],
)
def test_train_viewer_bad_settings_are_one_line_and_write_nothing(tmp_path, capsys, override, message) -> None:
    assert train_cli.main([*TINY, "viewer=true", override, f"run_root={tmp_path}"]) == 2
    assert message in one_line(capsys.readouterr().err)
    assert not any(tmp_path.iterdir())  # no run folder


def test_train_viewer_on_a_busy_port_is_one_line_and_writes_nothing(busy_port, tmp_path, capsys) -> None:
    assert train_cli.main([*TINY, "viewer=true", f"viewer_port={busy_port}", f"run_root={tmp_path}"]) == 2
    assert f"viewer_port {busy_port}: 127.0.0.1:{busy_port} is in use" in one_line(capsys.readouterr().err)
    assert not any(tmp_path.iterdir())


# -- training ----------------------------------------------------------------------------------
def test_training_viewer_then_play_viewer_of_the_run(tmp_path, capsys, monkeypatch) -> None:
    viewers = []
    start = train_cli.start_training_viewer

    def keep(cfg, trainer):
        viewers.append(start(cfg, trainer))
        return viewers[-1]

    monkeypatch.setattr(train_cli, "start_training_viewer", keep)
    began = time.monotonic()
    run_dir = tmp_path / "run"
    overrides = ["viewer=true", "viewer_port=0", "total_env_steps=40", f"run_dir={run_dir}"]
    assert train_cli.main([*TINY, *overrides]) == 0
    elapsed = time.monotonic() - began
    out = capsys.readouterr().out
    (live,) = viewers
    assert f"viewer: {live.url}  (4 of 4 worlds)" in out
    assert 1 <= live.feed.copies <= 10 * elapsed + 1  # the first iteration copies, then at most 10 a second
    snapshot = live.feed.read()
    assert snapshot.qpos.shape == (4, 1) and snapshot.episode_step.max() >= 1

    # unilab-play --viewer of the run, from its checkpoint and from its exported ONNX file: the URL
    # line, then the usual stats.
    view = ["--viewer", "--port", "0", "--worlds", "2", "--num-envs", "4", "--steps", "4"]
    for policy in ([str(run_dir)], ["--onnx", str(run_dir / "policy.onnx")]):
        assert play_main([*policy, *view]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert any(line.startswith("viewer: http://127.0.0.1:") and "(2 of 4 worlds; Ctrl-C" in line for line in lines)
        assert any("4 envs x 4 steps" in line for line in lines)


# -- hostile clients -------------------------------------------------------------------------
class ViserClient:
    """A bare websocket client of a viser server that sends GUI updates as a browser would, but
    with any value (viser casts it to the control's type and nothing more)."""

    def __init__(self, live: LiveViewer) -> None:
        import viser
        from websockets.sync.client import connect

        port = live.server.get_port()
        self.socket = connect(f"ws://127.0.0.1:{port}", subprotocols=[f"viser-v{viser.__version__}"], open_timeout=10)
        # viser counts a client as connected (and runs GUI callbacks for it) after its first camera message.
        camera = {"wxyz": [1.0, 0.0, 0.0, 0.0], "position": [3.0, 0.0, 1.0], "fov": 1.0, "near": 0.01, "far": 100.0}
        camera |= {"image_height": 480, "image_width": 640, "look_at": [0.0] * 3, "up_direction": [0.0, 0.0, 1.0]}
        self._send({"type": "ViewerCameraMessage", **camera})
        wait_for_client(live)

    def _send(self, message: dict) -> None:
        import msgspec

        self.socket.send(msgspec.msgpack.encode(message))

    def set(self, control, value) -> None:
        self._send({"type": "GuiUpdateMessage", "uuid": control._impl.uuid, "updates": {"value": value}})

    def close(self) -> None:
        self.socket.close()


def _wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the viewer never applied the update"
        time.sleep(0.02)


def test_gui_values_from_a_hostile_client_are_clamped() -> None:
    env = make_env("pendulum", num_envs=5, device="cpu", compile=False, seed=0, announce=False)
    env.reset()
    live = LiveViewer(env, worlds=2, port=0)
    client = ViserClient(live)
    try:
        # Speed 0 divided the pace by zero (ZeroDivisionError in unilab-play's loop); now the slider's minimum.
        client.set(live.speed_control, 0)
        _wait_until(lambda: live.speed == 0.1)
        live.on_step(0)
        live.on_step(1)
        client.set(live.speed_control, 1e9)
        _wait_until(lambda: live.speed == 4.0)
        client.set(live.speed_control, float("nan"))  # kept: the last good speed
        client.set(live.speed_control, 2.5)
        _wait_until(lambda: live.speed == 2.5)
        assert live.speed_control.value == 2.5
        # A first world past the last one (or below 0) shows the last (first) K worlds instead of failing.
        client.set(live.first_world_control, 10**9)
        _wait_until(lambda: live.feed.first == 3)
        client.set(live.first_world_control, -7)
        _wait_until(lambda: live.feed.first == 0)
        live.on_step(2)
    finally:
        client.close()
        live.close()


def test_clamp_gui() -> None:
    from unilab_gpu.viewer.live import clamp_gui

    assert clamp_gui(0, 0.1, 4.0, 1.0) == 0.1 and clamp_gui(float("inf"), 0.1, 4.0, 1.0) == 4.0
    assert clamp_gui(float("nan"), 0.1, 4.0, 1.5) == 1.5 and clamp_gui("fast", 0.1, 4.0, 1.5) == 1.5
    assert clamp_gui(None, 0, 3, 2) == 2 and clamp_gui("2", 0, 3, 1) == 2.0


# -- scene -------------------------------------------------------------------------------------
def test_command_arrows_turn_with_the_heading() -> None:
    half = np.sqrt(0.5)
    qpos = np.array([[1.0, 2.0, 0.7, half, 0.0, 0.0, half]])  # yawed +90 degrees about z
    arrow = heading_arrows(qpos, np.array([[1.0, 0.0]]), "heading")[0]  # 1 m/s forward in the heading frame
    np.testing.assert_allclose(arrow[0], [1.0, 2.0, 1.3])  # from 0.6 m above the root
    np.testing.assert_allclose(arrow[1] - arrow[0], [0.0, 1.0, 0.0], atol=1e-12)  # forward is world +y
    world = heading_arrows(qpos, np.array([[1.0, 0.0]]), "world")[0]
    np.testing.assert_allclose(world[1] - world[0], [1.0, 0.0, 0.0])  # a world-frame velocity is not turned


def test_velocity_scene_follows_the_chosen_world_and_can_hide_the_others() -> None:
    env = make_env("g1_velocity", num_envs=3, device="cpu", compile=False, seed=0, announce=False)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.action_dim))
    live = LiveViewer(env, worlds=2, port=0, mode="train")
    try:
        live.feed.show_from(1)  # worlds 1 and 2
        scene = live.scene
        for followed, hide in ((0, False), (1, False), (1, True)):
            scene.scene.env_idx, scene.scene.show_only_selected = followed, hide
            live.feed.maybe_copy(force=True)
            assert live.draw()
            points = scene._arrows.points
            command = env.command_manager.get("twist").command[1:3].numpy()
            shown = [followed] if hide else [0, 1]
            assert points.shape == (2 * len(shown), 2, 3)
            # The followed world's root is at the origin (its arrows start 0.6 m above it), the
            # other one stands `spacing` away along y, and an arrow's length is the command's speed.
            for i, world in enumerate(shown):
                start = points[i, 0]
                expected_y = (world - followed) * scene.spacing
                root = env.sim.state.qpos[1 + world, :3].numpy() - env.sim.state.qpos[1 + followed, :3].numpy()
                np.testing.assert_allclose(start, root + [0.0, expected_y, 0.6], atol=1e-5)
                length = np.linalg.norm(points[i, 1] - points[i, 0])
                assert length == pytest.approx(np.linalg.norm(command[world, :2]), abs=1e-5)
    finally:
        live.close()


def test_numbers_table_has_a_column_per_world() -> None:
    snapshot = WorldSnapshot(
        first=2,
        qpos=np.zeros((2, 1)),
        episode_step=np.array([7, 120]),
        reward=np.array([0.0125, -0.5]),
        episode_return=np.array([1.234, 9.0]),
        errors={"lin_vel_error": np.array([0.25, 1.0])},
        reference_qpos=None,
        command=None,
        base_velocity=None,
    )
    assert format_numbers(snapshot).splitlines() == [
        "| world | 2 | 3 |",
        "|---|---|---|",
        "| episode step | 7 | 120 |",
        "| reward | 0.013 | -0.500 |",
        "| return | 1.23 | 9.00 |",
        "| lin vel error | 0.250 | 1.000 |",
    ]


# -- the page in a browser ---------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--use-angle=swiftshader",  # WebGL on the CPU
    "--enable-unsafe-swiftshader",
    "--window-size=1280,800",
    "--remote-debugging-port=0",
]


class HeadlessChromium:
    """A headless Chromium driven through the DevTools protocol (navigate, screenshot)."""

    def __init__(self) -> None:
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="unilab-chromium-")
        self.process = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        self._id = 0

    def call(self, method: str, **params) -> dict:
        self._id += 1
        self.socket.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self._id:
                return message.get("result", {})

    def screenshot(self) -> np.ndarray:
        """The page as ``(H, W, 3)`` uint8."""
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


def show(live: LiveViewer, env, qpos: torch.Tensor | None = None) -> None:
    """Put ``qpos`` into every world (when given), copy and draw now."""
    if qpos is not None:
        env.sim.state.qpos.copy_(qpos)
    assert live.feed.maybe_copy(force=True)
    live.draw()  # unless the drawing thread was first


def wait_for_client(live: LiveViewer, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not live.server.get_clients():
        assert time.monotonic() < deadline, "the page never connected to the viewer"
        time.sleep(0.1)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")
def test_headless_chromium_renders_the_robots(tmp_path) -> None:
    """Screenshots of the page with the pendulums hanging down and swung up differ where the
    pendulums are (robot pixels drawn by WebGL); a blank or frozen canvas would not differ."""
    env = make_env("pendulum", num_envs=3, device="cpu", compile=False, seed=0, announce=False)
    env.reset()
    live = LiveViewer(env, worlds=3, port=0)
    # Software WebGL on 2 busy cores spends ~35 s prefiltering the HDR environment map before
    # the first frame; plain lights show the same geometry.
    live.server.scene.configure_environment_map(hdri=None)
    browser = HeadlessChromium()
    try:
        down = torch.zeros_like(env.sim.state.qpos)
        show(live, env, down)
        browser.call("Page.navigate", url=live.url)
        wait_for_client(live)
        changed = 0
        for _ in range(20):  # the first frames may still be loading meshes
            time.sleep(1.5)
            first = browser.screenshot()
            show(live, env, down + torch.pi / 2)
            time.sleep(1.5)
            second = browser.screenshot()
            show(live, env, down)
            # Ignore the GUI panel (right) and notifications (top left): the 3D canvas is the rest.
            height, width, _ = first.shape
            canvas = (slice(height // 4, height), slice(0, int(width * 0.7)))
            diff = np.abs(first[canvas].astype(int) - second[canvas].astype(int)).sum(axis=-1)
            changed = int((diff > 60).sum())
            if changed > 300:
                break
        Image.fromarray(second).save(tmp_path / "viewer.png")
        assert changed > 300, f"only {changed} pixels changed when the pendulums swung up: nothing rendered"
        assert first[canvas].std() > 5  # not a blank canvas
    finally:
        browser.close()
        live.close()


def write_docs_picture(path: str) -> None:
    """The picture of docs/viewer.md: G1 tracking, 4 worlds with their reference ghosts."""
    env = make_env("g1_tracking", num_envs=4, device="cpu", compile=False, seed=0, announce=False)
    env.reset()
    live = LiveViewer(env, worlds=4, port=0)
    browser = HeadlessChromium()
    try:
        zeros = torch.zeros(env.num_envs, env.action_dim)
        for _ in range(40):
            env.step(zeros)
        show(live, env)
        browser.call("Page.navigate", url=live.url)
        wait_for_client(live)
        time.sleep(60)  # meshes and the environment map load in the software renderer
        Image.fromarray(browser.screenshot()).save(path)
    finally:
        browser.close()
        live.close()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    write_docs_picture(sys.argv[1])
