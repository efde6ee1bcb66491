"""Bloom filter: set membership without false negatives."""
from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from fastops._kernels import sketch as _sketch
from fastops.core.sketches.common import (
    _EMPTY_U8,
    T_BLOOM,
    _check_int,
    _check_seed,
    _header,
    _length,
    _no_weights,
    _Reader,
    _reduce,
    _sources,
)

__all__ = ["BloomFilter"]


class BloomFilter:
    r"""Bloom filter: ``m`` bits, ``k`` hash functions by double hashing.

    Sized for ``capacity`` distinct values at false-positive rate ``p``:
    :math:`m = \lceil -n \ln p / (\ln 2)^2 \rceil`,
    :math:`k = \max(1, \mathrm{round}(m/n \cdot \ln 2))`. Bit ``i`` of a value
    with hash ``h`` is ``⌊(h + i·h₂ mod 2⁶⁴)·m / 2⁶⁴⌋``, ``h₂ = fmix64(h) | 1``.

    Error bound: no false negatives; after ``n`` distinct insertions the
    false-positive probability is :math:`(1 - e^{-kn/m})^k` (≈ ``p`` at
    ``n = capacity``). Merge (same parameters) is the bitwise OR, exactly the
    filter of the union.

    ``capacity`` is at most ``2**40`` and ``m`` at most ``MAX_BITS`` (``2**35``
    bits, 4 GiB); larger sizes raise ``ValueError``.

    Notes
    -----
    Binary body::

        k u32, 4 zero bytes, m_bits u64, seed u64, capacity u64, fp_rate f64,
        words u64[ceil(m_bits / 64)]   (bits >= m_bits are zero)

    Examples
    --------
    >>> import numpy as np
    >>> b = BloomFilter(1000, 0.01)
    >>> b.add(np.arange(100))
    >>> bool(b.contains(np.arange(100)).all())
    True
    """

    _BODY = struct.Struct("<I4xQQQd")
    MAX_BITS = 2**35

    def __init__(self, capacity: int, fp_rate: float = 0.01, seed: int = 0):
        self.capacity = _check_int("capacity", capacity, 1, 2**40)
        if not (isinstance(fp_rate, (int, float)) and 0 < fp_rate < 1):
            raise ValueError(f"fp_rate must be in (0, 1), got {fp_rate!r}")
        self.fp_rate = float(fp_rate)
        self.seed = _check_seed(seed)
        self.num_bits, self.num_hashes = self.optimal_parameters(self.capacity, self.fp_rate)
        if self.num_bits > self.MAX_BITS:
            raise ValueError(f"capacity={self.capacity} at fp_rate={self.fp_rate} needs "
                             f"{self.num_bits} bits, more than MAX_BITS = 2**35")
        self._words = np.zeros((self.num_bits + 63) // 64, dtype=np.uint64)

    @staticmethod
    def optimal_parameters(capacity: int, fp_rate: float) -> tuple[int, int]:
        """``(m, k)``: ``m = ⌈-n ln p / (ln 2)²⌉`` bits (at least 64) and
        ``k = round(m / n · ln 2)`` hash functions (1 .. 64)."""
        m = max(64, math.ceil(-capacity * math.log(fp_rate) / math.log(2.0) ** 2))
        k = int(min(64, max(1, round(m / capacity * math.log(2.0)))))
        return m, k

    def add(self, values: Any) -> None:
        """Insert every non-null value."""
        for _, _, src, _ in _sources(values, self.seed):
            if src is not None:
                _sketch.bloom_update(self._words, self.num_bits, self.num_hashes, False,
                                     _EMPTY_U8, src.mode, src.a, src.b, src.valid,
                                     src.voff, src.n, self.seed)

    def update(self, values: Any, weights: Any = None) -> None:
        """Same as ``add``."""
        _no_weights(weights, "BloomFilter")
        self.add(values)

    def contains(self, values: Any) -> np.ndarray:
        """Bool array: possibly present (True) / surely absent (False; nulls too)."""
        n = _length(values)
        out = np.zeros(n, dtype=np.uint8)
        for start, cnt, src, _ in _sources(values, self.seed):
            if src is not None:
                _sketch.bloom_update(self._words, self.num_bits, self.num_hashes, True,
                                     out[start:start + cnt], src.mode, src.a, src.b,
                                     src.valid, src.voff, src.n, self.seed)
        return out.view(np.bool_)

    @property
    def fill_ratio(self) -> float:
        return _sketch.popcount(self._words) / self.num_bits

    def current_fp_rate(self) -> float:
        """Estimated false-positive rate now: ``fill_ratio ** k``."""
        return self.fill_ratio ** self.num_hashes

    def _check_compatible(self, other: Any) -> None:
        if not isinstance(other, BloomFilter):
            raise TypeError(f"cannot merge BloomFilter with {type(other).__name__}")
        if (other.num_bits, other.num_hashes, other.seed) != (
                self.num_bits, self.num_hashes, self.seed):
            raise ValueError(f"cannot merge {other!r} into {self!r}: parameters differ")

    def merge(self, other: BloomFilter) -> BloomFilter:
        """Union in place (bitwise OR); returns ``self``."""
        self._check_compatible(other)
        _sketch.bits_or(self._words, other._words)
        return self

    def copy(self) -> BloomFilter:
        c = BloomFilter(self.capacity, self.fp_rate, self.seed)
        c._words[:] = self._words
        return c

    def to_bytes(self) -> bytes:
        return (_header(T_BLOOM) + self._BODY.pack(self.num_hashes, self.num_bits, self.seed,
                                                   self.capacity, self.fp_rate)
                + self._words.tobytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter:
        r = _Reader(data, T_BLOOM)
        k, m, seed, capacity, fp = r.unpack(cls._BODY)
        if not (1 <= capacity <= 2**40) or not (0 < fp < 1):
            r.fail(f"bad capacity {capacity} / fp_rate {fp}")
        if (m, k) != cls.optimal_parameters(capacity, fp) or m > cls.MAX_BITS:
            r.fail(f"k={k}, m_bits={m} do not match capacity={capacity}, fp_rate={fp}")
        words = r.array(np.uint64, (m + 63) // 64)   # checks the length first
        r.end()
        if m % 64 and int(words[-1]) >> (m % 64):
            r.fail("bits set beyond m_bits")
        out = cls(capacity, fp, seed)
        out._words[:] = words
        return out

    __reduce__ = _reduce

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BloomFilter)
                and (other.num_bits, other.num_hashes, other.seed)
                == (self.num_bits, self.num_hashes, self.seed)
                and np.array_equal(other._words, self._words))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"BloomFilter(capacity={self.capacity}, fp_rate={self.fp_rate}, "
                f"num_bits={self.num_bits}, num_hashes={self.num_hashes}, "
                f"fill_ratio={self.fill_ratio:.3f})")
