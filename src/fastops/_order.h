/* Group order of a pane's records by a bitmap of its groups
 * (``fastops._window.sorted_records``). */
#ifndef FASTOPS_ORDER_H
#define FASTOPS_ORDER_H

#include <stdint.h>
#include <stddef.h>

/* The positions i (< n) of distinct groups g[i] < max_group in ascending
 * group order, into ``order``: each group's bit set in ``bits`` (zeroed,
 * (max_group + 63) / 64 words) and its position in ``pos`` (max_group
 * entries, contents ignored), then the bits read in order. Cheaper than a
 * sort while the bitmap is not much larger than n. Returns the positions
 * written: fewer than n if a group repeats; -1 - i if g[i] is outside
 * [0, max_group) (nothing read in order then). */
static ptrdiff_t fastops_order_by_bitmap(const int64_t* g, ptrdiff_t n, int64_t max_group,
                                    uint64_t* bits, int32_t* pos, int64_t* order) {
    ptrdiff_t i, k = 0;
    int64_t w, nwords = (max_group + 63) >> 6;
    for (i = 0; i < n; i++) {
        if ((uint64_t)g[i] >= (uint64_t)max_group)
            return -1 - i;
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
    return k;
}

#endif
