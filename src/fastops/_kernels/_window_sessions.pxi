# Session table (included by window.pyx).
#
# Per group a list of live sessions sorted by start (``g_head``, ``s_next``);
# ``s_start``/``s_end`` with ``end = last + gap``. Slots are reused through a
# free stack (``free_stack``, its size in ``counters[1]``).

cdef uint8_t S_LIVE = 1     # session flags
cdef uint8_t S_DIRTY = 2
cdef uint8_t S_FIRED = 4


cdef inline int64_t _alloc(int64_t* free_stack, int64_t* counters) noexcept nogil:
    """A free session slot: the top of the free stack, or the next unused one."""
    if counters[1] > 0:
        counters[1] -= 1
        return free_stack[counters[1]]
    counters[0] += 1
    return counters[0] - 1


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
