/* Partition ids straight from 8- or 4-byte keys, for a power-of-two number
 * of partitions, with AVX-512 (checked at run time).
 *
 * Each register of eight keys is hashed (XXH64, bit for bit
 * fastops_xxh64_u64 / _u32), masked to its ids, stored and counted while it
 * is still in registers: no array of hashes is written and read back, and
 * no scalar loop touches a row. Up to 8 partitions, the counts live in the
 * bytes of one register (a one shifted into byte ``id`` of each lane), added
 * up every 255 registers (2040 rows); above that the ids of each such block
 * are counted from L1 into the caller's four interleaved histograms. The
 * keys are prefetched 4 KB ahead: the hardware prefetcher alone leaves the
 * loop waiting on memory.
 *
 * fastops_ids_pow2_{u64,u32}_{u8,i32} return 1 when they did the work, 0
 * where the CPU (or compiler) lacks AVX-512: the caller then runs its plain
 * loop.
 */
#ifndef FASTOPS_IDS_H
#define FASTOPS_IDS_H

#include "_xxh64.h"

#ifdef FASTOPS_AVX512
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/* fastops_canon_f64 in each lane: -0.0 as 0.0, every NaN as the quiet NaN */
FASTOPS_AVX512 __m512i fastops_canon_f64x8(__m512i b) {
    __mmask8 zero = _mm512_cmpeq_epi64_mask(_mm512_slli_epi64(b, 1), _mm512_setzero_si512());
    __mmask8 nan = _mm512_cmpgt_epu64_mask(_mm512_and_si512(b, _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFLL)),
                                           _mm512_set1_epi64(0x7FF0000000000000LL));
    b = _mm512_maskz_mov_epi64((__mmask8)~zero, b);
    return _mm512_mask_mov_epi64(b, nan, _mm512_set1_epi64(0x7FF8000000000000LL));
}

FASTOPS_AVX512 __m512i fastops_canon_f32x8(__m512i b) {  /* 32-bit values in 64-bit lanes */
    __mmask8 zero = _mm512_cmpeq_epi64_mask(_mm512_and_si512(b, _mm512_set1_epi64(0x7FFFFFFF)),
                                            _mm512_setzero_si512());
    __mmask8 nan = _mm512_cmpgt_epu64_mask(_mm512_and_si512(b, _mm512_set1_epi64(0x7FFFFFFF)),
                                           _mm512_set1_epi64(0x7F800000));
    b = _mm512_maskz_mov_epi64((__mmask8)~zero, b);
    return _mm512_mask_mov_epi64(b, nan, _mm512_set1_epi64(0x7FC00000));
}

FASTOPS_AVX512 __m512i fastops_avalanche_x8(__m512i h) {
    h = fastops_mul64x8(_mm512_xor_si512(h, _mm512_srli_epi64(h, 33)), FASTOPS_P2);
    h = fastops_mul64x8(_mm512_xor_si512(h, _mm512_srli_epi64(h, 29)), FASTOPS_P3);
    return _mm512_xor_si512(h, _mm512_srli_epi64(h, 32));
}

/* fastops_xxh64_u64 of eight values */
FASTOPS_AVX512 __m512i fastops_hash_u64x8(__m512i v, uint64_t seed) {
    __m512i k = fastops_mul64x8(_mm512_rol_epi64(fastops_mul64x8(v, FASTOPS_P2), 31), FASTOPS_P1);
    __m512i h = _mm512_xor_si512(_mm512_set1_epi64((long long)(seed + FASTOPS_P5 + 8)), k);
    h = _mm512_add_epi64(fastops_mul64x8(_mm512_rol_epi64(h, 27), FASTOPS_P1),
                         _mm512_set1_epi64((long long)FASTOPS_P4));
    return fastops_avalanche_x8(h);
}

/* fastops_xxh64_u32 of eight values (zero-extended into 64-bit lanes) */
FASTOPS_AVX512 __m512i fastops_hash_u32x8(__m512i v, uint64_t seed) {
    __m512i h = _mm512_xor_si512(_mm512_set1_epi64((long long)(seed + FASTOPS_P5 + 4)),
                                 fastops_mul64x8(v, FASTOPS_P1));
    h = _mm512_add_epi64(fastops_mul64x8(_mm512_rol_epi64(h, 23), FASTOPS_P2),
                         _mm512_set1_epi64((long long)FASTOPS_P3));
    return fastops_avalanche_x8(h);
}

FASTOPS_AVX512 __m512i fastops_load_u64x8(const uint64_t* v, __mmask8 m, int canon) {
    __m512i x = _mm512_maskz_loadu_epi64(m, (const void*)v);
    return canon ? fastops_canon_f64x8(x) : x;
}

FASTOPS_AVX512 __m512i fastops_load_u32x8(const uint32_t* v, __mmask8 m, int canon) {
    __m512i x = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(
        _mm512_maskz_loadu_epi32((__mmask16)m, (const void*)v)));
    return canon ? fastops_canon_f32x8(x) : x;
}

FASTOPS_AVX512 void fastops_store_ids_u8(uint8_t* out, __mmask8 m, __m512i ids) {
    _mm512_mask_cvtepi64_storeu_epi8((void*)out, m, ids);
}

FASTOPS_AVX512 void fastops_store_ids_i32(int32_t* out, __mmask8 m, __m512i ids) {
    _mm512_mask_cvtepi64_storeu_epi32((void*)out, m, ids);
}

/* the byte counters of one register into sub[0..P) */
FASTOPS_AVX512 void fastops_add_byte_counts(__m512i c, int64_t P, int64_t* sub) {
    for (int64_t p = 0; p < P; p++)
        sub[p] += _mm512_reduce_add_epi64(
            _mm512_and_si512(_mm512_srli_epi64(c, (unsigned)(8 * p)), _mm512_set1_epi64(255)));
}

/* four registers of ids at a time: each hash is a chain of five dependent
   multiplies, and independent chains side by side keep the multiplier busy */
#define FASTOPS_IDS_STEP(LOAD, HASH, STORE, J, M) \
    ids = _mm512_and_si512(HASH(LOAD(v + (J), M, canon), seed), mask); \
    STORE(out + (J), M, ids); \
    if (bytes) c = _mm512_add_epi64(c, _mm512_maskz_sllv_epi64(M, one, _mm512_slli_epi64(ids, 3)));
#define FASTOPS_IDS_POW2(NAME, T, LOAD, HASH, ID_T, STORE) \
FASTOPS_AVX512_LOOP void NAME##_avx512(const T* v, int64_t n, uint64_t seed, int canon, uint64_t P, \
                                       ID_T* out, int64_t* sub, int64_t stride) { \
    const __m512i mask = _mm512_set1_epi64((long long)(P - 1)), one = _mm512_set1_epi64(1); \
    const int bytes = sub != 0 && P <= 8; \
    __m512i c = _mm512_setzero_si512(), ids; \
    int64_t i = 0, j, e, k; \
    __mmask8 m; \
    while (i < n) { \
        e = i + 2040 < n ? i + 2040 : n;  /* 255 registers: a byte counter takes 255 at most */ \
        for (j = i; j + 32 <= e; j += 32) { \
            for (k = 0; k < 32 * (int64_t)sizeof(T); k += 64) \
                FASTOPS_PREFETCH_R((const char*)(v + j + 512) + k); \
            FASTOPS_IDS_STEP(LOAD, HASH, STORE, j, 0xFF) FASTOPS_IDS_STEP(LOAD, HASH, STORE, j + 8, 0xFF) \
            FASTOPS_IDS_STEP(LOAD, HASH, STORE, j + 16, 0xFF) FASTOPS_IDS_STEP(LOAD, HASH, STORE, j + 24, 0xFF) \
        } \
        for (; j < e; j += 8) { \
            m = e - j >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (e - j)) - 1); \
            FASTOPS_IDS_STEP(LOAD, HASH, STORE, j, m) \
        } \
        if (bytes) { fastops_add_byte_counts(c, (int64_t)P, sub); c = _mm512_setzero_si512(); } \
        else if (sub != 0) \
            for (k = i; k < e; k++) sub[(k & 3) * stride + (int64_t)out[k]] += 1; \
        i = e; \
    } \
} \
static inline int NAME(const T* v, int64_t n, uint64_t seed, int canon, uint64_t P, ID_T* out, \
                       int64_t* sub, int64_t stride) { \
    if (!fastops_use_avx512()) return 0; \
    NAME##_avx512(v, n, seed, canon, P, out, sub, stride); \
    return 1; \
}
#pragma GCC diagnostic pop
#else
#define FASTOPS_IDS_POW2(NAME, T, LOAD, HASH, ID_T, STORE) \
static inline int NAME(const T* v, int64_t n, uint64_t seed, int canon, uint64_t P, ID_T* out, \
                       int64_t* sub, int64_t stride) { return 0; }
#endif

/* out[i] = XXH64(v[i]) & (P - 1) (``canon``: of the float bits' hashed form)
 * for a power of two P, counted into ``sub`` (fastops' interleaved
 * histograms with ``stride``; NULL for none). */
FASTOPS_IDS_POW2(fastops_ids_pow2_u64_u8, uint64_t, fastops_load_u64x8, fastops_hash_u64x8, uint8_t,
                 fastops_store_ids_u8)
FASTOPS_IDS_POW2(fastops_ids_pow2_u64_i32, uint64_t, fastops_load_u64x8, fastops_hash_u64x8, int32_t,
                 fastops_store_ids_i32)
FASTOPS_IDS_POW2(fastops_ids_pow2_u32_u8, uint32_t, fastops_load_u32x8, fastops_hash_u32x8, uint8_t,
                 fastops_store_ids_u8)
FASTOPS_IDS_POW2(fastops_ids_pow2_u32_i32, uint32_t, fastops_load_u32x8, fastops_hash_u32x8, int32_t,
                 fastops_store_ids_i32)

#endif
