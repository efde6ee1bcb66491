# cython: language_level=3
# distutils: language = c++
"""Sketch kernels: HyperLogLog, Count-Min, Bloom, KLL, Space-Saving, reservoir.

Loops over buffers only. The Python layer (``fastops.core.sketches``) validates
inputs, prepares zero-copy views of Arrow buffers and raises on a non-zero
status after the ``nogil`` block.

Value input ("hash source")
---------------------------
Kernels that work on hashed values take the same seven arguments
``mode, a, b, valid, voff, n, seed``; rows are hashed in blocks of
``BLOCK`` rows into a small stack buffer, nulls are skipped:

- ``mode`` 0: ``a`` holds ``n`` precomputed uint64 hashes (``fastops.core.hashing``);
- 1 / 2: ``a`` holds ``n`` 8 / 4-byte integers, hashed as ``XXH64(le(v), seed)``;
- 3 / 4: ``a`` holds ``n + 1`` int32 / int64 offsets into the bytes ``b``
  (string / binary), hashed as ``XXH64(bytes, seed)``; offsets that decrease
  or leave ``b`` are a ValueError, raised when the blocks before them are done;
- 5 / 6: ``a`` holds float64 / float32 bit patterns, hashed like
  ``fastops.core.hashing`` does (``-0.0`` as ``0.0``, one NaN);
- ``valid``: validity bitmap (bit ``voff + i``), ignored when empty.

So a value hashes the same whichever mode fed it, and equals
``fastops.core.hashing.hash_columns([arr], seed)``.
"""
from libc.math cimport ceil, exp, floor, log, pow
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from libcpp.algorithm cimport nth_element, sort

from fastops._kernels._bounds cimport offsets_ok
from fastops._kernels._xxhash cimport xxh64_many4, xxh64_many8, xxh64_values32, xxh64_values64

cdef extern from *:
    """
    #include <stdint.h>
    static inline int fastops_clz64(uint64_t x) { return x ? __builtin_clzll(x) : 64; }
    static inline uint64_t fastops_range64(uint64_t x, uint64_t n) {
        return (uint64_t)(((unsigned __int128)x * (unsigned __int128)n) >> 64);
    }
    """
    int clz64 "fastops_clz64"(uint64_t x) noexcept nogil
    void _prefetch "__builtin_prefetch"(const void* p) noexcept nogil
    uint64_t range64 "fastops_range64"(uint64_t x, uint64_t n) noexcept nogil

cdef extern from *:
    """
    #include <algorithm>
    #include <vector>
    #include <cmath>
    static inline double fastops_nan(void) { return NAN; }
    /* Batcher's odd-even merge sort network on 16 doubles (63 branchless
       compare-exchanges; checked with the 0-1 principle). */
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define FO_CE(i, j) { __m128d x_ = _mm_load_sd(a + i), y_ = _mm_load_sd(a + j); \
        _mm_store_sd(a + i, _mm_min_sd(x_, y_)); _mm_store_sd(a + j, _mm_max_sd(x_, y_)); }
    #else
    #define FO_CE(i, j) { double x_ = a[i], y_ = a[j]; \
        a[i] = x_ < y_ ? x_ : y_; a[j] = x_ < y_ ? y_ : x_; }
    #endif
    static inline void fastops_sort16(double* a) {
        FO_CE(0,1) FO_CE(2,3) FO_CE(0,2) FO_CE(1,3) FO_CE(1,2) FO_CE(4,5) FO_CE(6,7) FO_CE(4,6)
        FO_CE(5,7) FO_CE(5,6) FO_CE(0,4) FO_CE(2,6) FO_CE(2,4) FO_CE(1,5) FO_CE(3,7) FO_CE(3,5)
        FO_CE(1,2) FO_CE(3,4) FO_CE(5,6) FO_CE(8,9) FO_CE(10,11) FO_CE(8,10) FO_CE(9,11)
        FO_CE(9,10) FO_CE(12,13) FO_CE(14,15) FO_CE(12,14) FO_CE(13,15) FO_CE(13,14)
        FO_CE(8,12) FO_CE(10,14) FO_CE(10,12) FO_CE(9,13) FO_CE(11,15) FO_CE(11,13) FO_CE(9,10)
        FO_CE(11,12) FO_CE(13,14) FO_CE(0,8) FO_CE(4,12) FO_CE(4,8) FO_CE(2,10) FO_CE(6,14)
        FO_CE(6,10) FO_CE(2,4) FO_CE(6,8) FO_CE(10,12) FO_CE(1,9) FO_CE(5,13) FO_CE(5,9)
        FO_CE(3,11) FO_CE(7,15) FO_CE(7,11) FO_CE(3,5) FO_CE(7,9) FO_CE(11,13) FO_CE(1,2)
        FO_CE(3,4) FO_CE(5,6) FO_CE(7,8) FO_CE(9,10) FO_CE(11,12) FO_CE(13,14)
    }
    #undef FO_CE
    /* Forward branchless merge of sorted x[0..nx) and y[0..ny) into out. */
    static inline void fastops_merge2(const double* x, int64_t nx, const double* y,
                                      int64_t ny, double* out) {
        int64_t i = 0, j = 0, w = 0;
        while (i < nx && j < ny) {
            double a = x[i], b = y[j];
            int take = b < a;
            out[w++] = take ? b : a;
            j += take;
            i += 1 - take;
        }
        while (i < nx) out[w++] = x[i++];
        while (j < ny) out[w++] = y[j++];
    }
    /* Sort a[0..L), L <= FASTOPS_SORT_SMALL_MAX: the last min(L, 32) items by
       two networks (padded with +inf) and a merge, then the first one (if
       L == 33) inserted. */
    #define FASTOPS_SORT_SMALL_MAX 33
    static inline void fastops_sort_small(double* a, int64_t L) {
        double buf[32], srt[32];
        int64_t extra = L > 32 ? 1 : 0, cnt = L - extra, i;
        const double* res = buf;
        if (cnt <= 16) {
            for (i = 0; i < 16; i++) buf[i] = i < cnt ? a[extra + i] : INFINITY;
            fastops_sort16(buf);
        } else {
            for (i = 0; i < 32; i++) buf[i] = i < cnt ? a[extra + i] : INFINITY;
            fastops_sort16(buf);
            fastops_sort16(buf + 16);
            fastops_merge2(buf, 16, buf + 16, cnt - 16, srt);
            res = srt;
        }
        if (!extra) { for (i = 0; i < cnt; i++) a[i] = res[i]; return; }
        double x = a[0];
        i = 0;
        while (i < cnt && res[i] < x) { a[i] = res[i]; i++; }
        a[i] = x;
        for (; i < cnt; i++) a[i + 1] = res[i];
    }
    /* Merge sorted src[0..ns) into sorted dst[0..nd) (room for nd + ns), from
       the back, branchless. */
    static inline void fastops_merge_back(double* dst, int64_t nd, const double* src,
                                          int64_t ns, int64_t stride) {
        int64_t i = nd - 1, j = ns - 1, w = nd + ns - 1;
        while (i >= 0 && j >= 0) {
            double x = dst[i], y = src[j * stride];
            int take = x > y;
            dst[w--] = take ? x : y;
            i -= take;
            j -= 1 - take;
        }
        while (j >= 0) { dst[w--] = src[j * stride]; j--; }
    }
    /* Merge sorted x[0..nx) and y[0], y[s], ... (ny items) into out from both
       ends at once: the front and the back are two independent dependency
       chains, so this branchless merge runs up to twice as fast as one chain.
       Rounds of r = min(rest of x, rest of y, half the rest) steps need no
       bounds checks (neither end can run out within r steps, and the front
       takes the r smallest, the back the r largest: disjoint). */
    static inline void fastops_merge_bidir(const double* x, int64_t nx, const double* y,
                                           int64_t ny, int64_t s, double* out) {
        int64_t i = 0, j = 0, a = nx - 1, b = ny - 1, lo = 0, hi = nx + ny - 1, r, t;
        for (;;) {
            int64_t rx = a - i + 1, ry = b - j + 1;
            r = rx < ry ? rx : ry;
            if (r > (rx + ry) / 2) r = (rx + ry) / 2;
            if (r == 0) break;
            for (t = 0; t < r; t++) {
                double xv = x[i], yv = y[j * s];
                int ty = yv < xv;
                out[lo++] = ty ? yv : xv;
                j += ty;
                i += 1 - ty;
                double xb = x[a], yb = y[b * s];
                int tx = xb > yb;
                out[hi--] = tx ? xb : yb;
                a -= tx;
                b -= 1 - tx;
            }
        }
        while (i <= a) out[lo++] = x[i++];
        while (j <= b) { out[lo++] = y[j * s]; j++; }
    }
    /* Sort a[0..L) (L > 16): runs of 16 by the network, the rest by
       fastops_sort_small, then rounds of two-ended merges through tmp
       (room for L). Several times faster than std::sort at these sizes. */
    static void fastops_sort_runs(double* a, int64_t L, double* tmp) {
        int64_t full = L / 16 * 16, i, w;
        double *src = a, *dst = tmp, *sw;
        for (i = 0; i < full; i += 16) fastops_sort16(a + i);
        if (L > full) fastops_sort_small(a + full, L - full);
        for (w = 16; w < L; w *= 2) {
            for (i = 0; i < L; i += 2 * w) {
                int64_t n1 = L - i < w ? L - i : w;
                int64_t n2 = L - i - n1 < w ? L - i - n1 : w;
                fastops_merge_bidir(src + i, n1, src + i + n1, n2, 1, dst + i);
            }
            sw = src; src = dst; dst = sw;
        }
        if (src != a) memcpy(a, src, (size_t)L * sizeof(double));
    }
    static void fastops_sort_pairs(double* v, int64_t* w, int64_t n) {
        std::vector<std::pair<double, int64_t> > tmp((size_t)n);
        for (int64_t i = 0; i < n; i++) tmp[(size_t)i] = std::make_pair(v[i], w[i]);
        std::sort(tmp.begin(), tmp.end());
        for (int64_t i = 0; i < n; i++) { v[i] = tmp[(size_t)i].first; w[i] = tmp[(size_t)i].second; }
    }
    """
    double _nan "fastops_nan"() noexcept nogil
    void _sort_small "fastops_sort_small"(double* a, int64_t L) noexcept nogil
    enum: SORT_SMALL_MAX "FASTOPS_SORT_SMALL_MAX"    # the most items _sort_small takes
    void _merge_back "fastops_merge_back"(double* dst, int64_t nd, const double* src,
                                          int64_t ns, int64_t stride) noexcept nogil
    void _merge_bidir "fastops_merge_bidir"(const double* x, int64_t nx, const double* y,
                                            int64_t ny, int64_t s, double* out) noexcept nogil
    void _sort_runs "fastops_sort_runs"(double* a, int64_t L, double* tmp) noexcept nogil
    void _sort_pairs "fastops_sort_pairs"(double* v, int64_t* w, int64_t n) noexcept nogil


cdef extern from *:
    int __builtin_popcountll(unsigned long long) noexcept nogil


cdef extern from *:
    """
    /* One row of a Space-Saving chunk: find the cell of hash hv (linear
       probing) or the empty cell where it goes, and add wt to acc[id] of that
       cell; a new item gets id newid. Returns 1 for a new item, its cell in
       *pos. Written so that the only branch is the probe loop, which almost
       always stops at the first cell: found-or-new is a 50/50 coin on heavy-
       tailed data and would mispredict as a branch. */
    typedef struct { uint64_t key; int64_t id; } fo_cell;
    static inline int fo_ss_add(fo_cell* tab, uint64_t mask, uint64_t hv, int64_t wt,
                                int64_t* acc, int64_t newid, uint64_t* pos) {
        uint64_t p = hv & mask;
        fo_cell* e;
        for (;;) {
            e = tab + p;
            int stop = (e->key == hv) | (e->id == -1);
            __asm__("" : "+r"(stop));     /* one branch, not two */
            if (stop) break;
            p = (p + 1) & mask;
        }
        int64_t id = e->id;
        int64_t isnew = -(int64_t)(id == -1);   /* all ones for a new item */
        __asm__("" : "+r"(isnew));              /* selects by masks, not jumps */
        id = (newid & isnew) | (id & ~isnew);
        e->key = hv;
        e->id = id;
        acc[id] = (acc[id] & ~isnew) + wt;
        *pos = p;
        return (int)(isnew & 1);
    }
    """
    ctypedef struct Cell "fo_cell":
        uint64_t key
        int64_t id
    int _ss_add "fo_ss_add"(Cell* tab, uint64_t mask, uint64_t hv, int64_t wt, int64_t* acc,
                            int64_t newid, uint64_t* pos) noexcept nogil


DEF BLOCK = 512
DEF MAXLEV = 48
DEF KLL_RUN = 16
DEF PREFETCH = 16
DEF MERGE_BUF = 2048
DEF TABLE_LOAD = 2
DEF HIST = 256

# status codes (the Python layer maps them to exceptions)
cdef enum:
    ERR_NOMEM = -1
    ERR_NEGATIVE_WEIGHT = -2
    ERR_BAD_SIZES = -3
    ERR_TOO_MANY_LEVELS = -4

STATUS_NOMEM = ERR_NOMEM
STATUS_NEGATIVE_WEIGHT = ERR_NEGATIVE_WEIGHT
STATUS_BAD_SIZES = ERR_BAD_SIZES
STATUS_TOO_MANY_LEVELS = ERR_TOO_MANY_LEVELS



# ------------------------------------------------------------ primitives

cdef inline uint64_t _fmix64(uint64_t h) noexcept nogil:
    """MurmurHash3's 64-bit finaliser: derives a second hash from the first."""
    h ^= h >> 33
    h *= 0xFF51AFD7ED558CCDULL
    h ^= h >> 33
    h *= 0xC4CEB9FE1A85EC53ULL
    h ^= h >> 33
    return h


cdef inline uint64_t _splitmix(uint64_t* s) noexcept nogil:
    """splitmix64: advance the state ``s`` and return the next output."""
    s[0] += 0x9E3779B97F4A7C15ULL
    cdef uint64_t z = s[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline double _unit_open0(uint64_t* s) noexcept nogil:
    """Uniform double in (0, 1]."""
    return (<double>((_splitmix(s) >> 11) + 1)) * (1.0 / 9007199254740992.0)


cdef inline bint _any_negative(const int64_t* w, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        if w[i] < 0:
            return True
    return False


cdef inline bint _bit(const uint8_t* bm, int64_t i) noexcept nogil:
    return (bm[i >> 3] >> (i & 7)) & 1


def splitmix_next(uint64_t state):
    """One splitmix64 step: returns ``(new_state, output)``."""
    cdef uint64_t s = state
    cdef uint64_t out = _splitmix(&s)
    return s, out


# ------------------------------------------------------------ hash source

cdef struct HashSrc:
    int mode
    const uint8_t* a
    const uint8_t* b
    const uint8_t* valid
    int64_t voff
    int64_t n
    uint64_t seed
    int64_t lo            # modes 3 / 4: the first offset and the last; no row
    int64_t hi            # runs outside them


ctypedef fused offset_t:
    int32_t
    int64_t


cdef int _check_valid(Py_ssize_t nbytes, int64_t voff, int64_t n) except -1:
    """Validity bits ``voff .. voff + n - 1`` lie inside ``nbytes`` bytes."""
    if n > 0 and (voff < 0 or voff > nbytes * 8 - n):
        raise ValueError(f"validity bitmap too short: {n} bits from bit {voff} on, "
                         f"{nbytes} bytes")
    return 0


cdef int _raise_offsets(const HashSrc* s, str what) except -1:
    """ValueError for the offsets of a hash source that a block found bad."""
    cdef int64_t j, x, y
    for j in range(s.n):
        if s.mode == 3:
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
    (modes 3 / 4) between the first and the last are checked by
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
        _check_valid(valid.shape[0], voff, n)
        s.valid = &valid[0]
    if n == 0:
        return 0
    if mode in (0, 1, 5):
        width = 8
    elif mode in (2, 6):
        width = 4
    elif mode == 3 or mode == 4:
        width = 4 if mode == 3 else 8
        if n >= a.shape[0] // width:  # n + 1 offsets
            raise ValueError("offsets buffer too short")
        if mode == 3:
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
    if s.mode == 0:
        memcpy(out, s.a + 8 * start, <size_t>(8 * count))
    elif s.mode == 1 or s.mode == 5:
        xxh64_many8(<const uint64_t*>(s.a + 8 * start), count, s.seed, out, s.mode == 5)
    elif s.mode == 2 or s.mode == 6:
        xxh64_many4(<const uint32_t*>(s.a + 4 * start), count, s.seed, out, s.mode == 6)
    elif s.mode == 3:
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


# ------------------------------------------------------------ HyperLogLog

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
        if s.mode == 0 and s.valid == NULL:   # hashes given, no nulls: read in place, no copy
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
    ``ERR_BAD_SIZES`` if a slot is out of range. Modifies ``regs``."""
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
                    status = ERR_BAD_SIZES
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
    Returns ``ERR_BAD_SIZES`` if an id is out of range. Modifies ``regs``."""
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
                status = ERR_BAD_SIZES
                break
            for j in range(m):
                if base[b * m + j] > base[a * m + j]:
                    base[a * m + j] = base[b * m + j]
    return status


# ------------------------------------------------------------ Count-Min

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


# ------------------------------------------------------------ Bloom filter

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
    cdef int i
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
                    for i in range(k):
                        bit = range64(g, m_bits)
                        if not ((wd[bit >> 6] >> (bit & 63)) & 1):
                            hit = 0
                            break
                        g += h2
                    out[rb[j]] = hit
                else:
                    for i in range(k):
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
            c += __builtin_popcountll(words[i])
    return c


# ------------------------------------------------------------ KLL

cdef struct KLLData:
    int32_t k
    int32_t m
    int32_t nlev
    int64_t n
    int64_t total_size
    int64_t total_cap
    double minv
    double maxv
    uint64_t rng
    double* lv[MAXLEV]
    int32_t sz[MAXLEV]
    int32_t alloc[MAXLEV]
    int32_t caps[MAXLEV]


cdef inline int64_t _scratch_need(int k) noexcept nogil:
    return 8 * <int64_t>k + 16 * MAXLEV + 64 + KLL_RUN


cdef inline int64_t _kll_cap(const KLLData* d, int h) noexcept nogil:
    """Capacity of level ``h``: max(m, ceil(k * (2/3)**(nlev - 1 - h)))."""
    cdef int64_t c = <int64_t>ceil(d.k * pow(2.0 / 3.0, d.nlev - 1 - h) - 1e-9)
    return c if c > d.m else d.m


cdef inline void _kll_recap(KLLData* d) noexcept nogil:
    """Recompute the cached level capacities (after the level count changed)."""
    cdef int h
    cdef int64_t t = 0, c
    for h in range(d.nlev):
        c = _kll_cap(d, h)
        d.caps[h] = <int32_t>c
        t += c
    d.total_cap = t


cdef int _kll_init(KLLData* d, int k, int m, uint64_t seed) noexcept nogil:
    memset(d, 0, sizeof(KLLData))
    d.k = k
    d.m = m
    d.nlev = 1
    d.rng = seed
    d.minv = 0.0
    d.maxv = 0.0
    _kll_recap(d)
    return 0


cdef void _kll_free(KLLData* d) noexcept nogil:
    cdef int h
    for h in range(MAXLEV):
        if d.lv[h] != NULL:
            free(d.lv[h])
            d.lv[h] = NULL
        d.sz[h] = 0
        d.alloc[h] = 0


cdef int _kll_reserve(KLLData* d, int h, int64_t need) noexcept nogil:
    cdef int64_t cap
    cdef double* p
    if need <= d.alloc[h]:
        return 0
    if need > 2000000000:
        return ERR_NOMEM
    cap = d.alloc[h] * 2
    if cap < need:
        cap = need
    if cap < 16:
        cap = 16
    if cap > 2000000000:
        cap = 2000000000
    p = <double*>realloc(d.lv[h], cap * sizeof(double))
    if p == NULL:
        return ERR_NOMEM
    d.lv[h] = p
    d.alloc[h] = <int32_t>cap
    return 0


cdef int _kll_merge_into(KLLData* d, int h, const double* src, int64_t cnt,
                         int64_t stride=1) noexcept nogil:
    """Merge the ``cnt`` sorted items ``src[0], src[stride], ...`` into the
    sorted level ``h`` (``src`` must not be level ``h``): from both ends into
    a stack buffer when the result fits it, else in place from the back."""
    cdef double buf[MERGE_BUF]
    if _kll_reserve(d, h, d.sz[h] + cnt) != 0:
        return ERR_NOMEM
    if d.sz[h] + cnt <= MERGE_BUF:
        _merge_bidir(d.lv[h], d.sz[h], src, cnt, stride, buf)
        memcpy(d.lv[h], buf, (d.sz[h] + cnt) * sizeof(double))
    else:
        _merge_back(d.lv[h], d.sz[h], src, cnt, stride)
    d.sz[h] = <int32_t>(d.sz[h] + cnt)
    return 0


cdef int _kll_compress(KLLData* d, double* scratch) noexcept nogil:
    """Compact levels until the sketch fits its total capacity.

    A compaction sorts the lowest full level (level 0 is kept unsorted until
    then), keeps one item if the count is odd, and promotes every other item
    of the rest, starting at a random offset 0/1, into the level above
    (weights double). ``scratch`` holds at least ``_scratch_need(k)`` doubles
    (every sketch's scratch does), room to sort level 0 by merges."""
    cdef int h, st
    cdef int64_t L, odd, pairs, j, r
    cdef double* lvl
    while d.total_size >= d.total_cap:
        h = 0
        while h < d.nlev and d.sz[h] < d.caps[h]:
            h += 1
        if h >= d.nlev:
            h = 0
            while h < d.nlev - 1 and d.sz[h] < 2:
                h += 1
        if h == d.nlev - 1:
            if d.nlev >= MAXLEV:
                return ERR_TOO_MANY_LEVELS
            d.nlev += 1
            _kll_recap(d)
        lvl = d.lv[h]
        L = d.sz[h]
        if L < 2:
            return 0
        if h == 0:
            if L <= SORT_SMALL_MAX:
                _sort_small(lvl, L)
            elif L <= _scratch_need(d.k):
                _sort_runs(lvl, L, scratch)
            else:
                sort(lvl, lvl + L)
        odd = L & 1
        pairs = (L - odd) // 2
        r = <int64_t>(_splitmix(&d.rng) >> 63)
        if _kll_reserve(d, h + 1, d.sz[h + 1] + pairs) != 0:
            return ERR_NOMEM
        lvl = d.lv[h]
        st = _kll_merge_into(d, h + 1, lvl + odd + r, pairs, 2)
        if st != 0:
            return st
        d.sz[h] = <int32_t>odd
        d.total_size -= pairs
    return 0


cdef inline int _kll_add(KLLData* d, double v, double* scratch) noexcept nogil:
    cdef int st
    if v != v:
        return 0
    if d.sz[0] >= d.alloc[0]:
        st = _kll_reserve(d, 0, d.sz[0] + 1)
        if st != 0:
            return st
    d.lv[0][d.sz[0]] = v
    d.sz[0] += 1
    if d.n == 0:
        d.minv = v
        d.maxv = v
    elif v < d.minv:
        d.minv = v
    elif v > d.maxv:
        d.maxv = v
    d.n += 1
    d.total_size += 1
    if d.total_size >= d.total_cap:
        return _kll_compress(d, scratch)
    return 0


cdef int _kll_add_many(KLLData* d, const double* x, int64_t n, const uint8_t* bm,
                       int64_t voff, double* scratch) noexcept nogil:
    """Add ``n`` values (bit ``voff + i`` of ``bm`` valid; NaN skipped).

    Values go into level 0 ``KLL_RUN`` at a time before the sketch compacts,
    so level 0 is compacted in runs of up to ``KLL_RUN`` items rather than
    of its (small) nominal capacity: fewer, larger compactions, which only
    lowers the error (each compaction at level h adds one ±2^h term), and a
    sort per run instead of per handful of items. The state after the call
    is within capacity as usual. ``scratch`` must hold
    ``_scratch_need(k) + KLL_RUN`` doubles."""
    cdef int64_t i = 0, j, t, room
    cdef int st
    cdef double v, lo, hi
    cdef double* dst
    while i < n:
        if _kll_reserve(d, 0, d.sz[0] + KLL_RUN) != 0:
            return ERR_NOMEM
        dst = d.lv[0] + d.sz[0]
        j = 0
        if d.n == 0:
            while i < n and (x[i] != x[i] or (bm != NULL and not _bit(bm, voff + i))):
                i += 1
            if i == n:
                break
            d.minv = x[i]
            d.maxv = x[i]
        lo = d.minv
        hi = d.maxv
        if bm == NULL:
            if n - i >= KLL_RUN:                # no branch per value
                for t in range(KLL_RUN):
                    v = x[i + t]
                    dst[j] = v
                    j += v == v                 # NaN: written over, not kept
                    lo = v if v < lo else lo
                    hi = v if v > hi else hi
                i += KLL_RUN
            while i < n and j < KLL_RUN:        # (NaNs seen) fill the run up
                v = x[i]
                i += 1
                if v != v:
                    continue
                dst[j] = v
                j += 1
                if v < lo:
                    lo = v
                if v > hi:
                    hi = v
        else:
            while i < n and j < KLL_RUN:
                v = x[i]
                i += 1
                if v != v or not _bit(bm, voff + i - 1):
                    continue
                dst[j] = v
                j += 1
                if v < lo:
                    lo = v
                if v > hi:
                    hi = v
        d.minv = lo
        d.maxv = hi
        d.sz[0] += <int32_t>j
        d.n += j
        d.total_size += j
        if d.total_size >= d.total_cap:
            st = _kll_compress(d, scratch)
            if st != 0:
                return st
    return 0


cdef int _kll_merge(KLLData* d, const KLLData* o, double* scratch) noexcept nogil:
    """d <- d (+) o: level-wise union (level 0 appended, others merged sorted),
    then compaction."""
    cdef int h, st
    if o.n == 0:
        return 0
    while d.nlev < o.nlev:
        d.nlev += 1
    _kll_recap(d)
    if _kll_reserve(d, 0, d.sz[0] + o.sz[0]) != 0:
        return ERR_NOMEM
    if o.sz[0] > 0:
        memcpy(d.lv[0] + d.sz[0], o.lv[0], o.sz[0] * sizeof(double))
    d.sz[0] += o.sz[0]
    for h in range(1, o.nlev):
        if o.sz[h] > 0:
            st = _kll_merge_into(d, h, o.lv[h], o.sz[h])
            if st != 0:
                return st
    if d.n == 0:
        d.minv = o.minv
        d.maxv = o.maxv
    else:
        if o.minv < d.minv:
            d.minv = o.minv
        if o.maxv > d.maxv:
            d.maxv = o.maxv
    d.n += o.n
    d.total_size += o.total_size
    return _kll_compress(d, scratch)


cdef int _kll_copy(KLLData* d, const KLLData* o) noexcept nogil:
    cdef int h
    _kll_free(d)
    memcpy(d, o, sizeof(KLLData))
    for h in range(MAXLEV):
        d.lv[h] = NULL
        d.alloc[h] = 0
        d.sz[h] = 0
    for h in range(o.nlev):
        if o.sz[h] > 0:
            if _kll_reserve(d, h, o.sz[h]) != 0:
                return ERR_NOMEM
            memcpy(d.lv[h], o.lv[h], o.sz[h] * sizeof(double))
        d.sz[h] = o.sz[h]
    return 0


cdef class _Scratch:
    """A growable double buffer shared by KLL compactions."""
    cdef double* p
    cdef int64_t n

    def __cinit__(self):
        self.p = NULL
        self.n = 0

    cdef int ensure(self, int64_t need) except -1:
        cdef double* q
        if need <= self.n:
            return 0
        q = <double*>realloc(self.p, need * sizeof(double))
        if q == NULL:
            raise MemoryError()
        self.p = q
        self.n = need
        return 0

    def __dealloc__(self):
        if self.p != NULL:
            free(self.p)


cdef class KLLCore:
    """One KLL sketch: a compactor hierarchy of float64 items."""
    cdef KLLData d
    cdef _Scratch scratch

    def __cinit__(self, int k=200, int m=8, uint64_t seed=0):
        if k < 8 or k > 65535 or m < 2 or m > k:
            raise ValueError(f"bad KLL parameters k={k}, m={m}")
        _kll_init(&self.d, k, m, seed)
        self.scratch = _Scratch()
        self.scratch.ensure(_scratch_need(k))

    def __dealloc__(self):
        _kll_free(&self.d)

    @property
    def k(self):
        return self.d.k

    @property
    def m(self):
        return self.d.m

    @property
    def n(self):
        return self.d.n

    @property
    def num_levels(self):
        return self.d.nlev

    @property
    def num_retained(self):
        return self.d.total_size

    @property
    def min_value(self):
        return self.d.minv

    @property
    def max_value(self):
        return self.d.maxv

    @property
    def rng_state(self):
        return self.d.rng

    def update(self, const double[::1] x, const uint8_t[::1] valid, int64_t voff) -> int:
        """Add the valid, non-NaN values of ``x`` (bit ``voff + i`` of ``valid``;
        empty ``valid``: all valid). Returns a status."""
        cdef int64_t i, n = x.shape[0]
        cdef int st = 0
        cdef const uint8_t* bm = NULL
        if valid.shape[0] > 0:
            _check_valid(valid.shape[0], voff, n)
            bm = &valid[0]
        self.scratch.ensure(_scratch_need(self.d.k) + self.d.total_size)
        cdef double* sc = self.scratch.p
        with nogil:
            st = _kll_add_many(&self.d, &x[0] if n > 0 else NULL, n, bm, voff, sc)
        return st

    def merge(self, KLLCore other) -> int:
        """self <- self (+) other. Returns a status."""
        if other.d.k != self.d.k or other.d.m != self.d.m:
            raise ValueError("KLL parameters differ")
        self.scratch.ensure(_scratch_need(self.d.k) + self.d.total_size + other.d.total_size)
        cdef int st
        with nogil:
            st = _kll_merge(&self.d, &other.d, self.scratch.p)
        return st

    def copy(self):
        cdef KLLCore c = KLLCore(self.d.k, self.d.m, self.d.rng)
        if _kll_copy(&c.d, &self.d) != 0:
            raise MemoryError()
        return c

    def level_size(self, int h) -> int:
        if h < 0 or h >= self.d.nlev:
            raise IndexError(h)
        return self.d.sz[h]

    def read_level(self, int h, double[::1] out) -> int:
        """Copy level ``h`` into ``out`` (length level_size(h)). Modifies ``out``."""
        if h < 0 or h >= self.d.nlev or out.shape[0] != self.d.sz[h]:
            raise ValueError("bad level / output size")
        if self.d.sz[h] > 0:
            memcpy(&out[0], self.d.lv[h], self.d.sz[h] * sizeof(double))
        return self.d.sz[h]

    def load(self, int nlev, int64_t n, double minv, double maxv, uint64_t rng, list levels):
        """Replace the state (used by ``from_bytes``; inputs validated there)."""
        cdef int h
        cdef const double[::1] lv
        if nlev < 1 or nlev > MAXLEV or len(levels) != nlev:
            raise ValueError("bad level count")
        _kll_free(&self.d)
        self.d.nlev = nlev
        self.d.n = n
        self.d.minv = minv
        self.d.maxv = maxv
        self.d.rng = rng
        self.d.total_size = 0
        for h in range(nlev):
            lv = levels[h]
            if lv.shape[0] > 0:
                if _kll_reserve(&self.d, h, lv.shape[0]) != 0:
                    raise MemoryError()
                memcpy(self.d.lv[h], &lv[0], lv.shape[0] * sizeof(double))
            self.d.sz[h] = <int32_t>lv.shape[0]
            self.d.total_size += lv.shape[0]
        _kll_recap(&self.d)
        self.scratch.ensure(_scratch_need(self.d.k) + self.d.total_size)
        cdef int st
        with nogil:
            st = _kll_compress(&self.d, self.scratch.p)
        if st != 0:
            raise MemoryError()


cdef class KLLSlots:
    """An array of KLL sketches (one per window slot), as C structs."""
    cdef KLLData* arr
    cdef int64_t n
    cdef int64_t cap
    cdef int k
    cdef int m
    cdef uint64_t seed
    cdef _Scratch scratch

    def __cinit__(self, int k=200, int m=8, uint64_t seed=0):
        if k < 8 or k > 65535 or m < 2 or m > k:
            raise ValueError(f"bad KLL parameters k={k}, m={m}")
        self.arr = NULL
        self.n = 0
        self.cap = 0
        self.k = k
        self.m = m
        self.seed = seed
        self.scratch = _Scratch()
        self.scratch.ensure(_scratch_need(k))

    def __dealloc__(self):
        cdef int64_t i
        if self.arr != NULL:
            for i in range(self.n):
                _kll_free(&self.arr[i])
            free(self.arr)

    def __len__(self):
        return self.n

    def grow(self, int64_t nslots):
        """Make sure slots ``0 .. nslots-1`` exist (new ones empty)."""
        cdef int64_t i, c
        cdef KLLData* p
        if nslots <= self.n:
            return
        if nslots > self.cap:
            c = max(nslots, 2 * self.cap, 16)
            p = <KLLData*>realloc(self.arr, c * sizeof(KLLData))
            if p == NULL:
                raise MemoryError()
            self.arr = p
            self.cap = c
        for i in range(self.n, nslots):
            _kll_init(&self.arr[i], self.k, self.m, self.seed + <uint64_t>i * 0x9E3779B97F4A7C15ULL)
        self.n = nslots

    def update(self, const int64_t[::1] slots, const double[::1] x) -> int:
        """Value ``x[i]`` goes into the sketch of slot ``slots[i]`` (NaN skipped).
        Returns ``ERR_BAD_SIZES`` for a slot out of range."""
        cdef int64_t i, sl, n = x.shape[0]
        cdef int st = 0
        if slots.shape[0] != n:
            raise ValueError("slots and values differ in length")
        cdef double* sc = self.scratch.p
        with nogil:
            for i in range(n):
                sl = slots[i]
                if sl < 0 or sl >= self.n:
                    st = ERR_BAD_SIZES
                    break
                st = _kll_add(&self.arr[sl], x[i], sc)
                if st != 0:
                    break
        return st

    def merge(self, const int64_t[::1] dst, const int64_t[::1] src) -> int:
        """Sketch ``dst[i]`` <- ``dst[i]`` (+) ``src[i]`` in order."""
        cdef int64_t i, a, b
        cdef int st = 0
        cdef KLLData tmp
        if dst.shape[0] != src.shape[0]:
            raise ValueError("dst and src differ in length")
        memset(&tmp, 0, sizeof(KLLData))
        with nogil:
            for i in range(dst.shape[0]):
                a = dst[i]
                b = src[i]
                if a < 0 or a >= self.n or b < 0 or b >= self.n:
                    st = ERR_BAD_SIZES
                    break
                if a == b:
                    st = _kll_copy(&tmp, &self.arr[b])
                    if st == 0:
                        st = _kll_merge(&self.arr[a], &tmp, self.scratch.p)
                else:
                    st = _kll_merge(&self.arr[a], &self.arr[b], self.scratch.p)
                if st != 0:
                    break
            _kll_free(&tmp)
        return st

    def reset(self, const int64_t[::1] slots) -> int:
        cdef int64_t i, sl
        for i in range(slots.shape[0]):
            sl = slots[i]
            if sl < 0 or sl >= self.n:
                return ERR_BAD_SIZES
        with nogil:
            for i in range(slots.shape[0]):
                sl = slots[i]
                _kll_free(&self.arr[sl])
                _kll_init(&self.arr[sl], self.k, self.m,
                          self.seed + <uint64_t>sl * 0x9E3779B97F4A7C15ULL)
        return 0

    def get(self, int64_t slot):
        """A KLLCore copy of one slot's sketch."""
        if slot < 0 or slot >= self.n:
            raise IndexError(slot)
        cdef KLLCore c = KLLCore(self.k, self.m, 0)
        if _kll_copy(&c.d, &self.arr[slot]) != 0:
            raise MemoryError()
        c.scratch.ensure(_scratch_need(c.d.k) + c.d.total_size)
        return c

    def put(self, int64_t slot, KLLCore core):
        """Replace one slot's sketch with a copy of ``core``."""
        if slot < 0 or slot >= self.n:
            raise IndexError(slot)
        if core.d.k != self.k or core.d.m != self.m:
            raise ValueError("KLL parameters differ")
        if _kll_copy(&self.arr[slot], &core.d) != 0:
            raise MemoryError()
        self.scratch.ensure(_scratch_need(self.k) + self.arr[slot].total_size)

    def quantiles(self, const int64_t[::1] slots, double q, double[::1] out) -> int:
        """out[i] = the q-quantile (inclusive rank) of slot ``slots[i]``; NaN for
        an empty sketch. Modifies ``out``."""
        cdef int64_t i, sl, tot, j, cnt, lo
        cdef int h
        cdef KLLData* d
        cdef double target, cum
        cdef double* items = NULL
        cdef double* wts = NULL
        cdef int64_t* order = NULL
        if out.shape[0] < slots.shape[0]:
            raise ValueError("output too short")
        for i in range(slots.shape[0]):
            if slots[i] < 0 or slots[i] >= self.n:
                return ERR_BAD_SIZES
        with nogil:
            for i in range(slots.shape[0]):
                d = &self.arr[slots[i]]
                if d.n == 0:
                    out[i] = _nan()
                    continue
                if q <= 0.0:
                    out[i] = d.minv
                    continue
                if q >= 1.0:
                    out[i] = d.maxv
                    continue
                tot = d.total_size
                items = <double*>realloc(items, (tot + 1) * sizeof(double))
                order = <int64_t*>realloc(order, (tot + 1) * sizeof(int64_t))
                if items == NULL or order == NULL:
                    break
                # weighted items, encoded as (value, level) pairs sorted by value
                cnt = 0
                for h in range(d.nlev):
                    for j in range(d.sz[h]):
                        items[cnt] = d.lv[h][j]
                        order[cnt] = h
                        cnt += 1
                _sort_pairs(items, order, cnt)
                target = q * d.n
                cum = 0.0
                out[i] = d.maxv
                for j in range(cnt):
                    cum += <double>(<int64_t>1 << order[j])
                    if cum >= target:
                        out[i] = items[j]
                        break
            free(items)
            free(order)
        return 0


# ------------------------------------------------------------ Space-Saving

cdef inline int64_t _tbl_find(const uint64_t* keys, const uint8_t* used, uint64_t mask,
                              uint64_t h) noexcept nogil:
    """Open-addressing lookup (linear probing): the cell of ``h`` or the empty
    cell where it would go."""
    cdef uint64_t i = _fmix64(h) & mask
    while used[i] and keys[i] != h:
        i = (i + 1) & mask
    return <int64_t>i


cdef struct SSWork:
    uint64_t* tkeys
    uint8_t* tused
    int64_t* tval
    uint64_t mask
    int64_t tsize
    uint64_t* ch
    int64_t* cc
    int64_t* ce
    int64_t* cr
    int64_t* tmp


cdef void _ssw_free(SSWork* w) noexcept nogil:
    free(w.tkeys)
    free(w.tused)
    free(w.tval)
    free(w.ch)
    free(w.cc)
    free(w.ce)
    free(w.cr)
    free(w.tmp)


cdef int _ssw_alloc(SSWork* w, int64_t table_items, int64_t ncand) noexcept nogil:
    """Scratch for a hash table of ``table_items`` keys and ``ncand`` candidates."""
    memset(w, 0, sizeof(SSWork))
    w.tsize = 16
    while w.tsize < TABLE_LOAD * table_items + 2:
        w.tsize *= 2
    w.mask = <uint64_t>(w.tsize - 1)
    w.tkeys = <uint64_t*>malloc(w.tsize * sizeof(uint64_t))
    w.tused = <uint8_t*>malloc(w.tsize)
    w.tval = <int64_t*>malloc(w.tsize * sizeof(int64_t))
    w.ch = <uint64_t*>malloc((ncand + 1) * sizeof(uint64_t))
    w.cc = <int64_t*>malloc((ncand + 1) * sizeof(int64_t))
    w.ce = <int64_t*>malloc((ncand + 1) * sizeof(int64_t))
    w.cr = <int64_t*>malloc((ncand + 1) * sizeof(int64_t))
    w.tmp = <int64_t*>malloc((ncand + 1) * sizeof(int64_t))
    if (w.tkeys == NULL or w.tused == NULL or w.tval == NULL or w.ch == NULL
            or w.cc == NULL or w.ce == NULL or w.cr == NULL or w.tmp == NULL):
        _ssw_free(w)
        memset(w, 0, sizeof(SSWork))
        return ERR_NOMEM
    return 0


cdef inline int64_t _ss_min(const int64_t* counts, int64_t size, int64_t capacity) noexcept nogil:
    """The count below which an unmonitored item must lie: the summary's
    minimum when it is full, else 0."""
    cdef int64_t m1, i
    if size < capacity or size == 0:
        return 0
    m1 = counts[0]
    for i in range(size):
        if counts[i] < m1:
            m1 = counts[i]
    return m1


cdef int64_t _ss_select(int64_t* tmp, uint64_t* hashes, int64_t* counts, int64_t* errs,
                        int64_t* reps, int64_t size, int64_t capacity,
                        const uint64_t* ch, const int64_t* cc, const int64_t* ce,
                        const int64_t* cr, int64_t n2, int64_t m1) noexcept nogil:
    """Keep the ``capacity`` largest of the summary (``size`` entries) and of
    ``n2`` candidates not in it, candidate ``j`` with count ``cc[j] + m1`` and
    error ``ce[j] + m1`` (``ce`` NULL: errors 0); ties go to the summary, then
    to the lower index.
    Survivors are compacted in place (summary first, then candidates).
    ``tmp`` has room for ``size + n2`` values. Returns the new size.

    The threshold (the ``capacity``-th largest count) comes from a histogram
    of ``[m1, m1 + HIST)`` in one pass when it lies there, as it does in the
    steady state (counts gather just above the minimum); else from
    ``nth_element``."""
    cdef int64_t hist[HIST]
    cdef int64_t i, j, t, above = 0, cum, thr, gt, ties, keep, c, total = size + n2
    cdef uint64_t d
    cdef bint take
    if total <= capacity:
        for j in range(n2):
            hashes[size + j] = ch[j]
            counts[size + j] = cc[j] + m1
            errs[size + j] = (ce[j] if ce != NULL else 0) + m1
            reps[size + j] = cr[j]
        return total
    memset(hist, 0, sizeof(hist))
    for i in range(size):
        d = <uint64_t>(counts[i] - m1)
        if d < HIST:
            hist[d] += 1
        else:
            above += 1
    for j in range(n2):
        d = <uint64_t>cc[j]
        if d < HIST:
            hist[d] += 1
        else:
            above += 1
    if above < capacity:
        cum = above
        t = HIST - 1
        while t > 0 and cum + hist[t] < capacity:
            cum += hist[t]
            t -= 1
        thr = m1 + t
        gt = cum
    else:
        for i in range(size):
            tmp[i] = -counts[i]
        for j in range(n2):
            tmp[size + j] = -(cc[j] + m1)
        nth_element(tmp, tmp + (capacity - 1), tmp + total)
        thr = -tmp[capacity - 1]
        gt = 0
        for i in range(total):
            gt += tmp[i] < -thr
    ties = capacity - gt
    keep = 0
    for i in range(size):
        c = counts[i]
        take = c > thr or (c == thr and ties > 0)
        ties -= c == thr and take
        if take:
            hashes[keep] = hashes[i]
            counts[keep] = c
            errs[keep] = errs[i]
            reps[keep] = reps[i]
            keep += 1
    for j in range(n2):
        c = cc[j] + m1
        take = c > thr or (c == thr and ties > 0)
        ties -= c == thr and take
        if take:
            hashes[keep] = ch[j]
            counts[keep] = c
            errs[keep] = (ce[j] if ce != NULL else 0) + m1
            reps[keep] = cr[j]
            keep += 1
    return keep


cdef int64_t _ss_combine(SSWork* w, uint64_t* hashes, int64_t* counts, int64_t* errs,
                         int64_t* reps, int64_t size, int64_t capacity,
                         const uint64_t* oh, const int64_t* oc, const int64_t* oe,
                         const int64_t* orp, int64_t n2, int64_t o_min) noexcept nogil:
    """Space-Saving combine (see ``ss_merge``); ``w`` has a table for ``size``
    keys and room for ``size + n2`` candidates. Returns the new size."""
    cdef int64_t m1 = _ss_min(counts, size, capacity), i, j, pos, nnew = 0
    memset(w.tused, 0, w.tsize)
    for i in range(size):
        pos = _tbl_find(w.tkeys, w.tused, w.mask, hashes[i])
        w.tused[pos] = 1
        w.tkeys[pos] = hashes[i]
        w.tval[pos] = i
        counts[i] += o_min
        errs[i] += o_min
    for j in range(n2):
        pos = _tbl_find(w.tkeys, w.tused, w.mask, oh[j])
        if w.tused[pos]:
            i = w.tval[pos]
            counts[i] += oc[j] - o_min
            errs[i] += oe[j] - o_min
        else:
            w.ch[nnew] = oh[j]
            w.cc[nnew] = oc[j]
            w.ce[nnew] = oe[j]
            w.cr[nnew] = orp[j]
            nnew += 1
    return _ss_select(w.tmp, hashes, counts, errs, reps, size, capacity,
                      w.ch, w.cc, w.ce, w.cr, nnew, m1)


cdef int _check_ss(uint64_t[::1] hashes, int64_t[::1] counts, int64_t[::1] errs,
                   int64_t[::1] reps, int64_t size, int64_t capacity) except -1:
    if (capacity < 1 or hashes.shape[0] < capacity or counts.shape[0] < capacity
            or errs.shape[0] < capacity or reps.shape[0] < capacity
            or size < 0 or size > capacity):
        raise ValueError("bad Space-Saving buffers")
    return 0


def ss_merge(uint64_t[::1] hashes, int64_t[::1] counts, int64_t[::1] errs,
             int64_t[::1] reps, int64_t size, int64_t capacity,
             const uint64_t[::1] o_hashes, const int64_t[::1] o_counts,
             const int64_t[::1] o_errs, int64_t o_min) -> int:
    """Combine a summary (``size`` entries, arrays of length >= ``capacity``)
    with another summary ``o`` whose unmonitored items have count <= ``o_min``.

    Each item gets count ``c1 + c2`` and error ``e1 + e2``, where a side that
    does not monitor it contributes its minimum count (0 unless full) to both;
    the ``capacity`` largest counts stay. ``reps`` is carried along with the
    entries (preset it, e.g. to ``0..size-1``); entries from ``o`` get
    ``-(j + 1)``. Returns the new size (or a negative status); modifies the
    four summary arrays."""
    _check_ss(hashes, counts, errs, reps, size, capacity)
    cdef int64_t n2 = o_hashes.shape[0], j, res
    if o_counts.shape[0] < n2 or o_errs.shape[0] < n2:
        raise ValueError("bad Space-Saving buffers")
    cdef SSWork w
    cdef int64_t* orp = <int64_t*>malloc((n2 + 1) * sizeof(int64_t))
    if orp == NULL:
        raise MemoryError()
    cdef const uint64_t* ohp = &o_hashes[0] if n2 > 0 else NULL
    cdef const int64_t* ocp = &o_counts[0] if n2 > 0 else NULL
    cdef const int64_t* oep = &o_errs[0] if n2 > 0 else NULL
    with nogil:
        for j in range(n2):
            orp[j] = -(j + 1)
        if _ssw_alloc(&w, size, size + n2) != 0:
            res = ERR_NOMEM
        else:
            res = _ss_combine(&w, &hashes[0], &counts[0], &errs[0], &reps[0], size,
                              capacity, ohp, ocp, oep, orp, n2, o_min)
            _ssw_free(&w)
        free(orp)
    return res


def ss_update(uint64_t[::1] hashes, int64_t[::1] counts, int64_t[::1] errs,
              int64_t[::1] reps, int64_t size, int64_t capacity,
              const int64_t[::1] weights, int64_t chunk, int mode,
              const uint8_t[::1] a, const uint8_t[::1] b, const uint8_t[::1] valid,
              int64_t voff, int64_t n, uint64_t seed) -> int:
    """Space-Saving update with a batch, ``chunk`` rows at a time: each chunk
    is counted exactly (hash table; weight-0 rows skipped) and combined into
    the summary as by ``ss_merge`` with ``o_min = 0``. New entries get
    ``reps = -(row + 1)`` (their first row in the batch). Returns the new size
    or ``ERR_NEGATIVE_WEIGHT`` (summary unchanged) / ``ERR_NOMEM``.

    One open-addressing table per chunk holds the monitored items (put in
    first) and the chunk's new items; a row costs one probe, and whether its
    item is monitored, new or seen before in the chunk takes no branch (the
    probe loop stops at the first cell in the common case)."""
    _check_ss(hashes, counts, errs, reps, size, capacity)
    cdef HashSrc s
    _src_init(&s, mode, a, b, valid, voff, n, seed)
    cdef bint weighted = weights.shape[0] > 0
    if weighted and weights.shape[0] < n:
        raise ValueError("weights shorter than values")
    if chunk < 1:
        raise ValueError("chunk must be positive")
    if chunk > n:
        chunk = max(n, 1)
    cdef const int64_t* wp = &weights[0] if weighted else NULL
    cdef uint64_t hb[BLOCK]
    cdef int64_t rb[BLOCK]
    cdef SSWork w                  # the chunk's candidates and the selection's scratch
    cdef int64_t off, cend, got = 0, j, i, wt, distinct, m1, res = size
    cdef uint64_t pos, hv
    cdef uint64_t* tpos = NULL
    cdef uint64_t* spos = NULL
    cdef int64_t* acc = NULL       # weight added by the chunk, by cell id
    cdef Cell* tab = NULL
    cdef Cell* e
    cdef uint64_t tmask
    cdef int64_t tsize = 16
    cdef bint neg = False
    cdef int isnew
    while tsize < TABLE_LOAD * (chunk + capacity) + 2:
        tsize *= 2
    tmask = <uint64_t>(tsize - 1)
    if weighted:
        with nogil:
            neg = _any_negative(wp, n)
        if neg:
            return ERR_NEGATIVE_WEIGHT
    with nogil:
        tab = <Cell*>malloc(tsize * sizeof(Cell))
        acc = <int64_t*>malloc((capacity + chunk + 1) * sizeof(int64_t))
        tpos = <uint64_t*>malloc((chunk + 1) * sizeof(uint64_t))
        spos = <uint64_t*>malloc((capacity + 1) * sizeof(uint64_t))
        # no keys for SSWork's table: the chunk is counted in ``tab``
        if (_ssw_alloc(&w, 0, capacity + chunk) != 0 or tab == NULL or acc == NULL
                or tpos == NULL or spos == NULL):
            res = ERR_NOMEM
        else:
            for j in range(tsize):
                tab[j].id = -1
            off = 0
            while off < n:
                cend = min(off + chunk, n)
                # the monitored items first: their rows add to their counter
                # directly (the combine rule for an item on both sides)
                for i in range(min(res, <int64_t>PREFETCH)):
                    _prefetch(&tab[hashes[i] & tmask])
                for i in range(res):
                    if i + PREFETCH < res:
                        _prefetch(&tab[hashes[i + PREFETCH] & tmask])
                    hv = hashes[i]
                    pos = hv & tmask
                    while tab[pos].id != -1:
                        pos = (pos + 1) & tmask
                    tab[pos].key = hv
                    tab[pos].id = i
                    spos[i] = pos
                    acc[i] = 0
                distinct = 0
                while off < cend:
                    got = _hash_block(&s, off, min(<int64_t>BLOCK, cend - off), hb, rb)
                    if got < 0:
                        break
                    for j in range(min(got, <int64_t>PREFETCH)):
                        _prefetch(&tab[hb[j] & tmask])
                    for j in range(got):
                        if j + PREFETCH < got:
                            _prefetch(&tab[hb[j + PREFETCH] & tmask])
                        if weighted:
                            wt = wp[rb[j]]
                            if wt == 0:
                                continue
                        else:
                            wt = 1
                        # cells: (hash, id), id -1 empty, < capacity a
                        # monitored entry, capacity + d the chunk's new item d;
                        # XXH64 bits index the table with no further mixing
                        isnew = _ss_add(tab, tmask, hb[j], wt, acc, capacity + distinct, &pos)
                        tpos[distinct] = pos
                        w.cr[distinct] = -(rb[j] + 1)
                        distinct += isnew
                    off += min(<int64_t>BLOCK, cend - off)
                if got < 0:
                    break
                # an item new to the summary may have had up to m1 before
                m1 = _ss_min(&counts[0], res, capacity)
                for i in range(res):
                    if i + PREFETCH < res:
                        _prefetch(&tab[spos[i + PREFETCH]])
                    counts[i] += acc[i]
                    tab[spos[i]].id = -1
                for j in range(distinct):
                    if j + PREFETCH < distinct:
                        _prefetch(&tab[tpos[j + PREFETCH]])
                    e = &tab[tpos[j]]
                    w.ch[j] = e.key
                    w.cc[j] = acc[capacity + j]
                    e.id = -1
                res = _ss_select(w.tmp, &hashes[0], &counts[0], &errs[0], &reps[0], res,
                                 capacity, w.ch, w.cc, NULL, w.cr, distinct, m1)
        _ssw_free(&w)
        free(tab)
        free(acc)
        free(tpos)
        free(spos)
    if got < 0:
        _raise_offsets(&s, "ss_update")
    return res


# ------------------------------------------------------------ reservoir

cdef inline int64_t _l_skip(double W, uint64_t* s) noexcept nogil:
    """Algorithm L's skip ``floor(log(u) / log(1 - W))``, capped at 4e18 rows.
    When ``1 - W`` rounds to 1 (``W`` below 1.1e-16: a very long stream, or a
    loaded state) ``log(1 - W)`` is taken as ``-W``: the skip is then huge,
    never negative or a cast of -inf."""
    cdef double lw = log(1.0 - W)
    if lw == 0.0:
        lw = -W
    cdef double skip = floor(log(_unit_open0(s)) / lw)
    return <int64_t>skip if skip < 4e18 else <int64_t>4000000000000000000


def reservoir_update(int64_t k, double[::1] fstate, int64_t[::1] istate,
                     uint64_t[::1] rng, int64_t[::1] positions, int64_t[::1] src,
                     const uint8_t[::1] valid, int64_t voff, int64_t n) -> int:
    """Algorithm L over the valid rows ``0 .. n-1`` of one batch.

    State: ``istate = [seen, next]`` (rows seen so far, global number of the
    next row to take once full), ``fstate = [W]``, ``rng = [splitmix state]``.
    ``positions[slot]`` gets the global row number of the sampled row and
    ``src[slot]`` (preset to -1 by the caller) the batch row that replaced it.
    Modifies all state arrays, ``positions`` and ``src``."""
    if positions.shape[0] < k or src.shape[0] < k or k < 1:
        raise ValueError("bad reservoir buffers")
    if istate.shape[0] < 2 or fstate.shape[0] < 1 or rng.shape[0] < 1:
        raise ValueError("bad reservoir state")
    cdef const uint8_t* bm = NULL
    if valid.shape[0] > 0:
        _check_valid(valid.shape[0], voff, n)
        bm = &valid[0]
    cdef int64_t i, seen = istate[0], nxt = istate[1], slot
    cdef double W = fstate[0]
    cdef uint64_t s = rng[0]
    with nogil:
        for i in range(n):
            if bm != NULL and not _bit(bm, voff + i):
                continue
            if seen < k:
                positions[seen] = seen
                src[seen] = i
                seen += 1
                if seen == k:
                    W = exp(log(_unit_open0(&s)) / k)
                    nxt = seen + _l_skip(W, &s)
                continue
            if seen == nxt:
                slot = <int64_t>range64(_splitmix(&s), <uint64_t>k)
                positions[slot] = seen
                src[slot] = i
                W = W * exp(log(_unit_open0(&s)) / k)
                nxt = seen + 1 + _l_skip(W, &s)
            seen += 1
    istate[0] = seen
    istate[1] = nxt
    fstate[0] = W
    rng[0] = s
    return 0


def reservoir_skip(int64_t k, double W, uint64_t rng, int64_t seen):
    """Restart Algorithm L after a merge at ``seen`` rows with threshold ``W``:
    returns ``(next, rng)``."""
    cdef uint64_t s = rng
    cdef int64_t nxt = seen + _l_skip(W, &s)
    return nxt, s
