# KLL quantile sketch (included by sketch.pyx).
#
# Sorting and merging of level items: networks and branchless merges in C++.

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
       (room for L): cheaper than a general sort for these small arrays. */
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
        for (int64_t i = 0; i < n; i++) {
            v[i] = tmp[(size_t)i].first;
            w[i] = tmp[(size_t)i].second;
        }
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


DEF MAXLEV = 48       # levels of a sketch at most
DEF KLL_RUN = 16      # values added to level 0 before a compaction
DEF MERGE_BUF = 2048  # merged levels up to this many items go through a stack buffer

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
    cdef int64_t L, odd, pairs, r
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
    cdef int64_t i = 0, j, t
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


@cython.auto_pickle(False)  # C memory: not picklable
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


@cython.auto_pickle(False)  # C memory: not picklable
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
        cdef int64_t n = x.shape[0]
        cdef int st = 0
        cdef const uint8_t* bm = NULL
        if valid.shape[0] > 0:
            check_validity(valid.shape[0], voff, n)
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


@cython.auto_pickle(False)  # C memory: not picklable
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
        Returns ``ERR_RANGE`` for a slot out of range."""
        cdef int64_t i, sl, n = x.shape[0]
        cdef int st = 0
        if slots.shape[0] != n:
            raise ValueError("slots and values differ in length")
        cdef double* sc = self.scratch.p
        with nogil:
            for i in range(n):
                sl = slots[i]
                if sl < 0 or sl >= self.n:
                    st = ERR_RANGE
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
                    st = ERR_RANGE
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
                return ERR_RANGE
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
        cdef int64_t i, tot, j, cnt
        cdef int h
        cdef KLLData* d
        cdef double target, cum
        cdef double* items = NULL
        cdef int64_t* order = NULL
        if out.shape[0] < slots.shape[0]:
            raise ValueError("output too short")
        for i in range(slots.shape[0]):
            if slots[i] < 0 or slots[i] >= self.n:
                return ERR_RANGE
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
