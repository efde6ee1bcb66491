# cython: language_level=3
"""Window aggregation kernels: slot tables and columnar aggregate state.

A *slot* is one accumulator: (group, pane) for tumbling and sliding windows,
(group, session) for session windows. Slot ids are dense int64, reused after
purge: sessions through a free stack of slots, panes through free lists of
chunks. All state lives in NumPy arrays owned by
``fastops.core.window.aggregator``; every kernel takes contiguous memoryviews, runs one
``with nogil:`` block, and modifies the arrays it is given. Capacities are
ensured by the caller before the call (``counters`` holds the sizes).

Pane table (tumbling / sliding)
    Open-addressing hash map ``(g, q) -> slot`` (arrays ``hg, hq, hv``; ``hv``
    is ``-1`` for empty, ``-2`` for a tombstone). Entry ``(-1, q)`` is the head
    of pane ``q``'s list of slots (linked through ``s_next``). A pane owns
    whole chunks of consecutive slots, filled in order, each chunk twice the
    last (1, 2, 4 .. 64 slots, aligned to their size): a dense pane's slots,
    records and list links lie together in memory, so walking it (emission,
    purge) and reading its records are sequential, while a sparse pane
    wastes no more slots than it uses. Free chunks wait in one list per size
    (linked through ``s_next`` of their first slot); 64-slot chunks are cut
    from the high-water mark and split for the smaller sizes. Times are
    relative to the window offset; pane ``q`` covers ``[q*p, (q+1)*p)``;
    window ``j`` covers panes ``[j*ks, j*ks + k)`` with ``ks = slide/p``,
    ``k = size/p``.

Session table
    Per group a list of live sessions sorted by start (``g_head``,
    ``s_next``); ``s_start``/``s_end`` with ``end = last + gap``.

``counters``: ``[0]`` slot high-water mark, ``[1]`` free stack size
(sessions), ``[2]`` live hash entries, ``[3]`` tombstones, ``[4]`` live pane
slots, ``[5 + c]`` first slot + 1 of the free chunks of class ``c`` (0: none).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define FASTOPS_PREFETCH(p) __builtin_prefetch((const void*)(p), 1, 3)
    #else
    #define FASTOPS_PREFETCH(p) ((void)0)
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    #define FASTOPS_CTZ64(x) __builtin_ctzll(x)
    #define FASTOPS_POPCOUNT64(x) __builtin_popcountll(x)
    #else
    static int fastops_ctz64(unsigned long long x) { int b = 0; while (!((x >> b) & 1)) b++; return b; }
    #define FASTOPS_CTZ64(x) fastops_ctz64(x)
    static int fastops_popcount64(unsigned long long x) { int b = 0; for (; x; x &= x - 1) b++; return b; }
    #define FASTOPS_POPCOUNT64(x) fastops_popcount64(x)
    #endif
    #if defined(__x86_64__) || defined(_M_X64)
    #include <emmintrin.h>
    /* zero n words with streaming stores: the lines are not read first, nor kept in the cache */
    static inline void fastops_zero_stream(long long* w, long long n) {
        for (long long i = 0; i < n; i++) _mm_stream_si64(w + i, 0);
    }
    #define FASTOPS_ZERO_STREAM(w, n) fastops_zero_stream((long long*)(w), (n))
    #define FASTOPS_STREAM_FENCE() _mm_sfence()
    #define FASTOPS_STORE_STREAM(p, v) _mm_stream_si64((long long*)(p), (long long)(v))
    #else
    #define FASTOPS_STORE_STREAM(p, v) (*(p) = (v))
    #define FASTOPS_ZERO_STREAM(w, n) memset((w), 0, (size_t)(n) * 8)
    #define FASTOPS_STREAM_FENCE() ((void)0)
    #endif
    """
    void zero_stream "FASTOPS_ZERO_STREAM"(int64_t* w, int64_t n) noexcept nogil
    void stream_fence "FASTOPS_STREAM_FENCE"() noexcept nogil
    void store_stream "FASTOPS_STORE_STREAM"(int64_t* p, int64_t v) noexcept nogil
    void prefetch "FASTOPS_PREFETCH"(const void* p) noexcept nogil
    int ctz64 "FASTOPS_CTZ64"(uint64_t x) noexcept nogil
    int popcount64 "FASTOPS_POPCOUNT64"(uint64_t x) noexcept nogil


cdef extern from *:
    """
    /* a + b into *r (wrapped to 64 bits); 1 if the exact sum is outside int64 */
    static inline uint64_t fastops_add_ovf(int64_t a, int64_t b, int64_t* r) {
    #if defined(__GNUC__) || defined(__clang__)
        return (uint64_t)__builtin_add_overflow(a, b, r);
    #else
        int64_t s = (int64_t)((uint64_t)a + (uint64_t)b);
        *r = s;
        return (uint64_t)(((a ^ s) & (b ^ s)) < 0);
    #endif
    }
    """
    uint64_t add_ovf "fastops_add_ovf"(int64_t a, int64_t b, int64_t* r) noexcept nogil


class SumOverflowError(OverflowError):
    """An int64 sum (``sum_i64``) left the int64 range: some partial sum,
    of rows or of merged records, did not fit. ``aggregates``: the indices of
    the aggregates that overflowed, in the numbering of the kernel that
    raised it (its ``ops``, or a stack layout's aggregates with values);
    ``fastops.core.aggregates`` and ``fastops.core.window.aggregator`` re-raise it naming the aggregate
    and its column. The state the kernel wrote is then unusable."""

    def __init__(self, message: str, aggregates: tuple = ()):
        super().__init__(message)
        self.aggregates = tuple(aggregates)


cdef int _raise_overflow(str what, uint64_t mask, Py_ssize_t first=0) except -1:
    """Raise SumOverflowError for the aggregates whose bits are set in
    ``mask`` (bit k: aggregate ``first + k``; bit 63 stands for 63 and on)."""
    cdef list idx = [first + k for k in range(64) if (mask >> k) & 1]
    raise SumOverflowError(f"{what}: an int64 sum overflowed (aggregate {idx[0] if idx else '?'})",
                           tuple(idx))

cdef Py_ssize_t PF = 16  # prefetch distance (rows)
# prefetch distance (rows) for loops that do little per row, where 16 rows take less than a
# miss to memory: pane_assign (also the size of its ring of panes worked out ahead; a power of
# two), agg_update (in sliding windows a new pane reuses slots purged long before: cold) and
# dense_window's runs that only read and finish a record
DEF PF_FAR = 64

DEF MAX_CLASS = 6     # pane chunks hold 2**class slots, class 0 .. MAX_CLASS
DEF CLASS_SHIFT = 4   # a pane slot's chunk class sits in its flags from this bit on
PANE_CHUNK_MAX = 1 << MAX_CLASS  # slots of the largest pane chunk
PANE_LAYOUT = "chunks-64"  # recorded in snapshots: how pane slots are laid out

cdef int64_t EMPTY = -1
cdef int64_t TOMB = -2
cdef uint8_t DIRTY = 1      # pane flag: updated after one of its windows fired
cdef uint8_t IN_MAP = 2     # pane flag: the slot's (g, q) entry is in the hash map
cdef uint8_t S_LIVE = 1     # session flags
cdef uint8_t S_DIRTY = 2
cdef uint8_t S_FIRED = 4

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


cdef inline int64_t _older_chunk(const int64_t* s_next, const uint8_t* s_flags, int64_t first) noexcept nogil:
    """The highest slot of the pane's next older chunk (-1: none), from the
    link of the chunk starting at ``first``. Its flags and, for a full
    chunk, its link are prefetched: a walk that reads this first overlaps
    the next chunk's misses with the work on this one."""
    cdef int64_t nxt = s_next[first]
    if nxt >= 0:
        prefetch(&s_flags[nxt])
        prefetch(&s_next[nxt & ~((<int64_t>1 << MAX_CLASS) - 1)])
    return nxt


cdef inline void _chunk_give(int64_t* s_next, int64_t* cnt, int64_t base, int c) noexcept nogil:
    s_next[base] = cnt[5 + c] - 1
    cnt[5 + c] = base + 1


cdef inline int64_t _alloc(int64_t* free_stack, int64_t* counters) noexcept nogil:
    if counters[1] > 0:
        counters[1] -= 1
        return free_stack[counters[1]]
    counters[0] += 1
    return counters[0] - 1


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
                Py_ssize_t start, int64_t max_fill, const int64_t[::1] indexed, int64_t[::1] out_slots,
                int64_t[::1] new_panes):
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
    first of a new chunk (see the module docstring), and is prepended to its
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
    cdef int64_t q_ahead[PF_FAR]  # pane of rows i .. i + PF_FAR - 1 (ring), worked out when prefetched
    cdef Py_ssize_t ia, x, nidx = indexed.shape[0]
    cdef bint newer, in_index, want = False
    if counters.shape[0] < 6 + MAX_CLASS:
        raise ValueError(f"pane_assign: counters has {counters.shape[0]} entries, needs {6 + MAX_CLASS}")
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
                prefetch(&gcache[2 * ways * gids[ia] + 2 * (q_ahead[ia & (PF_FAR - 1)] & (ways - 1))])
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
                    # the pane's head: its newest slot, the next one is free unless it starts a chunk
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
                        prefetch(&s_group[slot + 8])
                        prefetch(&s_next[slot + 8])
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
        raise ValueError(f"pane_index: counters has {counters.shape[0]} entries, needs {6 + MAX_CLASS}")
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
    cdef uint64_t flags = 0  # (a local: ORing into ``ovf`` itself would chain every merge through memory)
    for a in range(m):
        slot = _find(hg, hq, hv, mask, -1, panes[a], &where)
        while slot >= 0:
            lo = _chunk_first(s_flags, slot)  # the run's first slot
            x = slot
            while x >= lo:
                xa = x - PF
                if xa >= lo:
                    prefetch(&group_mark[s_group[xa]])
                    prefetch(base + xa * W)
                xa = x - PF // 2
                if xa >= lo:
                    r = group_mark[s_group[xa]]
                    if r >= 0:
                        prefetch(orec + r * W)
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
                            flags |= _merge_one(<int>op[k], o + off[k], b + off[k]) << (k if k < 63 else 63)
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
    pass, ``_emit_merged``; ``pairs`` is then returned as 0). ``group_mark`` (one entry per group) must be
    all -1 and is left so. Capacities: ``out_groups`` and ``out_rec`` from
    ``row0`` on, and the pair arrays, hold at least every slot of these
    panes. Returns ``(rows, pairs)``. An int64 sum out of range raises
    SumOverflowError (numbering the aggregates as ``ops``) after the merges.

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
                        prefetch(&group_mark[out_row[i + PF]])
                    g = out_row[i]
                    if (s_flags[out_src[i]] & DIRTY) and group_mark[g] < 0:
                        group_mark[g] = nrows
                        out_groups[row0 + nrows] = g
                        memset(orec + nrows * W, 0, <size_t>W * 8)
                        nrows += 1
            for i in range(nslots):
                if i + PF < nslots:
                    prefetch(&group_mark[out_row[i + PF]])
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
                        prefetch(orec + out_row[i + PF] * W + k)
                        prefetch(base + out_src[i + PF] * W + k)
                o = orec + out_row[i] * W
                b = base + out_src[i] * W
                for k in range(nagg):
                    if b[off[k]] != 0:
                        ovf |= _merge_one(<int>op[k], o + off[k], b + off[k]) << (k if k < 63 else 63)
            for r in range(nrows):
                group_mark[out_groups[row0 + r]] = -1
            for i in range(npairs):
                out_row[i] += row0
    if ovf:
        _raise_overflow("pane_emit", ovf)
    return nrows, npairs


# ---------------------------------------------------------------- pane runs
# Sliding windows of k panes are emitted from lists of (group, record) sorted
# by group: a window is the suffix of one block of k aligned panes merged with
# a prefix of the next (``fastops.core.window.aggregator`` keeps both), so each output row
# costs about two sequential merges instead of one lookup per pane.

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
                prefetch(&s_group[x])
            for x in range(lo, slot + 1):
                out_slots[n] = x
                out_groups[n] = s_group[x]
                n += 1
            slot = nxt
    return n


cdef inline void _copy_rec(int64_t* o, const int64_t* b, int64_t W) noexcept nogil:
    """One record of ``W`` words; the usual widths as word moves (a fixed-size
    ``memcpy`` to the stack may become ``rep movs``, slow to start)."""
    cdef int64_t c
    if W == 6:
        o[0] = b[0]; o[1] = b[1]; o[2] = b[2]; o[3] = b[3]; o[4] = b[4]; o[5] = b[5]
    elif W == 8:
        o[0] = b[0]; o[1] = b[1]; o[2] = b[2]; o[3] = b[3]; o[4] = b[4]; o[5] = b[5]; o[6] = b[6]; o[7] = b[7]
    elif W == 4:
        o[0] = b[0]; o[1] = b[1]; o[2] = b[2]; o[3] = b[3]
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
# array (``window._stack_layout`` builds it):
#   [W, nvals, ncnt, neq,
#    src[W]      stack word j is a copy of store word src[j]
#    op[nvals]   the aggregates with values (OPS code > 0): merge code,
#    cnt[nvals]  the stack word of their count,
#    val[nvals]  the stack word of their first value,
#    cw[ncnt]    the count words (each merged by addition),
#    eq[2neq]]   pairs of store words every record read must hold equal

cdef struct _Stack:  # a layout, copied into the kernel's frame (a plan of pointers into the
    Py_ssize_t W, nvals, ncnt, neq  # layout array was 0.5 ns per record slower in dense_add and
    int64_t src[64]                 # suffix_add); the usual narrow one runs as ``_Narrow``
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
    if n < 4 or not (1 <= a[0] <= 64 and 0 <= a[1] <= 32 and 0 <= a[2] <= 64 and 0 <= a[3] <= 64) or \
            n != 4 + a[0] + 3 * a[1] + a[2] + 2 * a[3]:
        raise ValueError(f"{what}: a stack layout of {n} words that does not add up (see _window.pyx)")
    if a[0] != W:
        raise ValueError(f"{what}: a stack layout of {a[0]} words for stack records of {W}")
    s.W, s.nvals, s.ncnt, s.neq = a[0], a[1], a[2], a[3]
    a += 4
    for k in range(s.W):
        s.src[k] = a[k]
        if store_w >= 0 and not 0 <= a[k] < store_w:
            raise ValueError(f"{what}: a stack layout reads store word {a[k]} of records of {store_w}")
    a += s.W
    for k in range(s.nvals):
        s.op[k], s.cnt[k], s.val[k] = <int>a[k], a[s.nvals + k], a[2 * s.nvals + k]
        if not (1 <= s.op[k] <= 9 and 0 <= s.cnt[k] < W and 0 <= s.val[k] and s.val[k] + _op_words(s.op[k]) - 1 <= W):
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
            raise ValueError(f"{what}: a stack layout reads store word {a[k]} of records of {store_w}")
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


cdef struct _Narrow:  # the usual layout with one count (``_narrow``): 4 words, the count at word 0,
    int64_t s0, s1, s2, s3  # one or two aggregates with values (op1 0: one), at most two pairs of
    int64_t e0, e1, e2, e3  # counts to check (unused: word 0 twice). The kernels' loops take it by
    int64_t v0, v1          # value, so its words stay in registers where ``_Stack``'s are read from
    int op0, op1            # the frame on every record (9.0 against 10.3 ns per record in dense_add)


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
        t[0] = r[s.s0]; t[1] = r[s.s1]; t[2] = r[s.s2]; t[3] = r[s.s3]
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
            added = _dense_add(nr, &groups[0], &slots[0], n, &rec[0, 0], rec.shape[1], &acc[0, 0], &bits[0],
                               &ovf)
        else:
            added = _dense_add(st, &groups[0], &slots[0], n, &rec[0, 0], rec.shape[1], &acc[0, 0], &bits[0],
                               &ovf)
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
            prefetch(acc + groups[i + 2 * PF] * W)  # line of each, 2 * PF rows ahead
            prefetch(rec + slots[i + 2 * PF] * rw)
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
            prefetch(&ptr[groups[i + 2 * PF]])
        if i + PF < n:  # the pane's record and the group's newer one, both at random
            prefetch(rec + slots[i + PF] * rw)
            if _bit(bits, groups[i + PF]):
                prefetch(ss + ptr[groups[i + PF]] * W)
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


def suffix_drop(const int64_t[::1] ss_group, const int64_t[::1] ss_next, Py_ssize_t lo, Py_ssize_t hi,
                int64_t[::1] ptr, uint64_t[::1] bits) -> int:
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
                     const int64_t[::1] cnt_words, Py_ssize_t W, int64_t[:, ::1] out, uint8_t[:, ::1] null,
                     int64_t[::1] nnull, str what) except -1:
    """Check a plan against records of ``W`` words and its outputs; fill ``f``."""
    cdef Py_ssize_t c
    if codes.shape[0] != words.shape[0] or out.shape[0] != words.shape[0] or \
            null.shape[0] != cnt_words.shape[0] or nnull.shape[0] < cnt_words.shape[0] or \
            null.shape[1] != out.shape[1]:
        raise ValueError(f"{what}: {words.shape[0]} words, {codes.shape[0]} codes and {out.shape[0]} "
                         f"columns; {cnt_words.shape[0]} count words, {null.shape[0]} null columns and "
                         f"{nnull.shape[0]} null counts; {out.shape[1]} / {null.shape[1]} rows")
    for c in range(words.shape[0]):
        if not (0 <= codes[c] <= 1 and 0 <= words[c] and words[c] + codes[c] < W):
            raise ValueError(f"{what}: word {words[c]} (code {codes[c]}) outside records of {W} words")
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


DEF BLK = 64  # rows per block of the kernels that finish records into result columns


cdef inline int64_t _final_word(const int64_t* rec, int64_t w, int64_t code) noexcept nogil:
    """Result word ``w`` of a record made by ``code`` (``FINAL``): the word,
    or a compensated sum (the word plus its error term where it is finite)."""
    cdef double t
    if code == 0:
        return rec[w]
    t = _as_double(rec[w])
    if t - t == 0:  # 0 unless t is inf or NaN (whose error term is NaN, not added)
        t += _as_double(rec[w + 1])
    return _as_int(t)


cdef inline void _put_block(const _Final* f, const int64_t** src, Py_ssize_t m, Py_ssize_t r) noexcept nogil:
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
                store_stream(col + i, _final_word(src[i], w, code))
        else:
            for i in range(m):
                col[i] = _final_word(src[i], w, code)
    nn = 0
    for c in range(f.nnull):  # only nulls are written (rare: the branch is predicted)
        w = f.cnt[c]
        nul = f.nulls + c * f.stride + r
        if c > 0 and w == f.cnt[c - 1]:  # the column before's nulls (one count for several
            if nn:                        # aggregates: a pass fewer; W2 dense_window ~10% less)
                memcpy(nul, nul - f.stride, <size_t>m)
        else:
            nn = 0
            for i in range(m):
                if src[i][w] == 0:
                    nul[i] = 1
                    nn += 1
        f.counts[c] += nn


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
        raise ValueError(f"dense_window: stack rows of {ss.shape[1]} words and accumulator rows of "
                         f"{acc.shape[1]} (one width, at most 64), or arrays shorter than their bitmaps")
    if not 0 <= row0 <= cap or out_null.shape[1] != cap:
        raise ValueError(f"dense_window: first row {row0} outside {cap} columns' rows, or null columns "
                         f"of {out_null.shape[1]} rows")
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


cdef int64_t _window_rows(_Layout s, const _Final* fin, const uint64_t[::1] sbits, const int64_t[::1] ptr,
                         const int64_t[:, ::1] ss, const uint64_t[::1] pbits, const int64_t[:, ::1] acc,
                         int64_t[::1] out_groups, Py_ssize_t row0, uint64_t* ovf_out) noexcept nogil:
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
                prefetch(&ss[ptr[g], 0])  # (a pointer out of range is caught below; prefetches never fault)
                prefetch(&acc[g, 0])
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
                prefetch(&ss[ptr[out_groups[r + PF_FAR]], 0])
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
                prefetch(&acc[out_groups[r + PF_FAR], 0])
            src[i] = &acc[out_groups[r], 0]
        _put_block(fin, src, m, row0 + r0)
    stream_fence()
    ovf_out[0] = ovf
    return bad


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
        raise ValueError(f"pane_purge: counters has {counters.shape[0]} entries, needs {6 + MAX_CLASS}")
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
                nxt = _older_chunk(&s_next[0], &s_flags[0], base)  # (read before _chunk_give overwrites it)
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


# ---------------------------------------------------------------- session table

def session_assign(int64_t[::1] g_head, int64_t[::1] s_group, int64_t[::1] s_start,
                   int64_t[::1] s_end, int64_t[::1] s_next, uint8_t[::1] s_flags,
                   int64_t[::1] s_parent, int64_t[::1] free_stack, int64_t[::1] counters,
                   const int64_t[::1] gids, const int64_t[::1] ts, int64_t gap,
                   int64_t late_limit, int64_t[::1] out_slots, int64_t[::1] merge_dst,
                   int64_t[::1] merge_src):
    """Session slot of every row, merging sessions a row bridges.

    Row ``t`` joins every live session ``[s, e)`` of its group with
    ``s <= t + gap`` and ``e >= t``; if it joins several they merge into the
    earliest (pairs in ``merge_dst``/``merge_src``, in order; the merged-away
    slots are unlinked but not freed). A row joining none opens a session,
    unless ``t + gap <= late_limit`` (``watermark - allowed_lateness``): then
    it is late (slot -1). Returns ``(merges, late count)``.
    """
    cdef Py_ssize_t i, n = gids.shape[0]
    cdef int64_t t, g, lo, hi, prev, cur, a, nm = 0, nlate = 0, s
    with nogil:
        for i in range(n):
            t = ts[i]
            g = gids[i]
            lo = t
            hi = t + gap
            prev = -1
            a = -1
            cur = g_head[g]
            while cur >= 0:
                if s_start[cur] > hi:
                    break
                if s_end[cur] >= lo:
                    if a < 0:
                        a = cur
                        if lo < s_start[a]:
                            s_start[a] = lo
                        if hi > s_end[a]:
                            s_end[a] = hi
                        s_flags[a] |= S_DIRTY
                        cur = s_next[a]
                        continue
                    # cur directly follows a: merge it into a
                    if s_end[cur] > s_end[a]:
                        s_end[a] = s_end[cur]
                    s_next[a] = s_next[cur]
                    s_parent[cur] = a
                    s_flags[cur] = 0
                    merge_dst[nm] = a
                    merge_src[nm] = cur
                    nm += 1
                    cur = s_next[a]
                    continue
                prev = cur
                cur = s_next[cur]
            if a < 0:
                if hi <= late_limit:
                    out_slots[i] = -1
                    nlate += 1
                    continue
                a = _alloc(&free_stack[0], &counters[0])
                s_group[a] = g
                s_start[a] = lo
                s_end[a] = hi
                s_flags[a] = S_LIVE | S_DIRTY
                s_parent[a] = -1
                if prev < 0:
                    s_next[a] = g_head[g]
                    g_head[g] = a
                else:
                    s_next[a] = s_next[prev]
                    s_next[prev] = a
            out_slots[i] = a
        if nm > 0:
            for i in range(n):
                s = out_slots[i]
                if s >= 0:
                    while s_parent[s] >= 0:
                        s = s_parent[s]
                    out_slots[i] = s
            for i in range(nm):
                s = merge_dst[i]
                while s_parent[s] >= 0:
                    s = s_parent[s]
                merge_dst[i] = s
    return nm, nlate


def session_release(int64_t[::1] s_parent, const int64_t[::1] slots,
                    int64_t[::1] free_stack, int64_t[::1] counters):
    """Free merged-away session slots (after their state was merged and reset)."""
    cdef Py_ssize_t i, n = slots.shape[0]
    with nogil:
        for i in range(n):
            s_parent[slots[i]] = -1
            free_stack[counters[1]] = slots[i]
            counters[1] += 1


def session_fire(uint8_t[::1] s_flags, const int64_t[::1] s_end, int64_t nslots, int64_t t,
                 int64_t[::1] out):
    """Live sessions with ``end <= t`` that never fired or changed since:
    listed in ``out``, marked FIRED, DIRTY cleared. Returns the count."""
    cdef int64_t s, n = 0
    cdef uint8_t f
    with nogil:
        for s in range(nslots):
            f = s_flags[s]
            if (f & S_LIVE) and s_end[s] <= t and ((f & S_DIRTY) or not (f & S_FIRED)):
                out[n] = s
                n += 1
                s_flags[s] = (f | S_FIRED) & ~S_DIRTY
    return n


def session_purge(int64_t[::1] g_head, const int64_t[::1] s_group, const int64_t[::1] s_end,
                  int64_t[::1] s_next, uint8_t[::1] s_flags, int64_t[::1] free_stack,
                  int64_t[::1] counters, int64_t limit, int64_t[::1] out):
    """Drop live sessions with ``end <= limit`` (``watermark - allowed_lateness``):
    unlink, free, list in ``out``. Returns the count."""
    cdef int64_t s, g, cur, prev, n = 0, nslots = counters[0]
    with nogil:
        for s in range(nslots):
            if not (s_flags[s] & S_LIVE) or s_end[s] > limit:
                continue
            g = s_group[s]
            prev = -1
            cur = g_head[g]
            while cur >= 0 and cur != s:
                prev = cur
                cur = s_next[cur]
            if cur == s:
                if prev < 0:
                    g_head[g] = s_next[s]
                else:
                    s_next[prev] = s_next[s]
            s_flags[s] = 0
            free_stack[counters[1]] = s
            counters[1] += 1
            out[n] = s
            n += 1
    return n


# ---------------------------------------------------------------- aggregates
# State of one aggregate: ``rec``, an (n_slots, F) int64 array, one record of
# F 8-byte words per slot (so one row touches one cache line); word 0 is
# ``cnt``, the number of non-null values (0: the slot is empty and its other
# words are garbage); float words are the same bytes read as double.
# Aggregates are named by a code (``OPS``) shared by updates and merges:
#   count (cnt) | sum_f64 (cnt, total, comp; result total + comp) | sum_i64
#   (cnt, total; a total out of int64 range is reported: SumOverflowError) | max/min_i64, max/min_f64 (cnt, value; NaN
#   skipped) | welford (cnt, mean, M2) | first / last (cnt, value, ts: the
#   value of the smallest / largest event time; ties: the earliest row for
#   first, the latest for last; values are raw 8-byte words)

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


cdef inline void _update_one(int op, int64_t* r, const int64_t* v, int64_t t, uint64_t* ovf) noexcept nogil:
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
    uint64_t ovf       # 1: an int64 sum overflowed (a flag in memory, written only by sums: a
                       # variable ORed in the loop over aggregates slowed every aggregate by 15%)


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
                         f"{len(vals)} value arrays, {len(valids)} bitmaps, {voffs.shape[0]} offsets")
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
                raise ValueError(f"agg_update: words from {roffs[k]} on (code {u.op}) outside records of "
                                 f"{rec.shape[1]} words")
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
                            prefetch(loc[k].rec + slots[i + PF_FAR] * loc[k].stride)
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
                                    loc[k].vals + i if loc[k].vals != NULL else NULL, ts[i], &loc[k].ovf)
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
        raise ValueError(f"agg_update: slot {slots[bad_row]} outside [0, {nrec}) (rows before it added)")


# merges: drec[dst[i]] <- drec[dst[i]] (+) srec[src[i]], in order. ``drec`` and
# ``srec`` may be the same array (merging slots of one state) or not (merging
# slots into a separate, zeroed record per output row).

# A merge is split in two: the values (``_merge_vals``, given both counts) and
# the count (an addition). Records of the store keep each aggregate's count
# beside its values (``_merge_one``); a suffix stack's records may share one
# count among several aggregates (``_stack_merge``).

cdef inline uint64_t _merge_vals(int op, int64_t na, int64_t nb, int64_t* a, const int64_t* b) noexcept nogil:
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
                prefetch(w + dst[i + PF] * DF)  # (prefetches of bad slots never fault)
                prefetch(sw + src[i + PF] * SF)
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
                zero_stream(w + slots[i] * W, W)
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
                        prefetch(w + slots[i + PF] * F)  # (prefetches of bad slots never fault)
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


# ---------------------------------------------------------------- string picks
#
# min / max / first / last of string and binary columns. A slot holds its
# value as a reference into one byte arena owned by the caller (``ref``:
# start, -1 for none; ``length``) and the value's event time (``held_ts``).
# Merges copy references, not bytes; the caller appends winners' bytes with
# ``gather_bytes`` and compacts the arena when garbage outgrows live bytes.

ctypedef fused offset_t:
    int32_t
    int64_t

PICK_MODES = {"min": 0, "max": 1, "first": 2, "last": 3}


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define fastops_be64(x) __builtin_bswap64(x)
    #else
    static inline uint64_t fastops_be64(uint64_t x) {
        x = ((x & 0x00000000FFFFFFFFULL) << 32) | (x >> 32);
        x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
        return ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
    }
    #endif
    """
    uint64_t be64 "fastops_be64"(uint64_t x) noexcept nogil


cdef inline int _cmp_bytes(const uint8_t* a, int64_t la,
                           const uint8_t* b, int64_t lb) noexcept nogil:
    """memcmp order of two byte strings, a prefix first (UTF-8: code point order).
    Values of 8 bytes or more are told apart by their first 8 bytes as one
    big-endian word when those differ, without a call."""
    cdef int64_t m = la if la < lb else lb
    cdef uint64_t wa, wb
    cdef int c
    if m >= 8:  # (fastops imports only on little-endian hosts)
        memcpy(&wa, a, 8)
        memcpy(&wb, b, 8)
        if wa != wb:
            wa = be64(wa)
            wb = be64(wb)
            return -1 if wa < wb else 1
    c = memcmp(a, b, <size_t>m) if m > 0 else 0
    if c != 0:
        return c
    return (la > lb) - (la < lb)


cdef inline bint _replaces(int mode, const uint8_t* a, int64_t la, int64_t ta,
                           const uint8_t* b, int64_t lb, int64_t tb) noexcept nogil:
    """Whether value ``a`` (time ``ta``, from a later row) replaces the held ``b``:
    min / max by bytes, first by a smaller time, last by a time as large or larger."""
    if mode == 0:
        return _cmp_bytes(a, la, b, lb) < 0
    if mode == 1:
        return _cmp_bytes(a, la, b, lb) > 0
    if mode == 2:
        return ta < tb
    return ta >= tb


def pick_candidates(int mode, const int64_t[::1] slots, const offset_t[::1] offsets,
                    const uint8_t[::1] data, const int64_t[::1] ts, int64_t[::1] best,
                    const int64_t[::1] ref, const int64_t[::1] length,
                    const int64_t[::1] held_ts, const uint8_t[::1] arena,
                    int64_t[::1] out_slots, int64_t[::1] out_rows) -> int:
    """The rows of a batch whose values replace their slots' held values.

    Row i (bytes ``data[offsets[i]:offsets[i+1]]``, time ``ts[i]``; ``ts``
    may be empty for min / max) is offered to slot ``slots[i]``, rows in order
    (a later row counts as later). First each slot's best row of the batch
    (``best``: one scratch entry per slot, all -1 before and after), then that
    row against the held value (``ref[s] < 0``: none). The winners go to
    ``out_slots`` / ``out_rows`` (capacity n), one per slot; returns their number.
    """
    cdef Py_ssize_t i, k, w = 0, touched = 0, n = slots.shape[0]
    cdef Py_ssize_t cap = best.shape[0]
    cdef int64_t s, j, bad = -1
    cdef const uint8_t* d = &data[0] if data.shape[0] > 0 else NULL
    cdef const uint8_t* a = &arena[0] if arena.shape[0] > 0 else NULL
    cdef bint timed = mode >= 2
    if not 0 <= mode <= 3:
        raise ValueError(f"pick_candidates: unknown mode {mode}")
    if offsets.shape[0] != n + 1 or (timed and ts.shape[0] != n) or out_slots.shape[0] < n \
            or out_rows.shape[0] < n:
        raise ValueError(f"pick_candidates: {n} slots need n + 1 offsets, n times and outputs of n")
    if ref.shape[0] < cap or length.shape[0] < cap or held_ts.shape[0] < cap:
        raise ValueError(f"pick_candidates: state smaller than its {cap} slots")
    with nogil:
        for i in range(n):
            s = slots[i]
            if s < 0 or s >= cap:
                bad = s
                break
            if i + PF < n and 0 <= slots[i + PF] < cap:
                prefetch(&best[slots[i + PF]])
            j = best[s]
            if j < 0:
                best[s] = i
                out_slots[touched] = s
                touched += 1
            elif _replaces(mode, d + offsets[i], offsets[i + 1] - offsets[i], ts[i] if timed else 0,
                           d + offsets[j], offsets[j + 1] - offsets[j], ts[j] if timed else 0):
                best[s] = i
        for k in range(touched):
            if k + PF < touched:
                prefetch(&ref[out_slots[k + PF]])
                prefetch(&length[out_slots[k + PF]])
                if timed:
                    prefetch(&held_ts[out_slots[k + PF]])
            s = out_slots[k]
            j = best[s]
            best[s] = -1
            if bad < 0 and (ref[s] < 0 or _replaces(
                    mode, d + offsets[j], offsets[j + 1] - offsets[j], ts[j] if timed else 0,
                    a + ref[s], length[s], held_ts[s])):
                out_slots[w] = s
                out_rows[w] = j
                w += 1
    if bad >= 0:
        raise ValueError(f"pick_candidates: slot {bad} outside [0, {cap})")
    return w


def pick_merge(int mode, const int64_t[::1] dst, const int64_t[::1] src, int64_t[::1] ref,
               int64_t[::1] length, int64_t[::1] held_ts, const uint8_t[::1] arena):
    """Slot ``dst[k]`` takes ``src[k]``'s value where it wins (the source
    counting as later rows), pairs in order; the value is shared, not copied."""
    cdef Py_ssize_t k, n = dst.shape[0], cap = ref.shape[0]
    cdef int64_t s, t, bad = -1
    cdef const uint8_t* a = &arena[0] if arena.shape[0] > 0 else NULL
    if not 0 <= mode <= 3 or src.shape[0] != n or length.shape[0] < cap or held_ts.shape[0] < cap:
        raise ValueError(f"pick_merge: mode {mode}, {n} destinations, {src.shape[0]} sources")
    with nogil:
        for k in range(n):
            t = dst[k]
            s = src[k]
            if t < 0 or t >= cap or s < 0 or s >= cap:
                bad = k
                break
            if ref[s] >= 0 and (ref[t] < 0 or _replaces(mode, a + ref[s], length[s], held_ts[s],
                                                       a + ref[t], length[t], held_ts[t])):
                ref[t] = ref[s]
                length[t] = length[s]
                held_ts[t] = held_ts[s]
    if bad >= 0:
        raise ValueError(f"pick_merge: pair ({dst[bad]}, {src[bad]}) outside [0, {cap})")


def gather_bytes(const int64_t[::1] starts, const int64_t[::1] lengths, const uint8_t[::1] src,
                 const int64_t[::1] out_starts, uint8_t[::1] out):
    """out[out_starts[i]:][:lengths[i]] = src[starts[i]:][:lengths[i]] for each i."""
    cdef Py_ssize_t i, n = starts.shape[0]
    cdef int64_t ns = src.shape[0], no = out.shape[0], bad = -1
    if lengths.shape[0] != n or out_starts.shape[0] != n:
        raise ValueError(f"gather_bytes: {n} starts, {lengths.shape[0]} lengths, "
                         f"{out_starts.shape[0]} output starts")
    with nogil:
        for i in range(n):
            if lengths[i] == 0:
                continue
            if lengths[i] < 0 or starts[i] < 0 or starts[i] + lengths[i] > ns \
                    or out_starts[i] < 0 or out_starts[i] + lengths[i] > no:
                bad = i
                break
            memcpy(&out[out_starts[i]], &src[starts[i]], <size_t>lengths[i])
    if bad >= 0:
        raise ValueError(f"gather_bytes: value {bad} ({lengths[bad]} bytes) outside its buffers")
