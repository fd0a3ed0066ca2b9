"""Episode start samplers: which (clip, frame) each reset begins at, drawn on the device.

Every sampler draws with static shapes from a caller-owned ``torch.Generator`` on the library's
device (or, with ``generator=None``, from the device's default generator, which
``torch.manual_seed`` seeds) and never reads a device value on the host, so ``sample`` and ``update`` can sit inside a
captured env step. ``update`` takes fixed-size rows with a ``valid`` mask (padding rows of a
fixed-capacity reset buffer are invalid and have no effect).

``sample(num)`` is ``place(u, v)`` applied to two ``(num,)`` tensors of uniform numbers drawn from
the generator. ``torch.compile`` cannot trace calls that take an explicit generator: with one,
code compiled with ``fullgraph=True`` draws the numbers outside and calls
:meth:`StartSampler.place` (pure tensor math) inside; with the default generator, ``sample``
compiles as it is. ``update`` always does.

Clip weights (``MotionLibrary.clip_weight``) scale how often each clip's frames are drawn; with
all weights equal every sampler draws exactly as without weights.
"""

from __future__ import annotations

import math

import torch

from unilab_gpu.motion.library import MotionLibrary


def _check_generator(library: MotionLibrary, generator: torch.Generator | None) -> None:
    if generator is not None and torch.device(generator.device).type != library.device.type:
        raise ValueError(f"the sampler's generator is on {generator.device}, the motion library on {library.device}")


class StartSampler:
    """Base class: ``sample(num) -> (clip, frame)``; ``update`` does nothing unless overridden."""

    def __init__(self, library: MotionLibrary, generator: torch.Generator | None = None) -> None:
        _check_generator(library, generator)
        self.library = library
        self.generator = generator

    def sample(self, num: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``num`` start points: clip ids and frame indices, int64 ``(num,)`` each."""
        u = torch.rand(2, num, generator=self.generator, device=self.library.device)
        return self.place(u[0], u[1])

    def place(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Start points (clip, frame), int64 ``(N,)`` each, from uniform numbers ``u``, ``v`` in [0, 1) ``(N,)``."""
        raise NotImplementedError

    def update(self, clip: torch.Tensor, frame: torch.Tensor, failed: torch.Tensor, valid: torch.Tensor) -> None:
        """Learn from ended episodes; ``(N,)`` clip, frame (where each ended), failed and valid (bool)."""
        del clip, frame, failed, valid


class UniformStartSampler(StartSampler):
    """Every frame of a clip equally likely, each frame of clip ``c`` with probability proportional
    to its weight ``w_c`` (so clip ``c``'s share is ``w_c · length_c / Σ w · length``).

    The table is laid out as consecutive intervals of width ``w_c`` per frame; ``u`` picks a point
    on it (one float32 uniform: exact for up to 2**24 frames of weight 1, 93 hours at 50 fps).
    """

    def __init__(self, library: MotionLibrary, generator: torch.Generator | None = None) -> None:
        super().__init__(library, generator)
        mass = library.clip_weight * library.clip_length
        self._mass_start = torch.cumsum(mass, dim=0) - mass  # (C,) where each clip's interval starts
        self._mass_total = float(mass.sum())

    def place(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lib = self.library
        point = u * self._mass_total
        clip = (torch.searchsorted(self._mass_start, point, right=True) - 1).clamp(0, lib.num_clips - 1)
        frame = ((point - self._mass_start[clip]) / lib.clip_weight[clip]).long()
        return clip, torch.minimum(frame.clamp_min(0), lib.clip_length[clip] - 1)


class ClipStartSampler(StartSampler):
    """A clip drawn with probability proportional to its weight, from its first frame."""

    def __init__(self, library: MotionLibrary, generator: torch.Generator | None = None) -> None:
        super().__init__(library, generator)
        self._weight_end = torch.cumsum(library.clip_weight, dim=0)  # (C,)

    def place(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        point = u * self._weight_end[-1]
        clip = torch.searchsorted(self._weight_end, point, right=True).clamp_max(self.library.num_clips - 1)
        return clip, torch.zeros_like(clip)


class AdaptiveStartSampler(StartSampler):
    """Start more often where episodes fail, after BeyondMimic's adaptive sampling (Liao et al., 2025).

    Each clip is cut into bins of ``bin_seconds`` (the last one may be shorter); the ``K`` bins of
    all clips are numbered clip by clip, so ``failure_ema (K,)`` holds the failure statistics per
    clip and per time bin (``clip_bins (C,)``: how many bins each clip has). On every
    :meth:`update`, ``ema ← (1 − ema_rate) · ema + ema_rate · n`` with ``n`` the failed, valid
    episodes that ended in the bin. With ``w (K,)`` the weight of each bin's clip, the bin
    distribution is

        p = (1 − uniform_ratio) · w·ema / Σ w·ema + uniform_ratio · w / Σ w

    (the failure share uniform while Σ ema = 0); with equal weights, BeyondMimic's
    ``(1 − uniform_ratio) · ema / Σ ema + uniform_ratio / K``.

    A bin is drawn by inverse-CDF sampling (cumsum + searchsorted), then a frame uniformly inside
    it. ``entropy ()`` (nats; ``log K`` when uniform) and ``top_bin ()`` (most likely bin) are
    device tensors refreshed by every update, for logging.

    Args:
        library: the motion table.
        generator: RNG on the library's device; ``None``: the device's default generator.
        bin_seconds: bin length in seconds.
        uniform_ratio: share of uniform sampling, in [0, 1].
        ema_rate: weight of the newest failure counts, in (0, 1].
    """

    def __init__(
        self,
        library: MotionLibrary,
        generator: torch.Generator | None = None,
        bin_seconds: float = 1.0,
        uniform_ratio: float = 0.1,
        ema_rate: float = 0.001,
    ) -> None:
        super().__init__(library, generator)
        if not 0.0 <= uniform_ratio <= 1.0:
            raise ValueError(f"uniform_ratio must be in [0, 1], got {uniform_ratio}")
        if not 0.0 < ema_rate <= 1.0:
            raise ValueError(f"ema_rate must be in (0, 1], got {ema_rate}")
        if bin_seconds <= 0:
            raise ValueError(f"bin_seconds must be positive, got {bin_seconds}")
        self.uniform_ratio = uniform_ratio
        self.ema_rate = ema_rate
        self.frames_per_bin = max(1, round(bin_seconds * library.fps))
        # Bin tables built on the host (cold path) from the clip lengths.
        lengths = library.clip_length.cpu().tolist()
        per_clip = [math.ceil(n / self.frames_per_bin) for n in lengths]
        bin_clip, bin_first, bin_length, offsets = [], [], [], []
        for c, (n, k) in enumerate(zip(lengths, per_clip, strict=True)):
            offsets.append(len(bin_clip))
            for b in range(k):
                bin_clip.append(c)
                bin_first.append(b * self.frames_per_bin)
                bin_length.append(min(self.frames_per_bin, n - b * self.frames_per_bin))
        dev = library.device
        self.num_bins = len(bin_clip)
        self.bin_clip = torch.tensor(bin_clip, dtype=torch.int64, device=dev)
        self.bin_first_frame = torch.tensor(bin_first, dtype=torch.int64, device=dev)
        self.bin_length = torch.tensor(bin_length, dtype=torch.int64, device=dev)
        self.clip_first_bin = torch.tensor(offsets, dtype=torch.int64, device=dev)
        self.clip_bins = torch.tensor(per_clip, dtype=torch.int64, device=dev)
        self._bin_weight = library.clip_weight[self.bin_clip]
        self._uniform = self._bin_weight / self._bin_weight.sum()
        self.failure_ema = torch.zeros(self.num_bins, device=dev)
        self.probabilities = torch.zeros(self.num_bins, device=dev)
        self.cdf = torch.zeros(self.num_bins, device=dev)
        self.entropy = torch.zeros((), device=dev)
        self.top_bin = torch.zeros((), dtype=torch.int64, device=dev)
        self._counts = torch.zeros(self.num_bins, device=dev)
        self._refresh()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """What the sampler has learned (failure rates per clip and bin), with the bins per clip
        they belong to: a resumed run starts from it."""
        return {"failure_ema": self.failure_ema.detach().clone(), "clip_bins": self.clip_bins.detach().clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict` in place (same addresses, so a captured step keeps working).
        A state without ``clip_bins`` (saved before it was kept) is checked by its bin count only."""
        saved = state["failure_ema"]
        if tuple(saved.shape) != (self.num_bins,):
            raise ValueError(
                f"adaptive sampler state has {tuple(saved.shape)} bins, this motion library {self.num_bins}: "
                "resume with the motion files of the run"
            )
        bins = state.get("clip_bins")
        if bins is not None and bins.tolist() != self.clip_bins.tolist():
            raise ValueError(
                f"adaptive sampler state has {bins.tolist()} bins per clip, this motion library "
                f"{self.clip_bins.tolist()}: resume with the motion files of the run, in the same order"
            )
        self.failure_ema.copy_(saved)
        self._refresh()

    def bin_of(self, clip: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
        """Bin index ``(N,)`` of ``(N,)`` (clip, frame) pairs (clamped into the table)."""
        lib = self.library
        clip = clip.clamp(0, lib.num_clips - 1)
        frame = torch.minimum(frame.clamp_min(0), lib.clip_length[clip] - 1)
        return self.clip_first_bin[clip] + torch.div(frame, self.frames_per_bin, rounding_mode="floor")

    def _refresh(self) -> None:
        weighted = self._bin_weight * self.failure_ema
        total = weighted.sum()
        failures = torch.where(total > 0, weighted / total.clamp_min(1e-30), self._uniform)
        self.probabilities.copy_((1.0 - self.uniform_ratio) * failures + self.uniform_ratio * self._uniform)
        torch.cumsum(self.probabilities, dim=0, out=self.cdf)
        p = self.probabilities
        self.entropy.copy_(-(p * torch.log(p.clamp_min(1e-30))).sum())
        self.top_bin.copy_(torch.argmax(p))

    def update(self, clip: torch.Tensor, frame: torch.Tensor, failed: torch.Tensor, valid: torch.Tensor) -> None:
        bins = self.bin_of(clip, frame)
        self._counts.zero_()
        self._counts.scatter_add_(0, bins, (failed & valid).to(self._counts.dtype))
        self.failure_ema.mul_(1.0 - self.ema_rate).add_(self._counts, alpha=self.ema_rate)
        self._refresh()

    def place(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Inverse CDF: the first bin whose cumulative probability exceeds u (scaled by the total,
        # which float32 cumsum leaves slightly off 1).
        bins = torch.searchsorted(self.cdf, u * self.cdf[-1], right=True).clamp_max(self.num_bins - 1)
        length = self.bin_length[bins]
        offset = torch.minimum((v * length).long(), length - 1)
        return self.bin_clip[bins], self.bin_first_frame[bins] + offset
