# Aggregate records (included by window.pyx).
#
# State of one aggregate: ``rec``, an (n_slots, F) int64 array, one record of
# F 8-byte words per slot (so one row touches one cache line); word 0 is
# ``cnt``, the number of non-null values (0: the slot is empty and its other
# words are garbage); float words are the same bytes read as double.
# Aggregates are named by a code (``OPS``) shared by updates and merges:
#   count (cnt) | sum_f64 (cnt, total, comp; result total + comp) | sum_i64
#   (cnt, total; a total out of int64 range is reported: SumOverflowError) |
#   max/min_i64, max/min_f64 (cnt, value; NaN skipped) | welford (cnt, mean,
#   M2) | first / last (cnt, value, ts: the value of the smallest / largest
#   event time; ties: the earliest row for first, the latest for last; values
#   are raw 8-byte words)

OPS = {"count": 0, "sum_f64": 1, "sum_i64": 2, "max_i64": 3, "min_i64": 4,
       "max_f64": 5, "min_f64": 6, "welford": 7, "first": 8, "last": 9}


cdef inline int64_t _op_words(int64_t op) noexcept nogil:
    """Words of an aggregate's record (``OPS`` code), count first."""
    if op == 0:
        return 1
    if op == 1 or op >= 7:
        return 3  # sum_f64: total, error term; welford: mean, m2; first / last: value, time
    return 2


cdef inline int64_t _pick(bint c, int64_t a, int64_t b) noexcept nogil:
    """``a`` if ``c`` else ``b`` (8-byte words, any type), by a mask: GCC
    compiles a conditional expression on such words to a branch, and which
    way the data goes (a slot's first row, a merge's larger value) is
    unpredictable, so the branch often misses."""
    cdef int64_t m = -<int64_t>c
    return (a & m) | (b & ~m)


cdef inline double _as_double(int64_t w) noexcept nogil:
    """The word's bits as a double (records hold doubles as int64 words)."""
    cdef double d
    memcpy(&d, &w, sizeof(double))
    return d


cdef inline int64_t _as_int(double d) noexcept nogil:
    """The double's bits as a word."""
    cdef int64_t w
    memcpy(&w, &d, sizeof(double))
    return w


cdef inline void _two_sum(double* total, double* comp, double v) noexcept nogil:
    """total + comp += v with Knuth's TwoSum error term (branch-free)."""
    cdef double a = total[0]
    cdef double t = a + v
    cdef double bp = t - a
    comp[0] += (a - (t - bp)) + (v - bp)
    total[0] = t


cdef inline void _update_one(int op, int64_t* r, const int64_t* v, int64_t t,
                             uint64_t* ovf) noexcept nogil:
    """Add one value (``v``: its 8-byte word; unused by count) at event time
    ``t``. An int64 sum that leaves the int64 range (its word wraps) sets
    ``ovf`` to 1."""
    cdef double* f = <double*>r
    cdef double x, d
    cdef int64_t c
    if op == 0:
        r[0] += 1
        return
    # The first value of a slot (r[0] == 0) is chosen by masks (_pick), not
    # branches: which rows start a slot is unpredictable.
    cdef bint first = r[0] == 0
    cdef double tot, comp, cur
    cdef int64_t icur
    if op == 1:
        x = (<const double*>v)[0]
        tot = _as_double(_pick(first, 0, r[1]))  # (0 is +0.0)
        comp = _as_double(_pick(first, 0, r[2]))
        _two_sum(&tot, &comp, x)
        f[1] = tot
        f[2] = comp
    elif op == 2:
        icur = _pick(first, 0, r[1])
        ovf[0] |= add_ovf(icur, v[0], &r[1])
    elif op == 3:
        icur = _pick(first, v[0], r[1])
        r[1] = v[0] if v[0] > icur else icur
    elif op == 4:
        icur = _pick(first, v[0], r[1])
        r[1] = v[0] if v[0] < icur else icur
    elif op == 5 or op == 6:
        x = (<const double*>v)[0]
        if x != x:
            return
        cur = _as_double(_pick(first, v[0], r[1]))
        if op == 5:
            f[1] = x if x > cur else cur
        else:
            f[1] = x if x < cur else cur
    elif op == 7:  # Welford: the first value's mean is itself, its sum of squares 0
        x = (<const double*>v)[0]
        c = r[0] + 1
        r[0] = c
        d = x - f[1]
        cur = f[1] + d / c
        tot = f[2] + d * (x - cur)
        r[1] = _pick(first, v[0], _as_int(cur))
        r[2] = _pick(first, 0, _as_int(tot))
        return
    else:  # first / last by event time: with disordered rows, which row wins is a coin toss
        first = first | ((t >= r[2]) if op == 9 else (t < r[2]))
        r[1] = _pick(first, v[0], r[1])
        r[2] = _pick(first, t, r[2])
    r[0] += 1


cdef struct _Update:
    int op             # code of OPS
    int64_t* rec       # the aggregate's first word of slot 0
    int64_t stride     # words per record
    const int64_t* vals    # NULL for count()
    const uint8_t* valid   # NULL: no nulls
    int64_t voff       # bit of row 0 in valid
    # 1: an int64 sum overflowed. A flag in memory, written only by sums: a
    # variable ORed in the loop over the aggregates would slow every aggregate.
    uint64_t ovf


def agg_update(const int64_t[::1] slots, const int64_t[::1] ts, const int64_t[::1] ops,
               int64_t[:, ::1] rec, const int64_t[::1] roffs, list vals, list valids,
               const int64_t[::1] voffs):
    """Add row ``i`` to slot ``slots[i]`` (``< 0``: skipped) of every aggregate,
    in one pass over the rows per 16 aggregates (any number). Aggregate ``a``:
    code ``ops[a]`` (``OPS``), state in ``rec`` (int64 (n_slots, W) records
    the aggregates share; a slot outside them is a ValueError, raised when
    the rows before it are added) at words ``roffs[a]`` on,
    values ``vals[a]`` (8-byte words, int64 or float64 viewed as
    int64; empty for ``count()``), validity ``valids[a]`` (Arrow bitmap, bit
    ``voffs[a] + i``; empty: no nulls; null rows are skipped). ``ts``: event
    times (first / last). Modifies ``rec``. An int64 sum that leaves the
    int64 range raises SumOverflowError naming the aggregate (the rows of
    its 16 aggregates all added, wrapped; those after not).
    """
    cdef Py_ssize_t i, k, n = slots.shape[0], nagg = ops.shape[0], bad_row = -1
    cdef uint64_t ovf = 0  # bit k: aggregate c + k of the current 16 overflowed
    cdef Py_ssize_t ovf_first = 0
    cdef int64_t s, j, nrec = rec.shape[0]
    cdef const int64_t[::1] vv
    cdef const uint8_t[::1] bv
    cdef Py_ssize_t c, m
    cdef _Update* ag
    cdef _Update* u
    cdef _Update loc[16]
    if len(vals) != nagg or len(valids) != nagg or voffs.shape[0] != nagg or roffs.shape[0] != nagg:
        raise ValueError(f"agg_update: {nagg} codes for {roffs.shape[0]} record offsets, "
                         f"{len(vals)} value arrays, {len(valids)} bitmaps, "
                         f"{voffs.shape[0]} offsets")
    if ts.shape[0] != n:
        raise ValueError(f"agg_update: {ts.shape[0]} event times for {n} rows")
    if n == 0 or nagg == 0:
        return
    ag = <_Update*>malloc(<size_t>nagg * sizeof(_Update))
    if ag == NULL:
        raise MemoryError(f"agg_update: state of {nagg} aggregates")
    try:
        for k in range(nagg):
            u = &ag[k]
            u.op = <int>ops[k]
            if not 0 <= u.op <= 9:
                raise ValueError(f"agg_update: unknown code {u.op}")
            if not (0 <= roffs[k] and roffs[k] + _op_words(u.op) <= rec.shape[1]):
                raise ValueError(f"agg_update: words from {roffs[k]} on (code {u.op}) "
                                 f"outside records of {rec.shape[1]} words")
            u.rec = &rec[0, 0] + roffs[k] if rec.shape[0] > 0 else NULL
            u.stride = rec.shape[1]
            vv = vals[k]
            if vv.shape[0] == 0 and u.op == 0:
                u.vals = NULL
            elif vv.shape[0] != n:
                raise ValueError(f"agg_update: aggregate {k} has {vv.shape[0]} values for {n} rows")
            else:
                u.vals = &vv[0]
            bv = valids[k]
            u.voff = voffs[k]
            u.ovf = 0
            if bv.shape[0] == 0:
                u.valid = NULL
            elif bv.shape[0] * 8 < u.voff + n:
                raise ValueError(f"agg_update: aggregate {k}'s validity bitmap is too short")
            else:
                u.valid = &bv[0]
        with nogil:
            for c in range(0, nagg, 16):  # from a local copy, which the record writes cannot alias
                if bad_row >= 0:
                    break
                m = min(16, nagg - c)
                for k in range(m):
                    loc[k] = ag[c + k]
                for i in range(n):
                    if i + PF_FAR < n and slots[i + PF_FAR] >= 0:
                        for k in range(m):
                            prefetch_w(loc[k].rec + slots[i + PF_FAR] * loc[k].stride)
                    s = slots[i]
                    if s < 0:
                        continue
                    if s >= nrec:
                        bad_row = i
                        break
                    for k in range(m):
                        if loc[k].valid != NULL:
                            j = loc[k].voff + i
                            if not ((loc[k].valid[j >> 3] >> (j & 7)) & 1):
                                continue
                        # (overflow flags ORed, checked once per 16 aggregates: no branch per row)
                        _update_one(loc[k].op, loc[k].rec + s * loc[k].stride,
                                    loc[k].vals + i if loc[k].vals != NULL else NULL, ts[i],
                                    &loc[k].ovf)
                for k in range(m):  # checked once per 16 aggregates, not per row
                    ovf |= loc[k].ovf << k
                if ovf:
                    ovf_first = c
                    break
    finally:
        free(ag)
    if ovf:
        _raise_overflow("agg_update", ovf, ovf_first)
    if bad_row >= 0:
        raise ValueError(f"agg_update: slot {slots[bad_row]} outside [0, {nrec}) "
                         f"(rows before it added)")


# merges: drec[dst[i]] <- drec[dst[i]] (+) srec[src[i]], in order. ``drec`` and
# ``srec`` may be the same array (merging slots of one state) or not (merging
# slots into a separate, zeroed record per output row).

# A merge is split in two: the values (``_merge_vals``, given both counts) and
# the count (an addition). Records of the store keep each aggregate's count
# beside its values (``_merge_one``); a suffix stack's records may share one
# count among several aggregates (``_stack_merge``).

cdef inline uint64_t _merge_vals(int op, int64_t na, int64_t nb, int64_t* a,
                                 const int64_t* b) noexcept nogil:
    """Values ``b`` (of ``nb`` rows) merged into ``a`` (of ``na``), the words
    after an aggregate's count (``OPS`` code ``op`` > 0); counts untouched.
    Returns 1 if an int64 sum left the int64 range (wrapped), else 0."""
    cdef double* fa = <double*>a
    cdef const double* fb = <const double*>b
    cdef double dna, dnb, nt, delta
    cdef bint take
    cdef uint64_t ovf = 0
    if op == 1 or op == 7:
        if na == 0:
            a[0] = b[0]
            a[1] = b[1]
        elif op == 1:
            _two_sum(&fa[0], &fa[1], fb[0])
            fa[1] += fb[1]
        else:  # Chan et al.'s pairwise combination of (mean, M2)
            dna = <double>na
            dnb = <double>nb
            nt = dna + dnb
            delta = fb[0] - fa[0]
            fa[0] += delta * (dnb / nt)
            fa[1] += fb[1] + delta * delta * (dna * dnb / nt)
    elif op == 2:
        if na == 0:
            a[0] = b[0]
        else:
            ovf = add_ovf(a[0], b[0], a)
    elif op <= 6:  # min / max by selects: which side wins is unpredictable
        if op == 3:
            take = b[0] > a[0]
        elif op == 4:
            take = b[0] < a[0]
        elif op == 5:
            take = fb[0] > fa[0]
        else:
            take = fb[0] < fa[0]
        a[0] = _pick(take | (na == 0), b[0], a[0])
    else:  # first / last: ``b`` counts as the later rows on ties; values are raw words
        take = (na == 0) | ((b[1] >= a[1]) if op == 9 else (b[1] < a[1]))
        a[0] = _pick(take, b[0], a[0])
        a[1] = _pick(take, b[1], a[1])
    return ovf


cdef inline uint64_t _merge_one(int op, int64_t* a, const int64_t* b) noexcept nogil:
    """Record ``b`` of one aggregate (count first) merged into ``a``; returns
    ``_merge_vals``'s overflow flag."""
    cdef uint64_t ovf = 0
    if op != 0:
        ovf = _merge_vals(op, a[0], b[0], a + 1, b + 1)
    a[0] += b[0]
    return ovf


def merge_records(int op, const int64_t[::1] dst, const int64_t[::1] src, int64_t[:, ::1] drec,
                  int64_t doff, const int64_t[:, ::1] srec, int64_t soff):
    """drec[dst[i]] <- drec[dst[i]] (+) srec[src[i]] for each i in order, the
    records at words ``doff`` / ``soff`` of their rows; ``op`` (a value of
    ``OPS``) names the aggregate. Empty sources are skipped. A slot outside
    its records is a ValueError, raised when the pairs before it are merged;
    an int64 sum out of range a SumOverflowError (aggregate 0), raised when
    every pair is merged. Modifies ``drec``."""
    cdef Py_ssize_t i, n = dst.shape[0], bad = -1
    cdef uint64_t ovf = 0
    cdef int64_t DF, SF, nd = drec.shape[0], ns = srec.shape[0]
    cdef int64_t* w
    cdef const int64_t* sw
    if not 0 <= op <= 9:
        raise ValueError(f"merge: unknown op {op}")
    if dst.shape[0] != src.shape[0]:
        raise ValueError(f"merge: {dst.shape[0]} destinations but {src.shape[0]} sources")
    if not (0 <= doff and doff + _op_words(op) <= drec.shape[1] and
            0 <= soff and soff + _op_words(op) <= srec.shape[1]):
        raise ValueError(f"merge: words from {doff} / {soff} on (op {op}) outside records of "
                         f"{drec.shape[1]} / {srec.shape[1]} words")
    if n == 0:
        return
    DF = drec.shape[1]
    SF = srec.shape[1]
    w = &drec[0, 0] + doff
    sw = &srec[0, 0] + soff
    with nogil:
        for i in range(n):
            if i + PF < n:
                prefetch_w(w + dst[i + PF] * DF)  # (prefetches of bad slots never fault)
                prefetch_w(sw + src[i + PF] * SF)
            if <uint64_t>dst[i] >= <uint64_t>nd or <uint64_t>src[i] >= <uint64_t>ns:
                bad = i
                break
            if sw[src[i] * SF] != 0:
                ovf |= _merge_one(op, w + dst[i] * DF, sw + src[i] * SF)
    if bad >= 0:
        raise ValueError(f"merge: pair ({dst[bad]}, {src[bad]}) outside [0, {nd}) / [0, {ns})")
    if ovf:
        _raise_overflow("merge_records", ovf)


def clear_records(int64_t[:, ::1] rec, const int64_t[::1] slots, bint stream=False):
    """Zero the records ``rec[slots[i]]`` (purged slots, emptied for reuse).

    ``stream``: the records are cold (last updated long before their purge),
    so the zeros stream past the cache (on x86-64) rather than reading each
    line in only to overwrite it and pushing live state out. On a record
    still in the cache a streaming store costs more than a plain one."""
    cdef Py_ssize_t i, n = slots.shape[0]
    cdef int64_t W = rec.shape[1], nrec = rec.shape[0], bad = 0
    cdef int64_t* w = &rec[0, 0] if nrec > 0 else NULL
    cdef bint ok = True
    with nogil:
        for i in range(n):
            if not 0 <= slots[i] < nrec:
                bad = slots[i]
                ok = False
                break
            if stream:
                stream_zero(w + slots[i] * W, W)
            else:
                memset(w + slots[i] * W, 0, <size_t>W * 8)
        if stream:
            stream_fence()
    if not ok:
        raise ValueError(f"clear_records: slot {bad} outside {nrec} records")


def gather_fields(const int64_t[:, ::1] rec, const int64_t[::1] words, const int64_t[::1] codes,
                  const int64_t[::1] cnt_words, const int64_t[::1] slots, int64_t[:, ::1] out,
                  uint8_t[:, ::1] null, int64_t[::1] nnull):
    """Result columns of the records ``rec[slots[i]]`` (``slots`` None: rows
    0 .. n-1 in order, n = out.shape[1]): ``out[c, i]`` = word ``words[c]``
    made by ``codes[c]`` (``FINAL``), and ``null[v, i]`` set to 1 where
    word ``cnt_words[v]`` is 0, counted into ``nnull[v]`` (``null`` comes
    zeroed: only nulls are written). Modifies outputs. A
    slot outside ``rec`` raises ValueError as it is read (the outputs are
    then partly written)."""
    cdef bint seq = slots is None
    cdef Py_ssize_t i, k, r0, m, n = out.shape[1] if seq else slots.shape[0]
    cdef int64_t F = rec.shape[1], nrec = rec.shape[0], slot = 0
    cdef Py_ssize_t bad_row = -1
    cdef const int64_t* w
    cdef const int64_t* src[BLK]
    cdef _Final fin
    if out.shape[1] != n:
        raise ValueError(f"gather_fields: outputs of {out.shape[1]} rows for {n} slots")
    if seq and n > nrec:
        raise ValueError(f"gather_fields: {n} rows asked of {nrec} records")
    _final_plan(&fin, words, codes, cnt_words, F, out, null, nnull, "gather_fields")
    if n == 0:
        return
    w = &rec[0, 0]
    with nogil:
        for r0 in range(0, n, BLK):
            m = min(BLK, n - r0)
            for k in range(m):
                i = r0 + k
                slot = i
                if not seq:
                    if i + PF < n:
                        prefetch_w(w + slots[i + PF] * F)  # (prefetches of bad slots never fault)
                    slot = slots[i]
                    if <uint64_t>slot >= <uint64_t>nrec:
                        bad_row = i
                        break
                src[k] = w + slot * F
            if bad_row >= 0:
                break
            _put_block(&fin, src, m, r0)
    if bad_row >= 0:
        raise ValueError(f"gather_fields: slot {slot} outside [0, {nrec})")


FINAL = {"word": 0, "sum_f64": 1}
"""How a result word is made from a record (``gather_fields``, ``dense_window``):
the word as it is, or a compensated sum (the word plus the next one, its
error term, where the word is finite)."""


cdef struct _Final:
    Py_ssize_t nout, nnull, stride
    const int64_t* word
    const int64_t* code
    const int64_t* cnt
    int64_t* cols      # nout columns of ``stride`` rows
    uint8_t* nulls     # nnull columns of ``stride`` rows
    int64_t* counts    # nulls per null column
    bint stream        # columns written with streaming stores (see dense_window)


cdef int _final_plan(_Final* f, const int64_t[::1] words, const int64_t[::1] codes,
                     const int64_t[::1] cnt_words, Py_ssize_t W, int64_t[:, ::1] out,
                     uint8_t[:, ::1] null, int64_t[::1] nnull, str what) except -1:
    """Check a plan against records of ``W`` words and its outputs; fill ``f``."""
    cdef Py_ssize_t c
    if codes.shape[0] != words.shape[0] or out.shape[0] != words.shape[0] or \
            null.shape[0] != cnt_words.shape[0] or nnull.shape[0] < cnt_words.shape[0] or \
            null.shape[1] != out.shape[1]:
        raise ValueError(f"{what}: {words.shape[0]} words, {codes.shape[0]} codes and "
                         f"{out.shape[0]} columns; {cnt_words.shape[0]} count words, "
                         f"{null.shape[0]} null columns and {nnull.shape[0]} null counts; "
                         f"{out.shape[1]} / {null.shape[1]} rows")
    for c in range(words.shape[0]):
        if not (0 <= codes[c] <= 1 and 0 <= words[c] and words[c] + codes[c] < W):
            raise ValueError(f"{what}: word {words[c]} (code {codes[c]}) outside records of "
                             f"{W} words")
    for c in range(cnt_words.shape[0]):
        if not 0 <= cnt_words[c] < W:
            raise ValueError(f"{what}: count word {cnt_words[c]} outside records of {W} words")
        nnull[c] = 0
    f.nout = words.shape[0]
    f.nnull = cnt_words.shape[0]
    f.stride = out.shape[1]
    f.word = &words[0] if f.nout else NULL
    f.code = &codes[0] if f.nout else NULL
    f.cnt = &cnt_words[0] if f.nnull else NULL
    f.cols = &out[0, 0] if f.nout and f.stride else NULL
    f.nulls = &null[0, 0] if f.nnull and f.stride else NULL
    f.counts = &nnull[0] if f.nnull else NULL
    f.stream = False
    return 0


cdef inline int64_t _final_word(const int64_t* rec, int64_t w,
                                int64_t code) noexcept nogil:
    """Result word ``w`` of a record made by ``code`` (``FINAL``): the word,
    or a compensated sum (the word plus its error term where it is finite)."""
    cdef double t
    if code == 0:
        return rec[w]
    t = _as_double(rec[w])
    if t - t == 0:  # 0 unless t is inf or NaN (whose error term is NaN, not added)
        t += _as_double(rec[w + 1])
    return _as_int(t)


cdef inline void _put_block(const _Final* f, const int64_t** src, Py_ssize_t m,
                            Py_ssize_t r) noexcept nogil:
    """Rows ``r .. r + m - 1`` of the plan's columns from records ``src[0 ..
    m - 1]``, column by column: a column's word and code are read once per
    block, not once per row, and its loop is a load (two for a compensated
    sum) and a store per row."""
    cdef Py_ssize_t c, i
    cdef int64_t w, code, nn
    cdef int64_t* col
    cdef uint8_t* nul
    for c in range(f.nout):
        w, code = f.word[c], f.code[c]
        col = f.cols + c * f.stride + r
        if f.stream:
            for i in range(m):
                stream_store(col + i, _final_word(src[i], w, code))
        else:
            for i in range(m):
                col[i] = _final_word(src[i], w, code)
    nn = 0
    for c in range(f.nnull):  # only nulls are written (rare: the branch is predicted)
        w = f.cnt[c]
        nul = f.nulls + c * f.stride + r
        if c > 0 and w == f.cnt[c - 1]:  # the column before's nulls (one count for several
            if nn:                        # aggregates): copied, a pass over the records fewer
                memcpy(nul, nul - f.stride, <size_t>m)
        else:
            nn = 0
            for i in range(m):
                if src[i][w] == 0:
                    nul[i] = 1
                    nn += 1
        f.counts[c] += nn
