"""HyperLogLog distinct counts (Ertl's improved estimator)."""
from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from fastops._kernels import sketch as _sketch
from fastops.core.sketches.common import (
    T_HLL,
    _check_int,
    _check_seed,
    _header,
    _no_weights,
    _Reader,
    _reduce,
    _sources,
)

__all__ = ["HyperLogLog", "hll_estimate_from_histogram"]


def _sigma(x: np.ndarray) -> np.ndarray:
    """Ertl's sigma(x) = x + sum_k x^(2^k) 2^(k-1), for x < 1."""
    x = np.array(x, dtype=np.float64)
    y = 1.0
    z = x.copy()
    for _ in range(70):
        x = x * x
        z = z + x * y
        y *= 2.0
    return z


def _tau(x: np.ndarray) -> np.ndarray:
    """Ertl's tau(x) = (1 - x - sum_k (1 - x^(2^-k))^2 2^-k) / 3."""
    x = np.array(x, dtype=np.float64)
    edge = (x <= 0.0) | (x >= 1.0)
    xs = np.where(edge, 0.5, x)
    y = 1.0
    z = 1.0 - xs
    for _ in range(70):
        xs = np.sqrt(xs)
        y *= 0.5
        z = z - (1.0 - xs) ** 2 * y
    return np.where(edge, 0.0, z / 3.0)


def hll_estimate_from_histogram(hist: np.ndarray, p: int) -> np.ndarray:
    """Ertl's improved raw estimator for rows of register histograms.

    ``hist[s, j]`` is the number of registers of sketch ``s`` equal to ``j``,
    ``j = 0 .. 65 - p``. Returns one cardinality estimate per row.
    """
    hist = np.atleast_2d(np.asarray(hist, dtype=np.float64))
    m = float(1 << p)
    q = 64 - p
    all_empty = hist[:, 0] >= m
    z = m * _tau(1.0 - hist[:, q + 1] / m)
    for j in range(q, 0, -1):
        z = 0.5 * (z + hist[:, j])
    c0 = np.where(all_empty, 0.0, hist[:, 0] / m)
    z = z + m * _sigma(c0)
    z = np.where(all_empty, 1.0, z)
    est = (m * m / (2.0 * math.log(2.0))) / z
    return np.where(all_empty, 0.0, est)


class HyperLogLog:
    r"""HyperLogLog distinct-count sketch with Ertl's improved estimator.

    ``m = 2**precision`` one-byte registers; a value with 64-bit hash ``h``
    updates register ``h >> (64 - p)`` with the position of the first 1-bit of
    the remaining ``64 - p`` bits. The estimate uses Ertl's improved raw
    estimator (O. Ertl, "New cardinality estimation algorithms for
    HyperLogLog sketches", 2017), which needs no empirical bias tables and is
    near exact at small cardinalities (it reduces to linear counting there).

    Error bound: relative standard error :math:`\sigma \approx 1.04/\sqrt{m}`
    (``precision=14``: 0.81 %); :math:`|\hat n - n| \le 3\sigma n` with
    probability ~99.7 %. Merging is exact: ``merge(hll(A), hll(B)) ==
    hll(A ∪ B)`` register for register.

    Parameters
    ----------
    precision : int
        ``p`` in ``[4, 18]``; ``2**p`` bytes of state.
    seed : int
        Hash seed; sketches merge only with the same seed.

    Notes
    -----
    Binary body (after the common header, flags 0)::

        precision u8, 7 zero bytes, seed u64, registers u8[2**precision]

    each register at most ``65 - precision``.

    Examples
    --------
    >>> import numpy as np
    >>> h = HyperLogLog(12)
    >>> h.update(np.arange(1000))
    >>> abs(h.estimate() - 1000) < 30
    True
    """

    _BODY = struct.Struct("<B7xQ")

    def __init__(self, precision: int = 14, seed: int = 0):
        self.precision = _check_int("precision", precision, 4, 18)
        self.seed = _check_seed(seed)
        self._regs = np.zeros(1 << self.precision, dtype=np.uint8)

    @property
    def num_registers(self) -> int:
        return 1 << self.precision

    @property
    def relative_error(self) -> float:
        """The relative standard error ``1.04 / sqrt(m)``."""
        return 1.04 / math.sqrt(self.num_registers)

    @property
    def registers(self) -> np.ndarray:
        """A read-only view of the registers."""
        v = self._regs.view()
        v.flags.writeable = False
        return v

    def update(self, values: Any, weights: Any = None) -> None:
        """Add every non-null value of the batch."""
        _no_weights(weights, "HyperLogLog")
        for _, _, src, _ in _sources(values, self.seed):
            if src is None:
                continue
            _sketch.hll_update(self._regs, self.precision, src.mode, src.a, src.b,
                               src.valid, src.voff, src.n, self.seed)

    def estimate(self) -> float:
        """Estimated number of distinct non-null values."""
        hist = np.bincount(self._regs, minlength=66 - self.precision)
        return float(hll_estimate_from_histogram(hist[None, :], self.precision)[0])

    def is_empty(self) -> bool:
        return not self._regs.any()

    def _check_compatible(self, other: Any) -> None:
        if not isinstance(other, HyperLogLog):
            raise TypeError(f"cannot merge HyperLogLog with {type(other).__name__}")
        if other.precision != self.precision or other.seed != self.seed:
            raise ValueError(
                f"cannot merge HyperLogLog(precision={other.precision}, seed={other.seed}) "
                f"into HyperLogLog(precision={self.precision}, seed={self.seed})")

    def merge(self, other: HyperLogLog) -> HyperLogLog:
        """Union in place (register-wise max); returns ``self``."""
        self._check_compatible(other)
        _sketch.hll_merge(self._regs, other._regs)
        return self

    def copy(self) -> HyperLogLog:
        c = HyperLogLog(self.precision, self.seed)
        c._regs[:] = self._regs
        return c

    def to_bytes(self) -> bytes:
        return _header(T_HLL) + self._BODY.pack(self.precision, self.seed) + self._regs.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> HyperLogLog:
        r = _Reader(data, T_HLL)
        p, seed = r.unpack(cls._BODY)
        if not 4 <= p <= 18:
            r.fail(f"precision {p} out of range [4, 18]")
        regs = r.array(np.uint8, 1 << p)
        r.end()
        if regs.size and int(regs.max()) > 65 - p:
            r.fail(f"register value {int(regs.max())} > {65 - p}")
        out = cls(p, seed)
        out._regs[:] = regs
        return out

    __reduce__ = _reduce

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HyperLogLog) and other.precision == self.precision
                and other.seed == self.seed and np.array_equal(other._regs, self._regs))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"HyperLogLog(precision={self.precision}, seed={self.seed}, "
                f"estimate={self.estimate():.1f}, rse={self.relative_error:.4f})")
