/* Compiler and CPU primitives of every kernel module (declared for Cython in
 * ``_platform.pxd``): prefetches, bit scans, a byte swap, a checked add,
 * 128-bit products and streaming stores, each with a plain fallback where
 * the compiler or the CPU lacks the builtin or instruction. Plain C, also
 * valid C++. */
#ifndef FASTOPS_PLATFORM_H
#define FASTOPS_PLATFORM_H

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- builtins */

#if defined(__GNUC__) || defined(__clang__)
#define FASTOPS_ALWAYS_INLINE static inline __attribute__((always_inline))
/* the line at p into every cache level, to be read / to be written */
#define FASTOPS_PREFETCH_R(p) __builtin_prefetch((const void*)(p), 0, 3)
#define FASTOPS_PREFETCH_W(p) __builtin_prefetch((const void*)(p), 1, 3)
#define FASTOPS_CTZ64(x) __builtin_ctzll(x)
#define FASTOPS_POPCOUNT64(x) __builtin_popcountll(x)
#define FASTOPS_BSWAP64(x) __builtin_bswap64(x)
static inline int fastops_clz64(uint64_t x) { return x ? __builtin_clzll(x) : 64; }
#else
#define FASTOPS_ALWAYS_INLINE static inline
#define FASTOPS_PREFETCH_R(p) ((void)(p))
#define FASTOPS_PREFETCH_W(p) ((void)(p))
static inline int fastops_ctz64(uint64_t x) { int b = 0; while (!((x >> b) & 1)) b++; return b; }
#define FASTOPS_CTZ64(x) fastops_ctz64(x)
static inline int fastops_popcount64(uint64_t x) { int b = 0; for (; x; x &= x - 1) b++; return b; }
#define FASTOPS_POPCOUNT64(x) fastops_popcount64(x)
static inline uint64_t fastops_bswap64(uint64_t x) {
    x = ((x & 0x00000000FFFFFFFFULL) << 32) | (x >> 32);
    x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
    return ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
}
#define FASTOPS_BSWAP64(x) fastops_bswap64(x)
static inline int fastops_clz64(uint64_t x) { int b = 0; while (b < 64 && !((x >> (63 - b)) & 1)) b++; return b; }
#endif

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

/* ---------------------------------------------------------------- 128-bit products */

#if defined(__SIZEOF_INT128__)
typedef unsigned __int128 fastops_u128;

/* floor(x * n / 2**64): x mapped onto [0, n) without a division */
static inline uint64_t fastops_range64(uint64_t x, uint64_t n) {
    return (uint64_t)(((fastops_u128)x * (fastops_u128)n) >> 64);
}

/* Exact a % d through a 128-bit reciprocal (direct remainder computation,
   Lemire, Kaser & Kurz 2019): M = floor((2^128 - 1) / d) + 1, then
   a % d = ((M * a mod 2^128) * d) >> 128. */
static inline void fastops_fastmod_init(uint64_t d, uint64_t* hi, uint64_t* lo) {
    fastops_u128 m = ((fastops_u128)0 - 1) / d + 1;
    *hi = (uint64_t)(m >> 64);
    *lo = (uint64_t)m;
}
static inline uint64_t fastops_fastmod(uint64_t a, uint64_t hi, uint64_t lo, uint64_t d) {
    fastops_u128 m = ((fastops_u128)hi << 64) | lo;
    fastops_u128 low = m * a;
    fastops_u128 bottom = ((fastops_u128)(uint64_t)low * d) >> 64;
    fastops_u128 top = (low >> 64) * d;
    return (uint64_t)((bottom + top) >> 64);
}
#else
static inline uint64_t fastops_range64(uint64_t x, uint64_t n) {
    uint64_t xl = x & 0xFFFFFFFFULL, xh = x >> 32, nl = n & 0xFFFFFFFFULL, nh = n >> 32;
    uint64_t mid = xh * nl + ((xl * nl) >> 32);
    uint64_t mid2 = xl * nh + (mid & 0xFFFFFFFFULL);
    return xh * nh + (mid >> 32) + (mid2 >> 32);
}
static inline void fastops_fastmod_init(uint64_t d, uint64_t* hi, uint64_t* lo) {
    *hi = 0; *lo = d;
}
static inline uint64_t fastops_fastmod(uint64_t a, uint64_t hi, uint64_t lo, uint64_t d) {
    (void)hi; (void)lo;
    return a % d;
}
#endif

/* ---------------------------------------------------------------- streaming stores
 * Stores that go to memory past the caches, without reading the lines first:
 * for outputs no one reads back soon. A fence orders them before later stores. */

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
/* one 64-byte line (both sides 16-byte aligned) */
static inline void fastops_stream_line(void* dst, const void* src) {
    __m128i* d = (__m128i*)dst;
    const __m128i* s = (const __m128i*)src;
    _mm_stream_si128(d, _mm_load_si128(s));
    _mm_stream_si128(d + 1, _mm_load_si128(s + 1));
    _mm_stream_si128(d + 2, _mm_load_si128(s + 2));
    _mm_stream_si128(d + 3, _mm_load_si128(s + 3));
}
static inline void fastops_stream_fence(void) { _mm_sfence(); }
#else
static inline void fastops_stream_line(void* dst, const void* src) { memcpy(dst, src, 64); }
static inline void fastops_stream_fence(void) {}
#endif

#if defined(__x86_64__) || defined(_M_X64)
/* one 8-byte word; n zero words */
#define fastops_stream_store(p, v) _mm_stream_si64((long long*)(p), (long long)(v))
static inline void fastops_stream_zero(int64_t* w, int64_t n) {
    for (int64_t i = 0; i < n; i++) _mm_stream_si64((long long*)(w + i), 0);
}
#else
#define fastops_stream_store(p, v) (*(p) = (v))
static inline void fastops_stream_zero(int64_t* w, int64_t n) { memset(w, 0, (size_t)n * 8); }
#endif

#endif
