/* The loop of a merge of two runs: lists of (group, record of W int64 words)
 * sorted by group (``fastops._window.merge_runs``).
 *
 * Which side comes next is as good as random, so each step picks the smaller
 * group's record without a branch and copies it out. A group on both sides
 * gets a's record, and (output row << 32 | b's index) is listed in ``both``
 * for the caller to merge b into (aggregate-specific code that stays with
 * the other merges). The output is rows of W words (``stride``
 * 0), or each record's W words down columns ``stride``
 * apart. The body is inlined for the usual widths, so that the copies are
 * fixed-size. Returns the rows written. */
#ifndef FASTOPS_RUNS_H
#define FASTOPS_RUNS_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define FASTOPS_INLINE static inline __attribute__((always_inline))
#define restrict __restrict__
#elif defined(_MSC_VER)
#define FASTOPS_INLINE static __forceinline
#define restrict __restrict
#else
#define FASTOPS_INLINE static inline
#define restrict
#endif

FASTOPS_INLINE void fastops_put_row(
        int64_t* restrict out, ptrdiff_t n, const int64_t* restrict src, ptrdiff_t W,
        ptrdiff_t stride) {
    if (stride == 0) {
        memcpy(out + n * W, src, (size_t)W * 8);
    } else {
        for (ptrdiff_t c = 0; c < W; c++) out[c * stride + n] = src[c];
    }
}

FASTOPS_INLINE ptrdiff_t fastops_merge_body(
        const int64_t* restrict ga, const int64_t* restrict pa, ptrdiff_t na,
        const int64_t* restrict gb, const int64_t* restrict pb, ptrdiff_t nb,
        ptrdiff_t W, int64_t* restrict og, int64_t* restrict out, ptrdiff_t stride,
        int64_t* restrict both, ptrdiff_t* nboth) {
    ptrdiff_t i = 0, j = 0, n = 0, m = 0;
    while (i < na && j < nb) {
        int64_t x = ga[i], y = gb[j];
        ptrdiff_t take_a = x <= y, take_b = y <= x;
        /* a mask, not ?: (which compilers turn back into a branch here) */
        uintptr_t mask = (uintptr_t)0 - (uintptr_t)take_a;
        const int64_t* src = (const int64_t*)(((uintptr_t)(pa + i * W) & mask)
                                              | ((uintptr_t)(pb + j * W) & ~mask));
        og[n] = (int64_t)(((uint64_t)x & mask) | ((uint64_t)y & ~mask));
        fastops_put_row(out, n, src, W, stride);
        both[m] = (n << 32) | j;  /* kept only when the group is on both sides */
        m += take_a & take_b;
        i += take_a;
        j += take_b;
        n++;
    }
    for (; i < na; i++, n++) {
        og[n] = ga[i];
        fastops_put_row(out, n, pa + i * W, W, stride);
    }
    for (; j < nb; j++, n++) {
        og[n] = gb[j];
        fastops_put_row(out, n, pb + j * W, W, stride);
    }
    *nboth = m;
    return n;
}

/* ``both`` holds min(na, nb) + 1 entries; na + nb < 2**31. */
static ptrdiff_t fastops_merge_runs(
        const int64_t* ga, const int64_t* pa, ptrdiff_t na,
        const int64_t* gb, const int64_t* pb, ptrdiff_t nb, ptrdiff_t W,
        int64_t* og, int64_t* out, ptrdiff_t stride,
        int64_t* both, ptrdiff_t* nboth) {
    if (stride == 0 && W == 6)
        return fastops_merge_body(ga, pa, na, gb, pb, nb, 6, og, out, 0, both, nboth);
    if (stride == 0 && W == 8)
        return fastops_merge_body(ga, pa, na, gb, pb, nb, 8, og, out, 0, both, nboth);
    if (stride != 0 && W == 6)
        return fastops_merge_body(ga, pa, na, gb, pb, nb, 6, og, out, stride, both, nboth);
    return fastops_merge_body(ga, pa, na, gb, pb, nb, W, og, out, stride, both, nboth);
}

/* The positions i (< n) of distinct groups g[i] < max_group in ascending
 * group order, into ``order``: each group's bit set in ``bits`` (zeroed,
 * (max_group + 63) / 64 words) and its position in ``pos`` (max_group
 * entries, contents ignored), then the bits read in order. Cheaper than a
 * sort while the bitmap is not much larger than n. */
static void fastops_order_by_bitmap(const int64_t* g, ptrdiff_t n, int64_t max_group,
                                    uint64_t* bits, int32_t* pos, int64_t* order) {
    ptrdiff_t i, k = 0;
    int64_t w, nwords = (max_group + 63) >> 6;
    for (i = 0; i < n; i++) {
        bits[g[i] >> 6] |= (uint64_t)1 << (g[i] & 63);
        pos[g[i]] = (int32_t)i;
    }
    for (w = 0; w < nwords; w++) {
        uint64_t x = bits[w];
        while (x) {
#if defined(__GNUC__) || defined(__clang__)
            int b = __builtin_ctzll(x);
#else
            int b = 0;
            while (!((x >> b) & 1)) b++;
#endif
            order[k++] = pos[(w << 6) | b];
            x &= x - 1;
        }
    }
}

#endif
