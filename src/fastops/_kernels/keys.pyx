# cython: language_level=3
"""Key table kernel: rows of one or more key columns -> dense group ids.

The 64-bit row hash (from ``fastops.core.hashing``) picks the bucket of an
open-addressing table (linear probing, power-of-two capacity, load <= 1/2);
exact equality of the stored key values decides the group. Each key column is
handed over normalised by ``fastops.core.keys``, as its ``KeyKind``:

- ``FIXED``: one ``uint64`` per row (integers sign- or zero-extended,
  floats as bits with -0.0 -> 0.0 and every NaN -> the canonical NaN, booleans
  0/1, temporal types their integer storage);
- ``VARIABLE``: int64 offsets (``n + 1``) into a byte buffer.

Nulls come as one byte per row (1 = null) or not at all; a null equals only a
null. ``KeyIndex`` owns its memory (``_mem.h``: tables of 2 MB and more on huge
pages) and frees it in ``__dealloc__``.
"""
cimport cython
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from "_mem.h" nogil:
    void* fastops_alloc(size_t nbytes)
    void* fastops_realloc(void* p, size_t old, size_t nbytes)

from fastops._kernels._checks cimport check_out, offsets_ok
from fastops._kernels._platform cimport prefetch_w
from fastops._kernels._xxhash cimport canon_f32, canon_f64, xxh64_many8

import numpy as np


cpdef enum KeyKind:  # how a key column is handed over (see the module docstring)
    FIXED = 0     # one uint64 word per row
    VARIABLE = 1  # int64 offsets into a byte buffer

cdef Py_ssize_t PF = 16  # prefetch distance (rows)
# for the hash-table probes of lookups: their bucket lines come from memory once the table
# outgrows the cache (or other work has pushed it out, as a sliding window's emission does
# between batches), and 16 rows of a lookup take less than that miss
cdef Py_ssize_t PF_PROBE = 96
DEF BLOCK = 1024  # rows per step of a lookup: hashed (fast path) and reserved for at once


def normalize_f64(const uint64_t[::1] bits, uint64_t[::1] out):
    """out[i] = bits[i] with -0.0 -> 0.0 and every NaN -> canonical NaN. Modifies ``out``."""
    cdef Py_ssize_t i, n = bits.shape[0]
    check_out(out.shape[0], n, "normalize_f64", True)
    with nogil:
        for i in range(n):
            out[i] = canon_f64(bits[i])


def normalize_f32(const uint32_t[::1] bits, uint64_t[::1] out):
    """out[i] = bits[i] (zero-extended) with -0.0 -> 0.0, NaN -> canonical. Modifies ``out``."""
    cdef Py_ssize_t i, n = bits.shape[0]
    check_out(out.shape[0], n, "normalize_f32", True)
    with nogil:
        for i in range(n):
            out[i] = canon_f32(bits[i])


cdef struct KeyCol:
    int kind                 # KeyKind: FIXED (uint64 words) or VARIABLE (bytes)
    uint64_t* gvals          # fixed: value per group
    uint8_t* gnull           # per group: 1 = null
    int64_t* goffs           # variable: ngroups + 1 offsets into gdata
    uint8_t* gdata
    int64_t dcap             # capacity of gdata
    const uint64_t* ivals    # inputs of the current call
    const uint8_t* inull
    const int64_t* ioffs
    const uint8_t* idata
    int64_t iend             # ioffs[n]: no value of the call runs past it
    bint any_null            # some group's value is null (gnull set)


cdef inline bint _row_equals(KeyCol* cols, int ncols, int64_t g, Py_ssize_t i) noexcept nogil:
    cdef int c
    cdef KeyCol* col
    cdef bint rnull
    cdef int64_t a0, a1, b0, b1
    for c in range(ncols):
        col = &cols[c]
        rnull = col.inull != NULL and col.inull[i] != 0
        if rnull or col.gnull[g]:
            if rnull and col.gnull[g]:
                continue
            return False
        if col.kind == FIXED:
            if col.gvals[g] != col.ivals[i]:
                return False
        else:
            a0 = col.goffs[g]
            a1 = col.goffs[g + 1]
            b0 = col.ioffs[i]
            b1 = col.ioffs[i + 1]
            if a1 - a0 != b1 - b0:
                return False
            if a1 > a0 and memcmp(col.gdata + a0, col.idata + b0, <size_t>(a1 - a0)) != 0:
                return False
    return True


cdef inline int _bad_block(const KeyCol* cols, int ncols, Py_ssize_t start,
                           Py_ssize_t m) noexcept nogil:
    """The first variable-width column whose values ``start .. start + m - 1``
    run backwards or outside the call's first and last offset, or -1: every
    value inside the data, and the bytes stored within those reserved."""
    cdef int c
    for c in range(ncols):
        if cols[c].kind == VARIABLE and not offsets_ok(cols[c].ioffs + start, m,
                                                       cols[c].ioffs[0], cols[c].iend):
            return c
    return -1


cdef inline void _store_row(KeyCol* cols, int ncols, int64_t g, Py_ssize_t i) noexcept nogil:
    cdef int c
    cdef KeyCol* col
    cdef bint rnull
    cdef int64_t start, length
    for c in range(ncols):
        col = &cols[c]
        rnull = col.inull != NULL and col.inull[i] != 0
        col.gnull[g] = 1 if rnull else 0
        col.any_null |= rnull
        if col.kind == FIXED:
            col.gvals[g] = 0 if rnull else col.ivals[i]
        else:
            start = col.goffs[g]
            length = 0 if rnull else col.ioffs[i + 1] - col.ioffs[i]
            if length > 0:
                memcpy(col.gdata + start, col.idata + col.ioffs[i], <size_t>length)
            col.goffs[g + 1] = start + length


@cython.auto_pickle(False)  # C memory: not picklable
cdef class KeyIndex:
    """Hash table of distinct keys with per-group key storage (C memory).

    Open addressing, two words per entry: (key, group) for one fixed-width
    column (``fast``), else (hash, group), so a probe reads one line and
    touches a group's stored key only when the hashes agree."""

    cdef KeyCol* cols
    cdef int ncols
    cdef int64_t* table
    cdef int64_t cap
    cdef uint64_t* ghash
    cdef int64_t ngroups
    cdef int64_t gcap
    cdef bint fast            # one fixed-width column: entries (key, gid) inline
    cdef int64_t null_gid     # fast path: the group of the null key, or -1

    def __cinit__(self, kinds):
        cdef int c
        self.ncols = len(kinds)
        self.cols = <KeyCol*>malloc(sizeof(KeyCol) * max(self.ncols, 1))
        if self.cols == NULL:
            raise MemoryError()
        memset(self.cols, 0, sizeof(KeyCol) * max(self.ncols, 1))
        for c in range(self.ncols):
            if kinds[c] not in (FIXED, VARIABLE):
                raise ValueError(f"key column kind must be 0 (FIXED) or 1 (VARIABLE), "
                                 f"got {kinds[c]!r}")
            self.cols[c].kind = kinds[c]
        self.cap = 0
        self.table = NULL
        self.ghash = NULL
        self.ngroups = 0
        self.gcap = 0
        self.fast = self.ncols == 1 and self.cols[0].kind == FIXED
        self.null_gid = -1
        self._reserve_groups(16)
        self._rehash(64)

    def __dealloc__(self):
        cdef int c
        if self.cols != NULL:
            for c in range(self.ncols):
                free(self.cols[c].gvals)
                free(self.cols[c].gnull)
                free(self.cols[c].goffs)
                free(self.cols[c].gdata)
            free(self.cols)
        free(self.table)
        free(self.ghash)

    @property
    def num_groups(self) -> int:
        return self.ngroups

    @property
    def capacity(self) -> int:
        return self.cap

    cdef int _reserve_groups(self, int64_t need) except -1:
        cdef int64_t newcap = self.gcap if self.gcap > 0 else 16
        cdef int c
        cdef void* p
        if need <= self.gcap:
            return 0
        while newcap < need:
            newcap *= 2
        p = fastops_realloc(self.ghash, sizeof(uint64_t) * self.gcap, sizeof(uint64_t) * newcap)
        if p == NULL:
            raise MemoryError()
        self.ghash = <uint64_t*>p
        for c in range(self.ncols):
            p = fastops_realloc(self.cols[c].gnull, self.gcap, newcap)
            if p == NULL:
                raise MemoryError()
            self.cols[c].gnull = <uint8_t*>p
            if self.cols[c].kind == FIXED:
                p = fastops_realloc(self.cols[c].gvals, sizeof(uint64_t) * self.gcap,
                                    sizeof(uint64_t) * newcap)
                if p == NULL:
                    raise MemoryError()
                self.cols[c].gvals = <uint64_t*>p
            else:
                p = fastops_realloc(self.cols[c].goffs, sizeof(int64_t) * (self.gcap + 1),
                                    sizeof(int64_t) * (newcap + 1))
                if p == NULL:
                    raise MemoryError()
                if self.cols[c].goffs == NULL:
                    (<int64_t*>p)[0] = 0
                self.cols[c].goffs = <int64_t*>p
        self.gcap = newcap
        return 0

    cdef int _reserve_table(self, int64_t n) except -1 nogil:
        """A table kept at most half full with ``n`` more groups (the GIL is
        taken only to grow it). Lookups reserve block by block (``BLOCK``
        rows), not for a whole batch: sized for the groups there are, the
        table is a half or a quarter of one sized for every row of a 64k
        batch being new, and probes at random miss the caches less."""
        cdef int64_t need = 64
        if 2 * (self.ngroups + n) <= self.cap:  # the usual block: room already
            return 0
        while need < 2 * (self.ngroups + n):
            need *= 2
        with gil:
            self._rehash(need)
        return 0

    cdef int _reserve_data(self, int c, int64_t extra) except -1:
        cdef KeyCol* col = &self.cols[c]
        cdef int64_t need = col.goffs[self.ngroups] + extra
        cdef int64_t newcap = col.dcap if col.dcap > 0 else 256
        cdef void* p
        if need <= col.dcap and col.gdata != NULL:
            return 0
        while newcap < need:
            newcap *= 2
        p = fastops_realloc(col.gdata, col.dcap, newcap)
        if p == NULL:
            raise MemoryError()
        col.gdata = <uint8_t*>p
        col.dcap = newcap
        return 0

    cdef int _rehash(self, int64_t newcap) except -1:
        cdef int64_t* t = <int64_t*>fastops_alloc(sizeof(int64_t) * newcap * 2)
        cdef int64_t g, pos
        cdef uint64_t mask = <uint64_t>(newcap - 1)
        if t == NULL:
            raise MemoryError()
        if self.fast:
            with nogil:
                for pos in range(newcap):
                    t[2 * pos + 1] = -1
                for g in range(self.ngroups):
                    if self.cols[0].gnull[g]:
                        continue
                    pos = <int64_t>(self.ghash[g] & mask)
                    while t[2 * pos + 1] >= 0:
                        pos = <int64_t>((<uint64_t>pos + 1) & mask)
                    t[2 * pos] = <int64_t>self.cols[0].gvals[g]
                    t[2 * pos + 1] = g
            free(self.table)
            self.table = t
            self.cap = newcap
            return 0
        with nogil:
            for pos in range(newcap):
                t[2 * pos + 1] = -1
            for g in range(self.ngroups):
                pos = <int64_t>(self.ghash[g] & mask)
                while t[2 * pos + 1] >= 0:
                    pos = <int64_t>((<uint64_t>pos + 1) & mask)
                t[2 * pos] = <int64_t>self.ghash[g]
                t[2 * pos + 1] = g
        free(self.table)
        self.table = t
        self.cap = newcap
        return 0

    def lookup_or_insert(self, const uint64_t[::1] hashes, list columns, int64_t[::1] out):
        """Group id of every row, inserting new keys. Modifies ``out``.

        ``columns[c]`` is ``(values_u64, nulls_u8_or_None)`` for a fixed column
        and ``(offsets_i64, data_u8, nulls_u8_or_None)`` for a variable one, all
        with ``len(hashes)`` rows (offsets: ``len + 1``). Offsets that decrease
        or leave the data are a ValueError, raised when the blocks of
        ``BLOCK`` rows before them are done. Returns the number of groups after the
        call.
        """
        cdef Py_ssize_t i, b, m, n = hashes.shape[0], bad_row = -1
        cdef int c, bad_col = -1
        cdef bint variable = False
        cdef int64_t g, pos, ng
        cdef uint64_t h, mask
        cdef const uint64_t[::1] v
        cdef const uint8_t[::1] nl
        cdef const int64_t[::1] of
        cdef const uint8_t[::1] dt
        cdef KeyCol* cols = self.cols
        cdef int ncols = self.ncols
        cdef int64_t* t
        cdef const uint64_t* fvals
        cdef const uint8_t* fnull
        keep = []
        if len(columns) != ncols:
            raise ValueError(f"expected {ncols} key columns, got {len(columns)}")
        if out.shape[0] != n:
            raise ValueError("out must have one entry per row")
        if n == 0:
            return self.ngroups
        self._reserve_groups(self.ngroups + n)
        for c in range(ncols):
            spec = columns[c]
            nulls = spec[len(spec) - 1]
            if nulls is not None:
                nl = nulls
                if nl.shape[0] != n:
                    raise ValueError(f"key column {c}: null mask has {nl.shape[0]} rows, "
                                     f"expected {n}")
                cols[c].inull = &nl[0]
                keep.append(nl)
            else:
                cols[c].inull = NULL
            if cols[c].kind == FIXED:
                v = spec[0]
                if v.shape[0] != n:
                    raise ValueError(f"key column {c}: {v.shape[0]} values, expected {n}")
                cols[c].ivals = &v[0]
                keep.append(v)
            else:
                of = spec[0]
                dt = spec[1]
                if of.shape[0] != n + 1:
                    raise ValueError(f"key column {c}: {of.shape[0]} offsets, expected {n + 1}")
                if of[n] < of[0] or of[0] < 0 or of[n] > dt.shape[0]:
                    raise ValueError(f"key column {c}: offsets out of range of the data buffer")
                cols[c].ioffs = &of[0]
                cols[c].iend = of[n]
                cols[c].idata = &dt[0] if dt.shape[0] > 0 else NULL
                variable = True
                keep.append(of)
                keep.append(dt)
                self._reserve_data(c, of[n] - of[0])
        ng = self.ngroups
        fvals, fnull = cols[0].ivals, cols[0].inull
        with nogil:
            for b in range(0, n, BLOCK):
                m = min(n - b, <Py_ssize_t>BLOCK)
                self.ngroups = ng
                self._reserve_table(m)
                if self.fast:  # the block's rows of the one column
                    cols[0].ivals = fvals + b
                    cols[0].inull = fnull + b if fnull != NULL else NULL
                    ng = self._lookup_fast(&hashes[b], m, &out[b])
                    continue
                t = self.table
                mask = <uint64_t>(self.cap - 1)
                if variable:  # a block's offsets, before its rows
                    bad_col = _bad_block(cols, ncols, b, m)
                    if bad_col >= 0:
                        bad_row = b
                        break
                for i in range(b, b + m):
                    if i + PF_PROBE < n:
                        prefetch_w(&t[2 * <int64_t>(hashes[i + PF_PROBE] & mask)])
                    h = hashes[i]
                    pos = <int64_t>(h & mask)
                    while True:
                        g = t[2 * pos + 1]
                        if g < 0:
                            g = ng
                            ng += 1
                            t[2 * pos] = <int64_t>h
                            t[2 * pos + 1] = g
                            self.ghash[g] = h
                            _store_row(cols, ncols, g, i)
                            break
                        if <uint64_t>t[2 * pos] == h and _row_equals(cols, ncols, g, i):
                            break
                        pos = <int64_t>((<uint64_t>pos + 1) & mask)
                    out[i] = g
        self.ngroups = ng
        for c in range(ncols):
            cols[c].inull = NULL
            cols[c].ivals = NULL
            cols[c].ioffs = NULL
            cols[c].idata = NULL
        if bad_row >= 0:
            of = columns[bad_col][0]
            while bad_row < n - 1 and of[bad_row] <= of[bad_row + 1] <= of[n]:
                bad_row += 1
            raise ValueError(f"key column {bad_col}: value {bad_row} runs from offset "
                             f"{of[bad_row]} to {of[bad_row + 1]}, outside [{of[0]}, {of[n]}]")
        return ng

    def lookup_or_insert_words(self, const uint64_t[::1] values, uint64_t seed, int64_t[::1] out):
        """``lookup_or_insert`` for one fixed-width column of 8-byte integers
        (or temporal storage) without nulls, hashing here: each block's
        XXH64 values (``hash64``'s, with ``seed``) stay in L1 instead of
        making a pass of their own. Modifies ``out``; returns the number of
        groups."""
        cdef Py_ssize_t i, m, n = values.shape[0]
        cdef uint64_t hbuf[BLOCK]
        cdef KeyCol* col = &self.cols[0]
        if not self.fast:
            raise ValueError("lookup_or_insert_words needs a table of one fixed-width key column")
        if out.shape[0] != n:
            raise ValueError("out must have one entry per row")
        if n == 0:
            return self.ngroups
        self._reserve_groups(self.ngroups + n)
        col.inull = NULL
        with nogil:
            for i in range(0, n, BLOCK):
                m = min(BLOCK, n - i)
                self._reserve_table(m)
                xxh64_many8(&values[i], m, seed, hbuf, 0)
                col.ivals = &values[i]
                self.ngroups = self._lookup_fast(hbuf, m, &out[i])
        col.ivals = NULL
        return self.ngroups

    cdef int64_t _lookup_fast(self, const uint64_t* hashes, Py_ssize_t n,
                              int64_t* out) noexcept nogil:
        """Group ids of ``n`` rows of the one fixed column (``ivals`` /
        ``inull`` set) with these hashes, inserting new keys (the table
        reserved for ``n`` more first); returns the number of groups."""
        cdef Py_ssize_t i
        cdef KeyCol* col = &self.cols[0]
        cdef int64_t* t = self.table
        cdef uint64_t mask = <uint64_t>(self.cap - 1)
        cdef int64_t ng = self.ngroups, g, pos, key
        cdef uint64_t h
        for i in range(min(n, PF_PROBE)):  # the first rows' buckets, as the loop does for the rest
            prefetch_w(&t[2 * <int64_t>(hashes[i] & mask)])
        for i in range(n):
            if i + PF_PROBE < n:
                prefetch_w(&t[2 * <int64_t>(hashes[i + PF_PROBE] & mask)])
            if col.inull != NULL and col.inull[i]:
                if self.null_gid < 0:
                    self.null_gid = ng
                    self.ghash[ng] = hashes[i]
                    col.gnull[ng] = 1
                    col.any_null = True
                    col.gvals[ng] = 0
                    ng += 1
                out[i] = self.null_gid
                continue
            key = <int64_t>col.ivals[i]
            h = hashes[i]
            pos = <int64_t>(h & mask)
            while True:
                g = t[2 * pos + 1]
                if g < 0:
                    g = ng
                    ng += 1
                    t[2 * pos] = key
                    t[2 * pos + 1] = g
                    self.ghash[g] = h
                    col.gnull[g] = 0
                    col.gvals[g] = <uint64_t>key
                    break
                if t[2 * pos] == key:
                    break
                pos = <int64_t>((<uint64_t>pos + 1) & mask)
            out[i] = g
        return ng

    def group_hashes(self, const int64_t[::1] ids, uint64_t[::1] out):
        """out[i] = hash of group ids[i]. Modifies ``out``. Returns -1 on a bad id."""
        cdef Py_ssize_t i, n = ids.shape[0]
        cdef int status = 0
        check_out(out.shape[0], n, "group_hashes", True)
        with nogil:
            for i in range(n):
                if ids[i] < 0 or ids[i] >= self.ngroups:
                    status = -1
                    break
                out[i] = self.ghash[ids[i]]
        return status

    def gather_fixed(self, int c, const int64_t[::1] ids, uint64_t[::1] out, uint8_t[::1] nulls):
        """Values and null flags of fixed column ``c`` for groups ``ids``. Modifies outputs.

        Returns the number of nulls, or -1 on a bad id. Null flags are
        written only where the column holds a null key (else there are none
        to read, and the loop is a plain gather: the stored values are a few
        MB at most, in cache, so nothing is prefetched).
        """
        cdef Py_ssize_t i, n = ids.shape[0]
        cdef int64_t g, nnull = 0
        cdef uint64_t top = <uint64_t>self.ngroups
        cdef KeyCol* col
        if c < 0 or c >= self.ncols or self.cols[c].kind != FIXED:
            raise ValueError(f"key column {c} is not a fixed-width column")
        check_out(min(out.shape[0], nulls.shape[0]), n, "gather_fixed", True)
        col = &self.cols[c]
        if not col.any_null:
            with nogil:
                for i in range(n):
                    g = ids[i]
                    if <uint64_t>g >= top:  # (a negative id too)
                        nnull = -1
                        break
                    out[i] = col.gvals[g]
            return nnull
        with nogil:
            for i in range(n):
                if i + PF < n and 0 <= ids[i + PF] < self.ngroups:
                    prefetch_w(&col.gvals[ids[i + PF]])
                g = ids[i]
                if g < 0 or g >= self.ngroups:
                    nnull = -1
                    break
                out[i] = col.gvals[g]
                nulls[i] = col.gnull[g]
                nnull += col.gnull[g]
        return nnull

    def binary_sizes(self, int c, const int64_t[::1] ids, int64_t[::1] offsets, uint8_t[::1] nulls):
        """Output offsets (``len(ids) + 1``) and null flags of variable column ``c``.

        Modifies outputs. Returns the total byte size, or -1 on a bad id.
        """
        cdef Py_ssize_t i, n = ids.shape[0]
        cdef int64_t g, total = 0
        cdef KeyCol* col
        if c < 0 or c >= self.ncols or self.cols[c].kind != VARIABLE:
            raise ValueError(f"key column {c} is not a variable-width column")
        check_out(min(offsets.shape[0] - 1, nulls.shape[0]), n, "binary_sizes", True)
        col = &self.cols[c]
        with nogil:
            offsets[0] = 0
            for i in range(n):
                g = ids[i]
                if g < 0 or g >= self.ngroups:
                    total = -1
                    break
                total += col.goffs[g + 1] - col.goffs[g]
                offsets[i + 1] = total
                nulls[i] = col.gnull[g]
        return total

    def binary_fill(self, int c, const int64_t[::1] ids, const int64_t[::1] offsets,
                    uint8_t[::1] data):
        """Copy the bytes of groups ``ids`` of variable column ``c`` (after
        ``binary_sizes``). A bad id, or a value that would not fit ``data``
        at its offset, is a ValueError, raised when the values before it are
        copied."""
        cdef Py_ssize_t i, n = ids.shape[0], bad = -1
        cdef int64_t g, o, length, ndata = data.shape[0]
        cdef KeyCol* col
        if c < 0 or c >= self.ncols or self.cols[c].kind != VARIABLE:
            raise ValueError(f"key column {c} is not a variable-width column")
        if n == 0 or data.shape[0] == 0:
            return
        check_out(offsets.shape[0], n, "binary_fill", True)
        col = &self.cols[c]
        with nogil:
            for i in range(n):
                g = ids[i]
                if <uint64_t>g >= <uint64_t>self.ngroups:
                    bad = i
                    break
                length = col.goffs[g + 1] - col.goffs[g]
                if length > 0:
                    o = offsets[i]
                    if o < 0 or o > ndata - length:
                        bad = i
                        break
                    memcpy(&data[o], col.gdata + col.goffs[g], <size_t>length)
        if bad >= 0:
            g = ids[bad]
            if not 0 <= g < self.ngroups:
                raise ValueError(f"binary_fill: group {g} outside [0, {self.ngroups})")
            raise ValueError(f"binary_fill: {col.goffs[g + 1] - col.goffs[g]} bytes at offset "
                             f"{offsets[bad]} outside the {ndata} data bytes")

    def nbytes(self) -> int:
        """Bytes of C memory held."""
        cdef int64_t total = self.cap * 16 + self.gcap * 8
        cdef int c
        for c in range(self.ncols):
            total += self.gcap * 9 + self.cols[c].dcap  # a value or an offset, and a null flag
        return total


# ---------------------------------------------------------------- key chains

def _doubled(a, Py_ssize_t n):
    """``a`` with room for ``n`` entries (capacity doubles, at least 64; new ones zero)."""
    if len(a) >= n:
        return a
    b = np.zeros(max(n, 2 * len(a), 64), dtype=a.dtype)
    b[:len(a)] = a
    return b


cdef class KeyChains:
    """Key id -> the row numbers held under it, oldest first: a chain per key
    (its first and last row, and each row's next row under the same key), as
    a hash join keeps its build side. Rows are added in increasing number,
    each batch right after the last; a negative key is not stored (a null key
    matches nothing). ``find`` walks the chains of the queried keys, so a
    probe costs its queries plus its matches, whatever the rows held.
    ``touched`` counts the keys and rows read or written. ``grow(array, n)``
    returns ``array`` with room for ``n`` entries, new ones zero: the caller's
    allocator (the engine passes its pool-backed one); by default capacity doubles."""

    cdef object _head, _tail, _count, _next, _grow
    cdef public Py_ssize_t num_rows   # rows added (row numbers run below it)
    cdef public Py_ssize_t entries    # rows stored under a key
    cdef public int64_t touched

    def __init__(self, grow=None):
        self._grow = _doubled if grow is None else grow
        self._head = np.zeros(0, dtype=np.int64)
        self._tail = np.zeros(0, dtype=np.int64)
        self._count = np.zeros(0, dtype=np.int64)
        self._next = np.zeros(0, dtype=np.int64)
        self.num_rows = 0
        self.entries = 0
        self.touched = 0

    def __len__(self):
        return self.entries

    def clear(self):
        """Hold nothing (capacity kept); row numbers start at 0 again."""
        self._count[:] = 0
        self.num_rows = 0
        self.entries = 0

    def add(self, const int64_t[::1] keys, Py_ssize_t first_row):
        """Hold rows ``first_row, first_row + 1, ...`` under ``keys``;
        ``first_row`` must be ``num_rows``."""
        cdef Py_ssize_t i, n = keys.shape[0]
        cdef int64_t k, r, kmax = -1, stored = 0
        if first_row != self.num_rows:
            raise ValueError(f"KeyChains.add: rows must follow on: first row {first_row}, "
                             f"{self.num_rows} held")
        for i in range(n):
            if keys[i] > kmax:
                kmax = keys[i]
        self._next = self._grow(self._next, first_row + n)
        if kmax >= len(self._count):
            self._head = self._grow(self._head, kmax + 1)
            self._tail = self._grow(self._tail, kmax + 1)
            self._count = self._grow(self._count, kmax + 1)
        cdef int64_t[::1] head = self._head
        cdef int64_t[::1] tail = self._tail
        cdef int64_t[::1] count = self._count
        cdef int64_t[::1] nxt = self._next
        with nogil:
            for i in range(n):
                r = first_row + i
                k = keys[i]
                nxt[r] = -1
                if k < 0:
                    continue
                if count[k] == 0:
                    head[k] = r
                else:
                    nxt[tail[k]] = r
                tail[k] = r
                count[k] += 1
                stored += 1
        self.num_rows += n
        self.entries += stored
        self.touched += n

    def find(self, const int64_t[::1] keys):
        """``(query, row)`` of every row held under ``keys[query]``: grouped by
        query, rows increasing within a query (int64 arrays)."""
        cdef Py_ssize_t i, n = keys.shape[0], pos = 0
        cdef int64_t k, r, total = 0
        cdef int64_t[::1] head = self._head
        cdef int64_t[::1] count = self._count
        cdef int64_t[::1] nxt = self._next
        cdef Py_ssize_t nkeys = count.shape[0]
        with nogil:
            for i in range(n):
                k = keys[i]
                if 0 <= k < nkeys:
                    total += count[k]
        q_arr = np.empty(total, dtype=np.int64)
        r_arr = np.empty(total, dtype=np.int64)
        cdef int64_t[::1] q = q_arr
        cdef int64_t[::1] rows = r_arr
        with nogil:
            for i in range(n):
                k = keys[i]
                if not (0 <= k < nkeys) or count[k] == 0:
                    continue
                r = head[k]
                while r >= 0:
                    q[pos] = i
                    rows[pos] = r
                    pos += 1
                    r = nxt[r]
        self.touched += n + total
        return q_arr, r_arr
