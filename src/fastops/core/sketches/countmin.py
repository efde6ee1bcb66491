"""Count-Min sketch: frequencies with signed (turnstile) updates."""
from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from fastops._kernels import sketch as _sketch
from fastops.core.sketches.common import (
    _EMPTY_I64,
    T_CMS,
    _check_int,
    _check_seed,
    _check_total,
    _header,
    _length,
    _Reader,
    _reduce,
    _sources,
    _status,
    _valid_weight,
    _weights,
)

__all__ = ["CountMinSketch"]


class CountMinSketch:
    r"""Count-Min sketch with signed (turnstile) updates.

    ``depth`` rows of ``width`` int64 counters. Row ``i`` maps a value with
    hash ``h`` to column ``⌊(h + i·h₂ mod 2⁶⁴)·width / 2⁶⁴⌋`` with
    ``h₂ = fmix64(h) | 1`` (double hashing). ``estimate`` is the minimum of
    the ``depth`` counters.

    Error bound: with ``W`` the sum of all weights (the stream's L1 mass,
    ``ε = e / width``, ``δ = e^{-depth}``), for every value whose true count
    ``f`` is non-negative and when every count is non-negative (the strict
    turnstile model, deletions included): :math:`f \le \hat f` always and
    :math:`\hat f \le f + \varepsilon W` with probability :math:`\ge 1 - \delta`.

    Conservative update (``conservative=True``, insert-only streams: negative
    weights raise ``ValueError``) raises each of a value's counters only up to
    ``min + w``; same guarantees, usually much smaller error. Merging adds the
    counters: exact (``merge(cms(A), cms(B)) == cms(A ∪ B)``) for the plain
    sketch; for conservative sketches the merge keeps the bounds but is not
    equal to the sketch of the union.

    Parameters
    ----------
    width, depth : int
        Counters per row (``1 .. 2**31``) and rows (``1 .. 64``), with
        ``width * depth <= MAX_COUNTERS`` (``2**28``: 2 GiB of counters).
    seed : int
        Hash seed.
    conservative : bool
        Conservative update (insert-only).

    ``total_weight`` is an int64: an update or merge that would take it out
    of that range raises ``OverflowError``.

    Notes
    -----
    Binary body (flags: bit 0 = conservative)::

        depth u32, width u32, seed u64, total_weight i64,
        counters i64[depth * width] (row-major)

    Examples
    --------
    >>> import numpy as np
    >>> c = CountMinSketch.from_error(0.001, 0.01)
    >>> c.update(np.array([1, 1, 2]))
    >>> c.estimate(np.array([1, 2, 3])).tolist()
    [2, 1, 0]
    """

    _BODY = struct.Struct("<IIQq")
    MAX_COUNTERS = 2**28

    def __init__(self, width: int, depth: int = 4, seed: int = 0, conservative: bool = False):
        self.width = _check_int("width", width, 1, 2**31)
        self.depth = _check_int("depth", depth, 1, 64)
        if self.width * self.depth > self.MAX_COUNTERS:
            raise ValueError(f"width * depth must be <= {self.MAX_COUNTERS} (2**28 counters), "
                             f"got width={self.width}, depth={self.depth}")
        self.seed = _check_seed(seed)
        self.conservative = bool(conservative)
        self.total_weight = 0
        self._table = np.zeros((self.depth, self.width), dtype=np.int64)

    @classmethod
    def from_error(cls, epsilon: float, delta: float, seed: int = 0,
                   conservative: bool = False) -> CountMinSketch:
        """Size for ``f̂ ≤ f + εW`` with probability ``1 - δ``:
        ``width = ⌈e/ε⌉``, ``depth = ⌈ln(1/δ)⌉``."""
        if not (isinstance(epsilon, (int, float)) and 0 < epsilon < 1):
            raise ValueError(f"epsilon must be in (0, 1), got {epsilon!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        width = math.ceil(math.e / epsilon)
        depth = max(1, math.ceil(math.log(1.0 / delta)))
        return cls(width, depth, seed, conservative)

    @property
    def epsilon(self) -> float:
        return math.e / self.width

    @property
    def delta(self) -> float:
        return math.exp(-self.depth)

    @property
    def table(self) -> np.ndarray:
        v = self._table.view()
        v.flags.writeable = False
        return v

    def update(self, values: Any, weights: Any = None) -> None:
        """Add ``weights[i]`` (default 1; negative = deletion unless
        conservative) for every non-null value."""
        n = _length(values)
        w = _weights(weights, n, "CountMinSketch")
        if w is not None and self.conservative and len(w) and w.min() < 0:
            raise ValueError("CountMinSketch(conservative=True) is insert-only: "
                             "negative weights are not allowed")
        for start, cnt, src, chunk in _sources(values, self.seed):
            if src is None:
                continue
            wc = _EMPTY_I64 if w is None else w[start:start + cnt]
            add = _valid_weight(chunk, cnt, None if w is None else wc)
            _check_total("CountMinSketch.update", self.total_weight, add)
            st = _sketch.cms_update(self._table, self.conservative, wc, src.mode, src.a,
                                    src.b, src.valid, src.voff, src.n, self.seed)
            _status(st, "CountMinSketch.update")
            self.total_weight += add

    def estimate(self, values: Any) -> np.ndarray:
        """Estimated count of every value (0 for nulls), as int64."""
        n = _length(values)
        out = np.zeros(n, dtype=np.int64)
        for start, cnt, src, _ in _sources(values, self.seed):
            if src is not None:
                _sketch.cms_estimate(self._table, out[start:start + cnt], src.mode, src.a,
                                     src.b, src.valid, src.voff, src.n, self.seed)
        return out

    def _check_compatible(self, other: Any) -> None:
        if not isinstance(other, CountMinSketch):
            raise TypeError(f"cannot merge CountMinSketch with {type(other).__name__}")
        if (other.width, other.depth, other.seed, other.conservative) != (
                self.width, self.depth, self.seed, self.conservative):
            raise ValueError(f"cannot merge {other!r} into {self!r}: parameters differ")

    def merge(self, other: CountMinSketch) -> CountMinSketch:
        """Add the counters of ``other``; returns ``self``."""
        self._check_compatible(other)
        _check_total("CountMinSketch.merge", self.total_weight, other.total_weight)
        self._table += other._table
        self.total_weight += other.total_weight
        return self

    def copy(self) -> CountMinSketch:
        c = CountMinSketch(self.width, self.depth, self.seed, self.conservative)
        c._table[:] = self._table
        c.total_weight = self.total_weight
        return c

    def to_bytes(self) -> bytes:
        return (_header(T_CMS, int(self.conservative))
                + self._BODY.pack(self.depth, self.width, self.seed, self.total_weight)
                + self._table.tobytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> CountMinSketch:
        r = _Reader(data, T_CMS)
        if r.flags > 1:
            r.fail(f"unknown flags {r.flags}")
        depth, width, seed, total = r.unpack(cls._BODY)
        if not 1 <= depth <= 64 or not 1 <= width <= 2**31 or width * depth > cls.MAX_COUNTERS:
            r.fail(f"bad shape depth={depth}, width={width}")
        table = r.array(np.int64, depth * width)
        r.end()
        out = cls(width, depth, seed, bool(r.flags & 1))
        out._table[:] = table.reshape(depth, width)
        out.total_weight = total
        return out

    __reduce__ = _reduce

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CountMinSketch)
                and (other.width, other.depth, other.seed, other.conservative,
                     other.total_weight)
                == (self.width, self.depth, self.seed, self.conservative, self.total_weight)
                and np.array_equal(other._table, self._table))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"CountMinSketch(width={self.width}, depth={self.depth}, seed={self.seed}, "
                f"conservative={self.conservative}, total_weight={self.total_weight}, "
                f"epsilon={self.epsilon:.3g}, delta={self.delta:.3g})")
