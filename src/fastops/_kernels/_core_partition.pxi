# ---------------------------------------------------------------- partition ids
#
# Every id kernel writes ``out[i]`` (in [0, P): int32, or uint8 where P <= 256
# and the ids stay inside ``partition``) and the histogram
# ``counts[p]`` (length P) in the same pass. Counting goes through four
# interleaved sub-histograms so that runs of one hot key do not serialise on a
# single counter.

cdef enum:
    SUB_HIST_MAX = 65536   # sub-histograms only for P up to this


cdef inline int64_t* _hist_alloc(Py_ssize_t P, Py_ssize_t* stride) noexcept nogil:
    """Four interleaved zeroed histograms of P counters (one if P is huge)."""
    stride[0] = P if P <= SUB_HIST_MAX else 0
    return <int64_t*>calloc(<size_t>(4 * stride[0] + P), sizeof(int64_t))


cdef inline void _hist_finish(const int64_t* sub, Py_ssize_t P, Py_ssize_t stride,
                              int64_t* counts) noexcept nogil:
    cdef Py_ssize_t p
    if stride == 0:
        for p in range(P):
            counts[p] = sub[p]
    else:
        for p in range(P):
            counts[p] = sub[p] + sub[stride + p] + sub[2 * stride + p] + sub[3 * stride + p]


cdef inline uint64_t _placed(const uint64_t* h, id_t* out, Py_ssize_t i,
                             uint64_t mask) noexcept nogil:
    """out[i] = h[i] & mask (a power-of-two modulo); returns a one in byte
    ``out[i]``, the row's count for ``_ids_counted``'s byte counters."""
    cdef int32_t p = <int32_t>(h[i] & mask)
    out[i] = <id_t>p
    return <uint64_t>1 << (8 * p)


cdef inline Py_ssize_t _ids_counted(const uint64_t* h, Py_ssize_t n, uint64_t d, uint64_t hi,
                                    uint64_t lo, const int32_t* own, id_t* out, int64_t* sub,
                                    Py_ssize_t stride, Py_ssize_t P, bint check) noexcept nogil:
    """out[i] = h[i] % d, or own[h[i] % d] when ``own`` is set, counted into the
    interleaved histograms ``sub`` (``_hist_alloc``, ``P`` counters) unless
    ``sub`` is NULL. With ``check`` (else ``own`` was checked whole), returns
    the first row whose counted owner is outside ``[0, P)`` (the rows before
    it done); else -1."""
    cdef Py_ssize_t i, j, m
    cdef uint64_t mask = d - 1
    cdef int32_t p
    cdef uint64_t c0, c1, c2, c3
    if d & mask == 0 and d <= 8 and own == NULL and sub != NULL:
        # up to 8 partitions: counts in the bytes of four registers (at most 255
        # rows each before they are added up), so no counter goes through memory
        i = 0
        while i < n:
            m = min(n - i, <Py_ssize_t>1008)  # 252 rows per register, 3 more in the tail
            c0 = c1 = c2 = c3 = 0
            j = 0
            while j + 4 <= m:
                c0 += _placed(h, out, i + j, mask)
                c1 += _placed(h, out, i + j + 1, mask)
                c2 += _placed(h, out, i + j + 2, mask)
                c3 += _placed(h, out, i + j + 3, mask)
                j += 4
            while j < m:
                c0 += _placed(h, out, i + j, mask)
                j += 1
            for p in range(<int32_t>d):
                sub[p] += <int64_t>(((c0 >> (8 * p)) & 255) + ((c1 >> (8 * p)) & 255)
                                    + ((c2 >> (8 * p)) & 255) + ((c3 >> (8 * p)) & 255))
            i += m
    elif d & mask == 0:
        for i in range(n):
            p = <int32_t>(h[i] & mask)
            if own != NULL:
                p = own[p]
                if check and sub != NULL and <uint32_t>p >= <size_t>P:
                    return i
            out[i] = <id_t>p
            if sub != NULL:
                sub[(i & 3) * stride + p] += 1
    else:
        for i in range(n):
            p = <int32_t>fastmod(h[i], hi, lo, d)
            if own != NULL:
                p = own[p]
                if check and sub != NULL and <uint32_t>p >= <size_t>P:
                    return i
            out[i] = <id_t>p
            if sub != NULL:
                sub[(i & 3) * stride + p] += 1
    return -1


cdef int _check_owners(const int32_t[::1] owner_of, Py_ssize_t P, str what) except -1:
    """Every key group's owner is in ``[0, P)``."""
    cdef Py_ssize_t g
    cdef bint ok
    with nogil:
        ok = _ids_ok(&owner_of[0], owner_of.shape[0], P)
    if not ok:
        for g in range(owner_of.shape[0]):
            if not 0 <= owner_of[g] < P:
                raise ValueError(f"{what}: owner {owner_of[g]} of key group {g} outside [0, {P})")
    return 0


cdef inline int64_t* _hist_or_none(Py_ssize_t P, Py_ssize_t* stride) except? NULL:
    """Histograms for ``P`` counts (``_hist_alloc``), or NULL for none (P = 0)."""
    cdef int64_t* sub
    if P == 0:
        return NULL
    sub = _hist_alloc(P, stride)
    if sub == NULL:
        raise MemoryError(f"histogram of {P} partitions")
    return sub


cdef inline void _hist_done(int64_t* sub, Py_ssize_t P, Py_ssize_t stride,
                            int64_t* counts) noexcept nogil:
    """Sum ``sub`` into ``counts`` and free it (nothing for NULL)."""
    if sub != NULL:
        _hist_finish(sub, P, stride, counts)
        free(sub)


cdef int _check_partitions(uint64_t num_partitions, Py_ssize_t ncounts, str what) except -1:
    """``num_partitions`` fits an int32 id; ``counts`` has that many entries or none."""
    if num_partitions < 1 or num_partitions > INT32_MAX:
        raise ValueError(f"{what}: num_partitions {num_partitions} outside [1, {INT32_MAX}]")
    if ncounts != 0 and <uint64_t>ncounts != num_partitions:
        raise ValueError(f"{what}: {ncounts} counts for {num_partitions} partitions")
    return 0


def fastmod_u64(const uint64_t[::1] values, uint64_t d, uint64_t[::1] out):
    """out[i] = values[i] % d through the kernels' reciprocal (``d >= 1``). For tests."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef uint64_t hi, lo
    if d == 0:
        raise ValueError("fastmod_u64: d must be >= 1")
    check_out(out.shape[0], n, "fastmod_u64")
    fastmod_init(d, &hi, &lo)
    with nogil:
        for i in range(n):
            out[i] = fastmod(values[i], hi, lo, d)


def partition_modulo(const uint64_t[::1] hashes, uint64_t num_partitions,
                     id_t[::1] out, int64_t[::1] counts) -> int:
    """out[i] = hashes[i] % num_partitions; counts[p] = rows with id p.

    ``counts`` has ``num_partitions`` entries, or none for no histogram.
    Modifies ``out`` and ``counts``.
    Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t n = hashes.shape[0], P, stride
    cdef uint64_t d = num_partitions, hi, lo
    cdef int64_t* sub
    _check_partitions(num_partitions, counts.shape[0], "partition_modulo")
    check_out(out.shape[0], n, "partition_modulo")
    P = <Py_ssize_t>num_partitions
    fastmod_init(d, &hi, &lo)
    sub = _hist_or_none(counts.shape[0], &stride)
    with nogil:
        if n > 0:
            _ids_counted(&hashes[0], n, d, hi, lo, NULL, &out[0], sub, stride, P, False)
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    return OK


def partition_lookup(const uint64_t[::1] hashes, const int32_t[::1] owner_of,
                     id_t[::1] out, int64_t[::1] counts) -> int:
    """out[i] = owner_of[hashes[i] % len(owner_of)]: key groups (Flink's scheme).

    ``owner_of[g]`` is the owner of key group ``g``, in ``[0, P)``; ``counts``
    (length P, or empty for no histogram) gets the rows per owner. With
    counts, an owner outside ``[0, P)`` is a ValueError: checked before the
    rows when there are no more key groups than rows, else row by row (raised
    when the rows before it are done).
    Modifies ``out`` and ``counts``. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t n = hashes.shape[0], P = counts.shape[0], stride, bad = -1
    cdef uint64_t m = <uint64_t>owner_of.shape[0], hi, lo, g
    cdef int64_t* sub
    cdef bint by_row = P > 0 and <uint64_t>n < m  # else owner_of is checked whole: no dearer
    if m == 0:
        raise ValueError("partition_lookup: no key groups in owner_of")
    check_out(out.shape[0], n, "partition_lookup")
    if P > 0 and not by_row:
        _check_owners(owner_of, P, "partition_lookup")
    fastmod_init(m, &hi, &lo)
    sub = _hist_or_none(P, &stride)
    with nogil:
        if n > 0 and by_row:
            bad = _ids_counted(&hashes[0], n, m, hi, lo, &owner_of[0], &out[0], sub, stride,
                               P, True)
        elif n > 0:
            _ids_counted(&hashes[0], n, m, hi, lo, &owner_of[0], &out[0], sub, stride, P, False)
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    if bad >= 0:
        g = hashes[bad] % m
        raise ValueError(f"partition_lookup: owner {owner_of[g]} of key group {g} outside [0, {P})")
    return OK


cdef extern from "_ids.h" nogil:
    # out[i] = XXH64(v[i]) & (P - 1), counted into interleaved histograms, in
    # AVX-512 registers; 0 (nothing done) without AVX-512
    bint ids_pow2_u64_u8 "fastops_ids_pow2_u64_u8"(
        const uint64_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, uint8_t* out,
        int64_t* sub, int64_t stride)
    bint ids_pow2_u64_i32 "fastops_ids_pow2_u64_i32"(
        const uint64_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, int32_t* out,
        int64_t* sub, int64_t stride)
    bint ids_pow2_u32_u8 "fastops_ids_pow2_u32_u8"(
        const uint32_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, uint8_t* out,
        int64_t* sub, int64_t stride)
    bint ids_pow2_u32_i32 "fastops_ids_pow2_u32_i32"(
        const uint32_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, int32_t* out,
        int64_t* sub, int64_t stride)


ctypedef fused key_t:
    uint32_t
    uint64_t


def partition_fixed(const key_t[::1] values, bint is_float, uint64_t seed,
                    uint64_t num_partitions, const int32_t[::1] owner_of,
                    id_t[::1] out, int64_t[::1] counts) -> int:
    """Partition ids straight from a 4- or 8-byte key column without nulls:
    ``hash64`` (``is_float``: of float bits) in blocks of 1024 rows kept in L1,
    then ``partition_modulo`` (``owner_of`` empty) or ``partition_lookup`` on
    each block, so that no array of hashes is written and read back.

    ``counts`` has ``num_partitions`` entries, or none for no histogram. With
    counts, an owner outside ``[0, num_partitions)`` is a ValueError, checked
    as ``partition_lookup`` does.
    Modifies ``out`` and ``counts``. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, m, n = values.shape[0], P, stride, bad = -1
    cdef uint64_t d, hi, lo, h
    cdef uint64_t hbuf[1024]
    cdef int64_t* sub
    cdef bint lookup = owner_of.shape[0] > 0
    cdef const int32_t* own = &owner_of[0] if lookup else NULL
    cdef bint vector = False
    _check_partitions(num_partitions, counts.shape[0], "partition_fixed")
    check_out(out.shape[0], n, "partition_fixed")
    P = <Py_ssize_t>num_partitions
    # owner_of is checked whole when it has no more key groups than rows
    cdef bint by_row = lookup and counts.shape[0] > 0 and n < owner_of.shape[0]
    if lookup and counts.shape[0] > 0 and not by_row:
        _check_owners(owner_of, P, "partition_fixed")
    d = <uint64_t>owner_of.shape[0] if lookup else num_partitions
    fastmod_init(d, &hi, &lo)
    sub = _hist_or_none(counts.shape[0], &stride)
    with nogil:
        if not lookup and d & (d - 1) == 0 and n > 0:  # AVX-512: hash, mask and count in registers
            if key_t is uint64_t and id_t is uint8_t:
                vector = ids_pow2_u64_u8(&values[0], n, seed, is_float, d, &out[0], sub, stride)
            elif key_t is uint64_t:
                vector = ids_pow2_u64_i32(&values[0], n, seed, is_float, d, &out[0], sub, stride)
            elif id_t is uint8_t:
                vector = ids_pow2_u32_u8(&values[0], n, seed, is_float, d, &out[0], sub, stride)
            else:
                vector = ids_pow2_u32_i32(&values[0], n, seed, is_float, d, &out[0], sub, stride)
        i = n if vector else 0
        while i < n:
            m = min(<Py_ssize_t>1024, n - i)
            if key_t is uint64_t:
                xxh64_many8(&values[i], m, seed, hbuf, is_float)
            else:
                xxh64_many4(&values[i], m, seed, hbuf, is_float)
            if by_row:
                bad = _ids_counted(hbuf, m, d, hi, lo, own, &out[i], sub, stride, P, True)
                if bad >= 0:
                    bad += i
                    break
            else:
                _ids_counted(hbuf, m, d, hi, lo, own, &out[i], sub, stride, P, False)
            i += m
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    if bad >= 0:
        if key_t is uint64_t:
            xxh64_many8(&values[bad], 1, seed, &h, is_float)
        else:
            xxh64_many4(&values[bad], 1, seed, &h, is_float)
        raise ValueError(f"partition_fixed: owner {owner_of[h % d]} of key group {h % d} "
                         f"outside [0, {P})")
    return OK


cdef inline Py_ssize_t _ring_ids(const uint64_t* hashes, Py_ssize_t n, const uint64_t* points,
                                 Py_ssize_t m, const int32_t* owners, const int64_t* lut,
                                 int lut_shift, id_t* out, int64_t* sub, Py_ssize_t stride,
                                 Py_ssize_t P, bint check) noexcept nogil:
    """out[i] = the owner of the first point >= hashes[i] (wrapping), binary
    search inside the hash's LUT bucket; counted into ``sub`` unless it is
    NULL. With ``check`` (else the tables were checked whole), returns the
    first row whose bucket is not ``0 <= lut[b] <= lut[b+1] <= m`` or whose
    counted owner is outside ``[0, P)``; else -1."""
    cdef Py_ssize_t i
    cdef uint64_t h, b
    cdef int64_t lo, hi, mid
    cdef int32_t p
    for i in range(n):
        h = hashes[i]
        b = h >> lut_shift
        lo = lut[b]
        hi = lut[b + 1]
        if check and (<uint64_t>lo > <uint64_t>hi or <uint64_t>hi > <uint64_t>m):
            return i
        while lo < hi:
            mid = (lo + hi) >> 1
            if points[mid] < h:
                lo = mid + 1
            else:
                hi = mid
        p = owners[0 if lo == m else lo]
        out[i] = <id_t>p
        if sub != NULL:
            if check and <uint32_t>p >= <size_t>P:
                return i
            sub[(i & 3) * stride + p] += 1
    return -1


cdef inline bint _lut_ok(const int64_t* lut, Py_ssize_t nlut, Py_ssize_t m) noexcept nogil:
    """``lut`` runs from 0 or more up to ``m`` or less and never down: one
    branch-free pass of vector ORs (with every entry below 2**62, a step
    down sets bit 63 of its difference)."""
    cdef Py_ssize_t j
    cdef uint64_t acc = <uint64_t>lut[0]
    for j in range(1, nlut):
        acc |= <uint64_t>lut[j] | (<uint64_t>lut[j] - <uint64_t>lut[j - 1])
    return (acc >> 62) == 0 and lut[nlut - 1] <= m


cdef int _check_ring(const int64_t[::1] lut, const int32_t[::1] owners, Py_ssize_t m,
                     Py_ssize_t P) except -1:
    """The LUT runs from 0 or more up to ``m`` or less, never down, and (``P``
    counts) every owner is in ``[0, P)``."""
    cdef Py_ssize_t j
    cdef int64_t prev = 0
    cdef bint ok
    with nogil:
        ok = _lut_ok(&lut[0], lut.shape[0], m) and (P == 0 or _ids_ok(&owners[0], m, P))
    if ok:
        return 0
    for j in range(lut.shape[0]):
        if not prev <= lut[j] <= m:
            raise ValueError(f"partition_ring: LUT entry {j} is {lut[j]}, outside [{prev}, {m}]")
        prev = lut[j]
    for j in range(m if P > 0 else 0):
        if not 0 <= owners[j] < P:
            raise ValueError(f"partition_ring: owner {owners[j]} of point {j} outside [0, {P})")
    return 0


def partition_ring(const uint64_t[::1] hashes, const uint64_t[::1] points,
                   const int32_t[::1] owners, const int64_t[::1] lut, int lut_shift,
                   id_t[::1] out, int64_t[::1] counts) -> int:
    """Consistent hashing: the owner of the first ring point >= hash (wrapping).

    ``points`` is sorted ascending (non-empty); ``lut[b]`` is the first index
    whose point has top bits ``>= b`` (``b = point >> lut_shift``), and
    ``lut[-1] == len(points)``. ``counts`` (length P, or empty for no
    histogram) gets the rows per owner. Modifies ``out`` and ``counts``.
    A LUT bucket outside the points, or an owner outside ``[0, P)`` that is
    counted, is a ValueError: for at least as many rows as LUT entries and
    points, checked before the rows; for fewer, row by row (raised when the
    rows before it are done).
    Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t n = hashes.shape[0], m = points.shape[0], bad = -1
    cdef Py_ssize_t P = counts.shape[0], stride = 0
    cdef int64_t* sub = NULL
    cdef uint64_t b
    cdef int64_t lo
    cdef bint by_row = n < lut.shape[0] + m  # else the tables are checked whole: no dearer
    if m == 0 or owners.shape[0] < m:
        raise ValueError(f"partition_ring: {m} points, {owners.shape[0]} owners")
    # the last bucket, (2**64 - 1) >> lut_shift, reads lut[bucket + 1]
    if not (0 <= lut_shift <= 63 and lut.shape[0] >= 2
            and <uint64_t>(lut.shape[0] - 2) >= (~(<uint64_t>0)) >> lut_shift):
        raise ValueError(f"partition_ring: {lut.shape[0]} LUT entries for shift {lut_shift}")
    check_out(out.shape[0], n, "partition_ring")
    if n > 0 and not by_row:
        _check_ring(lut, owners, m, P)
    if P > 0:
        sub = _hist_alloc(P, &stride)
        if sub == NULL:
            raise MemoryError(f"histogram of {P} partitions")
    with nogil:  # (literal arguments: the loop is compiled for each case)
        if n > 0 and by_row:
            bad = _ring_ids(&hashes[0], n, &points[0], m, &owners[0], &lut[0], lut_shift,
                            &out[0], sub, stride, P, True)
        elif n > 0 and sub != NULL:
            _ring_ids(&hashes[0], n, &points[0], m, &owners[0], &lut[0], lut_shift,
                      &out[0], sub, stride, P, False)
        elif n > 0:
            _ring_ids(&hashes[0], n, &points[0], m, &owners[0], &lut[0], lut_shift,
                      &out[0], NULL, 0, 0, False)
        if sub != NULL:
            _hist_finish(sub, P, stride, &counts[0])
            free(sub)
    if bad >= 0:
        b = hashes[bad] >> lut_shift
        if not 0 <= lut[b] <= lut[b + 1] <= m:
            raise ValueError(f"partition_ring: LUT bucket {b} holds points "
                             f"[{lut[b]}, {lut[b + 1]}) outside [0, {m}]")
        lo = lut[b]
        while lo < lut[b + 1] and points[lo] < hashes[bad]:
            lo += 1
        lo = 0 if lo == m else lo
        raise ValueError(f"partition_ring: owner {owners[lo]} of point {lo} outside [0, {P})")
    return OK


def partition_count(const int32_t[::1] ids, int64_t[::1] counts) -> int:
    """counts[p] = number of ids equal to p. Returns 0, or -1 if an id is
    outside ``[0, len(counts))``. Modifies ``counts``."""
    cdef Py_ssize_t i, n = ids.shape[0], P = counts.shape[0], stride
    cdef int32_t p
    cdef int64_t* sub
    cdef int status = OK
    sub = _hist_alloc(P, &stride)
    if sub == NULL:
        raise MemoryError(f"histogram of {P} partitions")
    with nogil:
        for i in range(n):
            p = ids[i]
            if p < 0 or p >= P:
                status = ERR_RANGE
                break
            sub[(i & 3) * stride + p] += 1
        _hist_finish(sub, P, stride, &counts[0])
        free(sub)
    return status
