/* Memory for large kernel-owned tables that are read at random (key tables).
 *
 * A random probe into a table of several MB misses the TLB on most rows with
 * 4 KB pages. On Linux, allocations of 2 MB and more are therefore aligned to
 * 2 MB and advised as transparent huge pages (a hint: where THP is off it
 * changes nothing). Everything here is released with free(). */
#ifndef FASTOPS_MEM_H
#define FASTOPS_MEM_H

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define FASTOPS_HUGE ((size_t)2 << 20)

static void* fastops_alloc(size_t nbytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (nbytes >= FASTOPS_HUGE) {
        void* p = NULL;
        if (posix_memalign(&p, FASTOPS_HUGE, nbytes) != 0) return NULL;
        (void)madvise(p, nbytes, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(nbytes ? nbytes : 1);
}

/* realloc that keeps large blocks huge-page backed; the first ``old`` bytes
 * of ``p`` are kept (none when ``p`` is NULL) */
static void* fastops_realloc(void* p, size_t old, size_t nbytes) {
    void* q;
    if (nbytes < FASTOPS_HUGE) return realloc(p, nbytes ? nbytes : 1);
    q = fastops_alloc(nbytes);
    if (q == NULL) return NULL;
    if (p != NULL) {
        memcpy(q, p, old < nbytes ? old : nbytes);
        free(p);
    }
    return q;
}

#endif
