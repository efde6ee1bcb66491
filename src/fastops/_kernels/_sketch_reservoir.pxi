# Reservoir sampling, Algorithm L (included by sketch.pyx).

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
        check_validity(valid.shape[0], voff, n)
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
