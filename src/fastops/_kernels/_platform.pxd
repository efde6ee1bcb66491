# cython: language_level=3
"""The compiler and CPU primitives of ``_platform.h`` for every kernel module,
through ``cimport``."""
from libc.stdint cimport int64_t, uint64_t


cdef extern from "_platform.h" nogil:
    # the line at p into every cache level, to be read / to be written (a hint:
    # never faults, whatever p is)
    void prefetch_r "FASTOPS_PREFETCH_R"(const void* p) noexcept
    void prefetch_w "FASTOPS_PREFETCH_W"(const void* p) noexcept
    int ctz64 "FASTOPS_CTZ64"(uint64_t x) noexcept  # x != 0
    int clz64 "fastops_clz64"(uint64_t x) noexcept  # 64 for 0
    int popcount64 "FASTOPS_POPCOUNT64"(uint64_t x) noexcept
    uint64_t bswap64 "FASTOPS_BSWAP64"(uint64_t x) noexcept
    # a + b into r (wrapped); 1 if the exact sum is outside int64, else 0
    uint64_t add_ovf "fastops_add_ovf"(int64_t a, int64_t b, int64_t* r) noexcept
    # floor(x * n / 2**64), in [0, n)
    uint64_t range64 "fastops_range64"(uint64_t x, uint64_t n) noexcept
    # a % d through a reciprocal (hi, lo) made once per divisor d >= 1
    void fastmod_init "fastops_fastmod_init"(uint64_t d, uint64_t* hi, uint64_t* lo) noexcept
    uint64_t fastmod "fastops_fastmod"(uint64_t a, uint64_t hi, uint64_t lo,
                                       uint64_t d) noexcept
    # streaming stores (past the caches): a 64-byte line (16-byte aligned), a
    # word, n zero words; the fence orders them before later stores
    void stream_line "fastops_stream_line"(void* dst, const void* src) noexcept
    void stream_store "fastops_stream_store"(int64_t* p, int64_t v) noexcept
    void stream_zero "fastops_stream_zero"(int64_t* w, int64_t n) noexcept
    void stream_fence "fastops_stream_fence"() noexcept
