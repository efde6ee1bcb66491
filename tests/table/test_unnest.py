"""``CROSS JOIN UNNEST`` / ``LEFT JOIN UNNEST ... ON TRUE`` (Flink's array,
map and row-array expansion) against DuckDB's UNNEST on random tables with
list columns (nulls, empty lists, NULL elements), cut into random batches,
batch and streaming, parallelism 1 and 2; maps and arrays of ROWs against a
pure-Python expansion; Flink's documented examples."""
from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.table import TableEnvironment
from fastops.table.plan import SqlError
from support.sql_diff import BASE_MS, CUTS, assert_same_rows, chunked, duck

INTS = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-3, 5)), max_size=4))
WORDS = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "cd"])), max_size=3))
ROW = st.tuples(st.one_of(st.none(), st.integers(0, 3)), INTS, WORDS, st.integers(0, 30_000))
ROWS = st.lists(ROW, max_size=30)


def make_table(rows: list) -> pa.Table:
    """Columns id (position), k, tags (list<int64>), words (list<string>), ts (TIMESTAMP(3))."""
    cols = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.table({
        "id": pa.array(range(len(rows)), pa.int64()),
        "k": pa.array(cols[0], pa.int64()),
        "tags": pa.array(cols[1], pa.list_(pa.int64())),
        "words": pa.array(cols[2], pa.list_(pa.string())),
        "ts": pa.array([BASE_MS + t for t in cols[3]], pa.int64()).cast(pa.timestamp("ms")),
    })


QUERIES = [
    "SELECT id, k, x FROM t CROSS JOIN UNNEST(t.tags) AS u(x)",
    "SELECT id, x FROM t, UNNEST(tags) AS u (x) WHERE x > 0",
    "SELECT id, x FROM t LEFT JOIN UNNEST(tags) AS u(x) ON TRUE",
    "SELECT id, x, n FROM t CROSS JOIN UNNEST(tags) WITH ORDINALITY AS u(x, n)",
    "SELECT id, w, n FROM t LEFT JOIN UNNEST(words) WITH ORDINALITY AS u(w, n) ON TRUE",
    "SELECT id, x FROM t JOIN UNNEST(tags) AS u(x) ON x > k",
    "SELECT id, x, w FROM t CROSS JOIN UNNEST(tags) AS u(x) CROSS JOIN UNNEST(words) AS v(w)",
    "SELECT x, COUNT(*) AS c, SUM(id) AS s FROM t CROSS JOIN UNNEST(tags) AS u(x) GROUP BY x",
    "SELECT w, COUNT(DISTINCT id) AS c FROM t CROSS JOIN UNNEST(words) AS u(w) WHERE k IS NOT NULL GROUP BY w",
]


@settings(max_examples=60, deadline=None)
@given(rows=ROWS, cuts=CUTS, q=st.sampled_from(QUERIES), mode=st.sampled_from(["batch", "streaming"]),
       parallelism=st.sampled_from([1, 2]))
def test_unnest_matches_duckdb(rows, cuts, q, mode, parallelism):
    t = make_table(rows)
    env = TableEnvironment(mode=mode, parallelism=parallelism, batch_size=5)
    env.create_temporary_view("t", env.from_arrow(chunked(t, cuts)))
    assert_same_rows(env.sql_query(q).to_arrow(), duck(q, {"t": t}), q)


@settings(max_examples=20, deadline=None)
@given(rows=ROWS, cuts=CUTS, parallelism=st.sampled_from([1, 2]))
def test_unnest_keeps_the_time_attribute(rows, cuts, parallelism):
    # a TUMBLE window over the expanded rows, with the watermark of the input (streaming)
    t = make_table(rows)
    env = TableEnvironment(mode="streaming", parallelism=parallelism, batch_size=5)
    env.create_temporary_view("t", env.from_arrow(chunked(t, cuts), rowtime="ts"))
    env.create_temporary_view("e", env.sql_query("SELECT id, ts, x FROM t CROSS JOIN UNNEST(tags) AS u(x)"))
    q = ("SELECT window_start, COUNT(*) AS c, SUM(x) AS s FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), "
         "INTERVAL '10' SECOND)) GROUP BY window_start, window_end")
    want = ("SELECT time_bucket(INTERVAL 10 SECOND, ts) AS window_start, "
            "COUNT(*) AS c, SUM(x) AS s FROM t CROSS JOIN UNNEST(tags) AS u(x) GROUP BY 1")
    assert_same_rows(env.sql_query(q).to_arrow(), duck(want, {"t": t}), q)


def _expand(values: list, left: bool, ordinality: bool) -> list:
    """The pure-Python model: (row, element) pairs; a NULL or empty collection gives none (LEFT: one NULL)."""
    out = []
    for i, v in enumerate(values):
        elems = list(v or [])
        for pos, e in enumerate(elems, 1):
            out.append((i, e, pos) if ordinality else (i, e))
        if not elems and left:
            out.append((i, None, None) if ordinality else (i, None))
    return out


MAPS = st.lists(st.one_of(st.none(), st.dictionaries(st.sampled_from("abc"), st.one_of(st.none(), st.integers(0, 9)),
                                                      max_size=3)), max_size=20)


@settings(max_examples=25, deadline=None)
@given(maps=MAPS, cuts=CUTS, mode=st.sampled_from(["batch", "streaming"]), left=st.booleans(),
       ordinality=st.booleans())
def test_unnest_of_a_map_gives_its_entries(maps, cuts, mode, left, ordinality):
    t = pa.table({"id": pa.array(range(len(maps)), pa.int64()),
                  "m": pa.array([None if m is None else list(m.items()) for m in maps],
                                pa.map_(pa.string(), pa.int64()))})
    env = TableEnvironment(mode=mode, batch_size=4)
    env.create_temporary_view("t", env.from_arrow(chunked(t, cuts)))
    join = "LEFT JOIN" if left else "CROSS JOIN"
    q = (f"SELECT id, mk, mv{', n' if ordinality else ''} FROM t {join} UNNEST(m)"
         f"{' WITH ORDINALITY' if ordinality else ''} AS u(mk, mv{', n' if ordinality else ''})"
         f"{' ON TRUE' if left else ''}")
    want = []
    for r in _expand([None if m is None else list(m.items()) for m in maps], left, ordinality):
        kv = r[1] or (None, None)
        want.append((r[0], *kv, *r[2:]))
    assert_same_rows(env.sql_query(q).to_arrow(), want, q)


ROW_ARRAYS = st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.fixed_dictionaries(
    {"a": st.one_of(st.none(), st.integers(0, 9)), "b": st.sampled_from(["x", "y"])})), max_size=3)), max_size=20)


@settings(max_examples=25, deadline=None)
@given(arrays=ROW_ARRAYS, cuts=CUTS, mode=st.sampled_from(["batch", "streaming"]), left=st.booleans())
def test_unnest_of_an_array_of_rows_gives_their_fields(arrays, cuts, mode, left):
    typ = pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))
    t = pa.table({"id": pa.array(range(len(arrays)), pa.int64()), "r": pa.array(arrays, typ)})
    env = TableEnvironment(mode=mode, batch_size=4)
    env.create_temporary_view("t", env.from_arrow(chunked(t, cuts)))
    q = f"SELECT * FROM t {'LEFT JOIN' if left else 'CROSS JOIN'} UNNEST(r){' ON TRUE' if left else ''}"
    got = env.sql_query(q).to_arrow()
    assert got.column_names == ["id", "r", "a", "b"]  # the ROW's fields, under their names
    want = [(i, arrays[i], (e or {}).get("a"), (e or {}).get("b")) for i, e in _expand(arrays, left, False)]
    assert_same_rows(got, want, q)


# ---------------------------------------------------------------- Flink's documentation

def test_flinks_array_expansion_example():
    # Flink's joins page: SELECT order_id, tag FROM Orders CROSS JOIN UNNEST(tags) AS t (tag)
    env = TableEnvironment(mode="streaming")
    env.create_temporary_view("Orders", env.from_arrow(pa.table({
        "order_id": ["o1", "o2", "o3"], "tags": pa.array([["red", "big"], [], None], pa.list_(pa.string()))})))
    got = env.sql_query("SELECT order_id, tag FROM Orders CROSS JOIN UNNEST(tags) AS t (tag)").to_arrow()
    assert got.column_names == ["order_id", "tag"]
    assert got.to_pylist() == [{"order_id": "o1", "tag": "red"}, {"order_id": "o1", "tag": "big"}]


def test_flinks_constant_array_examples():
    # Flink's joins page (1.20+): a row per element of a constant array, WITH ORDINALITY its 1-based position
    env = TableEnvironment(mode="batch")
    got = env.sql_query("SELECT * FROM (VALUES ('order_1')) AS o(id) "
                        "CROSS JOIN UNNEST(ARRAY['shirt', 'pants', 'hat']) AS p(product_name)").to_arrow()
    assert got.to_pylist() == [{"id": "order_1", "product_name": n} for n in ("shirt", "pants", "hat")]
    got = env.sql_query("SELECT * FROM (VALUES ('order_1')) AS o(id) CROSS JOIN "
                        "UNNEST(ARRAY['shirt', 'pants', 'hat']) WITH ORDINALITY AS t(product_name, `index`)")
    assert [tuple(r.values()) for r in got.to_arrow().to_pylist()] == \
        [("order_1", "shirt", 1), ("order_1", "pants", 2), ("order_1", "hat", 3)]


def test_default_names_and_clashes():
    env = TableEnvironment(mode="batch")
    env.create_temporary_view("t", env.from_arrow(pa.table({"id": [1], "tags": [[7, 8]]})))
    # no alias: Calcite's names, EXPR$0 for the element and ORDINALITY for the position
    got = env.sql_query("SELECT * FROM t CROSS JOIN UNNEST(tags) WITH ORDINALITY").to_arrow()
    assert got.column_names == ["id", "tags", "EXPR$0", "ORDINALITY"]
    assert got.column("ORDINALITY").type == pa.int32()
    # a name the table has: both stay reachable by qualifier, and SELECT * numbers the second
    got = env.sql_query("SELECT t.id, u.id FROM t CROSS JOIN UNNEST(tags) AS u(id)").to_arrow()
    assert got.column_names == ["id", "id0"] and got.to_pylist() == [{"id": 1, "id0": 7}, {"id": 1, "id0": 8}]


@pytest.mark.parametrize("sql, words", [
    ("SELECT * FROM t CROSS JOIN UNNEST(id) AS u(x)", "UNNEST needs an ARRAY or MAP, got BIGINT"),
    ("SELECT * FROM t CROSS JOIN UNNEST(tags) AS u(x, y)", "UNNEST gives 1 column (EXPR$0), its alias names 2"),
    ("SELECT * FROM t CROSS JOIN UNNEST(ARRAY[1, 'a']) AS u(x)", "ARRAY elements of different types"),
])
def test_wrong_uses_say_what_is_wrong(sql, words):
    env = TableEnvironment(mode="batch")
    env.create_temporary_view("t", env.from_arrow(pa.table({"id": [1], "tags": [[7, 8]]})))
    with pytest.raises(SqlError, match=re.escape(words)):
        env.sql_query(sql)
