# Suffix and prefix stacks of sliding windows (included by window.pyx).
#
# Sliding windows of k panes are emitted from lists of (group, record) sorted
# by group: a window is the suffix of one block of k aligned panes merged with
# a prefix of the next (``fastops.core.window.aggregator`` keeps both), so
# each output row costs about two sequential merges instead of one lookup per
# pane.


cdef inline void _copy_rec(int64_t* o, const int64_t* b, int64_t W) noexcept nogil:
    """One record of ``W`` words; the usual widths as word moves (a fixed-size
    ``memcpy`` to the stack may become ``rep movs``, slow to start)."""
    cdef int64_t c
    if W == 6:
        o[0] = b[0]
        o[1] = b[1]
        o[2] = b[2]
        o[3] = b[3]
        o[4] = b[4]
        o[5] = b[5]
    elif W == 8:
        o[0] = b[0]
        o[1] = b[1]
        o[2] = b[2]
        o[3] = b[3]
        o[4] = b[4]
        o[5] = b[5]
        o[6] = b[6]
        o[7] = b[7]
    elif W == 4:
        o[0] = b[0]
        o[1] = b[1]
        o[2] = b[2]
        o[3] = b[3]
    else:
        for c in range(W):
            o[c] = b[c]


cdef inline bint _bit(const uint64_t* bits, int64_t g) noexcept nogil:
    return (bits[g >> 6] >> (g & 63)) & 1


cdef inline void _set_bit(uint64_t* bits, int64_t g) noexcept nogil:
    bits[g >> 6] |= (<uint64_t>1) << (g & 63)


cdef int _check_ids(const int64_t[::1] ids, int64_t top, str what, str kind) except -1:
    """Every id (a ``kind``: group, slot) in ``[0, top)``: one pass without
    an exit or a compare (an id outside makes ``id`` or ``top - 1 - id``
    negative, so the OR of them all has its sign bit set; SSE2 vectorises
    that), then a search for the first bad one if any."""
    cdef Py_ssize_t i, n = ids.shape[0]
    cdef uint64_t bad = 0, last = <uint64_t>(top - 1)  # (in unsigned words: no overflow)
    cdef const uint64_t* p = <const uint64_t*>&ids[0] if n else NULL
    with nogil:
        for i in range(n):
            bad |= p[i] | (last - p[i])
    if bad >> 63:
        for i in range(n):
            if not 0 <= ids[i] < top:
                raise ValueError(f"{what}: {kind} {ids[i]} outside [0, {top})")
    return 0


cdef int _check_pane(const int64_t[::1] groups, const int64_t[::1] slots, const int64_t[:, ::1] rec,
                     int64_t max_group, str what) except -1:
    """The arguments of a pane: its groups and their slots in ``rec``."""
    if slots.shape[0] != groups.shape[0]:
        raise ValueError(f"{what}: {slots.shape[0]} slots for {groups.shape[0]} groups")
    _check_ids(groups, max_group, what, "group")
    _check_ids(slots, rec.shape[0], what, "slot")
    return 0


# ---------------------------------------------------------------- stack layouts
# The stacks of sliding windows (dense_add, suffix_add, dense_window) hold
# copies of the store's records, merged, in a layout of their own: one count
# word may stand for the counts of several aggregates where every record read
# has them equal (count() beside aggregates of a column without nulls or
# NaN), which makes a record of count, sum and max 4 words (half a cache
# line) instead of 6 (padded to 8). The kernels check that equality on every
# record they read and report a record that breaks it. A layout is one int64
# array (``_stack_layout`` of ``fastops.core.window`` builds it):
#   [W, nvals, ncnt, neq,
#    src[W]      stack word j is a copy of store word src[j]
#    op[nvals]   the aggregates with values (OPS code > 0): merge code,
#    cnt[nvals]  the stack word of their count,
#    val[nvals]  the stack word of their first value,
#    cw[ncnt]    the count words (each merged by addition),
#    eq[2neq]]   pairs of store words every record read must hold equal

# A layout, copied into the kernel's frame: a plan of pointers into the layout
# array adds a load per record to dense_add and suffix_add. The usual narrow
# layout runs as ``_Narrow``.
cdef struct _Stack:
    Py_ssize_t W, nvals, ncnt, neq
    int64_t src[64]
    int op[32]
    int64_t cnt[32]
    int64_t val[32]
    int64_t cw[64]
    int64_t eq[128]


cdef int _stack_plan(_Stack* s, const int64_t[::1] layout, Py_ssize_t store_w, Py_ssize_t W,
                     str what) except -1:
    """Check a stack layout against stack records of ``W`` words (and store
    records of ``store_w``, or none if -1); fill ``s``."""
    cdef Py_ssize_t n = layout.shape[0], k
    cdef const int64_t* a = &layout[0] if n else NULL
    if n < 4 or not (1 <= a[0] <= 64 and 0 <= a[1] <= 32 and 0 <= a[2] <= 64
                     and 0 <= a[3] <= 64) or n != 4 + a[0] + 3 * a[1] + a[2] + 2 * a[3]:
        raise ValueError(f"{what}: a stack layout of {n} words that does not add up "
                         f"(see _window_stacks.pxi)")
    if a[0] != W:
        raise ValueError(f"{what}: a stack layout of {a[0]} words for stack records of {W}")
    s.W, s.nvals, s.ncnt, s.neq = a[0], a[1], a[2], a[3]
    a += 4
    for k in range(s.W):
        s.src[k] = a[k]
        if store_w >= 0 and not 0 <= a[k] < store_w:
            raise ValueError(f"{what}: a stack layout reads store word {a[k]} of records of "
                             f"{store_w}")
    a += s.W
    for k in range(s.nvals):
        s.op[k], s.cnt[k], s.val[k] = <int>a[k], a[s.nvals + k], a[2 * s.nvals + k]
        if not (1 <= s.op[k] <= 9 and 0 <= s.cnt[k] < W and 0 <= s.val[k]
                and s.val[k] + _op_words(s.op[k]) - 1 <= W):
            raise ValueError(f"{what}: unknown code {a[k]}, or its count word {s.cnt[k]} or values "
                             f"from word {s.val[k]} on outside stack records of {W} words")
    a += 3 * s.nvals
    for k in range(s.ncnt):
        s.cw[k] = a[k]
        if not 0 <= a[k] < W:
            raise ValueError(f"{what}: count word {a[k]} outside stack records of {W} words")
    a += s.ncnt
    for k in range(2 * s.neq):
        s.eq[k] = a[k]
        if store_w >= 0 and not 0 <= a[k] < store_w:
            raise ValueError(f"{what}: a stack layout reads store word {a[k]} of records of "
                             f"{store_w}")
    return 0


cdef inline uint64_t _stack_load(int64_t* t, const int64_t* r, const _Stack* s) noexcept nogil:
    """Store record ``r`` in the stack layout, into ``t``; returns 0 if the
    counts the layout shares are equal in ``r`` (non-zero if not)."""
    cdef Py_ssize_t j
    cdef uint64_t diff = 0
    for j in range(s.W):  # (the usual narrow record is loaded word by word by ``_load``)
        t[j] = r[s.src[j]]
    for j in range(s.neq):
        diff |= <uint64_t>(r[s.eq[2 * j]] ^ r[s.eq[2 * j + 1]])
    return diff


cdef inline uint64_t _stack_merge(int64_t* a, const int64_t* b, const _Stack* s) noexcept nogil:
    """Stack record ``b`` merged into ``a``: each aggregate's values (skipped
    where ``b`` has none), then the counts. Returns the overflow flags, bit
    ``k`` for the layout's aggregate ``k`` with values."""
    cdef Py_ssize_t k
    cdef int64_t c
    cdef uint64_t ovf = 0
    for k in range(s.nvals):
        c = s.cnt[k]
        if b[c] != 0:
            ovf |= _merge_vals(s.op[k], a[c], b[c], a + s.val[k], b + s.val[k]) << k
    for k in range(s.ncnt):
        a[s.cw[k]] += b[s.cw[k]]
    return ovf


# The usual layout with one count (``_narrow``): 4 words, the count at word 0,
# one or two aggregates with values (op1 0: one), at most two pairs of counts
# to check (unused: word 0 twice). The kernels' loops take it by value, so its
# words stay in registers where ``_Stack``'s are read from the frame on every
# record.
cdef struct _Narrow:
    int64_t s0, s1, s2, s3
    int64_t e0, e1, e2, e3
    int64_t v0, v1
    int op0, op1


ctypedef fused _Layout:  # the loops of the stack kernels, compiled for each
    _Stack
    _Narrow


cdef bint _narrow(_Narrow* n, const _Stack* s) noexcept nogil:
    """Fill ``n`` from ``s`` if ``s`` is of its shape."""
    cdef Py_ssize_t k
    if s.W != 4 or s.ncnt != 1 or s.cw[0] != 0 or not 1 <= s.nvals <= 2 or s.neq > 2:
        return False
    for k in range(s.nvals):
        if s.cnt[k] != 0:
            return False
    n.s0, n.s1, n.s2, n.s3 = s.src[0], s.src[1], s.src[2], s.src[3]
    n.e0 = n.e1 = n.e2 = n.e3 = 0
    if s.neq > 0:
        n.e0, n.e1 = s.eq[0], s.eq[1]
    if s.neq > 1:
        n.e2, n.e3 = s.eq[2], s.eq[3]
    n.op0, n.v0 = s.op[0], s.val[0]
    n.op1, n.v1 = 0, 0
    if s.nvals > 1:
        n.op1, n.v1 = s.op[1], s.val[1]
    return True


cdef inline Py_ssize_t _width(const _Layout* s) noexcept nogil:
    if _Layout is _Narrow:
        return 4
    else:
        return s.W


cdef inline uint64_t _load(int64_t* t, const int64_t* r, const _Layout* s) noexcept nogil:
    """``_stack_load`` in either layout."""
    if _Layout is _Narrow:
        t[0] = r[s.s0]
        t[1] = r[s.s1]
        t[2] = r[s.s2]
        t[3] = r[s.s3]
        return <uint64_t>(r[s.e0] ^ r[s.e1]) | <uint64_t>(r[s.e2] ^ r[s.e3])
    else:
        return _stack_load(t, r, s)


cdef inline uint64_t _merge(int64_t* a, const int64_t* b, const _Layout* s) noexcept nogil:
    """``_stack_merge`` in either layout (returning its overflow flags)."""
    cdef int64_t na, nb
    cdef uint64_t ovf = 0
    if _Layout is _Narrow:
        na, nb = a[0], b[0]
        if nb != 0:
            ovf = _merge_vals(s.op0, na, nb, a + s.v0, b + s.v0)
            if s.op1 != 0:
                ovf |= _merge_vals(s.op1, na, nb, a + s.v1, b + s.v1) << 1
            a[0] = na + nb
        return ovf
    else:
        return _stack_merge(a, b, s)


def dense_add(const int64_t[::1] groups, const int64_t[::1] slots, const int64_t[:, ::1] rec,
              const int64_t[::1] layout, int64_t[:, ::1] acc, uint64_t[::1] bits) -> int:
    """Add a pane to a dense accumulator (a prefix of panes): ``acc[g] <-
    acc[g] (+) rec[slots[i]]`` for ``g = groups[i]`` (distinct), the store's
    records read in the stack ``layout``; a group whose bit in ``bits`` is
    clear gets the record copied and its bit set. Returns the groups new to
    the accumulator, or -1 if a record read breaks the layout (counts it
    shares differ): the accumulator is then to be rebuilt in another. An
    int64 sum out of range raises SumOverflowError (numbering the layout's
    aggregates with values) after the pane is added."""
    cdef Py_ssize_t n = groups.shape[0]
    cdef int64_t added
    cdef uint64_t ovf = 0
    cdef _Stack st
    cdef _Narrow nr
    _stack_plan(&st, layout, rec.shape[1], acc.shape[1], "dense_add")
    _check_pane(groups, slots, rec, min(acc.shape[0], bits.shape[0] * 64), "dense_add")
    if n == 0:
        return 0
    with nogil:
        if _narrow(&nr, &st):
            added = _dense_add(nr, &groups[0], &slots[0], n, &rec[0, 0], rec.shape[1], &acc[0, 0],
                               &bits[0], &ovf)
        else:
            added = _dense_add(st, &groups[0], &slots[0], n, &rec[0, 0], rec.shape[1], &acc[0, 0],
                               &bits[0], &ovf)
    if ovf and added >= 0:
        _raise_overflow("dense_add", ovf)
    return added


cdef int64_t _dense_add(_Layout s, const int64_t* groups, const int64_t* slots, Py_ssize_t n,
                        const int64_t* rec, Py_ssize_t rw, int64_t* acc, uint64_t* bits,
                        uint64_t* ovf_out) noexcept nogil:
    """``dense_add``'s loop over checked arguments (``rw``: words per store
    record); the merges' overflow flags go to ``ovf_out``."""
    cdef Py_ssize_t i, W = _width(&s)
    cdef int64_t g, added = 0
    cdef uint64_t diff = 0, ovf = 0
    cdef int64_t t[64]
    for i in range(n):
        if i + 2 * PF < n:  # both reads are at random (slots run in chunks): prefetched, a
            prefetch_w(acc + groups[i + 2 * PF] * W)  # line of each, 2 * PF rows ahead
            prefetch_w(rec + slots[i + 2 * PF] * rw)
        g = groups[i]
        if _bit(bits, g):
            diff |= _load(t, rec + slots[i] * rw, &s)
            ovf |= _merge(acc + g * W, t, &s)
        else:
            diff |= _load(acc + g * W, rec + slots[i] * rw, &s)
            _set_bit(bits, g)
            added += 1
    ovf_out[0] = ovf
    return -1 if diff else added


def suffix_add(const int64_t[::1] groups, const int64_t[::1] slots, const int64_t[:, ::1] rec,
               const int64_t[::1] layout, int64_t[:, ::1] ss, int64_t[::1] ss_group,
               int64_t[::1] ss_next, Py_ssize_t start, int64_t[::1] ptr, uint64_t[::1] bits) -> int:
    """Add a pane (its groups, distinct, and their slots in ``rec``) older
    than every pane added so far to a suffix stack.

    Group ``g = groups[i]`` gets ``ss[start + i] = rec[slots[i]] (+)
    ss[ptr[g]]`` (its suffix over the newer panes, if its bit is set; the
    store's record read in the stack ``layout``), linked to that record by
    ``ss_next`` (``-1``: none); ``ptr[g]`` then points to it and the bit is
    set. Returns the groups new to the stack, or -1 if a record read breaks
    the layout; an int64 sum out of range raises (both as ``dense_add``)."""
    cdef Py_ssize_t n = groups.shape[0]
    cdef int64_t added
    cdef uint64_t ovf = 0
    cdef _Stack st
    cdef _Narrow nr
    if start < 0 or start + n > min(ss.shape[0], ss_group.shape[0], ss_next.shape[0]):
        raise ValueError(f"suffix_add: rows [{start}, {start + n}) outside the stack")
    _stack_plan(&st, layout, rec.shape[1], ss.shape[1], "suffix_add")
    _check_pane(groups, slots, rec, min(ptr.shape[0], bits.shape[0] * 64), "suffix_add")
    if n == 0:
        return 0
    with nogil:
        if _narrow(&nr, &st):
            added = _suffix_add(nr, &groups[0], &slots[0], n, &rec[0, 0], rec.shape[1], &ss[0, 0],
                                &ss_group[0], &ss_next[0], start, &ptr[0], &bits[0], &ovf)
        else:
            added = _suffix_add(st, &groups[0], &slots[0], n, &rec[0, 0], rec.shape[1], &ss[0, 0],
                                &ss_group[0], &ss_next[0], start, &ptr[0], &bits[0], &ovf)
    if ovf and added >= 0:
        _raise_overflow("suffix_add", ovf)
    return added


cdef int64_t _suffix_add(_Layout s, const int64_t* groups, const int64_t* slots, Py_ssize_t n,
                         const int64_t* rec, Py_ssize_t rw, int64_t* ss, int64_t* ss_group,
                         int64_t* ss_next, Py_ssize_t start, int64_t* ptr, uint64_t* bits,
                         uint64_t* ovf_out) noexcept nogil:
    """``suffix_add``'s loop over checked arguments (``rw``: words per store
    record); the merges' overflow flags go to ``ovf_out``."""
    cdef Py_ssize_t i, idx, W = _width(&s)
    cdef int64_t g, nx, added = 0
    cdef uint64_t diff = 0, ovf = 0
    for i in range(n):
        if i + 2 * PF < n:  # the pointer to the group's newer record, read PF rows later
            prefetch_w(&ptr[groups[i + 2 * PF]])
        if i + PF < n:  # the pane's record and the group's newer one, both at random
            prefetch_w(rec + slots[i + PF] * rw)
            if _bit(bits, groups[i + PF]):
                prefetch_w(ss + ptr[groups[i + PF]] * W)
        g = groups[i]
        idx = start + i
        diff |= _load(ss + idx * W, rec + slots[i] * rw, &s)
        ss_group[idx] = g
        if _bit(bits, g):
            nx = ptr[g]
            ovf |= _merge(ss + idx * W, ss + nx * W, &s)
        else:
            nx = -1
            _set_bit(bits, g)
            added += 1
        ss_next[idx] = nx
        ptr[g] = idx
    ovf_out[0] = ovf
    return -1 if diff else added


def suffix_drop(const int64_t[::1] ss_group, const int64_t[::1] ss_next, Py_ssize_t lo,
                Py_ssize_t hi, int64_t[::1] ptr, uint64_t[::1] bits) -> int:
    """Drop the oldest pane of a suffix stack (its records ``[lo, hi)``):
    each group's pointer moves to its record of the next newer pane, or (to
    -1) its bit clears, without a branch on which (a coin toss per group).
    Returns the groups that left the stack."""
    cdef Py_ssize_t idx
    cdef int64_t g, nx, left = 0, top = min(ptr.shape[0], bits.shape[0] * 64)
    if not 0 <= lo <= hi <= min(ss_group.shape[0], ss_next.shape[0]):
        raise ValueError(f"suffix_drop: rows [{lo}, {hi}) outside the stack")
    for idx in range(lo, hi):
        if not 0 <= ss_group[idx] < top:
            raise ValueError(f"suffix_drop: group {ss_group[idx]} outside [0, {top})")
    with nogil:
        for idx in range(lo, hi):
            g = ss_group[idx]
            nx = ss_next[idx]
            ptr[g] = nx  # (read only while the bit is set)
            bits[g >> 6] &= ~((<uint64_t>(nx < 0)) << (g & 63))
            left += nx < 0
    return left


def dense_window(const uint64_t[::1] sbits, const int64_t[::1] ptr, const int64_t[:, ::1] ss,
                 const uint64_t[::1] pbits, const int64_t[:, ::1] acc, const int64_t[::1] layout,
                 const int64_t[::1] words, const int64_t[::1] codes,
                 const int64_t[::1] cnt_words, int64_t[::1] out_groups, int64_t[:, ::1] out_cols,
                 uint8_t[:, ::1] out_null, int64_t[::1] nnull, Py_ssize_t row0=0) -> int:
    """One window's rows, as result columns: for every group set in ``sbits``
    or ``pbits``, its suffix record ``ss[ptr[g]]`` merged with its prefix
    record ``acc[g]`` (either alone where the other bit is clear; both in the
    stack ``layout``), finished by the plan ``words`` / ``codes`` /
    ``cnt_words`` (``gather_fields``, in words of that layout)
    into ``out_cols[c, row0 + r]`` and ``out_null[v, row0 + r]`` (zeroed by
    the caller; nulls set and counted into ``nnull[v]``); its group goes to
    ``out_groups[r]``. A bitmap
    shorter than the other reads as zeros. Rows come in three runs, each in
    group order: groups in both, in the suffix only, in the prefix only (a
    loop without a branch on which side a group is in). Returns the rows.
    A suffix pointer outside ``ss`` raises ValueError as it is read (the
    outputs, scratch of the caller's, are then partly written); an int64
    sum out of range SumOverflowError after the rows (as ``dense_add``)."""
    cdef Py_ssize_t W = ss.shape[1] if sbits.shape[0] else acc.shape[1]
    cdef Py_ssize_t cap = out_cols.shape[1], ns = sbits.shape[0], np_ = pbits.shape[0]
    cdef Py_ssize_t nw = max(ns, np_), w, total = 0, room = min(out_groups.shape[0], cap - row0)
    cdef uint64_t sx, px
    cdef int64_t bad = -1
    cdef uint64_t ovf = 0
    cdef _Stack st
    cdef _Narrow nr
    cdef _Final fin
    if W > 64 or (ns and (ss.shape[1] != W or ptr.shape[0] < ns * 64)) or \
            (np_ and (acc.shape[1] != W or acc.shape[0] < np_ * 64)):
        raise ValueError(f"dense_window: stack rows of {ss.shape[1]} words and accumulator "
                         f"rows of {acc.shape[1]} (one width, at most 64), or arrays shorter "
                         f"than their bitmaps")
    if not 0 <= row0 <= cap or out_null.shape[1] != cap:
        raise ValueError(f"dense_window: first row {row0} outside {cap} columns' rows, or null "
                         f"columns of {out_null.shape[1]} rows")
    _stack_plan(&st, layout, -1, W, "dense_window")
    _final_plan(&fin, words, codes, cnt_words, W, out_cols, out_null, nnull, "dense_window")
    fin.stream = True  # a sliding window's columns: megabytes the engine never reads back
    for w in range(nw):  # rows counted before any is written
        sx = sbits[w] if w < ns else 0
        px = pbits[w] if w < np_ else 0
        total += popcount64(sx | px)
    if total > room:
        raise ValueError(f"dense_window: outputs hold {room} rows, {total} are set")
    if total == 0:
        return 0
    with nogil:
        if _narrow(&nr, &st):
            bad = _window_rows(nr, &fin, sbits, ptr, ss, pbits, acc, out_groups, row0, &ovf)
        else:
            bad = _window_rows(st, &fin, sbits, ptr, ss, pbits, acc, out_groups, row0, &ovf)
    if bad >= 0:
        raise ValueError(f"dense_window: group {bad} points to row {ptr[bad]} outside the stack")
    if ovf:
        _raise_overflow("dense_window", ovf)
    return total


cdef int64_t _window_rows(_Layout s, const _Final* fin, const uint64_t[::1] sbits,
                          const int64_t[::1] ptr, const int64_t[:, ::1] ss,
                          const uint64_t[::1] pbits, const int64_t[:, ::1] acc,
                          int64_t[::1] out_groups, Py_ssize_t row0,
                          uint64_t* ovf_out) noexcept nogil:
    """``dense_window``'s rows over checked arguments; returns -1, or a group
    whose suffix pointer is outside ``ss`` (rows before it written). The
    merges' overflow flags go to ``ovf_out``."""
    cdef Py_ssize_t W = _width(&s), blk = min(BLK, BLK * 8 // W)
    cdef Py_ssize_t ns = sbits.shape[0], np_ = pbits.shape[0], nw = max(ns, np_), w, n = 0
    cdef uint64_t x, sx, px, ovf = 0
    cdef int64_t g, p, bad = -1, top = ss.shape[0]
    cdef int64_t buf[BLK * 8]  # a block of merged records (64 of up to 8 words, fewer if wider)
    cdef const int64_t* src[BLK]  # a block's records to finish
    cdef Py_ssize_t ends[3]
    cdef Py_ssize_t r, r0, i, m
    cdef int side
    for side in range(3):  # the groups, side by side: 0 both, 1 suffix only, 2 prefix only
        for w in range(nw):
            sx = sbits[w] if w < ns else 0
            px = pbits[w] if w < np_ else 0
            x = (sx & px) if side == 0 else ((sx & ~px) if side == 1 else (px & ~sx))
            while x:
                out_groups[n] = (w << 6) | ctz64(x)
                x &= x - 1
                n += 1
        ends[side] = n
    # the rows, run by run, a block at a time (reads of both stacks are at random:
    # prefetched 2 * PF rows ahead where a row reads a line of each, or PF_FAR where a row
    # is only read and finished, about a third of a merge's work)
    r0 = 0
    while r0 < ends[0]:  # suffix merged with prefix
        m = min(blk, ends[0] - r0)
        for i in range(m):
            r = r0 + i
            if r + 2 * PF < ends[0]:
                g = out_groups[r + 2 * PF]
                # (a pointer out of range is caught below; prefetches never fault)
                prefetch_w(&ss[ptr[g], 0])
                prefetch_w(&acc[g, 0])
            g = out_groups[r]
            p = ptr[g]
            if <uint64_t>p >= <uint64_t>top:
                bad = g
                break
            _copy_rec(&buf[i * W], &ss[p, 0], W)
            ovf |= _merge(&buf[i * W], &acc[g, 0], &s)
            src[i] = &buf[i * W]
        if bad >= 0:
            break
        _put_block(fin, src, m, row0 + r0)
        r0 += m
    for r0 in range(ends[0], ends[1] if bad < 0 else 0, BLK):  # suffix only
        m = min(BLK, ends[1] - r0)
        for i in range(m):
            r = r0 + i
            if r + PF_FAR < ends[1]:
                prefetch_w(&ss[ptr[out_groups[r + PF_FAR]], 0])
            p = ptr[out_groups[r]]
            if <uint64_t>p >= <uint64_t>top:
                bad = out_groups[r]
                break
            src[i] = &ss[p, 0]
        if bad >= 0:
            break
        _put_block(fin, src, m, row0 + r0)
    for r0 in range(ends[1], n if bad < 0 else 0, BLK):  # prefix only
        m = min(BLK, n - r0)
        for i in range(m):
            r = r0 + i
            if r + PF_FAR < n:
                prefetch_w(&acc[out_groups[r + PF_FAR], 0])
            src[i] = &acc[out_groups[r], 0]
        _put_block(fin, src, m, row0 + r0)
    stream_fence()
    ovf_out[0] = ovf
    return bad
