# cython: language_level=3
"""Status codes and argument checks of every kernel module, through ``cimport``.

Kernels check sizes and ranges before their ``nogil`` loop where that costs
no pass over the rows (a ValueError names the kernel), and whole blocks of
rows inside it with no branch per value, so a hot loop pays one test per
block. A kernel that reports a failure instead of raising returns a status.
"""
from libc.stdint cimport int32_t, int64_t


cdef enum Status:  # the Python layer maps the negative ones to exceptions
    OK = 0
    ERR_RANGE = -1            # an id or slot outside its range
    ERR_NOMEM = -2            # memory ran out
    ERR_NEGATIVE_WEIGHT = -3  # a negative weight where only insertions are allowed
    ERR_TOO_MANY_LEVELS = -4  # a sketch outgrew its fixed number of levels


ctypedef fused offsets_t:
    int32_t
    int64_t


cdef inline int check_out(Py_ssize_t have, Py_ssize_t need, str what,
                          bint several=False) except -1:
    """``need`` rows fit an output of ``have`` rows (``several``: ``have`` is
    the shortest of a kernel's outputs)."""
    if have < need:
        if several:
            raise ValueError(f"{what}: outputs hold {have} rows, {need} needed")
        raise ValueError(f"{what}: out has {have} rows for {need} values")
    return 0


cdef inline bint bits_inside(Py_ssize_t nbytes, int64_t offset, Py_ssize_t n) noexcept nogil:
    """Bits ``offset .. offset + n - 1`` lie inside ``nbytes`` bytes."""
    return n <= 0 or (offset >= 0 and offset <= nbytes * 8 - n)


cdef inline int check_bits(Py_ssize_t nbytes, int64_t offset, Py_ssize_t n, str what) except -1:
    """``bits_inside`` for the bits of ``n`` values (booleans, a validity
    bitmap read as data)."""
    if not bits_inside(nbytes, offset, n):
        raise ValueError(f"{what}: {n} bits from bit {offset} on outside a bitmap of "
                         f"{nbytes} bytes")
    return 0


cdef inline int check_validity(Py_ssize_t nbytes, int64_t offset, Py_ssize_t n) except -1:
    """``bits_inside`` for the validity bits of ``n`` rows."""
    if not bits_inside(nbytes, offset, n):
        raise ValueError(f"validity bitmap too short: {n} bits from bit {offset} on, "
                         f"{nbytes} bytes")
    return 0


cdef inline bint offsets_ok(const offsets_t* off, Py_ssize_t m, int64_t lo,
                            int64_t hi) noexcept nogil:
    """``off[0 .. m]`` never decreases and lies inside ``[lo, hi]`` (one pass,
    no branch per value)."""
    cdef Py_ssize_t j
    cdef bint down = False
    for j in range(m):
        down |= off[j + 1] < off[j]
    return not down and off[0] >= lo and off[m] <= hi
