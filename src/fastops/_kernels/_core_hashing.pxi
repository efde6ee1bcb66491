# ---------------------------------------------------------------- hashing
#
# The 4- and 8-byte loops are the hottest code of the engine: they are
# ``_xxh64.h``'s (AVX2 where the CPU has it, else plain loops, bit for bit the
# same; the tests check them against the ``xxhash`` package).


def hash_u64(const uint64_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le8(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t n = values.shape[0]
    check_out(out.shape[0], n, "hash_u64")
    if n == 0:
        return
    with nogil:
        xxh64_many8(&values[0], n, seed, &out[0], 0)


def hash_u32(const uint32_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le4(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t n = values.shape[0]
    check_out(out.shape[0], n, "hash_u32")
    if n == 0:
        return
    with nogil:
        xxh64_many4(&values[0], n, seed, &out[0], 0)


def hash_u16(const uint16_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le2(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    check_out(out.shape[0], n, "hash_u16")
    with nogil:
        for i in range(n):
            out[i] = xxh64_u16(values[i], seed)


def hash_u8(const uint8_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(values[i:i+1], seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    check_out(out.shape[0], n, "hash_u8")
    with nogil:
        for i in range(n):
            out[i] = xxh64_u8(values[i], seed)


def hash_f64(const uint64_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float64 bit patterns with -0.0 as 0.0 and every NaN alike. Modifies ``out``."""
    cdef Py_ssize_t n = bits.shape[0]
    check_out(out.shape[0], n, "hash_f64")
    if n == 0:
        return
    with nogil:
        xxh64_many8(&bits[0], n, seed, &out[0], 1)


def hash_f32(const uint32_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float32 bit patterns with -0.0 as 0.0 and every NaN alike. Modifies ``out``."""
    cdef Py_ssize_t n = bits.shape[0]
    check_out(out.shape[0], n, "hash_f32")
    if n == 0:
        return
    with nogil:
        xxh64_many4(&bits[0], n, seed, &out[0], 1)


def hash_bits(const uint8_t[::1] bitmap, int64_t offset, uint64_t seed,
              uint64_t[::1] out):
    """Hash bit-packed booleans (bit ``offset + i``) as one byte 0 or 1."""
    cdef Py_ssize_t i, n = out.shape[0]
    cdef int64_t j
    cdef uint64_t h0 = xxh64_u8(0, seed)
    cdef uint64_t h1 = xxh64_u8(1, seed)
    check_bits(bitmap.shape[0], offset, n, "hash_bits")
    with nogil:
        for i in range(n):
            j = offset + i
            out[i] = h1 if (bitmap[j >> 3] >> (j & 7)) & 1 else h0


def hash_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                uint64_t seed, uint64_t[::1] out):
    """Hash variable-width values: value i is ``data[offsets[i]:offsets[i+1]]``.

    ``offsets`` has ``len(out) + 1`` entries (already shifted by the array's
    offset); ``data`` is the whole data buffer. Offsets that decrease or leave
    ``data`` are a ValueError, raised when the blocks of 1024 values before
    them are hashed.
    """
    cdef Py_ssize_t i, m, n = out.shape[0], bad = -1
    cdef Py_ssize_t nbytes = data.shape[0]
    cdef const uint8_t* base = &data[0] if nbytes > 0 else NULL
    if n == 0:
        return
    if offsets.shape[0] < n + 1:
        raise ValueError(f"hash_binary: {offsets.shape[0]} offsets for {n} values")
    with nogil:
        for i in range(0, n, 1024):  # each block's offsets checked while in L1
            m = min(n - i, <Py_ssize_t>1024)
            if not offsets_ok(&offsets[i], m, 0, nbytes):
                bad = i
                break
            if offset_t is int32_t:
                xxh64_values32(base, &offsets[i], m, seed, &out[i])
            else:
                xxh64_values64(base, &offsets[i], m, seed, &out[i])
    if bad >= 0:
        _raise_offsets(offsets, n, nbytes, "hash_binary")


def hash_bytes(const uint8_t[::1] data, uint64_t seed) -> int:
    """XXH64 of one byte string."""
    cdef uint64_t h
    cdef Py_ssize_t n = data.shape[0]
    if n == 0:
        return xxh64(NULL, 0, seed)
    with nogil:
        h = xxh64(&data[0], <size_t>n, seed)
    return h


def hash_set_nulls(const uint8_t[::1] validity, int64_t offset, uint64_t null_hash,
                   uint64_t[::1] out):
    """Set out[i] = null_hash wherever validity bit ``offset + i`` is 0."""
    cdef Py_ssize_t i, n = out.shape[0]
    cdef int64_t j
    check_bits(validity.shape[0], offset, n, "hash_set_nulls")
    with nogil:
        for i in range(n):
            j = offset + i
            if not (validity[j >> 3] >> (j & 7)) & 1:
                out[i] = null_hash


def hash_combine(uint64_t[::1] acc, const uint64_t[::1] h, uint64_t seed):
    """acc[i] = XXH64(le8(acc[i]) || le8(h[i]), seed): multi-column keys."""
    cdef Py_ssize_t i, n = acc.shape[0]
    if h.shape[0] < n:
        raise ValueError(f"hash_combine: {h.shape[0]} hashes for {n} rows")
    with nogil:
        for i in range(n):
            acc[i] = xxh64_pair(acc[i], h[i], seed)
