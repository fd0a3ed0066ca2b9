"""scripts/rollout_gif.py: an MP4 becomes a GIF with the asked frame rate, centre crop and width."""

from __future__ import annotations

import numpy as np
import pytest
from script_helpers import load_script

iio = pytest.importorskip("imageio.v3")
pytest.importorskip("imageio_ffmpeg")


def test_mp4_to_gif_keeps_every_nth_frame_and_the_centre_at_the_asked_width(tmp_path) -> None:
    # 2 s at 50 fps of a bar sliding across a 160 x 128 picture (MP4 sizes are multiples of 16).
    frames = np.full((100, 128, 160, 3), 200, dtype=np.uint8)
    for i, frame in enumerate(frames):
        frame[40:80, i : i + 20] = (200, 40, 40)
    mp4 = tmp_path / "clip.mp4"
    iio.imwrite(mp4, frames, fps=50)
    gif = tmp_path / "clip.gif"
    gif.write_bytes(load_script("rollout_gif").mp4_to_gif(mp4, fps=12.5, width=60, crop=0.75))
    decoded = iio.imread(gif, index=None)
    assert decoded.shape[:3] == (25, 48, 60)  # 2 s x 12.5 fps; the centre 120 x 96 scaled to 60 wide
    # The bar moved: every 4th source frame, 4 px a frame at full size, 2 px at half; column 20
    # of the full frame is column 0 of the crop.
    bar = [np.nonzero(f[24, :, 0].astype(int) - f[24, :, 1].astype(int) > 80)[0] for f in decoded[:10]]
    assert np.allclose(np.diff([b.mean() for b in bar[5:]]), 2.0, atol=0.6), bar
    assert bar[0].size == 0 or bar[0].max() < 2  # frame 0's bar (columns 0-19) lies left of the crop
