# Bloom filter (included by sketch.pyx).

def bloom_update(uint64_t[::1] words, uint64_t m_bits, int k, bint query,
                 uint8_t[::1] out, int mode, const uint8_t[::1] a, const uint8_t[::1] b,
                 const uint8_t[::1] valid, int64_t voff, int64_t n, uint64_t seed) -> int:
    """Set (``query`` false) or test (``query`` true, result in ``out[i]``; null
    rows untouched) the ``k`` bits ``range(h + i * h2, m_bits)`` of every valid
    row. Modifies ``words`` or ``out``."""
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    if m_bits < 1 or <uint64_t>words.shape[0] * 64 < m_bits or k < 1 or k > 64:
        raise ValueError("bad bit array")
    if query and out.shape[0] < n:
        raise ValueError("output too short")
    cdef uint64_t hb[BLOCK]
    cdef int64_t rb[BLOCK]
    cdef int64_t start, got = 0, j
    cdef int _bit_i
    cdef uint64_t h2, g, bit
    cdef uint64_t* wd = &words[0]
    cdef uint8_t hit
    with nogil:
        start = 0
        while start < n:
            got = _hash_block(&s, start, min(<int64_t>BLOCK, n - start), hb, rb)
            if got < 0:
                break
            for j in range(got):
                h2 = _fmix64(hb[j]) | 1
                g = hb[j]
                if query:
                    hit = 1
                    for _bit_i in range(k):
                        bit = range64(g, m_bits)
                        if not ((wd[bit >> 6] >> (bit & 63)) & 1):
                            hit = 0
                            break
                        g += h2
                    out[rb[j]] = hit
                else:
                    for _bit_i in range(k):
                        bit = range64(g, m_bits)
                        wd[bit >> 6] |= (<uint64_t>1) << (bit & 63)
                        g += h2
            start += BLOCK
    if got < 0:
        _raise_offsets(&s, "bloom_update")
    return 0


def bits_or(uint64_t[::1] dst, const uint64_t[::1] src) -> int:
    """dst |= src. Modifies ``dst``."""
    if dst.shape[0] != src.shape[0]:
        raise ValueError("sizes differ")
    cdef Py_ssize_t i
    with nogil:
        for i in range(dst.shape[0]):
            dst[i] |= src[i]
    return 0


def popcount(const uint64_t[::1] words) -> int:
    """Number of set bits."""
    cdef Py_ssize_t i
    cdef int64_t c = 0
    with nogil:
        for i in range(words.shape[0]):
            c += popcount64(words[i])
    return c
