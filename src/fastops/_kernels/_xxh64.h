/* XXH64 (Yann Collet's published algorithm): the one implementation every
 * fastops kernel module hashes with (through ``fastops/_xxhash.pxd``).
 *
 * All reads are little-endian via memcpy (unaligned-safe); fastops refuses to
 * import on big-endian hosts, so the hash of a value is the same everywhere and
 * can be stored in checkpoints and sketches. Plain C, also valid C++.
 */
#ifndef FASTOPS_XXH64_H
#define FASTOPS_XXH64_H

#include <stdint.h>
#include <string.h>

#include "_platform.h"

#define FASTOPS_P1 0x9E3779B185EBCA87ULL
#define FASTOPS_P2 0xC2B2AE3D27D4EB4FULL
#define FASTOPS_P3 0x165667B19E3779F9ULL
#define FASTOPS_P4 0x85EBCA77C2B2AE63ULL
#define FASTOPS_P5 0x27D4EB2F165667C5ULL

static inline uint64_t fastops_rotl64(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t fastops_xxh_round(uint64_t acc, uint64_t lane) {
    return fastops_rotl64(acc + lane * FASTOPS_P2, 31) * FASTOPS_P1;
}

static inline uint64_t fastops_xxh_merge(uint64_t h, uint64_t v) {
    return (h ^ fastops_xxh_round(0, v)) * FASTOPS_P1 + FASTOPS_P4;
}

static inline uint64_t fastops_xxh_avalanche(uint64_t h) {
    h ^= h >> 33; h *= FASTOPS_P2;
    h ^= h >> 29; h *= FASTOPS_P3;
    return h ^ (h >> 32);
}

/* The steps of the tail: one 8-byte lane, one 4-byte lane, one byte. */
static inline uint64_t fastops_xxh_step8(uint64_t h, uint64_t k) {
    return fastops_rotl64(h ^ fastops_xxh_round(0, k), 27) * FASTOPS_P1 + FASTOPS_P4;
}

static inline uint64_t fastops_xxh_step4(uint64_t h, uint32_t k) {
    return fastops_rotl64(h ^ ((uint64_t)k * FASTOPS_P1), 23) * FASTOPS_P2 + FASTOPS_P3;
}

static inline uint64_t fastops_xxh_step1(uint64_t h, uint8_t k) {
    return fastops_rotl64(h ^ ((uint64_t)k * FASTOPS_P5), 11) * FASTOPS_P1;
}

/* XXH64 of the n bytes at p. */
FASTOPS_ALWAYS_INLINE uint64_t fastops_xxh64(const uint8_t* p, size_t n, uint64_t seed) {
    uint64_t h, k;
    uint32_t k4;
    size_t total = n;
    if (n >= 32) {
        uint64_t v1 = seed + FASTOPS_P1 + FASTOPS_P2, v2 = seed + FASTOPS_P2;
        uint64_t v3 = seed, v4 = seed - FASTOPS_P1, l[4];
        while (n >= 32) {
            memcpy(l, p, 32);
            v1 = fastops_xxh_round(v1, l[0]);
            v2 = fastops_xxh_round(v2, l[1]);
            v3 = fastops_xxh_round(v3, l[2]);
            v4 = fastops_xxh_round(v4, l[3]);
            p += 32; n -= 32;
        }
        h = fastops_rotl64(v1, 1) + fastops_rotl64(v2, 7) + fastops_rotl64(v3, 12)
            + fastops_rotl64(v4, 18);
        h = fastops_xxh_merge(h, v1);
        h = fastops_xxh_merge(h, v2);
        h = fastops_xxh_merge(h, v3);
        h = fastops_xxh_merge(h, v4);
    } else {
        h = seed + FASTOPS_P5;
    }
    h += total;
    while (n >= 8) { memcpy(&k, p, 8); h = fastops_xxh_step8(h, k); p += 8; n -= 8; }
    if (n >= 4) { memcpy(&k4, p, 4); h = fastops_xxh_step4(h, k4); p += 4; n -= 4; }
    while (n > 0) { h = fastops_xxh_step1(h, *p); p++; n--; }
    return fastops_xxh_avalanche(h);
}

/* Specialised for fixed-width values (their little-endian bytes). */
static inline uint64_t fastops_xxh64_u64(uint64_t v, uint64_t seed) {
    return fastops_xxh_avalanche(fastops_xxh_step8(seed + FASTOPS_P5 + 8, v));
}

static inline uint64_t fastops_xxh64_u32(uint32_t v, uint64_t seed) {
    return fastops_xxh_avalanche(fastops_xxh_step4(seed + FASTOPS_P5 + 4, v));
}

static inline uint64_t fastops_xxh64_u16(uint32_t v, uint64_t seed) {
    uint64_t h = fastops_xxh_step1(seed + FASTOPS_P5 + 2, (uint8_t)(v & 0xFF));
    return fastops_xxh_avalanche(fastops_xxh_step1(h, (uint8_t)((v >> 8) & 0xFF)));
}

static inline uint64_t fastops_xxh64_u8(uint32_t v, uint64_t seed) {
    return fastops_xxh_avalanche(fastops_xxh_step1(seed + FASTOPS_P5 + 1, (uint8_t)(v & 0xFF)));
}

/* XXH64 of the 16 bytes le(a) || le(b): how column hashes combine. */
static inline uint64_t fastops_xxh64_pair(uint64_t a, uint64_t b, uint64_t seed) {
    uint64_t h = fastops_xxh_step8(seed + FASTOPS_P5 + 16, a);
    return fastops_xxh_avalanche(fastops_xxh_step8(h, b));
}

/* The form in which floats are hashed (their bits): -0.0 as 0.0, every NaN
 * as the quiet NaN. */
static inline uint64_t fastops_canon_f64(uint64_t b) {
    b = (b << 1) == 0 ? 0 : b;
    return (b & 0x7FFFFFFFFFFFFFFFULL) > 0x7FF0000000000000ULL ? 0x7FF8000000000000ULL : b;
}

static inline uint32_t fastops_canon_f32(uint32_t b) {
    b = (uint32_t)(b << 1) == 0 ? 0 : b;
    return (b & 0x7FFFFFFFU) > 0x7F800000U ? 0x7FC00000U : b;
}

/* Many fixed-width values at once, for x86-64 with AVX2 (checked at run time).
 * XXH64 of one 8-byte value is five dependent 64-bit multiplies, and one
 * scalar multiplier is the bound of the plain loop. AVX2 has no 64-bit
 * multiply, but three 32x32->64 ones make it: so each step hashes four values
 * in vector lanes and three more in scalar registers, and both kinds of
 * multiplier work at once (about 1.6x the plain loop here). The results are
 * the scalar function's, bit for bit. ``canon``: the values are float bits.
 * Machines with AVX-512 have a 64-bit vector multiply and are better served
 * by the compiler's vectorisation of the plain loop (fastops_use_avx2). */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define FASTOPS_HAVE_AVX2 1
#define FASTOPS_AVX2 __attribute__((target("avx2"), always_inline)) static inline
#define FASTOPS_AVX2_LOOP __attribute__((target("avx2"), unused)) static

static inline int fastops_use_avx2(void) {
    return __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512dq");
}

/* a * c (mod 2^64) in each lane, c a constant */
FASTOPS_AVX2 __m256i fastops_mul64x4(__m256i a, uint64_t c) {
    __m256i lo = _mm256_set1_epi64x((long long)(c & 0xFFFFFFFFULL));
    __m256i hi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), lo),
                                     _mm256_mul_epu32(a, hi));
    return _mm256_add_epi64(_mm256_mul_epu32(a, lo), _mm256_slli_epi64(cross, 32));
}

FASTOPS_AVX2 __m256i fastops_rotl64x4(__m256i x, int r) {
    return _mm256_or_si256(_mm256_slli_epi64(x, r), _mm256_srli_epi64(x, 64 - r));
}

FASTOPS_AVX2 __m256i fastops_avalanche_x4(__m256i h) {
    h = fastops_mul64x4(_mm256_xor_si256(h, _mm256_srli_epi64(h, 33)), FASTOPS_P2);
    h = fastops_mul64x4(_mm256_xor_si256(h, _mm256_srli_epi64(h, 29)), FASTOPS_P3);
    return _mm256_xor_si256(h, _mm256_srli_epi64(h, 32));
}

/* fastops_xxh64_u64 of four values */
FASTOPS_AVX2 __m256i fastops_xxh64_u64x4(__m256i k, uint64_t seed) {
    __m256i h = _mm256_set1_epi64x((long long)(seed + FASTOPS_P5 + 8));
    k = fastops_mul64x4(fastops_rotl64x4(fastops_mul64x4(k, FASTOPS_P2), 31), FASTOPS_P1);
    h = fastops_mul64x4(fastops_rotl64x4(_mm256_xor_si256(h, k), 27), FASTOPS_P1);
    return fastops_avalanche_x4(_mm256_add_epi64(h, _mm256_set1_epi64x((long long)FASTOPS_P4)));
}

/* fastops_xxh64_u32 of four values, zero-extended into 64-bit lanes */
FASTOPS_AVX2 __m256i fastops_xxh64_u32x4(__m256i k, uint64_t seed) {
    __m256i h = _mm256_set1_epi64x((long long)(seed + FASTOPS_P5 + 4));
    __m256i kp = _mm256_add_epi64(   /* k * P1 with k < 2^32: two multiplies */
        _mm256_mul_epu32(k, _mm256_set1_epi64x((long long)(FASTOPS_P1 & 0xFFFFFFFFULL))),
        _mm256_slli_epi64(_mm256_mul_epu32(k, _mm256_set1_epi64x((long long)(FASTOPS_P1 >> 32))), 32));
    h = fastops_mul64x4(fastops_rotl64x4(_mm256_xor_si256(h, kp), 23), FASTOPS_P2);
    return fastops_avalanche_x4(_mm256_add_epi64(h, _mm256_set1_epi64x((long long)FASTOPS_P3)));
}

FASTOPS_AVX2 __m256i fastops_canon_f64x4(__m256i b) {
    __m256i zero = _mm256_setzero_si256();
    b = _mm256_andnot_si256(_mm256_cmpeq_epi64(_mm256_slli_epi64(b, 1), zero), b);
    __m256i nan = _mm256_cmpgt_epi64(
        _mm256_and_si256(b, _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFLL)),
        _mm256_set1_epi64x(0x7FF0000000000000LL));
    return _mm256_blendv_epi8(b, _mm256_set1_epi64x(0x7FF8000000000000LL), nan);
}

FASTOPS_AVX2 __m256i fastops_canon_f32x4(__m256i b) {   /* b: 32-bit values in 64-bit lanes */
    __m256i zero = _mm256_setzero_si256();
    b = _mm256_andnot_si256(_mm256_cmpeq_epi64(_mm256_slli_epi64(b, 33), zero), b);
    __m256i nan = _mm256_cmpgt_epi64(_mm256_and_si256(b, _mm256_set1_epi64x(0x7FFFFFFFLL)),
                                     _mm256_set1_epi64x(0x7F800000LL));
    return _mm256_blendv_epi8(b, _mm256_set1_epi64x(0x7FC00000LL), nan);
}

/* out[i] = XXH64(le8(v[i])) (canon: of the float's hashed form) */
FASTOPS_AVX2_LOOP void fastops_hash8_avx2(const uint64_t* v, int64_t n, uint64_t seed,
                                     uint64_t* out, int canon) {
    int64_t i = 0;
    for (; i + 7 <= n; i += 7) {
        __m256i k = _mm256_loadu_si256((const __m256i*)(v + i));
        uint64_t a = v[i + 4], b = v[i + 5], c = v[i + 6];
        if (canon) {
            k = fastops_canon_f64x4(k);
            a = fastops_canon_f64(a); b = fastops_canon_f64(b); c = fastops_canon_f64(c);
        }
        a = fastops_xxh64_u64(a, seed); b = fastops_xxh64_u64(b, seed);
        c = fastops_xxh64_u64(c, seed);
        _mm256_storeu_si256((__m256i*)(out + i), fastops_xxh64_u64x4(k, seed));
        out[i + 4] = a; out[i + 5] = b; out[i + 6] = c;
    }
    for (; i < n; i++) out[i] = fastops_xxh64_u64(canon ? fastops_canon_f64(v[i]) : v[i], seed);
}

/* out[i] = XXH64(le4(v[i])) (canon: of the float's hashed form) */
FASTOPS_AVX2_LOOP void fastops_hash4_avx2(const uint32_t* v, int64_t n, uint64_t seed,
                                     uint64_t* out, int canon) {
    int64_t i = 0;
    for (; i + 7 <= n; i += 7) {
        __m256i k = _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i*)(v + i)));
        uint32_t a = v[i + 4], b = v[i + 5], c = v[i + 6];
        if (canon) {
            k = fastops_canon_f32x4(k);
            a = fastops_canon_f32(a); b = fastops_canon_f32(b); c = fastops_canon_f32(c);
        }
        uint64_t ha = fastops_xxh64_u32(a, seed), hb = fastops_xxh64_u32(b, seed);
        uint64_t hc = fastops_xxh64_u32(c, seed);
        _mm256_storeu_si256((__m256i*)(out + i), fastops_xxh64_u32x4(k, seed));
        out[i + 4] = ha; out[i + 5] = hb; out[i + 6] = hc;
    }
    for (; i < n; i++) out[i] = fastops_xxh64_u32(canon ? fastops_canon_f32(v[i]) : v[i], seed);
}

static inline uint64_t fastops_load64(const uint8_t* p) { uint64_t k; memcpy(&k, p, 8); return k; }
static inline uint32_t fastops_load32(const uint8_t* p) { uint32_t k; memcpy(&k, p, 4); return k; }

/* a * c (mod 2^64) in each lane, a < 2^32 */
FASTOPS_AVX2 __m256i fastops_mul32x4(__m256i a, uint64_t c) {
    return _mm256_add_epi64(
        _mm256_mul_epu32(a, _mm256_set1_epi64x((long long)(c & 0xFFFFFFFFULL))),
        _mm256_slli_epi64(_mm256_mul_epu32(a, _mm256_set1_epi64x((long long)(c >> 32))), 32));
}

/* fastops_xxh64 of the L bytes at s[0..3], L < 32 (a constant where inlined) */
FASTOPS_AVX2 __m256i fastops_xxh64_x4(const uint8_t* const* s, size_t L, uint64_t seed) {
    __m256i h = _mm256_set1_epi64x((long long)(seed + FASTOPS_P5 + L)), k;
    size_t c = 0;
    for (; c + 8 <= L; c += 8) {
        k = _mm256_set_epi64x((long long)fastops_load64(s[3] + c), (long long)fastops_load64(s[2] + c),
                              (long long)fastops_load64(s[1] + c), (long long)fastops_load64(s[0] + c));
        k = fastops_mul64x4(fastops_rotl64x4(fastops_mul64x4(k, FASTOPS_P2), 31), FASTOPS_P1);
        h = fastops_mul64x4(fastops_rotl64x4(_mm256_xor_si256(h, k), 27), FASTOPS_P1);
        h = _mm256_add_epi64(h, _mm256_set1_epi64x((long long)FASTOPS_P4));
    }
    if (L - c >= 4) {
        k = _mm256_set_epi64x(fastops_load32(s[3] + c), fastops_load32(s[2] + c),
                              fastops_load32(s[1] + c), fastops_load32(s[0] + c));
        h = _mm256_xor_si256(h, fastops_mul32x4(k, FASTOPS_P1));
        h = fastops_mul64x4(fastops_rotl64x4(h, 23), FASTOPS_P2);
        h = _mm256_add_epi64(h, _mm256_set1_epi64x((long long)FASTOPS_P3));
        c += 4;
    }
    for (; c < L; c++) {
        k = _mm256_set_epi64x(s[3][c], s[2][c], s[1][c], s[0][c]);
        h = _mm256_xor_si256(h, fastops_mul32x4(k, FASTOPS_P5));
        h = fastops_mul64x4(fastops_rotl64x4(h, 11), FASTOPS_P1);
    }
    return fastops_avalanche_x4(h);
}
#endif

/* out[i] = XXH64 of the 8- or 4-byte value v[i] (``canon``: of the float
 * whose bits v[i] are, in its hashed form), for every kernel module. With GCC
 * on x86-64 Linux the plain loops are also compiled for AVX-512 (picked at run
 * time, where the compiler's vectorisation has a 64-bit multiply to use);
 * with AVX2 alone the loops above run. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && \
    defined(__x86_64__) && defined(__linux__)
#define FASTOPS_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define FASTOPS_CLONES
#endif

#ifdef FASTOPS_HAVE_AVX2
#define FASTOPS_TRY_AVX2(CALL) if (fastops_use_avx2()) { CALL; return; }
#else
#define FASTOPS_TRY_AVX2(CALL)
#endif

/* fastops_xxh64_many<W> for W-byte values of type T: the plain loop, then
 * the entry point that takes the AVX2 loop where it runs */
#define FASTOPS_HASH_MANY(W, T, HASH, CANON) \
FASTOPS_CLONES static void fastops_xxh64_many##W##_plain(const T* v, int64_t n, uint64_t seed, \
                                                      uint64_t* out, int canon) { \
    /* blocks of 64 values, the input fetched 4 KB ahead (the hardware \
       prefetcher alone leaves the loop waiting on memory) */ \
    for (int64_t b = 0; b < n; b += 64) { \
        int64_t e = b + 64 < n ? b + 64 : n; \
        for (int64_t k = 0; k < 64 * W; k += 64) \
            FASTOPS_PREFETCH_R((const char*)(v + b) + 4096 + k); \
        for (int64_t i = b; i < e; i++) out[i] = HASH(canon ? CANON(v[i]) : v[i], seed); \
    } \
} \
static inline void fastops_xxh64_many##W(const T* v, int64_t n, uint64_t seed, uint64_t* out, \
                                         int canon) { \
    FASTOPS_TRY_AVX2(fastops_hash##W##_avx2(v, n, seed, out, canon)) \
    fastops_xxh64_many##W##_plain(v, n, seed, out, canon); \
}
FASTOPS_HASH_MANY(8, uint64_t, fastops_xxh64_u64, fastops_canon_f64)
FASTOPS_HASH_MANY(4, uint32_t, fastops_xxh64_u32, fastops_canon_f32)

/* Variable-width values. XXH64's control flow depends on the length (8-byte
 * steps, a 4-byte step, 0..3 single bytes), and random lengths make every one
 * of those branches mispredict. So the row numbers of a block of values are
 * first put in one bucket per exact length (one pass; the buckets' used ends
 * stay in L1), then each length up to 32 runs its own loop in which the length is a
 * compile-time constant: no data-dependent branch is left, and the hashes of
 * neighbouring values overlap in the pipeline. Longer values take the generic
 * path. */
#define FASTOPS_HBLOCK 1024
#define FASTOPS_HCLASSES 34   /* lengths 0..32, then 33 = longer */
#define FASTOPS_HCLASS(LEN) ((LEN) <= 32 ? (int)(LEN) : 33)
#define FASTOPS_HCASE(L) case L: \
    for (; j < e; j++) out[ord[j]] = fastops_xxh64(base + off[ord[j]], L, seed); \
    break;
/* out[i] = XXH64(base[off[i]:off[i+1]]) for i < m <= FASTOPS_HBLOCK. */
#define FASTOPS_HASH_BLOCK(NAME, OFF_T, ATTR, HCASE) \
ATTR void NAME(const uint8_t* base, const OFF_T* off, int m, uint64_t seed, \
                 uint64_t* out) { \
    /* row numbers by class: 68 KB of stack, of which a block touches ~2 KB */ \
    uint16_t order[FASTOPS_HCLASSES][FASTOPS_HBLOCK]; \
    int cnt[FASTOPS_HCLASSES]; \
    int c, i, j, e, c0; \
    uint8_t touch = 0; \
    const uint8_t* q; \
    if (m <= 0) return; \
    memset(cnt, 0, sizeof(cnt)); \
    c0 = FASTOPS_HCLASS((int64_t)off[1] - (int64_t)off[0]); \
    for (i = 0; i < m; i++) { \
        c = FASTOPS_HCLASS((int64_t)off[i + 1] - (int64_t)off[i]); \
        order[c][cnt[c]++] = (uint16_t)i; \
    } \
    if (cnt[c0] == m) {   /* one length: the plain loop predicts well */ \
        for (i = 0; i < m; i++) \
            out[i] = fastops_xxh64(base + off[i], \
                (size_t)((int64_t)off[i + 1] - (int64_t)off[i]), seed); \
        return; \
    } \
    /* the classes visit the bytes out of order, which the hardware \
       prefetcher does not follow: read them in order once first */ \
    for (q = base + off[0]; q < base + off[m]; q += 64) \
        touch |= *(volatile const uint8_t*)q; \
    (void)touch; \
    for (c = 0; c < FASTOPS_HCLASSES; c++) { \
        const uint16_t* ord = order[c]; \
        e = cnt[c]; \
        j = 0; \
        if (e == 0) continue; \
        switch (c) { \
        HCASE(0) HCASE(1) HCASE(2) HCASE(3) HCASE(4) HCASE(5) HCASE(6) HCASE(7) \
        HCASE(8) HCASE(9) HCASE(10) HCASE(11) HCASE(12) HCASE(13) HCASE(14) HCASE(15) \
        HCASE(16) HCASE(17) HCASE(18) HCASE(19) HCASE(20) HCASE(21) HCASE(22) HCASE(23) \
        HCASE(24) HCASE(25) HCASE(26) HCASE(27) HCASE(28) HCASE(29) HCASE(30) HCASE(31) \
        FASTOPS_HCASE(32) \
        default: \
            for (; j < e; j++) { \
                int r = ord[j]; \
                out[r] = fastops_xxh64(base + off[r], \
                    (size_t)((int64_t)off[r + 1] - (int64_t)off[r]), seed); \
            } \
        } \
    } \
}
FASTOPS_HASH_BLOCK(fastops_xxh64_block32, int32_t, static, FASTOPS_HCASE)
FASTOPS_HASH_BLOCK(fastops_xxh64_block64, int64_t, static, FASTOPS_HCASE)
#ifdef FASTOPS_HAVE_AVX2
/* with AVX2: four values of a length in vector lanes and two in scalar
   registers per step, as for fixed-width values */
#define FASTOPS_HCASE_AVX2(L) case L: \
    for (; j + 6 <= e; j += 6) { \
        const uint8_t* p4[4] = {base + off[ord[j]], base + off[ord[j + 1]], \
                                base + off[ord[j + 2]], base + off[ord[j + 3]]}; \
        uint64_t four[4], a = fastops_xxh64(base + off[ord[j + 4]], L, seed); \
        uint64_t b = fastops_xxh64(base + off[ord[j + 5]], L, seed); \
        _mm256_storeu_si256((__m256i*)four, fastops_xxh64_x4(p4, L, seed)); \
        out[ord[j]] = four[0]; out[ord[j + 1]] = four[1]; \
        out[ord[j + 2]] = four[2]; out[ord[j + 3]] = four[3]; \
        out[ord[j + 4]] = a; out[ord[j + 5]] = b; \
    } \
    for (; j < e; j++) out[ord[j]] = fastops_xxh64(base + off[ord[j]], L, seed); \
    break;
FASTOPS_HASH_BLOCK(fastops_xxh64_block32_avx2, int32_t, FASTOPS_AVX2_LOOP, FASTOPS_HCASE_AVX2)
FASTOPS_HASH_BLOCK(fastops_xxh64_block64_avx2, int64_t, FASTOPS_AVX2_LOOP, FASTOPS_HCASE_AVX2)

/* with AVX-512 (a 64-bit vector multiply, masks and gathers): values of
   mixed lengths side by side in vector lanes */
/* GCC 12 reports its own intrinsics' placeholder operands
   (_mm512_undefined_epi32) as "may be used uninitialized" here */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define FASTOPS_AVX512 __attribute__((target("avx512f,avx512dq"), always_inline)) static inline
#define FASTOPS_AVX512_LOOP __attribute__((target("avx512f,avx512dq"), unused)) static

static inline int fastops_use_avx512(void) { return __builtin_cpu_supports("avx512dq"); }

FASTOPS_AVX512 __m512i fastops_mul64x8(__m512i a, uint64_t c) {
    return _mm512_mullo_epi64(a, _mm512_set1_epi64((long long)c));
}

/* 32 neighbouring values in the lanes of four registers, each value with
   its own length (< 32): no sorting by length and no scattered stores. A
   lane whose value needs fewer steps than the longest one is masked out of
   the rest (and its loads with it); the 4-byte step and the last 0..3 bytes
   are read as 32-bit words that end inside the value, so nothing past it is
   touched. Four registers at a time, because each step is a chain of
   multiplies that one register alone leaves mostly waiting. */
#define FASTOPS_NREG 4   /* even: the set-aside rows are compressed two registers at a time */
#define FASTOPS_EACH_REG(STMT) for (g = 0; g < FASTOPS_NREG; g++) { STMT; }
FASTOPS_AVX512 void fastops_xxh64_lanes(const uint8_t* base, const __m512i* start,
                                        const __m512i* len, uint64_t seed, uint64_t* out) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i h[FASTOPS_NREG], n8[FASTOPS_NREG], tail[FASTOPS_NREG], w[FASTOPS_NREG];
    __m512i k, h2;
    __mmask8 m[FASTOPS_NREG], any;
    long long s;
    int g;
    FASTOPS_EACH_REG(h[g] = _mm512_add_epi64(_mm512_set1_epi64((long long)(seed + FASTOPS_P5)), len[g]);
                     n8[g] = _mm512_srli_epi64(len[g], 3);
                     tail[g] = _mm512_and_si512(len[g], _mm512_set1_epi64(3)))
    for (s = 0; s < 3; s++) {
        any = 0;
        FASTOPS_EACH_REG(m[g] = _mm512_cmpgt_epu64_mask(n8[g], _mm512_set1_epi64(s)); any |= m[g])
        if (!any) break;
        FASTOPS_EACH_REG(
            k = _mm512_mask_i64gather_epi64(zero, m[g], _mm512_add_epi64(start[g], _mm512_set1_epi64(8 * s)),
                                            (const void*)base, 1);
            k = fastops_mul64x8(_mm512_rol_epi64(fastops_mul64x8(k, FASTOPS_P2), 31), FASTOPS_P1);
            h2 = fastops_mul64x8(_mm512_rol_epi64(_mm512_xor_si512(h[g], k), 27), FASTOPS_P1);
            h[g] = _mm512_mask_add_epi64(h[g], m[g], h2, _mm512_set1_epi64((long long)FASTOPS_P4)))
    }
    FASTOPS_EACH_REG(
        m[g] = _mm512_test_epi64_mask(len[g], _mm512_set1_epi64(4));
        w[g] = _mm512_add_epi64(start[g], _mm512_slli_epi64(n8[g], 3));
        k = _mm512_cvtepu32_epi64(_mm512_mask_i64gather_epi32(_mm256_setzero_si256(), m[g], w[g],
                                                              (const void*)base, 1));
        h2 = fastops_mul64x8(_mm512_rol_epi64(_mm512_xor_si512(h[g], fastops_mul64x8(k, FASTOPS_P1)), 23),
                             FASTOPS_P2);
        h[g] = _mm512_mask_add_epi64(h[g], m[g], h2, _mm512_set1_epi64((long long)FASTOPS_P3)))
    /* the word of each value's last four bytes, shifted so that its last
       ``tail`` bytes come first */
    FASTOPS_EACH_REG(
        m[g] = _mm512_test_epi64_mask(tail[g], tail[g]);
        w[g] = _mm512_sub_epi64(_mm512_add_epi64(start[g], len[g]), _mm512_set1_epi64(4));
        w[g] = _mm512_cvtepu32_epi64(_mm512_mask_i64gather_epi32(_mm256_setzero_si256(), m[g], w[g],
                                                                 (const void*)base, 1));
        w[g] = _mm512_srlv_epi64(w[g], _mm512_slli_epi64(
            _mm512_sub_epi64(_mm512_set1_epi64(4), tail[g]), 3)))
    for (s = 0; s < 3; s++) {
        any = 0;
        FASTOPS_EACH_REG(any |= m[g])
        if (!any) break;
        FASTOPS_EACH_REG(
            k = _mm512_and_si512(w[g], _mm512_set1_epi64(0xFF));
            h2 = _mm512_xor_si512(h[g], fastops_mul64x8(k, FASTOPS_P5));
            h[g] = _mm512_mask_mov_epi64(h[g], m[g], fastops_mul64x8(_mm512_rol_epi64(h2, 11), FASTOPS_P1));
            w[g] = _mm512_srli_epi64(w[g], 8);
            m[g] = _mm512_cmpgt_epu64_mask(tail[g], _mm512_set1_epi64(s + 1)))
    }
    FASTOPS_EACH_REG(
        h[g] = fastops_mul64x8(_mm512_xor_si512(h[g], _mm512_srli_epi64(h[g], 33)), FASTOPS_P2);
        h[g] = fastops_mul64x8(_mm512_xor_si512(h[g], _mm512_srli_epi64(h[g], 29)), FASTOPS_P3);
        _mm512_storeu_si512((void*)(out + 8 * g), _mm512_xor_si512(h[g], _mm512_srli_epi64(h[g], 32))))
}
/* The offsets of eight values as 64-bit lanes. */
FASTOPS_AVX512 __m512i fastops_offsets8_32(const int32_t* off) {
    return _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i*)off));
}
FASTOPS_AVX512 __m512i fastops_offsets8_64(const int64_t* off) {
    return _mm512_loadu_si512((const void*)off);
}
/* Blocks of mostly long values are grouped by length, as without AVX-512,
   but compiled for it: the compiler then keeps XXH64's four 32-byte-stripe
   accumulators in one vector register (its 64-bit multiply), about twice
   as fast for values of 32 bytes and more. A block goes this way when more
   than a quarter of its first 32 values are that long. */
FASTOPS_HASH_BLOCK(fastops_xxh64_block32_long, int32_t, FASTOPS_AVX512_LOOP, FASTOPS_HCASE)
FASTOPS_HASH_BLOCK(fastops_xxh64_block64_long, int64_t, FASTOPS_AVX512_LOOP, FASTOPS_HCASE)
/* A value goes through the lanes when it is shorter than 32 bytes and ends
   at least four bytes into the buffer (its last word is inside it). Any
   other value is hashed as empty there; its row number is set aside
   (compressed out of a vector of row numbers, no branch per value) and the
   scalar hash does it after the block's groups. A group of such values only
   skips the lanes. */
#define FASTOPS_HASH_ONE(I) \
    out[I] = fastops_xxh64(base + off[I], (size_t)((int64_t)off[I + 1] - (int64_t)off[I]), seed)
#define FASTOPS_LANES_BLOCK(NAME, OFF_T, LOAD8, BY_LENGTH) \
FASTOPS_AVX512_LOOP void NAME(const uint8_t* base, const OFF_T* off, int m, uint64_t seed, \
                              uint64_t* out) { \
    __m512i start[FASTOPS_NREG], len[FASTOPS_NREG], end; \
    __mmask8 bad[FASTOPS_NREG], any, all; \
    int32_t later[FASTOPS_HBLOCK]; \
    int i = 0, g, nlater = 0, nlong; \
    const __m512i lanes16 = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); \
    for (; i + 8 * FASTOPS_NREG <= m; i += 8 * FASTOPS_NREG) { \
        any = 0; \
        all = 0xFF; \
        for (g = 0; g < FASTOPS_NREG; g++) { \
            start[g] = LOAD8(off + i + 8 * g); \
            end = LOAD8(off + i + 8 * g + 1); \
            len[g] = _mm512_sub_epi64(end, start[g]); \
            bad[g] = _mm512_cmpgt_epu64_mask(len[g], _mm512_set1_epi64(31)) | \
                     _mm512_cmplt_epi64_mask(end, _mm512_set1_epi64(4)); \
            len[g] = _mm512_maskz_mov_epi64((__mmask8)~bad[g], len[g]); \
            any |= bad[g]; \
            all &= bad[g]; \
        } \
        if (i == 0 && any) {  /* a block whose first 32 values are mostly long: by length */ \
            for (g = nlong = 0; g < FASTOPS_NREG; g++) nlong += __builtin_popcount(bad[g]); \
            if (4 * nlong > 8 * FASTOPS_NREG) { \
                BY_LENGTH(base, off, m, seed, out); \
                return; \
            } \
        } \
        if (all != 0xFF) \
            fastops_xxh64_lanes(base, start, len, seed, out + i); \
        if (any) \
            for (g = 0; g < FASTOPS_NREG; g += 2) { \
                __mmask16 b16 = (__mmask16)(bad[g] | (bad[g + 1] << 8)); \
                _mm512_mask_compressstoreu_epi32(later + nlater, b16, \
                    _mm512_add_epi32(lanes16, _mm512_set1_epi32(i + 8 * g))); \
                nlater += __builtin_popcount(b16); \
            } \
    } \
    for (g = 0; g < nlater; g++) FASTOPS_HASH_ONE(later[g]); \
    for (; i < m; i++) FASTOPS_HASH_ONE(i); \
}
FASTOPS_LANES_BLOCK(fastops_xxh64_block32_avx512, int32_t, fastops_offsets8_32, fastops_xxh64_block32_long)
FASTOPS_LANES_BLOCK(fastops_xxh64_block64_avx512, int64_t, fastops_offsets8_64, fastops_xxh64_block64_long)
#pragma GCC diagnostic pop
#define FASTOPS_PICK_BLOCK(PLAIN, OFF_T) \
    void (*block)(const uint8_t*, const OFF_T*, int, uint64_t, uint64_t*) = \
        fastops_use_avx512() ? PLAIN##_avx512 : fastops_use_avx2() ? PLAIN##_avx2 : PLAIN;
#else
#define FASTOPS_PICK_BLOCK(PLAIN, OFF_T) \
    void (*block)(const uint8_t*, const OFF_T*, int, uint64_t, uint64_t*) = PLAIN;
#endif

/* out[i] = XXH64(base[off[i]:off[i+1]]) for i < n, block by block. ``base``
 * may be NULL only when every value is empty. */
#define FASTOPS_HASH_VALUES(NAME, BLOCK, OFF_T) \
static inline void NAME(const uint8_t* base, const OFF_T* off, int64_t n, uint64_t seed, \
                 uint64_t* out) { \
    static const uint8_t empty = 0; \
    int64_t i, m; \
    FASTOPS_PICK_BLOCK(BLOCK, OFF_T) \
    if (base == NULL) base = &empty; \
    for (i = 0; i < n; i += m) { \
        m = n - i < FASTOPS_HBLOCK ? n - i : FASTOPS_HBLOCK; \
        block(base, off + i, (int)m, seed, out + i); \
    } \
}
FASTOPS_HASH_VALUES(fastops_xxh64_values32, fastops_xxh64_block32, int32_t)
FASTOPS_HASH_VALUES(fastops_xxh64_values64, fastops_xxh64_block64, int64_t)

#endif
