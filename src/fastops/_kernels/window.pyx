# cython: language_level=3
"""Window aggregation kernels: slot tables and columnar aggregate state.

A *slot* is one accumulator: (group, pane) for tumbling and sliding windows,
(group, session) for session windows. Slot ids are dense int64, reused after
purge: sessions through a free stack of slots, panes through free lists of
chunks. All state lives in NumPy arrays owned by
``fastops.core.window.aggregator``; every kernel takes contiguous memoryviews, runs one
``with nogil:`` block, and modifies the arrays it is given. Capacities are
ensured by the caller before the call (``counters`` holds the sizes).

``counters``: ``[0]`` slot high-water mark, ``[1]`` free stack size
(sessions), ``[2]`` live hash entries, ``[3]`` tombstones, ``[4]`` live pane
slots, ``[5 + c]`` first slot + 1 of the free chunks of class ``c`` (0: none).

One concern per include, in this order (each later one uses the earlier):

- ``_window_records.pxi``: the aggregates' records (codes ``OPS``): updates,
  merges, and records finished into result columns (``FINAL``);
- ``_window_panes.pxi``: the pane table of tumbling and sliding windows;
- ``_window_stacks.pxi``: the suffix and prefix stacks that emit sliding
  windows;
- ``_window_sessions.pxi``: the session table;
- ``_window_picks.pxi``: min / max / first / last of string and binary columns.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset

from fastops._kernels._platform cimport (add_ovf, bswap64, ctz64, popcount64, prefetch_w,
                                         stream_fence, stream_store, stream_zero)


class SumOverflowError(OverflowError):
    """An int64 sum (``sum_i64``) left the int64 range: some partial sum,
    of rows or of merged records, did not fit. ``aggregates``: the indices of
    the aggregates that overflowed, in the numbering of the kernel that
    raised it (its ``ops``, or a stack layout's aggregates with values);
    ``fastops.core.aggregates`` and ``fastops.core.window.aggregator`` re-raise
    it naming the aggregate and its column. The state the kernel wrote is then
    unusable."""

    def __init__(self, message: str, aggregates: tuple = ()):
        super().__init__(message)
        self.aggregates = tuple(aggregates)


cdef int _raise_overflow(str what, uint64_t mask, Py_ssize_t first=0) except -1:
    """Raise SumOverflowError for the aggregates whose bits are set in
    ``mask`` (bit k: aggregate ``first + k``; bit 63 stands for 63 and on)."""
    cdef list idx = [first + k for k in range(64) if (mask >> k) & 1]
    raise SumOverflowError(f"{what}: an int64 sum overflowed "
                           f"(aggregate {idx[0] if idx else '?'})", tuple(idx))


cdef Py_ssize_t PF = 16  # prefetch distance (rows)
# prefetch distance (rows) for loops that do little per row, where 16 rows take less than a
# miss to memory: pane_assign (also the size of its ring of panes worked out ahead; a power of
# two), agg_update (in sliding windows a new pane reuses slots purged long before: cold) and
# dense_window's runs that only read and finish a record
DEF PF_FAR = 64
DEF BLK = 64  # rows per block of the kernels that finish records into result columns


include "_window_records.pxi"
include "_window_panes.pxi"
include "_window_stacks.pxi"
include "_window_sessions.pxi"
include "_window_picks.pxi"
