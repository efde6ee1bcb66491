# HyperLogLog (included by sketch.pyx).

cdef inline void _hll_add(uint8_t* regs, int p, uint64_t h) noexcept nogil:
    """regs[idx] = max(regs[idx], rho). Stores only on an increase, which soon
    becomes rare (a well-predicted branch): an unconditional store would chain
    rows that hit the same register (repeated keys) through memory."""
    cdef uint64_t idx = h >> (64 - p)
    cdef uint64_t w = (h << p) | (<uint64_t>1 << (p - 1))
    cdef uint8_t r = <uint8_t>(clz64(w) + 1)
    if r > regs[idx]:
        regs[idx] = r


def hll_update(uint8_t[::1] regs, int p, int mode, const uint8_t[::1] a,
               const uint8_t[::1] b, const uint8_t[::1] valid, int64_t voff,
               int64_t n, uint64_t seed) -> int:
    """Add the valid rows of a hash source to the ``2**p`` registers
    (``regs[h >> (64-p)] = max(., rho)``). Modifies ``regs``."""
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    if p < 4 or p > 18 or regs.shape[0] != (1 << p):
        raise ValueError("bad precision / register count")
    cdef uint64_t hb[BLOCK]
    cdef int64_t start, got = 0, j
    cdef uint8_t* r = &regs[0]
    cdef uint64_t v
    with nogil:
        if s.mode == HASHES and s.valid == NULL:   # hashes given, no nulls: read in place, no copy
            for j in range(n):
                memcpy(&v, s.a + 8 * j, 8)
                _hll_add(r, p, v)
        else:
            start = 0
            while start < n:
                got = _hash_block(&s, start, min(<int64_t>BLOCK, n - start), hb, NULL)
                if got < 0:
                    break
                for j in range(got):
                    _hll_add(r, p, hb[j])
                start += BLOCK
    if got < 0:
        _raise_offsets(&s, "hll_update")
    return 0


def hll_update_slots(uint8_t[:, ::1] regs, int p, const int64_t[::1] slots, int mode,
                     const uint8_t[::1] a, const uint8_t[::1] b, const uint8_t[::1] valid,
                     int64_t voff, int64_t n, uint64_t seed) -> int:
    """Row ``i`` goes into the registers ``regs[slots[i]]``. Returns
    ``ERR_RANGE`` if a slot is out of range. Modifies ``regs``."""
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    if p < 4 or p > 18 or regs.shape[1] != (1 << p) or slots.shape[0] < n:
        raise ValueError("bad precision / register count / slots")
    cdef uint64_t hb[BLOCK]
    cdef int64_t rb[BLOCK]
    cdef int64_t start, got = 0, j, sl, nslots = regs.shape[0]
    cdef int status = 0
    cdef int64_t m = regs.shape[1]
    cdef uint8_t* base = &regs[0, 0] if nslots > 0 else NULL
    with nogil:
        start = 0
        while start < n:
            got = _hash_block(&s, start, min(<int64_t>BLOCK, n - start), hb, rb)
            if got < 0:
                break
            for j in range(got):
                sl = slots[rb[j]]
                if sl < 0 or sl >= nslots:
                    status = ERR_RANGE
                    break
                _hll_add(base + sl * m, p, hb[j])
            if status != 0:
                break
            start += BLOCK
    if got < 0:
        _raise_offsets(&s, "hll_update_slots")
    return status


def hll_merge(uint8_t[::1] dst, const uint8_t[::1] src) -> int:
    """dst = max(dst, src) elementwise. Modifies ``dst``."""
    if dst.shape[0] != src.shape[0]:
        raise ValueError("register counts differ")
    cdef Py_ssize_t i
    with nogil:
        for i in range(dst.shape[0]):
            if src[i] > dst[i]:
                dst[i] = src[i]
    return 0


def hll_merge_slots(uint8_t[:, ::1] regs, const int64_t[::1] dst,
                    const int64_t[::1] src) -> int:
    """regs[dst[i]] = max(regs[dst[i]], regs[src[i]]) for each i in order.
    Returns ``ERR_RANGE`` if an id is out of range. Modifies ``regs``."""
    cdef int64_t i, j, a, b, nslots = regs.shape[0], m = regs.shape[1]
    cdef int status = 0
    if dst.shape[0] != src.shape[0]:
        raise ValueError("dst and src differ in length")
    cdef uint8_t* base = &regs[0, 0] if nslots > 0 and m > 0 else NULL
    with nogil:
        for i in range(dst.shape[0]):
            a = dst[i]
            b = src[i]
            if a < 0 or a >= nslots or b < 0 or b >= nslots:
                status = ERR_RANGE
                break
            for j in range(m):
                if base[b * m + j] > base[a * m + j]:
                    base[a * m + j] = base[b * m + j]
    return status
