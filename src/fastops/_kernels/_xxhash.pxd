# cython: language_level=3
"""XXH64 for every kernel module, through ``cimport``: the declarations of
``_xxh64.h``, the one implementation (bit-exact with the ``xxhash`` package;
checked by the tests)."""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef extern from "_xxh64.h" nogil:
    uint64_t xxh64 "fastops_xxh64"(const uint8_t* p, size_t n, uint64_t seed) noexcept
    uint64_t xxh64_u64 "fastops_xxh64_u64"(uint64_t v, uint64_t seed) noexcept
    uint64_t xxh64_u32 "fastops_xxh64_u32"(uint32_t v, uint64_t seed) noexcept
    uint64_t xxh64_u16 "fastops_xxh64_u16"(uint32_t v, uint64_t seed) noexcept
    uint64_t xxh64_u8 "fastops_xxh64_u8"(uint32_t v, uint64_t seed) noexcept
    # XXH64 of the 16 bytes le(a) || le(b): how column hashes combine
    uint64_t xxh64_pair "fastops_xxh64_pair"(uint64_t a, uint64_t b, uint64_t seed) noexcept
    # floats as hashed (and as key tables compare them): -0.0 as 0.0, every NaN
    # as the quiet NaN
    uint64_t canon_f64 "fastops_canon_f64"(uint64_t bits) noexcept
    uint32_t canon_f32 "fastops_canon_f32"(uint32_t bits) noexcept
    # out[i] = XXH64 of the 8- or 4-byte v[i] (canon: of the float bits' hashed
    # form); AVX2 where the CPU has it
    void xxh64_many8 "fastops_xxh64_many8"(const uint64_t* v, int64_t n, uint64_t seed,
                                           uint64_t* out, int canon) noexcept
    void xxh64_many4 "fastops_xxh64_many4"(const uint32_t* v, int64_t n, uint64_t seed,
                                           uint64_t* out, int canon) noexcept
    # out[i] = XXH64(base[off[i]:off[i + 1]]) for i < n, grouped by length per block
    void xxh64_values32 "fastops_xxh64_values32"(const uint8_t* base, const int32_t* off,
                                                 int64_t n, uint64_t seed,
                                                 uint64_t* out) noexcept
    void xxh64_values64 "fastops_xxh64_values64"(const uint8_t* base, const int64_t* off,
                                                 int64_t n, uint64_t seed,
                                                 uint64_t* out) noexcept
