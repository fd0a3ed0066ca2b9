"""Start samplers: distributions (fixed-seed chi-square tests), adaptive updates, no host syncs."""

import math

import numpy as np
import pytest
import torch

from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.library import MotionLibrary
from unilab_gpu.motion.sampler import AdaptiveStartSampler, ClipStartSampler, UniformStartSampler
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.utils.sync_audit import no_host_sync


@pytest.fixture(scope="module")
def lib():
    kin = RobotKinematics.from_robot("g1")
    # 151 and 326 frames at 50 fps: 4 and 7 one-second bins, the last ones 1 and 26 frames long.
    clips = [synthesize_clip(seconds=s, seed=i, kinematics=kin) for i, s in enumerate((3.0, 6.5))]
    return MotionLibrary(clips, body_names=["pelvis"])


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _chi_square_ok(counts: np.ndarray, probs: np.ndarray) -> tuple[float, float]:
    """Pearson's statistic and its bound: dof + 5·sqrt(2·dof), about 5 sigma for a fixed seed."""
    expected = probs * counts.sum()
    stat = float((((counts - expected) ** 2) / expected).sum())
    dof = len(counts) - 1
    return stat, dof + 5.0 * math.sqrt(2.0 * dof)


def test_uniform_covers_every_frame_evenly(lib):
    sampler = UniformStartSampler(lib, _gen())
    clip, frame = sampler.sample(200_000)
    assert clip.dtype == frame.dtype == torch.int64 and clip.shape == (200_000,)
    assert (frame >= 0).all() and (frame < lib.clip_length[clip]).all()
    rows = (lib.clip_start[clip] + frame).numpy()
    counts = np.bincount(rows, minlength=lib.num_frames)
    assert (counts > 0).all()
    stat, bound = _chi_square_ok(counts, np.full(lib.num_frames, 1.0 / lib.num_frames))
    assert stat < bound


def test_clip_start_returns_frame_zero(lib):
    clip, frame = ClipStartSampler(lib, _gen()).sample(1000)
    assert (frame == 0).all()
    counts = np.bincount(clip.numpy(), minlength=2)
    assert counts.sum() == 1000 and abs(counts[0] - 500) < 80  # binomial sd ≈ 16


def test_bins(lib):
    s = AdaptiveStartSampler(lib, _gen())
    assert s.num_bins == 11 and s.frames_per_bin == 50
    assert s.bin_clip.tolist() == [0] * 4 + [1] * 7
    assert s.bin_first_frame.tolist() == [0, 50, 100, 150, 0, 50, 100, 150, 200, 250, 300]
    assert s.bin_length.tolist() == [50, 50, 50, 1, 50, 50, 50, 50, 50, 50, 26]
    assert s.bin_of(torch.tensor([0, 0, 1, 1]), torch.tensor([49, 150, 0, 325])).tolist() == [0, 3, 4, 10]
    np.testing.assert_allclose(s.probabilities.numpy(), 1.0 / 11, rtol=1e-6)
    assert float(s.entropy) == pytest.approx(math.log(11), rel=1e-6)


def _numpy_probs(ema: np.ndarray, ratio: float) -> np.ndarray:
    weights = ema / ema.sum() if ema.sum() > 0 else np.full(len(ema), 1.0 / len(ema))
    return (1 - ratio) * weights + ratio / len(ema)


def test_update_follows_the_ema_formula(lib):
    s = AdaptiveStartSampler(lib, _gen(), uniform_ratio=0.2, ema_rate=0.5)
    clip = torch.tensor([0, 0, 1, 1, 1, 1])
    frame = torch.tensor([10, 60, 210, 220, 299, 320])
    failed = torch.tensor([True, False, True, True, True, True])
    valid = torch.ones(6, dtype=torch.bool)
    s.update(clip, frame, failed, valid)
    ema = np.zeros(11)
    np.add.at(ema, [0, 8, 8, 9, 10], 0.5)  # bins of the failed rows, times ema_rate
    s.update(clip[:1], frame[:1], failed[:1], valid[:1])
    ema = 0.5 * ema
    ema[0] += 0.5
    np.testing.assert_allclose(s.failure_ema.numpy(), ema, rtol=1e-6)
    probs = _numpy_probs(ema, 0.2)
    np.testing.assert_allclose(s.probabilities.numpy(), probs, rtol=1e-6)
    assert float(s.entropy) == pytest.approx(-(probs * np.log(probs)).sum(), rel=1e-6)
    assert int(s.top_bin) == int(np.argmax(probs)) == 0


def test_sample_frequencies_follow_the_weights(lib):
    s = AdaptiveStartSampler(lib, _gen(7), uniform_ratio=0.1, ema_rate=1.0)
    rng = np.random.default_rng(0)
    n = 64
    clip = torch.from_numpy(rng.integers(0, 2, n))
    frame = torch.from_numpy(rng.integers(0, 151, n))
    failed = torch.from_numpy(rng.random(n) < 0.6)
    s.update(clip, frame, failed, torch.ones(n, dtype=torch.bool))
    clip_s, frame_s = s.sample(100_000)
    assert (frame_s < lib.clip_length[clip_s]).all() and (frame_s >= 0).all()
    bins = s.bin_of(clip_s, frame_s).numpy()
    counts = np.bincount(bins, minlength=11)
    stat, bound = _chi_square_ok(counts, s.probabilities.numpy().astype(np.float64))
    assert stat < bound
    # Inside a bin the frame is uniform: bin 5 (clip 1, frames 50..99).
    inside = frame_s[torch.from_numpy(bins == 5)].numpy() - 50
    stat, bound = _chi_square_ok(np.bincount(inside, minlength=50), np.full(50, 0.02))
    assert stat < bound
    # The short last bins (1 and 26 frames) only ever yield their own frames.
    assert set(frame_s[torch.from_numpy(bins == 3)].tolist()) <= {150}


def test_invalid_rows_change_nothing(lib):
    a = AdaptiveStartSampler(lib, _gen(), ema_rate=0.3)
    b = AdaptiveStartSampler(lib, _gen(), ema_rate=0.3)
    clip = torch.tensor([0, 1, 1])
    frame = torch.tensor([5, 100, 300])
    failed = torch.tensor([True, True, False])
    a.update(clip, frame, failed, torch.ones(3, dtype=torch.bool))
    # Same rows plus padding: garbage clip/frame ids, failed, but invalid.
    pad_clip = torch.cat((clip, torch.tensor([-1, 99, 0])))
    pad_frame = torch.cat((frame, torch.tensor([10_000, -5, 7])))
    pad_failed = torch.cat((failed, torch.tensor([True, True, True])))
    valid = torch.tensor([True, True, True, False, False, False])
    b.update(pad_clip, pad_frame, pad_failed, valid)
    torch.testing.assert_close(a.failure_ema, b.failure_ema, rtol=0, atol=0)
    # An all-invalid update only decays the EMA uniformly: the distribution stays.
    before = b.probabilities.clone()
    b.update(pad_clip, pad_frame, pad_failed, torch.zeros(6, dtype=torch.bool))
    torch.testing.assert_close(b.probabilities, before, rtol=1e-6, atol=0)


def test_same_seed_same_samples(lib):
    a = AdaptiveStartSampler(lib, _gen(3)).sample(50)
    b = AdaptiveStartSampler(lib, _gen(3)).sample(50)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_no_host_sync_in_sample_and_update(lib):
    samplers = [UniformStartSampler(lib, _gen()), ClipStartSampler(lib, _gen()), AdaptiveStartSampler(lib, _gen())]
    clip, frame = torch.tensor([0, 1, 1, 0]), torch.tensor([3, 200, 325, 150])
    failed, valid = torch.tensor([True, False, True, True]), torch.tensor([True, True, True, False])
    with no_host_sync():
        for s in samplers:
            s.sample(16)
            s.update(clip, frame, failed, valid)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to build a mismatched generator")
def test_generator_must_be_on_the_library_device(lib):
    with pytest.raises(ValueError, match="generator is on cuda"):
        UniformStartSampler(lib, torch.Generator(device="cuda"))


def test_place_and_update_compile_fullgraph(lib):
    s = AdaptiveStartSampler(lib, _gen(), ema_rate=0.5)
    twin = AdaptiveStartSampler(lib, _gen(), ema_rate=0.5)
    clip, frame = torch.tensor([0, 1, 1]), torch.tensor([3, 200, 325])
    failed, valid = torch.tensor([True, True, False]), torch.ones(3, dtype=torch.bool)
    torch.compile(s.update, fullgraph=True, dynamic=False, backend="eager")(clip, frame, failed, valid)
    twin.update(clip, frame, failed, valid)
    torch.testing.assert_close(s.probabilities, twin.probabilities)
    u, v = torch.rand(2, 32, generator=_gen(9))
    for sampler in (s, UniformStartSampler(lib, _gen()), ClipStartSampler(lib, _gen())):
        got = torch.compile(sampler.place, fullgraph=True, dynamic=False, backend="eager")(u, v)
        ref = sampler.place(u, v)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


def test_place_edges(lib):
    # u, v at the ends of [0, 1) map to the first and last rows / bins / frames.
    u = torch.tensor([0.0, 1.0 - 1e-7])
    clip, frame = UniformStartSampler(lib, _gen()).place(u, u)
    assert clip.tolist() == [0, 1] and frame.tolist() == [0, 325]
    clip, frame = AdaptiveStartSampler(lib, _gen()).place(u, u)
    assert clip.tolist() == [0, 1] and frame.tolist() == [0, 325]


def test_default_generator_is_seeded_by_manual_seed_and_compiles(lib):
    s = AdaptiveStartSampler(lib)
    torch.manual_seed(123)
    a = s.sample(20)
    torch.manual_seed(123)
    b = torch.compile(s.sample, fullgraph=True, dynamic=False, backend="eager")(20)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.fixture(scope="module")
def weighted(lib):
    """The two clips of ``lib`` (151 and 326 frames) with weights 3 and 0.5."""
    kin = RobotKinematics.from_robot("g1")
    clips = [synthesize_clip(seconds=s, seed=i, kinematics=kin) for i, s in enumerate((3.0, 6.5))]
    return MotionLibrary(clips, body_names=["pelvis"], clip_weights=[3.0, 0.5])


def test_uniform_draws_each_clip_by_weight_times_length(weighted):
    clip, frame = UniformStartSampler(weighted, _gen(11)).sample(200_000)
    mass = np.array([3.0 * 151, 0.5 * 326])
    stat, bound = _chi_square_ok(np.bincount(clip.numpy(), minlength=2), mass / mass.sum())
    assert stat < bound
    inside = frame[clip == 1].numpy()  # frames of a clip stay uniform
    stat, bound = _chi_square_ok(np.bincount(inside, minlength=326), np.full(326, 1 / 326))
    assert stat < bound and inside.max() == 325


def test_clip_start_draws_each_clip_by_weight(weighted):
    clip, frame = ClipStartSampler(weighted, _gen(12)).sample(100_000)
    stat, bound = _chi_square_ok(np.bincount(clip.numpy(), minlength=2), np.array([3.0, 0.5]) / 3.5)
    assert stat < bound and not frame.any()


def test_equal_weights_draw_exactly_as_no_weights(lib):
    kin = RobotKinematics.from_robot("g1")
    clips = [synthesize_clip(seconds=s, seed=i, kinematics=kin) for i, s in enumerate((3.0, 6.5))]
    doubled = MotionLibrary(clips, body_names=["pelvis"], clip_weights=[2.0, 2.0])
    u, v = torch.rand(2, 5000, generator=_gen(5))
    for kind in (UniformStartSampler, ClipStartSampler, AdaptiveStartSampler):
        a, b = kind(lib).place(u, v), kind(doubled).place(u, v)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), kind.__name__


def test_adaptive_probabilities_follow_the_clip_weights(weighted):
    s = AdaptiveStartSampler(weighted, _gen(), uniform_ratio=0.2, ema_rate=1.0)
    w = np.array([3.0] * 4 + [0.5] * 7)  # 4 bins of clip 0, 7 of clip 1
    np.testing.assert_allclose(s.probabilities.numpy(), w / w.sum(), rtol=1e-6)  # no failure yet
    clip, frame = torch.tensor([0, 1, 1, 1]), torch.tensor([10, 60, 70, 320])
    s.update(clip, frame, torch.ones(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool))
    ema = np.zeros(11)
    np.add.at(ema, [0, 5, 5, 10], 1.0)  # bins 0, 4 + 1 (twice), 4 + 6
    expected = 0.8 * w * ema / (w * ema).sum() + 0.2 * w / w.sum()
    np.testing.assert_allclose(s.probabilities.numpy(), expected, rtol=1e-6)
    clip_s, frame_s = s.sample(100_000)
    stat, bound = _chi_square_ok(np.bincount(s.bin_of(clip_s, frame_s).numpy(), minlength=11), expected)
    assert stat < bound
    assert s.state_dict()["clip_bins"].tolist() == [4, 7]
