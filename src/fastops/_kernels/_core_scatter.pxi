# ---------------------------------------------------------------- scatter

ctypedef fused dest_t:
    int32_t
    int64_t


def partition_dest(const id_t[::1] ids, const int64_t[::1] counts,
                   dest_t[::1] dest, int64_t[::1] starts, bint order=False) -> int:
    """Counting-sort placement of rows by partition id (ids already counted).

    Fills ``starts`` (length P + 1: partition p owns output rows
    ``starts[p]:starts[p+1]``) and ``dest`` (output row of input row i; rows keep
    their order inside a partition), or with ``order`` its inverse (the input
    row at each output row, for a take). ``ids`` must be in ``[0, P)`` and
    ``counts`` their histogram: an id outside, or (with ``order``) a row
    placed outside ``dest``, is a ValueError, raised when the rows before it
    are placed. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = ids.shape[0], P = counts.shape[0], bad = -1
    cdef Py_ssize_t ndest = dest.shape[0]
    cdef int64_t p, d = 0
    cdef int64_t* cursor
    if starts.shape[0] < P + 1:
        raise ValueError(f"partition_dest: {starts.shape[0]} starts for {P} partitions")
    if not order and ndest < n:
        raise ValueError(f"partition_dest: dest has {ndest} rows for {n} ids")
    cursor = <int64_t*>malloc(<size_t>(P if P > 0 else 1) * sizeof(int64_t))
    if cursor == NULL:
        raise MemoryError(f"cursors of {P} partitions")
    with nogil:
        starts[0] = 0
        for i in range(P):
            starts[i + 1] = starts[i] + counts[i]
        memcpy(cursor, &starts[0], <size_t>P * sizeof(int64_t))
        if order:
            for i in range(n):
                p = ids[i]
                d = cursor[p] if <uint64_t>p < <uint64_t>P else -1
                if <uint64_t>d >= <uint64_t>ndest:
                    bad = i
                    break
                dest[d] = <dest_t>i
                cursor[p] = d + 1
        else:
            for i in range(n):
                p = ids[i]
                if <uint64_t>p >= <uint64_t>P:
                    bad = i
                    break
                dest[i] = <dest_t>cursor[p]
                cursor[p] += 1
        free(cursor)
    if bad >= 0:
        if not 0 <= ids[bad] < P:
            raise ValueError(f"partition_dest: id {ids[bad]} of row {bad} outside [0, {P})")
        raise ValueError(f"partition_dest: counts place row {bad} at {d}, outside [0, {ndest})")
    return OK


cdef Py_ssize_t _STREAM_MIN_BYTES = 1 << 22
STREAM_MIN_BYTES = _STREAM_MIN_BYTES
"""Scatters that write at least this many bytes go through line buffers and
streaming stores (``_scatter_streamed``); smaller outputs would fit in the
caches, where the next operator reads them, so they are stored directly."""


cdef int _check_scatter(Py_ssize_t n, Py_ssize_t ndest, Py_ssize_t nsrc, Py_ssize_t nout,
                        Py_ssize_t nstarts, str what) except -1:
    if (ndest != n and ndest != 0) or nsrc < n or nout < n or nstarts < 1:
        raise ValueError(f"{what}: {n} ids, {ndest} output rows placed, "
                         f"columns of {nsrc} / {nout} rows, "
                         f"{nstarts} partition starts")
    return 0


cdef int _check_starts(const int64_t[::1] starts, Py_ssize_t nrows, str what) except -1:
    """Partition starts never decrease and lie inside ``[0, nrows]``."""
    cdef Py_ssize_t p
    cdef int64_t prev = 0
    for p in range(starts.shape[0]):
        if not prev <= starts[p] <= nrows:
            raise ValueError(f"{what}: start {starts[p]} of partition {p} outside "
                             f"[{prev}, {nrows}]")
        prev = starts[p]
    return 0


cdef int _raise_scatter(const id_t[::1] ids, const int64_t[::1] starts, const dest_t[::1] dest,
                        Py_ssize_t i, Py_ssize_t nout, str what) except -1:
    """ValueError for row ``i``, which a scatter could not place."""
    cdef Py_ssize_t P = starts.shape[0] - 1
    cdef int64_t p = ids[i]
    if dest.shape[0] > 0 and not 0 <= dest[i] < nout:
        raise ValueError(f"{what}: dest {dest[i]} of row {i} outside [0, {nout})")
    if not 0 <= p < P:
        raise ValueError(f"{what}: id {p} of row {i} outside [0, {P})")
    if dest.shape[0] == 0:
        raise ValueError(f"{what}: partition {p} has more rows than its starts "
                         f"[{starts[p]}, {starts[p + 1]})")
    raise ValueError(f"{what}: dest {dest[i]} of row {i} outside partition {p}'s rows "
                     f"[{starts[p]}, {starts[p + 1]})")


cdef bint _streamable(const void* a, const void* b, Py_ssize_t nbytes) noexcept nogil:
    return (nbytes >= _STREAM_MIN_BYTES and (<size_t>a) % 64 == 0
            and (b == NULL or (<size_t>b) % 64 == 0))


cdef inline void _put_line(word_t* out_a, word_t* out_b, const word_t* buf, Py_ssize_t per,
                           int64_t line, int64_t lo, int64_t hi) noexcept nogil:
    """Words ``[lo, hi)`` of the buffered line at ``line`` to each output
    (``out_b`` NULL: one; its buffer follows the first's): a whole line in
    one streaming store, part of one value by value."""
    cdef int c
    cdef word_t* out
    for c in range(1 if out_b == NULL else 2):
        out = out_a if c == 0 else out_b
        if lo == 0 and hi == per:
            stream_line(out + line, buf + c * per)
        else:
            memcpy(out + line + lo, buf + c * per + lo, <size_t>(hi - lo) * sizeof(word_t))


cdef inline int64_t _next_row(int64_t p, const dest_t* dest, int64_t* cursor,
                              Py_ssize_t i) noexcept nogil:
    """Output row of input row i (in partition ``p``): ``dest[i]``, or with
    ``dest`` NULL the next free row of its partition (``cursor``, advanced)."""
    cdef int64_t d
    if dest != NULL:
        return dest[i]
    d = cursor[p]
    cursor[p] = d + 1
    return d


cdef int _scatter_streamed(const word_t* src_a, const word_t* src_b, const id_t* ids,
                           const dest_t* dest, Py_ssize_t n, const int64_t* starts, Py_ssize_t P,
                           int64_t* cursor, word_t* out_a, word_t* out_b,
                           Py_ssize_t* bad) noexcept nogil:
    """``out[dest[i]] = src[i]`` for one column (``src_b`` NULL) or two,
    through a 64-byte line buffer per partition and column: a partition's
    rows are consecutive, so each full line goes out in one streaming store
    instead of every value pulling its line into the cache (the outputs are
    64-byte aligned). The first line of a partition may start in the previous
    partition's rows, and its last may end in the next one's: those are
    written value by value. ``dest`` NULL: rows are placed by the partitions'
    ``cursor`` (from ``starts``, which ``_check_starts`` accepted). A row
    whose id is outside ``[0, P)`` (ids are checked 1024 at a time, before
    their rows), or that completes a line at an output row outside its
    partition's rows, stops the scatter: ``bad`` gets it (other rows only
    fill their partition's line buffer). Returns -1 if the buffers could not
    be had."""
    cdef Py_ssize_t i, b, m, per = 64 // sizeof(word_t), cols = 1 if src_b == NULL else 2, stop = -1
    cdef int64_t d, s, line, end, p
    cdef char* raw = <char*>malloc(<size_t>(P if P > 0 else 1) * 64 * cols + 64)
    cdef word_t* buf = <word_t*>(raw + (64 - (<size_t>raw) % 64) % 64)  # aligned for the line loads
    cdef word_t* ba
    if raw == NULL:
        return -1
    for b in range(0, n, 1024):
        m = min(n - b, <Py_ssize_t>1024)
        if not _ids_ok(ids + b, m, P):  # a block's ids, checked while in L1
            stop = b
            while <uint64_t>ids[stop] < <uint64_t>P:
                stop += 1
            break
        for i in range(b, b + m):
            p = ids[i]
            d = _next_row(p, dest, cursor, i)
            s = d & (per - 1)
            ba = buf + p * per * cols
            ba[s] = src_a[i]
            if cols == 2:
                ba[per + s] = src_b[i]
            if s == per - 1:  # a line is full: from the partition's first row on
                if <uint64_t>(d - starts[p]) >= <uint64_t>(starts[p + 1] - starts[p]):
                    stop = i
                    break
                line = d - s
                _put_line(out_a, out_b, ba, per, line, max(starts[p] - line, 0), per)
        if stop >= 0:
            break
    bad[0] = stop
    for p in range(P if stop < 0 else 0):  # the lines not filled: up to the partition's end
        end = starts[p + 1]
        if end == starts[p] or (end & (per - 1)) == 0:
            continue
        line = end & ~(per - 1)
        _put_line(out_a, out_b, buf + p * per * cols, per, line, max(starts[p] - line, 0),
                  end - line)
    stream_fence()
    free(raw)
    return 0


cdef int _scatter_any(const word_t* src_a, const word_t* src_b, const id_t* ids,
                      const dest_t* dest, Py_ssize_t n, const int64_t* starts, Py_ssize_t P,
                      word_t* out_a, word_t* out_b, Py_ssize_t nout,
                      Py_ssize_t* bad) noexcept nogil:
    """``out[dest[i]] = src[i]`` for one column (``src_b`` NULL) or two; with
    ``dest`` NULL, rows go to their partition's next free row (the placement
    ``partition_dest`` would give, without its array written and read back).
    Large aligned outputs are streamed, others stored directly. A row that
    cannot be placed inside the ``nout`` output rows stops the scatter:
    ``bad`` gets it. Returns -1 if memory ran out."""
    cdef Py_ssize_t i, ahead = 256 // sizeof(word_t)
    cdef int64_t d, p
    cdef int status = 0
    cdef int64_t* cursor = NULL
    if dest == NULL:
        cursor = <int64_t*>malloc(<size_t>(P if P > 0 else 1) * sizeof(int64_t))
        if cursor == NULL:
            return -1
        memcpy(cursor, starts, <size_t>P * sizeof(int64_t))
    if _streamable(out_a, out_b, n * sizeof(word_t) * (1 if src_b == NULL else 2)):
        status = _scatter_streamed(src_a, src_b, ids, dest, n, starts, P, cursor, out_a, out_b, bad)
    else:
        for i in range(n):
            if dest != NULL:
                d = dest[i]
            else:
                p = ids[i]
                if <uint64_t>p >= <uint64_t>P:
                    bad[0] = i
                    break
                d = cursor[p]
                cursor[p] = d + 1
            if <uint64_t>d >= <uint64_t>nout:
                bad[0] = i
                break
            out_a[d] = src_a[i]
            # each partition is a write stream: fetch its lines ahead of time
            prefetch_w(out_a + d + ahead)
            if src_b != NULL:
                out_b[d] = src_b[i]
                prefetch_w(out_b + d + ahead)
    free(cursor)
    return status


def scatter_words(const word_t[::1] src, const id_t[::1] ids, const int64_t[::1] starts,
                  const dest_t[::1] dest, word_t[::1] out):
    """out[dest[i]] = src[i] for fixed-width values, ``dest`` from
    ``partition_dest`` of ``ids`` (partition p owns output rows
    ``starts[p]:starts[p+1]``); an empty ``dest``: the same placement, made
    here from ``ids``. An id outside ``[0, P)``, or an output row that would
    be written outside ``out`` (streamed: outside its partition's rows), is
    a ValueError; rows before it may be done. Modifies ``out``."""
    cdef Py_ssize_t n = ids.shape[0], P = starts.shape[0] - 1, bad = -1
    cdef int status = 0
    _check_scatter(n, dest.shape[0], src.shape[0], out.shape[0], starts.shape[0], "scatter_words")
    _check_starts(starts, out.shape[0], "scatter_words")
    if n == 0:
        return
    with nogil:
        status = _scatter_any(&src[0], <const word_t*>NULL, &ids[0],
                              &dest[0] if dest.shape[0] > 0 else NULL, n, &starts[0], P,
                              &out[0], <word_t*>NULL, out.shape[0], &bad)
    if status < 0:
        raise MemoryError(f"line buffers of {P} partitions")
    if bad >= 0:
        _raise_scatter(ids, starts, dest, bad, out.shape[0], "scatter_words")


def scatter_words2(const word_t[::1] src_a, const word_t[::1] src_b, const id_t[::1] ids,
                   const int64_t[::1] starts, const dest_t[::1] dest, word_t[::1] out_a,
                   word_t[::1] out_b):
    """``scatter_words`` of two columns of one width in one pass: the row
    placement is read or made once for both. Rows that cannot be placed are
    as in ``scatter_words``. Modifies ``out_a`` and ``out_b``."""
    cdef Py_ssize_t n = ids.shape[0], P = starts.shape[0] - 1, bad = -1
    cdef Py_ssize_t nout = min(out_a.shape[0], out_b.shape[0])
    cdef int status = 0
    _check_scatter(n, dest.shape[0], min(src_a.shape[0], src_b.shape[0]),
                   nout, starts.shape[0], "scatter_words2")
    _check_starts(starts, nout, "scatter_words2")
    if n == 0:
        return
    with nogil:
        status = _scatter_any(&src_a[0], &src_b[0], &ids[0],
                              &dest[0] if dest.shape[0] > 0 else NULL, n, &starts[0], P,
                              &out_a[0], &out_b[0], nout, &bad)
    if status < 0:
        raise MemoryError(f"line buffers of {P} partitions")
    if bad >= 0:
        _raise_scatter(ids, starts, dest, bad, nout, "scatter_words2")


def scatter_bits(const uint8_t[::1] src, int64_t src_offset, const dest_t[::1] dest,
                 uint8_t[::1] out):
    """Bit ``dest[i]`` of ``out`` = bit ``src_offset + i`` of ``src``.

    ``out`` holds at least ``ceil(n / 8)`` bytes and is zeroed here. A set
    bit's ``dest`` outside the bits of ``out`` is a ValueError, raised when
    the rows before it are done. Modifies ``out``.
    """
    cdef Py_ssize_t i, n = dest.shape[0], bad = -1
    cdef int64_t j, d, nbits = <int64_t>out.shape[0] * 8
    check_bits(src.shape[0], src_offset, n, "scatter_bits")
    with nogil:
        if out.shape[0] > 0:
            memset(&out[0], 0, <size_t>out.shape[0])
        for i in range(n):
            j = src_offset + i
            if (src[j >> 3] >> (j & 7)) & 1:
                d = dest[i]
                if <uint64_t>d >= <uint64_t>nbits:
                    bad = i
                    break
                out[d >> 3] |= <uint8_t>(1 << (d & 7))
    if bad >= 0:
        raise ValueError(f"scatter_bits: dest {dest[bad]} of row {bad} outside [0, {nbits})")


cdef inline void _copy_short(uint8_t* dst, const uint8_t* src, size_t length,
                             size_t dst_room, size_t src_room) noexcept nogil:
    """Copy ``length`` bytes; values up to 32 bytes as one fixed 32-byte block
    (no branch on the length) when both sides have room for it."""
    if length <= 32 and dst_room >= 32 and src_room >= 32:
        memcpy(dst, src, 32)
    else:
        memcpy(dst, src, length)


def scatter_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                   const id_t[::1] ids, const int64_t[::1] starts,
                   offset_t[::1] out_offsets, uint8_t[::1] out_data, dest_t[::1] dest):
    """Scatter variable-width values by partition id, keeping row order.

    Value i (``data[offsets[i]:offsets[i+1]]``; ``offsets`` has n + 1 entries,
    already shifted by the array's offset) goes to the next free row of
    partition ``ids[i]``; partition p owns output rows ``starts[p]:starts[p+1]``
    (from ``partition_dest``). Two passes: bytes per partition, then place.
    ``out_offsets`` (n + 1) is filled here, starting at 0; ``out_data`` holds
    ``offsets[n] - offsets[0]`` bytes. Short values are copied as whole 32-byte
    blocks where the block stays inside the source buffer and inside the
    value's own partition (the spill is overwritten by the partition's next
    values, which are written later). If ``dest`` has n entries it also gets
    every row's output row, as from ``partition_dest`` (which this pass then
    replaces). Ids outside ``[0, P)``, offsets that decrease or leave
    ``data``, and ids that do not fit ``starts`` are a ValueError (the first
    two before any output is written). Modifies the outputs.
    """
    cdef Py_ssize_t i, blk, m, n = ids.shape[0], P = starts.shape[0] - 1, stride, bad = -1
    cdef int64_t o, length, r, b, src_len = data.shape[0], total = 0
    cdef int64_t* sub
    cdef int64_t* work
    cdef int64_t* cur
    cdef int64_t* c
    cdef bint with_dest = dest.shape[0] == ids.shape[0]
    cdef const uint8_t* src_base
    cdef uint8_t* out_base
    if P < 0 or offsets.shape[0] < n + 1 or out_offsets.shape[0] < n + 1:
        raise ValueError(f"scatter_binary: {n} ids, {offsets.shape[0]} offsets, "
                         f"{out_offsets.shape[0]} output offsets, "
                         f"{starts.shape[0]} partition starts")
    if n == 0:
        out_offsets[0] = 0
        return
    if offsets[0] < 0 or offsets[n] > src_len:
        raise ValueError(f"scatter_binary: offsets from {offsets[0]} to {offsets[n]} outside the "
                         f"{src_len} data bytes")
    if out_data.shape[0] < offsets[n] - offsets[0]:
        raise ValueError(f"scatter_binary: out_data has {out_data.shape[0]} bytes for "
                         f"{offsets[n] - offsets[0]}")
    _check_starts(starts, n, "scatter_binary")
    sub = _hist_alloc(P, &stride)
    work = <int64_t*>malloc(<size_t>(5 * P) * sizeof(int64_t))
    if sub == NULL or work == NULL:
        free(sub)
        free(work)
        raise MemoryError(f"byte cursors of {P} partitions")
    cur = work + P
    with nogil:
        for blk in range(0, n, 1024):  # a block's ids and offsets, checked while in L1
            m = min(n - blk, <Py_ssize_t>1024)
            if not (_ids_ok(&ids[blk], m, P) and offsets_ok(&offsets[blk], m, 0, src_len)):
                bad = blk
                break
            for i in range(blk, blk + m):
                sub[(i & 3) * stride + ids[i]] += offsets[i + 1] - offsets[i]
    if bad >= 0:
        free(sub)
        free(work)
        for i in range(bad, min(n, bad + 1024)):
            if not 0 <= ids[i] < P:
                raise ValueError(f"scatter_binary: id {ids[i]} of row {i} outside [0, {P})")
        _raise_offsets(offsets, n, src_len, "scatter_binary")
    with nogil:
        _hist_finish(sub, P, stride, work)            # bytes per partition
        # cursors of partition p side by side (one cache line): next row,
        # next byte, end of its bytes, end of its rows
        for i in range(P):
            cur[4 * i] = starts[i]
            cur[4 * i + 1] = total
            total += work[i]
            cur[4 * i + 2] = total
            cur[4 * i + 3] = starts[i + 1]
        out_offsets[n] = <offset_t>total
        src_base = &data[0] if src_len > 0 else NULL
        out_base = &out_data[0] if total > 0 else NULL
        for i in range(n):
            c = cur + 4 * ids[i]
            o = offsets[i]
            length = offsets[i + 1] - o
            r = c[0]
            if r >= c[3]:  # more rows of this partition than ``starts`` gave it
                bad = i
                break
            c[0] = r + 1
            if with_dest:
                dest[i] = <dest_t>r
            b = c[1]
            c[1] = b + length
            out_offsets[r] = <offset_t>b
            # each partition is a write stream: fetch its lines ahead of time
            prefetch_w(&out_offsets[0] + r + 64)
            prefetch_w(out_base + b + 384)
            if length > 0:
                _copy_short(out_base + b, src_base + o, <size_t>length,
                            <size_t>(c[2] - b), <size_t>(src_len - o))
    free(sub)
    free(work)
    if bad >= 0:
        raise ValueError(f"scatter_binary: partition {ids[bad]} has more rows than its starts "
                         f"[{starts[ids[bad]]}, {starts[ids[bad] + 1]})")
