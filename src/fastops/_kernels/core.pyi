"""Typed stub of ``fastops._kernels.core`` (compiled kernels).

Arrays are C-contiguous NumPy arrays (read-only views are fine for inputs);
comments give the C type of each argument. Outputs are preallocated by the
caller and modified in place; a length, offset or id that would index outside
an array is a ValueError.
"""

import numpy as np
import numpy.typing as npt

_U8 = npt.NDArray[np.uint8]
_U16 = npt.NDArray[np.uint16]
_U32 = npt.NDArray[np.uint32]
_U64 = npt.NDArray[np.uint64]
_I32 = npt.NDArray[np.int32]
_I64 = npt.NDArray[np.int64]
_Offsets = _I32 | _I64          # offset_t: int32_t | int64_t
_Dest = _I32 | _I64             # dest_t: int32_t | int64_t
_Words = _U8 | _U16 | _U32 | _U64  # word_t: uint8_t | uint16_t | uint32_t | uint64_t
_Ids = _I32 | _U8               # id_t: int32_t | uint8_t (P <= 256)

# ---------------------------------------------------------------- hashing

def hash_u64(values: _U64,            # const uint64_t[::1]
             seed: int,               # uint64_t
             out: _U64,               # uint64_t[::1], len(values)
             ) -> None: ...
def hash_u32(values: _U32,            # const uint32_t[::1]
             seed: int,               # uint64_t
             out: _U64,               # uint64_t[::1]
             ) -> None: ...
def hash_u16(values: _U16,            # const uint16_t[::1]
             seed: int,               # uint64_t
             out: _U64,               # uint64_t[::1]
             ) -> None: ...
def hash_u8(values: _U8,              # const uint8_t[::1]
            seed: int,                # uint64_t
            out: _U64,                # uint64_t[::1]
            ) -> None: ...
def hash_f64(bits: _U64,              # const uint64_t[::1]: float64 bit patterns
             seed: int,               # uint64_t
             out: _U64,               # uint64_t[::1]
             ) -> None: ...
def hash_f32(bits: _U32,              # const uint32_t[::1]: float32 bit patterns
             seed: int,               # uint64_t
             out: _U64,               # uint64_t[::1]
             ) -> None: ...
def hash_bits(bitmap: _U8,            # const uint8_t[::1]: bit-packed booleans
              offset: int,            # int64_t: bit of row 0
              seed: int,              # uint64_t
              out: _U64,              # uint64_t[::1]: one hash per row
              ) -> None: ...
def hash_binary(offsets: _Offsets,    # const offset_t[::1]: len(out) + 1, shifted to the slice
                data: _U8,            # const uint8_t[::1]: the whole data buffer
                seed: int,            # uint64_t
                out: _U64,            # uint64_t[::1]
                ) -> None: ...
def hash_bytes(data: _U8,             # const uint8_t[::1]
               seed: int,             # uint64_t
               ) -> int: ...          # uint64_t
def hash_set_nulls(validity: _U8,     # const uint8_t[::1]: Arrow validity bitmap
                   offset: int,       # int64_t: bit of row 0
                   null_hash: int,    # uint64_t
                   out: _U64,         # uint64_t[::1]
                   ) -> None: ...
def hash_combine(acc: _U64,           # uint64_t[::1]: modified in place
                 h: _U64,             # const uint64_t[::1]
                 seed: int,           # uint64_t
                 ) -> None: ...

# ---------------------------------------------------------------- partition ids

def fastmod_u64(values: _U64,         # const uint64_t[::1]
                d: int,               # uint64_t, >= 1
                out: _U64,            # uint64_t[::1]
                ) -> None: ...
def partition_modulo(hashes: _U64,    # const uint64_t[::1]
                     num_partitions: int,  # uint64_t, >= 1
                     out: _Ids,       # id_t[::1]
                     counts: _I64,    # int64_t[::1]: num_partitions entries, or 0 (no histogram)
                     ) -> int: ...    # 0
def partition_lookup(hashes: _U64,    # const uint64_t[::1]
                     owner_of: _I32,  # const int32_t[::1]: owner of each key group
                     out: _Ids,       # id_t[::1]
                     counts: _I64,    # int64_t[::1]: P entries, or 0 (no histogram)
                     ) -> int: ...    # 0
def partition_fixed(values: _U32 | _U64,  # const key_t[::1]: 4- or 8-byte keys, no nulls
                    is_float: bool,   # bint: hash as float bits (-0.0, NaN canonical)
                    seed: int,        # uint64_t
                    num_partitions: int,  # uint64_t
                    owner_of: _I32,   # const int32_t[::1]: key-group owners, or empty (modulo)
                    out: _Ids,        # id_t[::1]
                    counts: _I64,     # int64_t[::1]: num_partitions entries
                    ) -> int: ...     # 0
def partition_ring(hashes: _U64,      # const uint64_t[::1]
                   points: _U64,      # const uint64_t[::1]: sorted ring points
                   owners: _I32,      # const int32_t[::1]: owner of each point
                   lut: _I64,         # const int64_t[::1]: 2**bits + 1 bucket starts
                   lut_shift: int,    # int: 64 - bits
                   out: _Ids,         # id_t[::1]
                   counts: _I64,      # int64_t[::1]: P entries, or 0 (no histogram)
                   ) -> int: ...      # 0
def partition_count(ids: _I32,        # const int32_t[::1]
                    counts: _I64,     # int64_t[::1]: P entries
                    ) -> int: ...     # 0, or -1 if an id is outside [0, P)

# ---------------------------------------------------------------- scatter

def partition_dest(ids: _Ids,         # const id_t[::1]: in [0, P)
                   counts: _I64,      # const int64_t[::1]: P entries, histogram of ids
                   dest: _Dest,       # dest_t[::1]: output row of each input row
                   starts: _I64,      # int64_t[::1]: P + 1 partition starts
                   order: bool = ..., # dest the other way: input row of each output row
                   ) -> int: ...      # 0
STREAM_MIN_BYTES: int  # scatters writing this much go through line buffers and streaming stores
def scatter_words(src: _Words,        # const word_t[::1]
                  ids: _Ids,          # const id_t[::1]: partition of each row
                  starts: _I64,       # const int64_t[::1]: P + 1 partition starts
                  dest: _Dest,        # const dest_t[::1]: output row of each row (partition_dest), or empty: made here
                  out: _Words,        # word_t[::1], same dtype as src
                  ) -> None: ...
def scatter_words2(src_a: _Words,    # const word_t[::1]
                   src_b: _Words,     # const word_t[::1], same dtype
                   ids: _Ids, starts: _I64, dest: _Dest,
                   out_a: _Words,     # word_t[::1]
                   out_b: _Words,     # word_t[::1]
                   ) -> None: ...
def scatter_bits(src: _U8,            # const uint8_t[::1]: bit-packed
                 src_offset: int,     # int64_t: bit of row 0
                 dest: _Dest,         # const dest_t[::1]
                 out: _U8,            # uint8_t[::1]: ceil(n / 8) bytes, zeroed here
                 ) -> None: ...
def scatter_binary(offsets: _Offsets,      # const offset_t[::1]: n + 1, shifted to the slice
                   data: _U8,              # const uint8_t[::1]: the whole data buffer
                   ids: _Ids,              # const id_t[::1]: partition of each row
                   starts: _I64,           # const int64_t[::1]: P + 1 partition starts
                   out_offsets: _Offsets,  # offset_t[::1]: n + 1, same dtype as offsets
                   out_data: _U8,          # uint8_t[::1]: offsets[n] - offsets[0] bytes
                   dest: _Dest,            # dest_t[::1]: n (filled: output row of each row) or 0
                   ) -> None: ...
