"""Typed stubs for the key table kernel (``fastops._kernels.keys``)."""
import enum
from collections.abc import Callable, Sequence

import numpy as np
from typing_extensions import Self, disjoint_base

class KeyKind(enum.IntEnum):  # how a key column is handed over
    FIXED = 0     # one uint64 word per row (values normalised)
    VARIABLE = 1  # int64 offsets into a byte buffer

def normalize_f64(bits: np.ndarray,  # const uint64[::1]
                  out: np.ndarray,   # uint64[::1], modified
                  ) -> None: ...
def normalize_f32(bits: np.ndarray,  # const uint32[::1]
                  out: np.ndarray,   # uint64[::1], modified
                  ) -> None: ...

_FixedSpec = tuple[np.ndarray, np.ndarray | None]  # (uint64 values, uint8 nulls | None)
_VarSpec = tuple[np.ndarray, np.ndarray, np.ndarray | None]  # (int64 offsets, uint8 data, nulls)

@disjoint_base
class KeyIndex:
    def __new__(cls, kinds: Sequence[int]) -> Self: ...  # a KeyKind per key column
    @property
    def num_groups(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    def lookup_or_insert(self, hashes: np.ndarray,  # const uint64[::1]
                         columns: list[_FixedSpec | _VarSpec],
                         out: np.ndarray,            # int64[::1], modified
                         ) -> int: ...
    def lookup_or_insert_words(self, values: np.ndarray,  # const uint64[::1]: 8-byte keys, no nulls
                               seed: int,                 # of the XXH64 row hash
                               out: np.ndarray,           # int64[::1], modified
                               ) -> int: ...
    def group_hashes(self, ids: np.ndarray,  # const int64[::1]
                     out: np.ndarray,        # uint64[::1], modified
                     ) -> int: ...
    def gather_fixed(self, c: int, ids: np.ndarray,  # const int64[::1]
                     out: np.ndarray,                # uint64[::1], modified
                     nulls: np.ndarray,              # uint8[::1], modified
                     ) -> int: ...
    def binary_sizes(self, c: int, ids: np.ndarray,  # const int64[::1]
                     offsets: np.ndarray,            # int64[::1] (len(ids) + 1), modified
                     nulls: np.ndarray,              # uint8[::1], modified
                     ) -> int: ...
    def binary_fill(self, c: int, ids: np.ndarray,  # const int64[::1]
                    offsets: np.ndarray,            # const int64[::1]
                    data: np.ndarray,               # uint8[::1], modified
                    ) -> None: ...
    def nbytes(self) -> int: ...

@disjoint_base
class KeyChains:
    num_rows: int
    entries: int
    touched: int
    def __init__(self, grow: Callable[[np.ndarray, int], np.ndarray] | None = None) -> None: ...
    def __len__(self) -> int: ...
    def clear(self) -> None: ...
    def add(self, keys: np.ndarray,  # const int64[::1]
            first_row: int) -> None: ...
    def find(self, keys: np.ndarray,  # const int64[::1]
             ) -> tuple[np.ndarray, np.ndarray]: ...
