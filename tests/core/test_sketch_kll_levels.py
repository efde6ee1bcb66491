"""KLL compaction internals: levels stay sorted, weights add up, items come from
the input, and the rank error stays within the bound (ties, infinities, large
level-0 buffers sorted by runs and two-ended merges)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.core.sketches import KLL


def _check_levels(s: KLL, values: np.ndarray) -> None:
    levels = s._levels()
    assert sum(len(lv) << h for h, lv in enumerate(levels)) == s.n == len(values)
    for h, lv in enumerate(levels):
        if h:
            assert np.all(lv[1:] >= lv[:-1]), h
    items = np.concatenate(levels)
    assert np.isin(items, values).all()
    assert KLL.from_bytes(s.to_bytes()).to_bytes() == s.to_bytes()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([-np.inf, np.inf, 0.0, -0.0, 1.0, 2.5, -7.0]) |
                st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3000),
       st.sampled_from([8, 16, 50]), st.integers(1, 700), st.integers(0, 2**64 - 1))
def test_levels_sorted_and_weights(values, k, batch, seed):
    x = np.array(values, dtype=np.float64)
    s = KLL(k, seed=seed)
    for i in range(0, len(x), batch):
        s.update(x[i:i + batch])
    _check_levels(s, x)


def test_large_batches_rank_error():
    # big level-0 buffers (slack after merges) go through the run sort
    rng = np.random.default_rng(3)
    x = rng.standard_normal(400_000)
    a, b = KLL(64, seed=1), KLL(64, seed=2)
    a.update(x[:200_000])
    b.update(x[200_000:])
    a.merge(b)
    _check_levels(a, x)
    srt = np.sort(x)
    pts = srt[np.linspace(1000, len(x) - 1000, 50).astype(int)]
    truth = np.searchsorted(srt, pts, side="right") / len(x)
    assert np.abs(a.ranks(pts) - truth).max() <= a.normalized_rank_error(all_ranks=True)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 5000), st.floats(0.0, 0.5), st.integers(0, 2**32))
def test_nan_skipped_exactly(n, nan_share, seed):
    # NaNs anywhere (full runs of 16 and the tail): the same sketch as without them
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    with_nan = x.copy()
    with_nan[rng.random(n) < nan_share] = np.nan
    a, b = KLL(32, seed=3), KLL(32, seed=3)
    a.update(with_nan)
    b.update(with_nan[~np.isnan(with_nan)])
    assert a.to_bytes() == b.to_bytes()
    assert a.n == int((~np.isnan(with_nan)).sum())
