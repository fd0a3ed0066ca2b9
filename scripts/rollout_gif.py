"""A short, small GIF of a policy's rollout for a README or an issue: ``unilab-play --video``, then
ffmpeg (imageio's own binary) with a palette made for the clip.

Usage::

    python scripts/rollout_gif.py RUN_DIR OUT.gif [--seconds 3] [--width 288] [--fps 12.5] -- [unilab-play options]
    python scripts/rollout_gif.py runs/g1_velocity_cpu docs/images/g1_velocity_walk.gif -- \\
        --task g1_velocity_play --override "commands.twist.params.fixed=[0.5,0.0,0.0]"

The rollout is one world (``--num-envs 1``, world 0) rendered at 640 x 480 and the control rate;
the GIF keeps every n-th frame for ``--fps``, crops the centre (``--crop``: the camera keeps the
robot there) and is scaled to ``--width``. A few hundred KB for
3 s at 288 px wide; the GIF is written atomically.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import imageio_ffmpeg

from unilab_gpu.cli.arguments import MAX_SECONDS, Bound, check_bounds, whole
from unilab_gpu.cli.play import main as play_main
from unilab_gpu.utils.files import check_output, write_atomic


def mp4_to_gif(mp4: Path, fps: float, width: int, crop: float = 1.0) -> bytes:
    """The GIF bytes of ``mp4`` at ``fps`` frames a second, its centre ``crop`` (a fraction of
    width and height) scaled to ``width`` pixels."""
    # One palette for the clip, from the pixels that change; no dithering: its noise defeats GIF's
    # compression and frame differencing (diff_mode), which is most of what keeps the file small.
    graph = (
        f"fps={fps},crop=iw*{crop}:ih*{crop},scale={width}:-2:flags=lanczos,split[a][b];"
        "[a]palettegen=max_colors=48:stats_mode=diff[p];[b][p]paletteuse=dither=none:diff_mode=rectangle"
    )
    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    command = [ffmpeg, "-v", "error", "-i", str(mp4), "-filter_complex", graph, "-loop", "0", "-f", "gif", "-"]
    return subprocess.run(command, check=True, capture_output=True).stdout


MAX_WIDTH = 4096
"""Widest GIF (pixels), a 4K frame: the video it is cut from is 640 pixels wide."""
MAX_FPS = 50.0
"""Most GIF frames a second: the video has one frame per 50 Hz control step, a GIF cannot show more."""

BOUNDS = {
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="env seconds"),
    "--width": Bound(2, MAX_WIDTH, integer=True, meaning="GIF width in pixels"),
    "--fps": Bound(0, MAX_FPS, low_open=True, meaning="GIF frames a second"),
    "--crop": Bound(0, 1, low_open=True, meaning="centre fraction kept"),
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    play_args = args[args.index("--") + 1 :] if "--" in args else []
    args = args[: args.index("--")] if "--" in args else args
    parser = argparse.ArgumentParser(prog="rollout_gif", description=__doc__.split("\n")[0])
    parser.add_argument("run", help="run folder or checkpoint (as for unilab-play)")
    parser.add_argument("out", type=Path, help="the GIF to write")
    parser.add_argument("--seconds", type=float, default=3.0, help="env seconds (default 3)")
    parser.add_argument("--width", type=whole, default=288, help="GIF width in pixels (default 288)")
    parser.add_argument("--fps", type=float, default=12.5, help="GIF frames a second (default 12.5)")
    parser.add_argument("--crop", type=float, default=0.75, help="centre fraction kept (default 0.75)")
    parser.add_argument("--force", action="store_true", help="replace an existing OUT")
    options = parser.parse_args(args)
    check_bounds(parser, options, BOUNDS)
    try:
        check_output(options.out, "OUT", force=options.force, example="rollout.gif")
    except ValueError as error:
        print(f"rollout_gif: error: {error}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        mp4 = Path(folder) / "rollout.mp4"
        play = [options.run, "--num-envs", "1", "--video", str(mp4), "--seconds", str(options.seconds), *play_args]
        status = play_main(play)
        if status != 0 or not mp4.is_file():
            print("rollout_gif: error: unilab-play wrote no video (see above)", file=sys.stderr)
            return status or 1
        gif = mp4_to_gif(mp4, options.fps, options.width, options.crop)
    write_atomic(options.out, lambda file: file.write(gif))
    print(f"rollout_gif: {options.out} ({len(gif) / 1024:.0f} KB, {options.seconds:g} s at {options.fps:g} fps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
