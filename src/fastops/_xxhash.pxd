# cython: language_level=3
"""XXH64 (Yann Collet's published algorithm), as inline ``noexcept nogil``
helpers shared by every kernel module through ``cimport``.

All reads are little-endian via ``memcpy`` (unaligned-safe); fastops refuses to
import on big-endian hosts, so the hash of a value is the same everywhere and
can be stored in checkpoints.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from *:
    """
    #define FASTOPS_P1 0x9E3779B185EBCA87ULL
    #define FASTOPS_P2 0xC2B2AE3D27D4EB4FULL
    #define FASTOPS_P3 0x165667B19E3779F9ULL
    #define FASTOPS_P4 0x85EBCA77C2B2AE63ULL
    #define FASTOPS_P5 0x27D4EB2F165667C5ULL
    static inline uint64_t fastops_rotl64(uint64_t x, int r) {
        return (x << r) | (x >> (64 - r));
    }
    """
    const uint64_t P1 "FASTOPS_P1"
    const uint64_t P2 "FASTOPS_P2"
    const uint64_t P3 "FASTOPS_P3"
    const uint64_t P4 "FASTOPS_P4"
    const uint64_t P5 "FASTOPS_P5"
    uint64_t rotl64 "fastops_rotl64"(uint64_t x, int r) noexcept nogil


cdef inline uint64_t _round(uint64_t acc, uint64_t lane) noexcept nogil:
    acc = acc + lane * P2
    acc = rotl64(acc, 31)
    return acc * P1


cdef inline uint64_t _merge_round(uint64_t acc, uint64_t val) noexcept nogil:
    acc = acc ^ _round(0, val)
    return acc * P1 + P4


cdef inline uint64_t _avalanche(uint64_t h) noexcept nogil:
    h = h ^ (h >> 33)
    h = h * P2
    h = h ^ (h >> 29)
    h = h * P3
    return h ^ (h >> 32)


cdef inline uint64_t _read64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline uint32_t _read32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint64_t _tail(uint64_t h, const uint8_t* p, size_t n) noexcept nogil:
    """Consume the last ``n < 32`` bytes and finish."""
    while n >= 8:
        h = h ^ _round(0, _read64(p))
        h = rotl64(h, 27) * P1 + P4
        p += 8
        n -= 8
    if n >= 4:
        h = h ^ (<uint64_t>_read32(p) * P1)
        h = rotl64(h, 23) * P2 + P3
        p += 4
        n -= 4
    while n > 0:
        h = h ^ (<uint64_t>p[0] * P5)
        h = rotl64(h, 11) * P1
        p += 1
        n -= 1
    return _avalanche(h)


cdef inline uint64_t xxh64(const uint8_t* p, size_t n, uint64_t seed) noexcept nogil:
    """XXH64 of ``n`` bytes at ``p``."""
    cdef uint64_t h, v1, v2, v3, v4
    cdef size_t total = n
    if n >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while n >= 32:
            v1 = _round(v1, _read64(p))
            v2 = _round(v2, _read64(p + 8))
            v3 = _round(v3, _read64(p + 16))
            v4 = _round(v4, _read64(p + 24))
            p += 32
            n -= 32
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18)
        h = _merge_round(h, v1)
        h = _merge_round(h, v2)
        h = _merge_round(h, v3)
        h = _merge_round(h, v4)
    else:
        h = seed + P5
    h = h + <uint64_t>total
    return _tail(h, p, n)


cdef inline uint64_t xxh64_u64(uint64_t v, uint64_t seed) noexcept nogil:
    """XXH64 of the 8 little-endian bytes of ``v`` (specialised)."""
    cdef uint64_t h = seed + P5 + 8
    h = h ^ _round(0, v)
    h = rotl64(h, 27) * P1 + P4
    return _avalanche(h)


cdef inline uint64_t xxh64_u32(uint32_t v, uint64_t seed) noexcept nogil:
    """XXH64 of the 4 little-endian bytes of ``v`` (specialised)."""
    cdef uint64_t h = seed + P5 + 4
    h = h ^ (<uint64_t>v * P1)
    h = rotl64(h, 23) * P2 + P3
    return _avalanche(h)


cdef inline uint64_t xxh64_u16(uint32_t v, uint64_t seed) noexcept nogil:
    """XXH64 of the 2 little-endian bytes of ``v``."""
    cdef uint64_t h = seed + P5 + 2
    h = h ^ (<uint64_t>(v & 0xFF) * P5)
    h = rotl64(h, 11) * P1
    h = h ^ (<uint64_t>((v >> 8) & 0xFF) * P5)
    h = rotl64(h, 11) * P1
    return _avalanche(h)


cdef inline uint64_t xxh64_u8(uint32_t v, uint64_t seed) noexcept nogil:
    """XXH64 of the single byte ``v``."""
    cdef uint64_t h = seed + P5 + 1
    h = h ^ (<uint64_t>(v & 0xFF) * P5)
    h = rotl64(h, 11) * P1
    return _avalanche(h)


cdef inline uint64_t xxh64_pair(uint64_t a, uint64_t b, uint64_t seed) noexcept nogil:
    """XXH64 of the 16 bytes ``le(a) || le(b)``: how column hashes combine."""
    cdef uint64_t h = seed + P5 + 16
    h = h ^ _round(0, a)
    h = rotl64(h, 27) * P1 + P4
    h = h ^ _round(0, b)
    h = rotl64(h, 27) * P1 + P4
    return _avalanche(h)
