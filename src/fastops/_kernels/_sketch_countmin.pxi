# Count-Min (included by sketch.pyx).

cdef inline void _cms_cells(uint64_t h, int64_t depth, uint64_t width,
                            int64_t* cells) noexcept nogil:
    """Cell offsets ``row * width + col`` of a hash: double hashing
    ``col_i = range(h + i * h2, width)`` with ``h2 = fmix64(h) | 1``."""
    cdef uint64_t h2 = _fmix64(h) | 1
    cdef uint64_t g = h
    cdef int64_t i
    for i in range(depth):
        cells[i] = i * <int64_t>width + <int64_t>range64(g, width)
        g += h2


def cms_update(int64_t[:, ::1] table, bint conservative, const int64_t[::1] weights,
               int mode, const uint8_t[::1] a, const uint8_t[::1] b,
               const uint8_t[::1] valid, int64_t voff, int64_t n, uint64_t seed) -> int:
    """Add ``weights[i]`` (1 when ``weights`` is empty) of every valid row.

    Conservative update raises each cell only up to ``min + w``; it returns
    ``ERR_NEGATIVE_WEIGHT`` (before any change) if a weight is negative.
    Modifies ``table``."""
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    cdef int64_t depth = table.shape[0]
    cdef uint64_t width = table.shape[1]
    if depth < 1 or depth > 64 or width < 1:
        raise ValueError("bad table shape")
    cdef bint weighted = weights.shape[0] > 0
    if weighted and weights.shape[0] < n:
        raise ValueError("weights shorter than values")
    cdef uint64_t hb[BLOCK]
    cdef int64_t rb[BLOCK]
    cdef int64_t cells[64]
    cdef int64_t start, got = 0, j, i, w, lo, target
    cdef int64_t* t = &table[0, 0]
    cdef const int64_t* wp = &weights[0] if weighted else NULL
    cdef bint neg = False
    with nogil:
        if conservative and weighted:
            neg = _any_negative(wp, n)
        start = n if neg else 0
        while start < n:
            got = _hash_block(&s, start, min(<int64_t>BLOCK, n - start), hb, rb)
            if got < 0:
                break
            for j in range(got):
                w = wp[rb[j]] if weighted else 1
                _cms_cells(hb[j], depth, width, cells)
                if conservative:
                    lo = t[cells[0]]
                    for i in range(1, depth):
                        if t[cells[i]] < lo:
                            lo = t[cells[i]]
                    target = lo + w
                    for i in range(depth):
                        if t[cells[i]] < target:
                            t[cells[i]] = target
                else:
                    for i in range(depth):
                        t[cells[i]] += w
            start += BLOCK
    if got < 0:
        _raise_offsets(&s, "cms_update")
    return ERR_NEGATIVE_WEIGHT if neg else 0


def cms_estimate(const int64_t[:, ::1] table, int64_t[::1] out, int mode,
                 const uint8_t[::1] a, const uint8_t[::1] b, const uint8_t[::1] valid,
                 int64_t voff, int64_t n, uint64_t seed) -> int:
    """out[i] = min over rows of the cells of row ``i`` (nulls: untouched).
    Modifies ``out``."""
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    cdef int64_t depth = table.shape[0]
    cdef uint64_t width = table.shape[1]
    if depth < 1 or depth > 64 or width < 1 or out.shape[0] < n:
        raise ValueError("bad table shape / output")
    cdef uint64_t hb[BLOCK]
    cdef int64_t rb[BLOCK]
    cdef int64_t cells[64]
    cdef int64_t start, got = 0, j, i, lo
    cdef const int64_t* t = &table[0, 0]
    with nogil:
        start = 0
        while start < n:
            got = _hash_block(&s, start, min(<int64_t>BLOCK, n - start), hb, rb)
            if got < 0:
                break
            for j in range(got):
                _cms_cells(hb[j], depth, width, cells)
                lo = t[cells[0]]
                for i in range(1, depth):
                    if t[cells[i]] < lo:
                        lo = t[cells[i]]
                out[rb[j]] = lo
            start += BLOCK
    if got < 0:
        _raise_offsets(&s, "cms_estimate")
    return 0
