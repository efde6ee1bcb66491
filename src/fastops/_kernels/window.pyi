"""Typed stubs for the window aggregation kernels (``fastops._kernels.window``).

Arrays are NumPy, C-contiguous; comments give the C element type. "modified"
marks outputs written in place.
"""
import numpy as np

PANE_CHUNK_MAX: int  # slots of the largest pane chunk
PANE_LAYOUT: str     # how pane slots are laid out (recorded in snapshots)

class SumOverflowError(OverflowError):
    """An int64 sum left the int64 range; raised by agg_update, merge_records,
    pane_emit, dense_add, suffix_add and dense_window after their loop."""
    aggregates: tuple[int, ...]  # overflowed aggregates, in the raising kernel's numbering
    # set where fastops.core.aggregates names the aggregate (sum_overflow)
    aggregate: object
    column: str | None
    output: str | None
    detail: str
    def __init__(self, message: str, aggregates: tuple[int, ...] = ...) -> None: ...

def pane_rehash(og: np.ndarray, oq: np.ndarray, ov: np.ndarray,  # const int64[::1]
                hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # int64[::1], modified
                ) -> None: ...
def pane_assign(hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # int64[::1], modified
                s_group: np.ndarray, s_next: np.ndarray,  # int64, modified
                s_flags: np.ndarray,      # uint8[::1], modified
                counters: np.ndarray,     # int64[::1] (12), modified
                gids: np.ndarray, ts: np.ndarray,  # const int64[::1]
                offset: int, p: int, q_dead: int, q_dirty: int,
                gcache: np.ndarray,       # int64[::1] (2 * ways per group), modified
                ways: int, start: int, max_fill: int,
                indexed: np.ndarray,      # const int64[::1] panes whose slots are in the map, ascending
                out_slots: np.ndarray,    # int64[::1], modified
                new_panes: np.ndarray,    # int64[::1], modified
                ) -> tuple[int, int, int, int, int | None]: ...  # next row, new panes, late, dirty, pane to index
def pane_index(hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # int64[::1], modified
               s_group: np.ndarray, s_next: np.ndarray,  # const int64[::1]
               s_flags: np.ndarray,      # uint8[::1], modified
               counters: np.ndarray,     # int64[::1] (12), modified
               q: int, max_fill: int,
               ) -> bool: ...  # False: the map filled up first (grow it, call again)
def pane_emit(hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # const int64[::1]
              s_group: np.ndarray, s_next: np.ndarray,  # const int64[::1]
              s_flags: np.ndarray,      # const uint8[::1]
              panes: np.ndarray,        # const int64[::1]
              refire: bool,
              group_mark: np.ndarray,   # int64[::1], all -1 (restored)
              ops: np.ndarray,          # const int64[::1] codes of OPS
              offs: np.ndarray,         # const int64[::1] first word of each aggregate
              rec: np.ndarray,          # const int64[:, ::1] the aggregates' shared state records
              out_rec: np.ndarray,      # int64[:, ::1] merged records (rec's layout), modified
              row0: int,
              out_groups: np.ndarray, out_row: np.ndarray, out_src: np.ndarray,  # int64, modified
              merge: bool = True,       # False: out_rec untouched (windows of one pane)
              pairs: bool = True,       # False (with merge, no refire): no pairs kept, one pass
              ) -> tuple[int, int]: ...
def pane_slots(hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # const int64[::1]
               s_group: np.ndarray, s_next: np.ndarray,  # const int64[::1]
               s_flags: np.ndarray,        # const uint8[::1]
               q: int,
               out_slots: np.ndarray, out_groups: np.ndarray,  # int64[::1], modified
               ) -> int: ...  # -1: outputs too short
def dense_add(groups: np.ndarray,   # const int64[::1] distinct, any order (a pane's)
              slots: np.ndarray,    # const int64[::1] their slots in rec
              rec: np.ndarray,      # const int64[:, ::1] the record store
              layout: np.ndarray,   # const int64[::1] the stack layout (fastops.core.window's _stack_layout)
              acc: np.ndarray,      # int64[:, ::1] one record per group id (the layout's width), modified
              bits: np.ndarray,     # uint64[::1] groups held in acc, modified
              ) -> int: ...  # groups new to acc; -1: a record read breaks the layout
def suffix_add(groups: np.ndarray, slots: np.ndarray, rec: np.ndarray,  # a pane older than those added
               layout: np.ndarray,
               ss: np.ndarray,        # int64[:, ::1] stack records, modified
               ss_group: np.ndarray,  # int64[::1], modified
               ss_next: np.ndarray,   # int64[::1] the group's record in the next newer pane, modified
               start: int,            # first stack row of this pane
               ptr: np.ndarray,       # int64[::1] each group's current stack record, modified
               bits: np.ndarray,      # uint64[::1] groups in the stack, modified
               ) -> int: ...  # groups new to the stack; -1: a record read breaks the layout
def suffix_drop(ss_group: np.ndarray, ss_next: np.ndarray,  # const int64[::1]
                lo: int, hi: int,     # stack rows of the oldest pane
                ptr: np.ndarray, bits: np.ndarray,  # modified
                ) -> int: ...  # groups that left the stack
FINAL: dict[str, int]  # how a result word is made of a record: "word" as it is, "sum_f64" plus its error term
def dense_window(sbits: np.ndarray, ptr: np.ndarray, ss: np.ndarray,  # the suffix stack
                 pbits: np.ndarray, acc: np.ndarray,  # the prefix
                 layout: np.ndarray,      # const int64[::1] the stack layout of both
                 words: np.ndarray, codes: np.ndarray,  # const int64[::1] the result plan, in its words
                 cnt_words: np.ndarray,
                 out_groups: np.ndarray,  # int64[::1], modified
                 out_cols: np.ndarray,    # int64[:, ::1] (len(words), rows), modified
                 out_null: np.ndarray,    # uint8[:, ::1] (len(cnt_words), rows), zeroed; 1 set where null
                 nnull: np.ndarray,       # int64[::1] nulls per null column, modified
                 row0: int = 0,           # first row of the outputs written
                 ) -> int: ...
def pairs_plan(rows: np.ndarray, src: np.ndarray,  # const int64[::1]
               nrows: int, top: int,
               count: np.ndarray,         # int64[::1] scratch (nrows)
               result_slots: np.ndarray,  # int64[::1] (nrows), modified
               out_dst: np.ndarray, out_src: np.ndarray,  # int64[::1], modified
               ) -> tuple[int, int]: ...
def pane_clear_dirty(hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # const int64[::1]
                     s_next: np.ndarray,   # const int64[::1]
                     s_flags: np.ndarray,  # uint8[::1], modified
                     panes: np.ndarray,    # const int64[::1]
                     ) -> None: ...
def pane_purge(hg: np.ndarray, hq: np.ndarray, hv: np.ndarray,  # int64[::1], modified
               s_group: np.ndarray,    # const int64[::1]
               s_next: np.ndarray,     # int64[::1], modified (free lists)
               s_flags: np.ndarray,    # const uint8[::1]
               counters: np.ndarray,   # int64[::1] (12), modified
               panes: np.ndarray,      # const int64[::1]
               out_slots: np.ndarray,  # int64[::1], modified
               ) -> int: ...
def session_assign(g_head: np.ndarray, s_group: np.ndarray, s_start: np.ndarray,
                   s_end: np.ndarray, s_next: np.ndarray,  # int64[::1], modified
                   s_flags: np.ndarray,   # uint8[::1], modified
                   s_parent: np.ndarray, free_stack: np.ndarray, counters: np.ndarray,  # int64
                   gids: np.ndarray, ts: np.ndarray,  # const int64[::1]
                   gap: int, late_limit: int,
                   out_slots: np.ndarray, merge_dst: np.ndarray, merge_src: np.ndarray,  # modified
                   ) -> tuple[int, int]: ...
def session_release(s_parent: np.ndarray,  # int64[::1], modified
                    slots: np.ndarray,     # const int64[::1]
                    free_stack: np.ndarray, counters: np.ndarray,  # int64[::1], modified
                    ) -> None: ...
def session_fire(s_flags: np.ndarray,  # uint8[::1], modified
                 s_end: np.ndarray,    # const int64[::1]
                 nslots: int, t: int,
                 out: np.ndarray,      # int64[::1], modified
                 ) -> int: ...
def session_purge(g_head: np.ndarray,  # int64[::1], modified
                  s_group: np.ndarray, s_end: np.ndarray,  # const int64[::1]
                  s_next: np.ndarray,  # int64[::1], modified
                  s_flags: np.ndarray,  # uint8[::1], modified
                  free_stack: np.ndarray, counters: np.ndarray,  # int64[::1], modified
                  limit: int,
                  out: np.ndarray,     # int64[::1], modified
                  ) -> int: ...

OPS: dict[str, int]  # aggregate codes shared by agg_update and the merges

# rec int64[:, ::1] (n_slots, W) records; an aggregate's words start at its offset, word 0 = cnt.
# Kernels that add to a sum_i64 (agg_update, merge_records, pane_emit, dense_add, suffix_add,
# dense_window) raise SumOverflowError after their loop where such a sum left int64.
def agg_update(slots: np.ndarray,  # const int64[::1] (< 0: skip)
               ts: np.ndarray,     # const int64[::1]
               ops: np.ndarray,    # const int64[::1] codes of OPS
               rec: np.ndarray,    # int64[:, ::1] records the aggregates share, modified
               roffs: np.ndarray,  # const int64[::1] word offsets in rec
               vals: list[np.ndarray],  # const int64[::1] 8-byte values (empty for count)
               valids: list[np.ndarray],  # const uint8[::1] bitmaps or empty
               voffs: np.ndarray,  # const int64[::1] bitmap offsets
               ) -> None: ...
def merge_records(op: int, dst: np.ndarray, src: np.ndarray,  # const int64[::1]
                  drec: np.ndarray, doff: int,  # int64[:, ::1], modified
                  srec: np.ndarray, soff: int,  # const int64[:, ::1]
                  ) -> None: ...
def clear_records(rec: np.ndarray,    # int64[:, ::1], modified
                  slots: np.ndarray,   # const int64[::1]
                  stream: bool = ...,  # cold records: streaming stores
                  ) -> None: ...
def gather_fields(rec: np.ndarray,        # const int64[:, ::1]
                  words: np.ndarray,      # const int64[::1] record word of each result column
                  codes: np.ndarray,      # const int64[::1] how it is made (FINAL)
                  cnt_words: np.ndarray,  # const int64[::1] count word of each null column
                  slots: np.ndarray | None,  # const int64[::1]; None: rows 0 .. n-1
                  out: np.ndarray,        # int64[:, ::1] (len(words), n), modified
                  null: np.ndarray,       # uint8[:, ::1] (len(cnt_words), n), zeroed; 1 set where null
                  nnull: np.ndarray,      # int64[::1] nulls per null column, modified
                  ) -> None: ...

# string picks: per slot a reference into a byte arena (start, -1 for none), a length and a time
PICK_MODES: dict[str, int]  # "min", "max", "first", "last"
def pick_candidates(mode: int,
                    slots: np.ndarray,    # const int64[::1]
                    offsets: np.ndarray,  # const int32 / int64[::1] (n + 1)
                    data: np.ndarray,     # const uint8[::1]
                    ts: np.ndarray,       # const int64[::1] (n, or empty for min / max)
                    best: np.ndarray,     # int64[::1] scratch, all -1 (kept so)
                    ref: np.ndarray, length: np.ndarray, held_ts: np.ndarray,  # const int64[::1]
                    arena: np.ndarray,    # const uint8[::1]
                    out_slots: np.ndarray, out_rows: np.ndarray,  # int64[::1] (n), modified
                    ) -> int: ...
def pick_merge(mode: int,
               dst: np.ndarray, src: np.ndarray,  # const int64[::1]
               ref: np.ndarray, length: np.ndarray, held_ts: np.ndarray,  # int64[::1], modified
               arena: np.ndarray,  # const uint8[::1]
               ) -> None: ...
def gather_bytes(starts: np.ndarray, lengths: np.ndarray,  # const int64[::1]
                 src: np.ndarray,         # const uint8[::1]
                 out_starts: np.ndarray,  # const int64[::1]
                 out: np.ndarray,         # uint8[::1], modified
                 ) -> None: ...
