# Hash sources (included by sketch.pyx).
#
# Kernels that work on hashed values take the same seven arguments
# ``mode, a, b, valid, voff, n, seed``; rows are hashed in blocks of ``BLOCK``
# rows into a small stack buffer, nulls are skipped. ``mode`` (a
# ``HashSource``) says what ``a`` and ``b`` hold; ``valid`` is a validity
# bitmap (bit ``voff + i``), ignored when empty. Offsets that decrease or
# leave ``b`` are a ValueError, raised when the blocks before them are done.


cpdef enum HashSource:  # what a hash source's buffers hold (its ``mode``)
    HASHES = 0    # a: n precomputed uint64 hashes (fastops.core.hashing)
    FIXED8 = 1    # a: n 8-byte integers, hashed as XXH64(le(v), seed)
    FIXED4 = 2    # a: n 4-byte integers, hashed as XXH64(le(v), seed)
    BINARY32 = 3  # a: n + 1 int32 offsets into the bytes b (string, binary), XXH64(bytes, seed)
    BINARY64 = 4  # a: n + 1 int64 offsets into the bytes b
    FLOAT64 = 5   # a: float64 bit patterns, hashed as fastops.core.hashing (-0.0 as 0.0, one NaN)
    FLOAT32 = 6   # a: float32 bit patterns, likewise


cdef struct HashSrc:
    int mode              # HashSource
    const uint8_t* a
    const uint8_t* b
    const uint8_t* valid
    int64_t voff
    int64_t n
    uint64_t seed
    int64_t lo            # BINARY32 / BINARY64: the first offset and the last; no row
    int64_t hi            # runs outside them


cdef int _raise_offsets(const HashSrc* s, str what) except -1:
    """ValueError for the offsets of a hash source that a block found bad."""
    cdef int64_t j, x, y
    for j in range(s.n):
        if s.mode == BINARY32:
            x = (<const int32_t*>s.a)[j]
            y = (<const int32_t*>s.a)[j + 1]
        else:
            x = (<const int64_t*>s.a)[j]
            y = (<const int64_t*>s.a)[j + 1]
        if y < x:
            raise ValueError(f"{what}: offsets decrease at row {j}: {x} then {y}")
    raise ValueError(f"{what}: offsets out of range of the data buffer")


cdef int _src_init(HashSrc* s, int mode, const uint8_t[::1] a, const uint8_t[::1] b,
                   const uint8_t[::1] valid, int64_t voff, int64_t n,
                   uint64_t seed) except -1:
    """Check buffer sizes against ``n`` (no row loop) and fill ``s``. Offsets
    (``BINARY32`` / ``BINARY64``) between the first and the last are checked by
    ``_hash_block``, a block at a time."""
    cdef int64_t width, last, first
    if n < 0 or voff < 0:
        raise ValueError("negative length or offset")
    s.mode = mode
    s.n = n
    s.seed = seed
    s.voff = voff
    s.lo = 0
    s.hi = 0
    s.a = &a[0] if a.shape[0] > 0 else NULL
    s.b = &b[0] if b.shape[0] > 0 else NULL
    s.valid = NULL
    if valid.shape[0] > 0:
        check_validity(valid.shape[0], voff, n)
        s.valid = &valid[0]
    if n == 0:
        return 0
    if mode in (HASHES, FIXED8, FLOAT64):
        width = 8
    elif mode in (FIXED4, FLOAT32):
        width = 4
    elif mode == BINARY32 or mode == BINARY64:
        width = 4 if mode == BINARY32 else 8
        if n >= a.shape[0] // width:  # n + 1 offsets
            raise ValueError("offsets buffer too short")
        if mode == BINARY32:
            first = (<const int32_t*>s.a)[0]
            last = (<const int32_t*>s.a)[n]
        else:
            first = (<const int64_t*>s.a)[0]
            last = (<const int64_t*>s.a)[n]
        if first < 0 or last < first or last > b.shape[0]:
            raise ValueError("offsets out of range of the data buffer")
        s.lo = first
        s.hi = last
        if s.b == NULL:
            s.b = s.a  # zero-length data: never dereferenced
        return 0
    else:
        raise ValueError(f"unknown hash source mode {mode}")
    if a.shape[0] // width < n:
        raise ValueError("values buffer too short")
    return 0


cdef inline int64_t _hash_block(const HashSrc* s, int64_t start, int64_t count,
                                uint64_t* out, int64_t* rows) noexcept nogil:
    """Hash the valid rows of ``[start, start + count)`` into ``out``; their row
    numbers go to ``rows`` unless it is NULL. Returns how many were written,
    or -1 (nothing hashed) if the block's offsets decrease or leave
    ``[s.lo, s.hi]``. Every row is hashed by the block loops, then nulls are
    dropped (cheaper than a branch per row)."""
    cdef int64_t i, j = 0, end = start + count
    if s.mode == HASHES:
        memcpy(out, s.a + 8 * start, <size_t>(8 * count))
    elif s.mode == FIXED8 or s.mode == FLOAT64:
        xxh64_many8(<const uint64_t*>(s.a + 8 * start), count, s.seed, out, s.mode == FLOAT64)
    elif s.mode == FIXED4 or s.mode == FLOAT32:
        xxh64_many4(<const uint32_t*>(s.a + 4 * start), count, s.seed, out, s.mode == FLOAT32)
    elif s.mode == BINARY32:
        if not offsets_ok(<const int32_t*>s.a + start, count, s.lo, s.hi):
            return -1
        xxh64_values32(s.b, <const int32_t*>s.a + start, count, s.seed, out)
    else:
        if not offsets_ok(<const int64_t*>s.a + start, count, s.lo, s.hi):
            return -1
        xxh64_values64(s.b, <const int64_t*>s.a + start, count, s.seed, out)
    if s.valid == NULL:
        if rows != NULL:
            for i in range(start, end):
                rows[i - start] = i
        return count
    for i in range(start, end):
        out[j] = out[i - start]
        if rows != NULL:
            rows[j] = i
        j += <int64_t>_bit(s.valid, s.voff + i)
    return j


def sketch_hash(int mode, const uint8_t[::1] a, const uint8_t[::1] b,
                const uint8_t[::1] valid, int64_t voff, int64_t n, uint64_t seed,
                uint64_t[::1] out, int64_t[::1] rows) -> int:
    """Hash the valid rows of a hash source: writes their hashes and row numbers
    to ``out``/``rows`` (length >= n); returns how many. Modifies ``out``, ``rows``."""
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    if out.shape[0] < n or rows.shape[0] < n:
        raise ValueError("output too short")
    cdef int64_t got = 0
    with nogil:
        if n > 0:
            got = _hash_block(&s, 0, n, &out[0], &rows[0])
    if got < 0:
        _raise_offsets(&s, "sketch_hash")
    return got
