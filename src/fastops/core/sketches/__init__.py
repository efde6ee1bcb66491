"""Stream synopses: small, mergeable summaries with batch updates.

Every sketch takes a whole batch per call (a pyarrow Array / ChunkedArray,
a NumPy array or a sequence) and runs one compiled ``nogil`` kernel over it
(one per chunk of a ChunkedArray); nulls are skipped. Values are hashed with
fastops' XXH64 (``fastops.core.hashing``), so every hashable Arrow type works and a
value hashes the same in every process and release.

Common API: ``update(values, weights=None)``, ``merge(other)`` (same
parameters, else ``ValueError``; merges in place and returns ``self``),
``to_bytes()`` / ``from_bytes(data)``, ``copy()``, ``repr``, pickling (through
``to_bytes``).

Binary format
-------------
Little-endian. Every sketch starts with the same 8-byte header::

    magic   4s   b"FOSK"
    version u16  1
    type    u8   1 HyperLogLog, 2 CountMinSketch, 3 KLL, 4 SpaceSaving,
                 5 BloomFilter, 6 Reservoir
    flags   u8   per type (0 unless documented)

followed by the body documented in each class. ``from_bytes`` checks the
header, every size against the length of the input and every parameter range
before it builds anything, and raises ``ValueError`` on truncated or corrupt
input.

Limits
------
Sizes that the bytes do not imply have documented maxima, enforced alike by
the constructors (``ValueError`` naming the parameter) and by ``from_bytes``,
so no input makes the next update allocate more than the maximum implies:
``SpaceSaving.MAX_CAPACITY`` (``2**20`` counters),
``Reservoir.MAX_SIZE`` (``2**22`` rows), ``CountMinSketch.MAX_COUNTERS``
(``2**28``), ``BloomFilter.MAX_BITS`` (``2**35``). Counters that grow with
the stream have maxima too: ``KLL.MAX_N`` (``2**48`` values),
``Reservoir.MAX_SEEN`` (``2**62`` rows) and the int64 range of
``total_weight`` (Count-Min, Space-Saving); an update or merge that would
pass one raises ``OverflowError`` and leaves the sketch as it was before
that chunk. A sketch that ``from_bytes`` accepts is fully usable: updates,
merges, queries and ``to_bytes`` work on it as on one built by updates
(``tests/kernels/test_sketch_fuzz.py`` checks this on random and damaged bytes).

Modules
-------
One per sketch (``hll``, ``countmin``, ``kll``, ``spacesaving``, ``bloom``,
``reservoir``); ``common`` holds the header and its reader, argument checks
and the hash sources the kernels read. This package re-exports the sketches.
"""
from fastops.core.sketches.bloom import BloomFilter
from fastops.core.sketches.countmin import CountMinSketch
from fastops.core.sketches.hll import HyperLogLog, hll_estimate_from_histogram
from fastops.core.sketches.kll import KLL
from fastops.core.sketches.reservoir import Reservoir
from fastops.core.sketches.spacesaving import SpaceSaving

__all__ = [
    "KLL",
    "BloomFilter",
    "CountMinSketch",
    "HyperLogLog",
    "Reservoir",
    "SpaceSaving",
    "hll_estimate_from_histogram",
]
