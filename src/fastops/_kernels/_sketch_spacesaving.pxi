# Space-Saving heavy hitters (included by sketch.pyx).

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


DEF PREFETCH = 16   # prefetch distance (rows) of the table probes
DEF TABLE_LOAD = 2  # hash tables hold at least this many cells per key
DEF HIST = 256      # counts histogram of the selection, above the minimum

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
                    prefetch_r(&tab[hashes[i] & tmask])
                for i in range(res):
                    if i + PREFETCH < res:
                        prefetch_r(&tab[hashes[i + PREFETCH] & tmask])
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
                        prefetch_r(&tab[hb[j] & tmask])
                    for j in range(got):
                        if j + PREFETCH < got:
                            prefetch_r(&tab[hb[j + PREFETCH] & tmask])
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
                        prefetch_r(&tab[spos[i + PREFETCH]])
                    counts[i] += acc[i]
                    tab[spos[i]].id = -1
                for j in range(distinct):
                    if j + PREFETCH < distinct:
                        prefetch_r(&tab[tpos[j + PREFETCH]])
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
