# String picks (included by window.pyx).
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


cdef inline int _cmp_bytes(const uint8_t* a, int64_t la,
                           const uint8_t* b, int64_t lb) noexcept nogil:
    """memcmp order of two byte strings, a prefix first (UTF-8: code point order).
    Values of 8 bytes or more are told apart by their first 8 bytes as one
    big-endian word when those differ, without a call."""
    cdef int64_t m = la if la < lb else lb
    cdef uint64_t wa, wb
    cdef int c
    if m >= 8:
        memcpy(&wa, a, 8)
        memcpy(&wb, b, 8)
        if wa != wb:  # byte-swapped, big-endian: fastops imports only on little-endian hosts
            wa = bswap64(wa)
            wb = bswap64(wb)
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
                prefetch_w(&best[slots[i + PF]])
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
                prefetch_w(&ref[out_slots[k + PF]])
                prefetch_w(&length[out_slots[k + PF]])
                if timed:
                    prefetch_w(&held_ts[out_slots[k + PF]])
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
            if ref[s] >= 0 and (ref[t] < 0 or _replaces(mode, a + ref[s], length[s],
                                                        held_ts[s], a + ref[t], length[t],
                                                        held_ts[t])):
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
