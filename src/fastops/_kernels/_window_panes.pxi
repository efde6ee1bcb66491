# Pane table of tumbling and sliding windows (included by window.pyx).
#
# Open-addressing hash map ``(g, q) -> slot`` (arrays ``hg, hq, hv``; ``hv``
# is ``-1`` for empty, ``-2`` for a tombstone). Entry ``(-1, q)`` is the head
# of pane ``q``'s list of slots (linked through ``s_next``). A pane owns
# whole chunks of consecutive slots, filled in order, each chunk twice the
# last (1, 2, 4 .. 64 slots, aligned to their size): a dense pane's slots,
# records and list links lie together in memory, so walking it (emission,
# purge) and reading its records are sequential, while a sparse pane wastes
# no more slots than it uses. Free chunks wait in one list per size (linked
# through ``s_next`` of their first slot); 64-slot chunks are cut from the
# high-water mark and split for the smaller sizes. Times are relative to the
# window offset; pane ``q`` covers ``[q*p, (q+1)*p)``; window ``j`` covers
# panes ``[j*ks, j*ks + k)`` with ``ks = slide/p``, ``k = size/p``.

DEF MAX_CLASS = 6     # pane chunks hold 2**class slots, class 0 .. MAX_CLASS
DEF CLASS_SHIFT = 4   # a pane slot's chunk class sits in its flags from this bit on
PANE_CHUNK_MAX = 1 << MAX_CLASS  # slots of the largest pane chunk
PANE_LAYOUT = "chunks-64"  # recorded in snapshots: how pane slots are laid out

cdef int64_t EMPTY = -1
cdef int64_t TOMB = -2
cdef uint8_t DIRTY = 1      # pane flag: updated after one of its windows fired
cdef uint8_t IN_MAP = 2     # pane flag: the slot's (g, q) entry is in the hash map


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a / b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef inline int64_t _floordiv_by(int64_t a, int64_t b, double inv_b) noexcept nogil:
    """floor(a / b) for b > 0 by a float multiply, corrected to be exact."""
    cdef int64_t q
    if a > <int64_t>4503599627370496LL or a < -<int64_t>4503599627370496LL:  # beyond 2**52: divide
        return _floordiv(a, b)
    q = <int64_t>(<double>a * inv_b)  # truncation: within 2 of the floor
    while q * b > a:
        q -= 1
    while (q + 1) * b <= a:
        q += 1
    return q


cdef inline uint64_t _mix(int64_t g, int64_t q) noexcept nogil:
    cdef uint64_t h = <uint64_t>g * 0x9E3779B97F4A7C15ULL
    h ^= <uint64_t>q * 0xC2B2AE3D27D4EB4FULL + 0x165667B19E3779F9ULL
    h ^= h >> 31
    h *= 0xBF58476D1CE4E5B9ULL
    h ^= h >> 29
    return h


cdef inline int64_t _find(const int64_t* hg, const int64_t* hq, const int64_t* hv,
                          uint64_t mask, int64_t g, int64_t q, int64_t* where) noexcept nogil:
    """Slot of (g, q), or -1 with ``where`` = the position to insert at."""
    cdef int64_t pos = <int64_t>(_mix(g, q) & mask)
    cdef int64_t tomb = -1
    cdef int64_t v
    while True:
        v = hv[pos]
        if v == EMPTY:
            where[0] = tomb if tomb >= 0 else pos
            return -1
        if v == TOMB:
            if tomb < 0:
                tomb = pos
        elif hg[pos] == g and hq[pos] == q:
            where[0] = pos
            return v
        pos = <int64_t>((<uint64_t>pos + 1) & mask)


cdef inline void _put(int64_t* hg, int64_t* hq, int64_t* hv, int64_t pos, int64_t g, int64_t q,
                      int64_t v, int64_t* counters) noexcept nogil:
    if hv[pos] == TOMB:
        counters[3] -= 1
    hg[pos] = g
    hq[pos] = q
    hv[pos] = v
    counters[2] += 1


cdef inline int64_t _chunk_take(int64_t* s_next, int64_t* cnt, int c, int64_t cap) noexcept nogil:
    """First slot of a free chunk of class ``c``, or -1 (nothing changed)
    when none is free and a 64-slot chunk would not fit below ``cap``."""
    cdef int64_t base, piece, size = <int64_t>1 << c
    if cnt[5 + c] == 0 and cnt[5 + MAX_CLASS] == 0 and cnt[0] + (<int64_t>1 << MAX_CLASS) > cap:
        return -1
    if cnt[5 + c] > 0:
        base = cnt[5 + c] - 1
        cnt[5 + c] = s_next[base] + 1
        return base
    if cnt[5 + MAX_CLASS] > 0:
        base = cnt[5 + MAX_CLASS] - 1
        cnt[5 + MAX_CLASS] = s_next[base] + 1
    else:
        base = cnt[0]
        cnt[0] += <int64_t>1 << MAX_CLASS
    piece = base + (<int64_t>1 << MAX_CLASS) - size
    while piece > base:  # the rest of the split chunk, on the free list of its class
        s_next[piece] = cnt[5 + c] - 1
        cnt[5 + c] = piece + 1
        piece -= size
    return base


cdef inline int64_t _chunk_first(const uint8_t* s_flags, int64_t top) noexcept nogil:
    """First slot of the pane chunk whose highest filled slot is ``top``."""
    return top & ~((<int64_t>1 << (s_flags[top] >> CLASS_SHIFT)) - 1)


cdef inline int64_t _older_chunk(const int64_t* s_next, const uint8_t* s_flags,
                                 int64_t first) noexcept nogil:
    """The highest slot of the pane's next older chunk (-1: none), from the
    link of the chunk starting at ``first``. Its flags and, for a full
    chunk, its link are prefetched: a walk that reads this first overlaps
    the next chunk's misses with the work on this one."""
    cdef int64_t nxt = s_next[first]
    if nxt >= 0:
        prefetch_w(&s_flags[nxt])
        prefetch_w(&s_next[nxt & ~((<int64_t>1 << MAX_CLASS) - 1)])
    return nxt


cdef inline void _chunk_give(int64_t* s_next, int64_t* cnt, int64_t base, int c) noexcept nogil:
    s_next[base] = cnt[5 + c] - 1
    cnt[5 + c] = base + 1


# ---------------------------------------------------------------- pane table

def pane_rehash(const int64_t[::1] og, const int64_t[::1] oq, const int64_t[::1] ov,
                int64_t[::1] hg, int64_t[::1] hq, int64_t[::1] hv):
    """Re-insert the live entries of the old map into the new (empty, all -1) one."""
    cdef Py_ssize_t i, n = ov.shape[0]
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t pos
    with nogil:
        for i in range(n):
            if ov[i] < 0:
                continue
            pos = <int64_t>(_mix(og[i], oq[i]) & mask)
            while hv[pos] != EMPTY:
                pos = <int64_t>((<uint64_t>pos + 1) & mask)
            hg[pos] = og[i]
            hq[pos] = oq[i]
            hv[pos] = ov[i]


def pane_assign(int64_t[::1] hg, int64_t[::1] hq, int64_t[::1] hv,
                int64_t[::1] s_group, int64_t[::1] s_next,
                uint8_t[::1] s_flags, int64_t[::1] counters,
                const int64_t[::1] gids, const int64_t[::1] ts, int64_t offset,
                int64_t p, int64_t q_dead, int64_t q_dirty, int64_t[::1] gcache, int64_t ways,
                Py_ssize_t start, int64_t max_fill, const int64_t[::1] indexed,
                int64_t[::1] out_slots, int64_t[::1] new_panes):
    """Slot of every row from ``start`` on (``-1``: late, all its windows purged).

    Panes ``q < q_dead`` have every window purged; panes ``q_dead <= q <=
    q_dirty`` have a window fired but not purged (the caller works both out
    from the window indices, exactly, and clamps them to int64).

    Where a (group, pane) lives: each group has ``ways`` (a power of two)
    cache ways ``gcache[2*ways*g + 2*(q & (ways-1))] = (q, slot)``, each
    holding the newest pane of its residue that the group has a slot in (a
    way whose pane is purged, ``q < q_dead``, or empty, slot
    ``-1``, holds none). A new (g, q) takes its way from an older pane, whose
    slot stays in that pane's list. So a (g, q) missing from its way is new,
    unless the way holds a newer pane: then its slot may have been moved
    out, and the call stops (returning ``q``) for the caller to put pane
    ``q``'s slots in the hash map (``pane_index``) and list ``q`` in
    ``indexed`` (ascending). A pane listed there is looked up in the map,
    and its new slots go into the map too (flag IN_MAP). With rows at most
    ``ways - 1`` panes out of order per key, no pane is indexed: the ways
    alone place every row.

    The map also holds the head of every pane's slot list (entry ``(-1,
    q)``); a new slot is the one after the head in the head's chunk, or the
    first of a new chunk (see the top of this file), and is prepended to its
    pane's list; a new pane is written to ``new_panes``. The map positions of
    the heads met are remembered (entries do not move during the call), so a
    new slot finds its pane's head without a probe. A row whose pane has a
    fired, unpurged window marks the slot DIRTY.

    Stops early (before an insertion) once the map holds ``max_fill`` live +
    tombstone entries, or a new chunk would not fit in the slot arrays, so
    the caller can grow them. Returns ``(next row, new panes, late rows,
    dirty rows, pane to index or None)``; ``next row == len(gids)`` when done.
    """
    cdef Py_ssize_t i, n = gids.shape[0]
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t q, g, slot, head, where, hwhere, c
    cdef int64_t nnew = 0, nlate = 0, ndirty = 0
    cdef int64_t cap = min(s_group.shape[0], s_next.shape[0], s_flags.shape[0])
    cdef int cls
    cdef double inv_p = 1.0 / <double>p
    cdef int64_t* cnt = &counters[0]
    cdef int64_t hq_cache[8]
    cdef int64_t hpos_cache[8]
    cdef int h8
    cdef int64_t q_ahead[PF_FAR]  # pane of rows i .. i + PF_FAR - 1 (ring), when prefetched
    cdef Py_ssize_t ia, x, nidx = indexed.shape[0]
    cdef bint newer, in_index, want = False
    if counters.shape[0] < 6 + MAX_CLASS:
        raise ValueError(f"pane_assign: counters has {counters.shape[0]} entries, "
                         f"needs {6 + MAX_CLASS}")
    for h8 in range(8):
        hpos_cache[h8] = -1
    with nogil:
        for ia in range(start, min(start + PF_FAR, n)):
            q_ahead[ia & (PF_FAR - 1)] = _floordiv_by(ts[ia] - offset, p, inv_p)
        i = start
        while i < n:
            q = q_ahead[i & (PF_FAR - 1)]
            if i + PF_FAR < n:  # the way row i + PF_FAR will read (one line of a table of
                ia = i + PF_FAR  # megabytes, 64 bytes per key: it comes from memory)
                q_ahead[ia & (PF_FAR - 1)] = _floordiv_by(ts[ia] - offset, p, inv_p)
                prefetch_w(&gcache[2 * ways * gids[ia]
                                   + 2 * (q_ahead[ia & (PF_FAR - 1)] & (ways - 1))])
            if q < q_dead:
                out_slots[i] = -1
                nlate += 1
                i += 1
                continue
            g = gids[i]
            c = 2 * ways * g + 2 * (q & (ways - 1))
            slot = gcache[c + 1]
            if slot < 0 or gcache[c] != q:
                newer = slot >= 0 and gcache[c] > q  # (newer than q: live)
                in_index = False
                for x in range(nidx):
                    if indexed[x] == q:
                        in_index = True
                slot = -1
                if in_index:
                    slot = _find(&hg[0], &hq[0], &hv[0], mask, g, q, &where)
                elif newer:
                    want = True  # (g, q) may have left its way: pane q goes into the map first
                    break
                if slot < 0:
                    if cnt[2] + cnt[3] + 2 >= max_fill:
                        break
                    # the pane's head: its newest slot, the next one is free unless it
                    # starts a chunk
                    h8 = <int>(q & 7)
                    if hpos_cache[h8] >= 0 and hq_cache[h8] == q:
                        hwhere = hpos_cache[h8]
                        head = hv[hwhere]
                    else:
                        head = _find(&hg[0], &hq[0], &hv[0], mask, -1, q, &hwhere)
                    cls = 0 if head < 0 else s_flags[head] >> CLASS_SHIFT
                    if head >= 0 and ((head + 1) & ((<int64_t>1 << cls) - 1)) != 0:
                        slot = head + 1
                    else:
                        if head >= 0 and cls < MAX_CLASS:
                            cls += 1
                        slot = _chunk_take(&s_next[0], cnt, cls, cap)
                        if slot < 0:
                            break  # the caller grows the slot arrays
                    cnt[4] += 1
                    # the lines a few slots on (the pane's next new slots, in a large chunk): a
                    # reused chunk was purged long before, and is cold
                    if slot + 8 < cap:
                        prefetch_w(&s_group[slot + 8])
                        prefetch_w(&s_next[slot + 8])
                    s_group[slot] = g
                    s_flags[slot] = <uint8_t>(cls << CLASS_SHIFT)
                    s_next[slot] = head
                    if head < 0:
                        _put(&hg[0], &hq[0], &hv[0], hwhere, -1, q, slot, cnt)
                        new_panes[nnew] = q
                        nnew += 1
                    else:
                        hv[hwhere] = slot
                    hq_cache[h8] = q
                    hpos_cache[h8] = hwhere
                    if not newer:
                        gcache[c] = q
                        gcache[c + 1] = slot
                    if in_index:
                        _find(&hg[0], &hq[0], &hv[0], mask, g, q, &where)
                        _put(&hg[0], &hq[0], &hv[0], where, g, q, slot, cnt)
                        s_flags[slot] |= IN_MAP
            if q <= q_dirty:
                s_flags[slot] |= DIRTY
                ndirty += 1
            out_slots[i] = slot
            i += 1
    return i, nnew, nlate, ndirty, (q if want else None)


def pane_index(int64_t[::1] hg, int64_t[::1] hq, int64_t[::1] hv, const int64_t[::1] s_group,
               const int64_t[::1] s_next, uint8_t[::1] s_flags, int64_t[::1] counters, int64_t q,
               int64_t max_fill) -> bool:
    """Put every slot of pane ``q`` in the hash map as ``(g, q)`` (flag
    IN_MAP), so that ``pane_assign`` finds the slots that left their ways.
    Returns False if the map reached ``max_fill`` live + tombstone entries
    first: grow it and call again (slots already in stay)."""
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t slot, where
    if counters.shape[0] < 6 + MAX_CLASS:
        raise ValueError(f"pane_index: counters has {counters.shape[0]} entries, "
                         f"needs {6 + MAX_CLASS}")
    cdef bint done = False
    with nogil:
        slot = _find(&hg[0], &hq[0], &hv[0], mask, -1, q, &where)
        while slot >= 0:
            if not (s_flags[slot] & IN_MAP):
                if counters[2] + counters[3] + 1 >= max_fill:
                    break
                if _find(&hg[0], &hq[0], &hv[0], mask, s_group[slot], q, &where) < 0:
                    _put(&hg[0], &hq[0], &hv[0], where, s_group[slot], q, slot, &counters[0])
                s_flags[slot] |= IN_MAP
            slot = s_next[slot]
        done = slot < 0
    return done


cdef int64_t _emit_merged(const int64_t* hg, const int64_t* hq, const int64_t* hv, uint64_t mask,
                          const int64_t* s_group, const int64_t* s_next, const uint8_t* s_flags,
                          const int64_t* panes, Py_ssize_t m, int64_t* group_mark,
                          const int64_t* op, const int64_t* off, Py_ssize_t nagg,
                          const int64_t* base, int64_t W, int64_t* orec,
                          int64_t* out_groups, uint64_t* ovf) noexcept nogil:
    """``pane_emit`` without pairs or refire, in one pass: each pane's list is
    walked a chunk at a time (a run of consecutive slots, newest first), and
    each slot's record is copied to a new row or merged into its group's row
    at once. Returns the number of rows; ORs the overflow flag of aggregate
    ``k`` into bit ``min(k, 63)`` of ``ovf``."""
    cdef Py_ssize_t a
    cdef int64_t slot, lo, x, g, r, nrows = 0, where, xa
    cdef Py_ssize_t k
    cdef const int64_t* b
    cdef int64_t* o
    # (a local: ORing into ``ovf`` itself would chain every merge through memory)
    cdef uint64_t flags = 0
    for a in range(m):
        slot = _find(hg, hq, hv, mask, -1, panes[a], &where)
        while slot >= 0:
            lo = _chunk_first(s_flags, slot)  # the run's first slot
            x = slot
            while x >= lo:
                xa = x - PF
                if xa >= lo:
                    prefetch_w(&group_mark[s_group[xa]])
                    prefetch_w(base + xa * W)
                xa = x - PF // 2
                if xa >= lo:
                    r = group_mark[s_group[xa]]
                    if r >= 0:
                        prefetch_w(orec + r * W)
                g = s_group[x]
                r = group_mark[g]
                b = base + x * W
                if r < 0:
                    group_mark[g] = nrows
                    out_groups[nrows] = g
                    memcpy(orec + nrows * W, b, <size_t>W * 8)
                    nrows += 1
                else:
                    o = orec + r * W
                    for k in range(nagg):
                        if b[off[k]] != 0:
                            flags |= (_merge_one(<int>op[k], o + off[k], b + off[k])
                                      << (k if k < 63 else 63))
                x -= 1
            slot = s_next[lo]
    for r in range(nrows):
        group_mark[out_groups[r]] = -1
    ovf[0] = flags
    return nrows


def pane_emit(const int64_t[::1] hg, const int64_t[::1] hq, const int64_t[::1] hv,
              const int64_t[::1] s_group, const int64_t[::1] s_next, const uint8_t[::1] s_flags,
              const int64_t[::1] panes, bint refire, int64_t[::1] group_mark,
              const int64_t[::1] ops, const int64_t[::1] offs, const int64_t[:, ::1] rec,
              int64_t[:, ::1] out_rec, int64_t row0,
              int64_t[::1] out_groups, int64_t[::1] out_row, int64_t[::1] out_src, bint merge=True,
              bint pairs=True):
    """The output rows of one window made of ``panes``, merged.

    Every group with a slot in these panes gets one output row (in order of
    first appearance), or with ``refire`` only the groups having a DIRTY slot.
    Rows are numbered from ``row0``: ``out_groups[r]`` is the group of row
    ``r`` and ``out_rec[r]`` the merge of its slots' records ``rec[slot]``
    (the aggregates' shared state, one (n_slots, W) array; ``out_rec`` has
    the same W words per row), aggregate ``a`` (merge code ``ops[a]``) in
    its words from ``offs[a]`` on in both; a row's record is zeroed when the
    row is created, so ``out_rec`` needs no initialisation. Without
    ``merge`` (windows of one pane, where a group has one slot) each slot is
    a row: the pairs are the rows in order, ``out_rec`` and ``group_mark``
    are left alone, and the caller reads the slots' records.
    The (row, slot) pairs are left in ``out_row`` / ``out_src`` (for
    aggregates merged outside); without ``pairs`` (merging, not refiring)
    they are not kept, and each slot is merged as its pane is walked (one
    pass, ``_emit_merged``; ``pairs`` is then returned as 0). ``group_mark``
    (one entry per group) must be all -1 and is left so. Capacities:
    ``out_groups`` and ``out_rec`` from ``row0`` on, and the pair arrays,
    hold at least every slot of these panes. Returns ``(rows, pairs)``. An
    int64 sum out of range raises SumOverflowError (numbering the aggregates
    as ``ops``) after the merges.

    Three passes over the pairs: list the slots (a walk of the pane lists),
    number the rows, merge; the last two prefetch ahead.
    """
    cdef Py_ssize_t a, i, m = panes.shape[0]
    cdef Py_ssize_t k, nagg = ops.shape[0]
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t slot, g, where, r, nrows = 0, npairs = 0, nslots = 0
    cdef int64_t W = rec.shape[1]
    cdef const int64_t* op = NULL
    cdef const int64_t* off = NULL
    cdef const int64_t* base = &rec[0, 0] if rec.shape[0] > 0 else NULL
    cdef int64_t* orec
    cdef const int64_t* b
    cdef int64_t* o
    cdef uint64_t ovf = 0
    if offs.shape[0] != nagg or out_rec.shape[1] != W:
        raise ValueError(f"pane_emit: {nagg} merge codes for {offs.shape[0]} offsets; out_rec has "
                         f"{out_rec.shape[1]} words per row, the records {W}")
    if nagg:
        op = &ops[0]
        off = &offs[0]
    for k in range(nagg):
        if not (0 <= op[k] <= 9 and 0 <= off[k] < W):
            raise ValueError(f"pane_emit: unknown code {op[k]} or word {off[k]} outside records "
                             f"of {W} words")
    if not (0 <= row0 < out_groups.shape[0] and (row0 < out_rec.shape[0] or not merge)):
        raise ValueError(f"pane_emit: row0 {row0} outside out_rec / out_groups of "
                         f"{out_rec.shape[0]} / {out_groups.shape[0]} rows")
    orec = &out_rec[row0, 0] if merge else NULL  # unused without merge
    if merge and not refire and not pairs:
        with nogil:
            nrows = _emit_merged(&hg[0], &hq[0], &hv[0], mask, &s_group[0], &s_next[0], &s_flags[0],
                                 &panes[0] if m > 0 else NULL, m, &group_mark[0], op, off, nagg,
                                 base, W, orec, &out_groups[row0], &ovf)
        if ovf:
            _raise_overflow("pane_emit", ovf)
        return nrows, 0
    with nogil:
        # the pane lists, one after the other (a pane's slots lie in runs of
        # consecutive slots, so each walk reads memory in order)
        for a in range(m):
            slot = _find(&hg[0], &hq[0], &hv[0], mask, -1, panes[a], &where)
            while slot >= 0:
                out_src[nslots] = slot
                nslots += 1
                slot = s_next[slot]
        if not merge:  # one pane: each slot (with refire: each DIRTY slot) is a row
            for i in range(nslots):
                slot = out_src[i]
                if refire and not (s_flags[slot] & DIRTY):
                    continue
                out_groups[row0 + nrows] = s_group[slot]
                out_src[nrows] = slot
                out_row[nrows] = row0 + nrows
                nrows += 1
            npairs = nrows
        else:
            for i in range(nslots):
                out_row[i] = s_group[out_src[i]]
            if refire:  # rows: the groups with a DIRTY slot
                for i in range(nslots):
                    if i + PF < nslots:
                        prefetch_w(&group_mark[out_row[i + PF]])
                    g = out_row[i]
                    if (s_flags[out_src[i]] & DIRTY) and group_mark[g] < 0:
                        group_mark[g] = nrows
                        out_groups[row0 + nrows] = g
                        memset(orec + nrows * W, 0, <size_t>W * 8)
                        nrows += 1
            for i in range(nslots):
                if i + PF < nslots:
                    prefetch_w(&group_mark[out_row[i + PF]])
                g = out_row[i]
                r = group_mark[g]
                if r < 0 and not refire:
                    r = nrows
                    group_mark[g] = r
                    out_groups[row0 + nrows] = g
                    memset(orec + nrows * W, 0, <size_t>W * 8)
                    nrows += 1
                if r >= 0:
                    out_row[npairs] = r
                    out_src[npairs] = out_src[i]
                    npairs += 1
            for i in range(npairs):
                if i + PF < npairs:  # one prefetch per 8 words (a line of aligned records)
                    for k in range(0, W, 8):
                        prefetch_w(orec + out_row[i + PF] * W + k)
                        prefetch_w(base + out_src[i + PF] * W + k)
                o = orec + out_row[i] * W
                b = base + out_src[i] * W
                for k in range(nagg):
                    if b[off[k]] != 0:
                        ovf |= (_merge_one(<int>op[k], o + off[k], b + off[k])
                                << (k if k < 63 else 63))
            for r in range(nrows):
                group_mark[out_groups[row0 + r]] = -1
            for i in range(npairs):
                out_row[i] += row0
    if ovf:
        _raise_overflow("pane_emit", ovf)
    return nrows, npairs


def pane_slots(const int64_t[::1] hg, const int64_t[::1] hq, const int64_t[::1] hv,
               const int64_t[::1] s_group, const int64_t[::1] s_next, const uint8_t[::1] s_flags,
               int64_t q, int64_t[::1] out_slots, int64_t[::1] out_groups) -> int:
    """The slots of pane ``q`` and their groups, a chunk (run of consecutive
    slots) at a time; returns their number, or ``-1`` if the outputs are too
    short. Modifies the outputs."""
    cdef int64_t where, n = 0, cap = min(out_slots.shape[0], out_groups.shape[0])
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t slot, lo, x, nxt
    with nogil:
        slot = _find(&hg[0], &hq[0], &hv[0], mask, -1, q, &where)
        while slot >= 0:
            lo = _chunk_first(&s_flags[0], slot)
            if n + slot - lo + 1 > cap:
                n = -1
                break
            nxt = _older_chunk(&s_next[0], &s_flags[0], lo)
            for x in range(lo, slot + 1, 8):
                prefetch_w(&s_group[x])
            for x in range(lo, slot + 1):
                out_slots[n] = x
                out_groups[n] = s_group[x]
                n += 1
            slot = nxt
    return n


def pairs_plan(const int64_t[::1] rows, const int64_t[::1] src, int64_t nrows, int64_t top,
               int64_t[::1] count, int64_t[::1] result_slots, int64_t[::1] out_dst,
               int64_t[::1] out_src):
    """Plan a window emission from its (output row, pane slot) pairs.

    A row with one pane reads that pane's slot directly; a row with several
    gets a scratch slot ``top, top + 1, ...`` and its pairs become merges
    ``out_dst[i] <- out_src[i]``. ``count`` is scratch of ``nrows`` entries.
    Fills ``result_slots`` (one per row). Returns ``(scratch slots, merges)``.
    """
    cdef Py_ssize_t i, npairs = rows.shape[0]
    cdef int64_t r, m = 0, nm = 0
    with nogil:
        for r in range(nrows):
            count[r] = 0
        for i in range(npairs):
            r = rows[i]
            count[r] += 1
            result_slots[r] = src[i]
        for r in range(nrows):
            if count[r] > 1:
                result_slots[r] = top + m
                m += 1
        for i in range(npairs):
            r = rows[i]
            if count[r] > 1:
                out_dst[nm] = result_slots[r]
                out_src[nm] = src[i]
                nm += 1
    return m, nm


def pane_clear_dirty(const int64_t[::1] hg, const int64_t[::1] hq, const int64_t[::1] hv,
                     const int64_t[::1] s_next, uint8_t[::1] s_flags, const int64_t[::1] panes):
    """Clear the DIRTY flag of every slot of ``panes``. Modifies ``s_flags``."""
    cdef Py_ssize_t a, m = panes.shape[0]
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t slot, where
    with nogil:
        for a in range(m):
            slot = _find(&hg[0], &hq[0], &hv[0], mask, -1, panes[a], &where)
            while slot >= 0:
                s_flags[slot] &= ~DIRTY
                slot = s_next[slot]


def pane_purge(int64_t[::1] hg, int64_t[::1] hq, int64_t[::1] hv,
               const int64_t[::1] s_group, int64_t[::1] s_next, const uint8_t[::1] s_flags,
               int64_t[::1] counters, const int64_t[::1] panes, int64_t[::1] out_slots):
    """Drop every slot of ``panes``: tombstone their entries, put their
    chunks on the free lists and list them in ``out_slots``. Returns the
    number of slots.

    A pane fills its chunks in order, so its slots are its head's chunk up
    to the head and every older chunk whole: the walk reads one link per
    chunk (the first slot's, to the older chunk's top), not one per slot."""
    cdef Py_ssize_t a, m = panes.shape[0]
    cdef uint64_t mask = <uint64_t>(hv.shape[0] - 1)
    cdef int64_t slot, base, x, where, w2, nxt, n = 0
    cdef int cls
    if counters.shape[0] < 6 + MAX_CLASS:
        raise ValueError(f"pane_purge: counters has {counters.shape[0]} entries, "
                         f"needs {6 + MAX_CLASS}")
    with nogil:
        for a in range(m):
            slot = _find(&hg[0], &hq[0], &hv[0], mask, -1, panes[a], &where)
            if slot < 0:
                continue
            hv[where] = TOMB
            counters[2] -= 1
            counters[3] += 1
            while slot >= 0:  # slot: the top of one of the pane's chunks
                cls = s_flags[slot] >> CLASS_SHIFT
                base = _chunk_first(&s_flags[0], slot)
                # (read before _chunk_give overwrites it)
                nxt = _older_chunk(&s_next[0], &s_flags[0], base)
                for x in range(slot, base - 1, -1):
                    if (s_flags[x] & IN_MAP) and \
                            _find(&hg[0], &hq[0], &hv[0], mask, s_group[x], panes[a], &w2) >= 0:
                        hv[w2] = TOMB
                        counters[2] -= 1
                        counters[3] += 1
                    out_slots[n] = x
                    n += 1
                slot = nxt
                _chunk_give(&s_next[0], &counters[0], base, cls)  # (overwrites that link)
        counters[4] -= n
    return n
