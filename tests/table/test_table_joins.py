"""Streaming joins of the Table API / SQL, against independent references.

- Regular joins (streaming): the operator's changelog equals a row-at-a-time
  model of Flink's join (``+I (row, NULLs)``, then ``-D`` / ``+I`` when the
  first match arrives) for any interleaving of the two inputs; through SQL,
  the changelog applied equals DuckDB's join of the same tables.
- Interval joins: state stays bounded while a long stream passes (rows held
  are counted), unmatched outer rows come out once the watermark passes their
  bound, and the rows equal DuckDB's.
"""
from __future__ import annotations

import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
import fastops.table.plan
from fastops._kernels.keys import KeyChains
from fastops.table import col, lit
from fastops.table.changelog import OP_COLUMN, ROW_KINDS
from fastops.table.expressions import Call, Col
from fastops.table.join_index import HeldRows, JoinKeys, JoinSide
from fastops.table.operators import StreamJoin

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOWS = ["inner", "left outer", "right outer", "full outer"]
LS = pa.schema([("k", pa.int64()), ("v", pa.int64())])
RS = pa.schema([("k2", pa.int64()), ("w", pa.int64())])


def _sort_key(row):
    return tuple((0, 0) if v is None else (1, v) for v in row)


def _rows(table: pa.Table) -> list:
    return sorted(zip(*[c.to_pylist() for c in table.columns]), key=_sort_key)


# ---------------------------------------------------------------- regular joins: operator vs a model

def flink_join_model(arrivals: list, how: str, cond) -> list:
    """Flink's streaming regular join, one row at a time: (kind, (k, v, k2, w)) rows."""
    outer = {"inner": (False, False), "left outer": (True, False), "right outer": (False, True),
             "full outer": (True, True)}[how]
    held: tuple[list, list] = ([], [])  # [row, number of matches]
    out = []

    def pair(side, row, other_row):
        return tuple(row) + tuple(other_row) if side == 0 else tuple(other_row) + tuple(row)

    def pad(side, row):
        return tuple(row) + (None, None) if side == 0 else (None, None) + tuple(row)

    for side, row in arrivals:
        other = 1 - side
        found = 0
        for h in held[other]:
            p = pair(side, row, h[0])
            if p[0] is None or p[0] != p[2] or not cond(p):
                continue
            if outer[other] and h[1] == 0:
                out.append(("-D", pad(other, h[0])))
            h[1] += 1
            found += 1
            out.append(("+I", p))
        if not found and outer[side]:
            out.append(("+I", pad(side, row)))
        held[side].append([row, found])
    return out


def _changelog(batches: list) -> list:
    out = []
    for b in batches:
        ops = b.column(OP_COLUMN).to_pylist() if OP_COLUMN in b.schema.names else [0] * b.num_rows
        data = [b.column(n).to_pylist() for n in ["k", "v", "k2", "w"]]
        out += [(ROW_KINDS[o], r) for o, r in zip(ops, zip(*data))]
    return out


ROW = st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.integers(-5, 5))
ARRIVALS = st.lists(st.tuples(st.integers(0, 1), ROW, st.booleans()), max_size=30)


@SETTINGS
@given(arrivals=ARRIVALS, how=st.sampled_from(HOWS), with_cond=st.booleans())
def test_regular_join_changelog_equals_flink_model(arrivals, how, with_cond):
    cond = Call("greater", [Col("w"), Col("v")]) if with_cond else None
    op = StreamJoin(["k"], ["k2"], how, LS, RS, cond, incremental=True)
    op.open(None)
    out: list = []
    pending: list = []  # rows of one side, cut into batches where the flag says so

    def flush():
        if pending:
            side = pending[0][0]
            rows = [r for _, r in pending]
            schema = LS if side == 0 else RS
            batch = pa.record_batch([pa.array([r[0] for r in rows], pa.int64()),
                                     pa.array([r[1] for r in rows], pa.int64())], schema=schema)
            out.extend(op.process_input(side, batch))
            pending.clear()

    for side, row, cut in arrivals:
        if pending and (pending[0][0] != side or cut):
            flush()
        pending.append((side, row))
    flush()
    out += op.close()
    want = flink_join_model([(s, r) for s, r, _ in arrivals], how,
                            (lambda p: p[3] > p[1]) if with_cond else (lambda p: True))
    assert _changelog(out) == want
    # every row is held (a regular join never forgets) and counts its matches
    assert op.held() == len(arrivals)


@SETTINGS
@given(arrivals=ARRIVALS, how=st.sampled_from(HOWS), restore_at=st.integers(0, 8))
def test_regular_join_changelog_is_unchanged_by_snapshot_and_restore(arrivals, how, restore_at):
    """Resume invariance: a snapshot after the ``restore_at``-th batch, restored
    into a new operator (its key index rebuilt from the held rows), gives
    the changelog of the model."""
    op = StreamJoin(["k"], ["k2"], how, LS, RS, None, incremental=True)
    op.open(None)
    out: list = []
    for batches, (side, row, cut) in enumerate(arrivals, 1):
        batch = pa.record_batch([pa.array([row[0]], pa.int64()), pa.array([row[1]], pa.int64())],
                                schema=LS if side == 0 else RS)
        out.extend(op.process_input(side, batch))
        if batches == restore_at or cut:
            state = op.snapshot()
            op = StreamJoin(["k"], ["k2"], how, LS, RS, None, incremental=True)
            op.open(None)
            op.restore(state)
    want = flink_join_model([(s, r) for s, r, _ in arrivals], how, lambda p: True)
    assert _changelog(out) == want
    assert op.held() == len(arrivals)


def test_left_outer_join_changelog_as_pyflink_prints_it():
    t_env = fo.TableEnvironment(mode="streaming", batch_size=1)
    t_env.create_temporary_view("l", t_env.from_elements([(1, "x")], ["k", "a"]))
    t_env.create_temporary_view("r", t_env.from_elements([(1, 10), (1, 11)], ["k2", "b"]))
    res = t_env.execute_sql("SELECT k, a, b FROM l LEFT JOIN r ON k = k2")
    # the left row arrives first (one batch per source in turn): no match yet
    assert [(r.get_row_kind(), tuple(r)) for r in res.collect()] == [
        ("+I", (1, "x", None)), ("-D", (1, "x", None)), ("+I", (1, "x", 10)), ("+I", (1, "x", 11))]
    grid = res.to_string().splitlines()
    assert grid[1].split("|")[1].strip() == "op" and grid[-1] == "4 rows in set"
    assert [line.split("|")[1].strip() for line in grid[3:7]] == ["+I", "-D", "+I", "+I"]
    assert "<NULL>" in grid[3] and "<NULL>" in grid[4]
    assert _rows(res.to_arrow()) == [(1, "x", 10), (1, "x", 11)]


# ---------------------------------------------------------------- regular joins through SQL vs DuckDB

TROW = st.tuples(st.one_of(st.none(), st.integers(0, 4)), st.integers(-20, 20))


@SETTINGS
@given(left=st.lists(TROW, max_size=25), right=st.lists(TROW, max_size=25),
       how=st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"]),
       extra=st.sampled_from(["", " AND u.y < t.y", " AND u.y > 0"]), batch=st.integers(1, 6),
       seed=st.integers(0, 2**16), parallelism=st.sampled_from([1, 2]))
def test_streaming_joins_final_state_equals_duckdb(left, right, how, extra, batch, seed, parallelism):
    rng = np.random.default_rng(seed)
    # arrival order: a random permutation of each table's rows
    t = pa.table({"id": range(len(left)), "k": pa.array([r[0] for r in left], pa.int64()),
                  "y": pa.array([r[1] for r in left], pa.int64())}).take(rng.permutation(len(left)))
    u = pa.table({"uid": range(len(right)), "k2": pa.array([r[0] for r in right], pa.int64()),
                  "y2": pa.array([r[1] for r in right], pa.int64())}).take(rng.permutation(len(right)))
    t_env = fo.TableEnvironment(mode="streaming", batch_size=batch, parallelism=parallelism)
    t_env.create_temporary_view("t", t_env.from_arrow(t))
    t_env.create_temporary_view("u", t_env.from_arrow(u.rename_columns(["uid", "k", "y"])))
    q = f"SELECT t.id, t.k, t.y, u.uid, u.y AS uy FROM t {how} u ON t.k = u.k{extra}"
    res = t_env.execute_sql(q)
    kinds = {r.get_row_kind() for r in res.collect()}
    assert kinds <= ({"+I"} if how == "JOIN" else {"+I", "-D"})
    con = duckdb.connect()
    con.register("t", t)
    con.register("u", u.rename_columns(["uid", "k", "y"]))
    assert _rows(res.to_arrow()) == _rows(con.sql(q).to_arrow_table())


# ---------------------------------------------------------------- interval joins

def _stream(prefix: str, n: int, rng: np.random.Generator, keys: int = 40) -> pa.Table:
    """``n`` rows 10 ms apart, up to 1 s out of order (never behind a 1 s watermark)."""
    t = np.arange(n, dtype=np.int64) * 10 + rng.integers(0, 1000, n)
    return pa.table({prefix + "k": rng.integers(0, keys, n), prefix + "t": pa.array(t).cast(pa.timestamp("ms")),
                     prefix + "v": np.arange(n)})


@pytest.fixture
def held_rows(monkeypatch):
    """The rows each join instance holds after every input batch."""
    seen: list[int] = []

    class Counting(StreamJoin):
        def process_input(self, input_index, batch):
            out = super().process_input(input_index, batch)
            seen.append(self.held())
            return out

    monkeypatch.setattr(fastops.table.plan, "StreamJoin", Counting)  # where the plan's compiler finds it
    return seen


@pytest.mark.parametrize("how,parallelism", [("JOIN", 1), ("LEFT JOIN", 1), ("RIGHT JOIN", 1), ("FULL JOIN", 1),
                                             ("FULL JOIN", 2)])
def test_interval_join_state_stays_bounded_and_matches_duckdb(how, parallelism, held_rows):
    rng = np.random.default_rng(7)
    n = 15_000
    a, b = _stream("a", n, rng), _stream("b", n, rng)
    t_env = fo.TableEnvironment(mode="streaming", batch_size=250, parallelism=parallelism)
    t_env.create_temporary_view("a", t_env.from_arrow(a, rowtime="at", watermark="1s"))
    t_env.create_temporary_view("b", t_env.from_arrow(b, rowtime="bt", watermark="1s"))
    q = (f"SELECT av, bv, ak FROM a {how} b ON ak = bk "
         "AND a.at BETWEEN b.bt - INTERVAL '2' SECOND AND b.bt + INTERVAL '1' SECOND")
    assert "IntervalJoin" in t_env.sql_query(q).explain()
    res = t_env.execute_sql(q)
    assert {r.get_row_kind() for r in res.collect()} == {"+I"}  # interval joins are insert-only, outer ones too
    con = duckdb.connect()
    con.register("a", a)
    con.register("b", b)
    want = con.sql(q).to_arrow_table()
    assert _rows(res.to_arrow()) == _rows(want)
    # a row is held about 2-3 s of event time (its bound + the 1 s watermark delay):
    # ~300 rows a side at 100 rows/s, plus a batch in flight; 30 000 rows went through
    assert len(held_rows) >= 2 * n // 250
    if parallelism == 1:  # one thread: the two inputs advance together
        assert max(held_rows) < 1_200, max(held_rows)  # per join instance
    else:
        # with threads one source can run ahead of the other (nothing aligns
        # their watermarks), so its rows wait for the slower side's watermark:
        # how long depends on scheduling. State is still dropped as it expires.
        assert max(held_rows) < 2 * n // 4, max(held_rows)


def test_interval_join_table_api_matches_duckdb(held_rows):
    rng = np.random.default_rng(3)
    a, b = _stream("a", 3000, rng, keys=5), _stream("b", 3000, rng, keys=5)
    t_env = fo.TableEnvironment(mode="streaming", batch_size=100)
    ta = t_env.from_arrow(a, rowtime="at", watermark="1s")
    tb = t_env.from_arrow(b, rowtime="bt", watermark="1s")
    cond = ((col("ak") == col("bk")) & (col("bt") >= col("at") - lit(1).seconds)
            & (col("bt") < col("at") + lit(2).seconds))
    t = ta.left_outer_join(tb, cond).select(col("av"), col("bv"))
    assert "IntervalJoin" in t.explain() and "[-1000, 2000]" in t.explain()
    got = t.to_arrow()
    con = duckdb.connect()
    con.register("a", a)
    con.register("b", b)
    q = ("SELECT av, bv FROM a LEFT JOIN b ON ak = bk AND b.bt >= a.at - INTERVAL '1' SECOND "
         "AND b.bt < a.at + INTERVAL '2' SECOND")
    assert _rows(got) == _rows(con.sql(q).to_arrow_table())
    assert max(held_rows) < 2 * 3000 // 3


def test_interval_outer_row_is_emitted_when_the_watermark_passes_its_bound():
    # b.t2 - a.t in [-1000, 2000]: a left row can match right rows up to t + 2000
    op = StreamJoin(["k"], ["k2"], "full outer", pa.schema([("k", pa.int64()), ("t", pa.int64())]),
                    pa.schema([("k2", pa.int64()), ("t2", pa.int64())]), None, (-1000, 2000), ("t", "t2"),
                    incremental=True)
    op.open(None)
    assert op.process_input(0, pa.record_batch({"k": [1, 2], "t": [1000, 1000]})) == []
    assert op.process_input(1, pa.record_batch({"k2": [1], "t2": [2500]}))[0].to_pylist() == [
        {"k": 1, "t": 1000, "k2": 1, "t2": 2500}]
    assert op.on_watermark(2999) == []  # right rows up to t2 = 3000 may still come
    out = op.on_watermark(3000)
    assert [b.to_pylist() for b in out] == [[{"k": 2, "t": 1000, "k2": None, "t2": None}]]
    assert op.held() == 1  # the matched left row is dropped silently, the right row stays until 3500
    assert [b.to_pylist() for b in op.on_watermark(3500)] == []
    assert op.held() == 0
    # a late right row: joined with what is held (nothing), emitted padded at once, not kept
    late = op.process_input(1, pa.record_batch({"k2": [3], "t2": [100]}))
    assert [b.to_pylist() for b in late] == [[{"k": None, "t": None, "k2": 3, "t2": 100}]]
    assert op.held() == 0


def test_join_state_survives_snapshot_and_restore():
    def run(split: bool) -> list:
        op = StreamJoin(["k"], ["k2"], "full outer", LS, RS, None, incremental=True)
        op.open(None)
        out = _changelog(op.process_input(0, pa.record_batch({"k": [1, 2, None], "v": [1, 2, 3]}, schema=LS)))
        out += _changelog(op.process_input(1, pa.record_batch({"k2": [2], "w": [5]}, schema=RS)))
        if split:
            state = op.snapshot()
            op = StreamJoin(["k"], ["k2"], "full outer", LS, RS, None, incremental=True)
            op.open(None)
            op.restore(state)
        out += _changelog(op.process_input(1, pa.record_batch({"k2": [1, 2], "w": [6, 7]}, schema=RS)))
        return out

    want = flink_join_model([(0, (1, 1)), (0, (2, 2)), (0, (None, 3)), (1, (2, 5)), (1, (1, 6)), (1, (2, 7))],
                            "full outer", lambda p: True)
    assert run(False) == want
    got = run(True)
    assert got == want
    assert ("-D", (1, 1, None, None)) in got
    assert ("-D", (2, 2, None, None)) not in got[5:]  # row 2 matched before the snapshot


def test_interval_bounds_are_read_from_the_condition():
    t_env = fo.TableEnvironment(mode="streaming")
    a = t_env.from_arrow(pa.table({"k": [1], "t": pa.array([0], pa.timestamp("ms"))}), rowtime="t", watermark="0s")
    b = t_env.from_arrow(pa.table({"k2": [1], "t2": pa.array([0], pa.timestamp("ms"))}), rowtime="t2",
                         watermark="0s")
    plan = lambda c: a.join(b, (col("k") == col("k2")) & c).explain()
    assert "[-5000, 5000]" in plan(col("t2").between(col("t") - lit(5).seconds, col("t") + lit(5).seconds))
    assert "[-3000, 0]" in plan((col("t") <= col("t2") + lit(3).seconds) & (col("t2") <= col("t")))
    assert "IntervalJoin" not in plan(col("t2") >= col("t"))  # one side unbounded: a regular join
    assert "[0, 0]" in a.join(b, (col("k") == col("k2")) & (col("t") == col("t2"))).explain()


def test_consumers_of_a_streaming_outer_join_and_joins_of_updating_tables_match_duckdb():
    rng = np.random.default_rng(11)
    t = pa.table({"k": rng.integers(0, 6, 40), "a": rng.integers(0, 100, 40)})
    u = pa.table({"k2": rng.integers(2, 9, 30), "b": rng.integers(0, 100, 30)})
    t_env = fo.TableEnvironment(mode="streaming", batch_size=3)
    t_env.create_temporary_view("t", t_env.from_arrow(t))
    t_env.create_temporary_view("u", t_env.from_arrow(u))
    con = duckdb.connect()
    con.register("t", t)
    con.register("u", u)
    for q in [
        # an aggregate / DISTINCT cannot take the join's retractions: the join runs at end of input
        "SELECT k, COUNT(b) AS n, SUM(a) AS sa FROM t LEFT JOIN u ON k = k2 GROUP BY k",
        "SELECT DISTINCT k, k2 FROM t FULL JOIN u ON k = k2",
        # a join of an updating table (a streaming GROUP BY) joins the final rows
        "SELECT g.k, g.s, u.b FROM (SELECT k, SUM(a) AS s FROM t GROUP BY k) AS g JOIN u ON g.k = u.k2",
        "SELECT g.k, g.s, u.b FROM (SELECT k, SUM(a) AS s FROM t GROUP BY k) AS g RIGHT JOIN u ON g.k = u.k2",
    ]:
        assert _rows(t_env.sql_query(q).to_arrow()) == _rows(con.sql(q).to_arrow_table()), q
    rows = t_env.to_data_stream(t_env.sql_query("SELECT k, b FROM t LEFT JOIN u ON k = k2")).collect()
    assert _rows(rows.select(["k", "b"])) == _rows(con.sql("SELECT k, b FROM t LEFT JOIN u ON k = k2").to_arrow_table())


# ---------------------------------------------------------------- the join index vs a naive model

KEY_TYPES = [pa.int64(), pa.dictionary(pa.int32(), pa.string()), pa.float64()]
KEYROW = st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.sampled_from(["", "a", "bb"])),
                   st.sampled_from([0.0, -0.0, 1.5, None]))
STEP = st.tuples(st.integers(0, 1), st.lists(KEYROW, max_size=12), st.integers(0, 40), st.integers(0, 4))


@SETTINGS
@given(steps=st.lists(STEP, max_size=25))
def test_join_index_finds_what_a_naive_scan_finds(steps):
    """Batches arrive on either side; each probes the other side's live rows,
    is held, then rows up to a random time expire. Probes, match counts
    and live rows equal a scan of a plain list, through compactions and key
    id shrinks."""
    keys = JoinKeys(KEY_TYPES)
    sides = (JoinSide(), JoinSide())
    model: tuple[list, list] = ([], [])  # [id, key tuple, time, alive, matches]
    next_id = 0
    for side, rows, horizon, action in steps:
        ids = np.arange(next_id, next_id + len(rows), dtype=np.int64)
        next_id += len(rows)
        ts = ids % 41
        # side 0 has its int key as int32 (cast to the common int64), side 1 its string key dictionary-encoded
        strings = pa.array([r[1] for r in rows], pa.string())
        batch = pa.record_batch([pa.array([r[0] for r in rows], pa.int32() if side == 0 else pa.int64()),
                                 strings if side == 0 else strings.dictionary_encode(),
                                 pa.array([r[2] for r in rows], pa.float64()), pa.array(ids, pa.int64())],
                                names=["a", "s", "f", "id"])
        kid = keys.ids([batch.column(i) for i in range(3)])
        assert ((kid < 0) == np.array([None in r for r in rows], dtype=bool)).all()
        other = sides[1 - side]
        q, hit = other.find(kid)
        got = [[] for _ in rows]
        if len(hit):
            for i, h in zip(q, other.rows.take(hit, ["id"])[0].to_pylist()):
                got[i].append(h)
        want = [[m[0] for m in model[1 - side] if m[3] and None not in r and m[1] == r] for r in rows]
        assert got == want
        other.count_matches(hit)
        for held in model[1 - side]:
            held[4] += sum(held[0] in g for g in got)
        sides[side].add(batch, kid, np.zeros(len(rows), np.int64), ts)
        model[side].extend([i, r, t, True, 0] for i, r, t in zip(ids.tolist(), rows, ts.tolist()))
        # expire rows up to a time, then compact as the join does
        for s, m in zip(sides, model):
            gone = s.expire(horizon)
            assert (s.rows.take(gone, ["id"])[0].to_pylist() if len(gone) else []) == [
                h[0] for h in m if h[3] and h[2] <= horizon]
            for held in m:
                held[3] = held[3] and held[2] > horizon
        if action == 0:
            new = keys.shrink([s.live_ids() for s in sides])
            for s, n in zip(sides, new):
                s.compact(n)
        elif action == 1:
            for s in sides:
                if s.needs_compaction():
                    s.compact()
        for s, m in zip(sides, model):
            live = np.flatnonzero(s.alive.values)
            assert s.live == len(live) == sum(h[3] for h in m)
            if s.num_rows:
                assert s.rows.take(live, ["id"])[0].to_pylist() == [h[0] for h in m if h[3]]
            assert s.matched.values[live].tolist() == [h[4] for h in m if h[3]]
            assert s.index.num_rows == s.num_rows  # every stored row, under its key unless null
            assert len(s.index) == int((s.ids.values >= 0).sum())
    if steps and steps[-1][3] == 0:  # just shrunk: exactly the live keys have ids
        assert keys.num_ids == len({tuple(h[1]) for m in model for h in m if h[3] and None not in h[1]})


def _work_per_batch(n: int, batch: int = 500) -> float:
    """Amortised rows / index entries touched per input batch by a streaming
    left join of 2 x n rows whose keys are new every few batches (so each
    batch has about the same number of matches however many rows are held)."""
    rng = np.random.default_rng(1)
    op = StreamJoin(["k"], ["k2"], "left outer", LS, RS, None, incremental=True)
    op.open(None)
    for i in range(n // batch):
        for side, schema in ((0, LS), (1, RS)):
            k = i // 4 * 1000 + rng.integers(0, 1000, batch)
            op.process_input(side, pa.record_batch([pa.array(k), pa.array(np.arange(batch))], schema=schema))
    assert op.held() == 2 * n
    return op.touched() / (2 * n // batch)


def test_streaming_join_work_per_batch_does_not_grow_with_rows_held():
    small, big = _work_per_batch(8_000), _work_per_batch(128_000)
    # 16x the rows held: the work per batch grows only with the number of
    # chunks of held rows (log of the rows held), nowhere near 16x; a batch probing
    # every held row would touch 64k rows on average here
    assert big < 2 * small, (small, big)
    assert big < 128_000 / 8, big


@pytest.mark.parametrize("restore_every", [0, 37])
def test_interval_join_with_ever_new_keys_keeps_few_key_ids_and_matches_duckdb(restore_every):
    rng = np.random.default_rng(5)
    n, batch = 40_000, 250
    ls = pa.schema([("k", pa.int64()), ("t", pa.int64()), ("v", pa.int64())])
    rs = pa.schema([("k2", pa.int64()), ("t2", pa.int64()), ("w", pa.int64())])
    # row i: time in [10 i, 10 i + 500), key i // 4: 10 000 keys, each live for ~1 s
    a = pa.table([np.arange(n) // 4, np.arange(n) * 10 + rng.integers(0, 500, n), np.arange(n)], schema=ls)
    b = pa.table([np.arange(n) // 4, np.arange(n) * 10 + rng.integers(0, 500, n), np.arange(n)], schema=rs)

    def fresh() -> StreamJoin:
        op = StreamJoin(["k"], ["k2"], "full outer", ls, rs, None, (-1000, 1000), ("t", "t2"), incremental=True)
        op.open(None)
        return op

    op = fresh()
    out, ids, held = [], [], []
    for j, i in enumerate(range(0, n, batch)):
        out += op.process_input(0, a.slice(i, batch).to_batches()[0])
        out += op.process_input(1, b.slice(i, batch).to_batches()[0])
        if restore_every and j % restore_every == 0:  # state taken before the watermark expires rows
            state = op.snapshot()
            op = fresh()
            op.restore(state)
        out += op.on_watermark((i + batch) * 10 - 1)  # no later row has a time below this
        ids.append(op.key_ids.num_ids)
        held.append(op.held())
    out += op.close()
    assert max(held) < 1_000 and max(ids) < 3_000, (max(held), max(ids))
    con = duckdb.connect()
    con.register("a", a)
    con.register("b", b)
    want = con.sql("SELECT k, t, v, k2, t2, w FROM a FULL JOIN b ON k = k2 AND t2 - t BETWEEN -1000 AND 1000")
    got = pa.Table.from_batches(out).select(["k", "t", "v", "k2", "t2", "w"])
    assert _rows(got) == _rows(want.to_arrow_table())


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_joins_on_multi_column_keys_of_mixed_types_match_duckdb(mode):
    rng = np.random.default_rng(4)
    n = 60

    def dec() -> pa.Array:
        return pa.array([decimal.Decimal(int(x)) / 4 for x in rng.integers(0, 4, n)], pa.decimal128(10, 2))

    t = pa.table({"id": range(n), "s": [None if i % 7 == 0 else f"k{i % 5}" for i in range(n)],
                  "i": pa.array(rng.integers(0, 3, n), pa.int32()), "d": dec()})
    u = pa.table({"uid": range(n), "s2": [None if i % 6 == 0 else f"k{i % 4}" for i in range(n)],
                  "i2": pa.array(rng.integers(0, 3, n), pa.int64()), "d2": dec()})
    con = duckdb.connect()
    con.register("t", t)
    con.register("u", u)
    for q in ["SELECT id, uid FROM t LEFT JOIN u ON s = s2 AND i = i2",  # string (nulls) + int32 = int64
              "SELECT id, uid FROM t FULL JOIN u ON d = d2 AND s = s2",  # decimal
              "SELECT id, uid FROM t JOIN u ON i = i2 AND uid > id"]:
        t_env = fo.TableEnvironment(mode=mode, batch_size=7)
        t_env.create_temporary_view("t", t_env.from_arrow(t))
        t_env.create_temporary_view("u", t_env.from_arrow(u))
        assert _rows(t_env.sql_query(q).to_arrow()) == _rows(con.sql(q).to_arrow_table()), q


def test_join_on_keys_of_an_unsupported_type_names_them():
    ls = pa.schema([("k", pa.list_(pa.int64())), ("v", pa.int64())])
    rs = pa.schema([("k2", pa.list_(pa.int64())), ("w", pa.int64())])
    op = StreamJoin(["k"], ["k2"], "inner", ls, rs, None, incremental=True)
    with pytest.raises(TypeError, match=r"'k = k2' has unsupported type list"):
        op.open(None)


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_join_conditions_of_constants_or_pyarrow_expressions_match_duckdb(mode):
    """The condition beyond the keys is evaluated over the columns it names: a
    constant names none, a pyarrow expression's are not known (all are taken)."""
    rng = np.random.default_rng(8)
    t = pa.table({"k": rng.integers(0, 4, 30), "v": rng.integers(0, 10, 30)})
    u = pa.table({"k2": rng.integers(0, 4, 20), "w": rng.integers(0, 10, 20)})
    con = duckdb.connect()
    con.register("t", t)
    con.register("u", u)
    t_env = fo.TableEnvironment(mode=mode, batch_size=4)
    a, b = t_env.from_arrow(t), t_env.from_arrow(u)
    for cond, sql in [(lit(True), "TRUE"), (lit(False), "FALSE"), (lit(None, "boolean"), "NULL"),
                      (pc.field("w") > pc.field("v"), "w > v")]:
        got = a.left_outer_join(b, (col("k") == col("k2")) & cond).to_arrow()
        want = con.sql(f"SELECT k, v, k2, w FROM t LEFT JOIN u ON k = k2 AND {sql}").to_arrow_table()
        assert _rows(got) == _rows(want), sql


def test_join_without_an_equality_between_the_sides_is_refused():
    t_env = fo.TableEnvironment(mode="streaming")
    a = t_env.from_arrow(pa.table({"k": [1], "v": [2]}))
    b = t_env.from_arrow(pa.table({"k2": [1], "w": [3]}))
    for cond in [col("w") > col("v"), (col("k") == col("v")) & (col("w") > 0)]:
        with pytest.raises(fo.table.PlanError, match="no equality between the two sides"):
            a.join(b, cond)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.one_of(st.lists(st.integers(-1, 6), max_size=20).map(lambda k: ("add", k)),
                              st.lists(st.integers(-2, 8), max_size=10).map(lambda k: ("find", k)),
                              st.just(("clear", None))), max_size=12))
def test_key_chains_equal_a_dict_of_lists(ops):
    """KeyChains (the join sides' key index) against a dict key -> rows:
    rows in order within a key, null (negative) keys stored nowhere, keys
    never added found nowhere, ``clear`` restarts the row numbers."""
    chains, model, held = KeyChains(), {}, 0
    for op, keys in ops:
        if op == "add":
            chains.add(np.array(keys, np.int64), held)
            for i, k in enumerate(keys):
                if k >= 0:
                    model.setdefault(k, []).append(held + i)
            held += len(keys)
        elif op == "find":
            q, rows = chains.find(np.array(keys, np.int64))
            want = [(i, r) for i, k in enumerate(keys) for r in model.get(k, [])]
            assert list(zip(q.tolist(), rows.tolist())) == want
        else:
            chains.clear()
            model, held = {}, 0
        assert chains.num_rows == held and len(chains) == sum(map(len, model.values()))
    with pytest.raises(ValueError, match="follow on"):
        chains.add(np.array([1], np.int64), held + 1)


HELD_TYPES = [pa.int8(), pa.uint16(), pa.int64(), pa.float16(), pa.float64(), pa.date32(),
              pa.timestamp("us", tz="UTC"), pa.time64("ns"), pa.duration("ms"), pa.decimal128(9, 2),
              pa.bool_(), pa.string(), pa.large_binary(), pa.list_(pa.int32())]


def _held_column(t: pa.DataType, rows: list) -> pa.Array:
    """A column of type ``t`` with a value made from each row number, null
    for multiples of 5."""
    vals = [None if r % 5 == 0 else r % 100 for r in rows]
    if pa.types.is_floating(t):
        return pa.array([None if v is None else v / 4 for v in vals], pa.float64()).cast(t)
    if pa.types.is_decimal(t):
        return pa.array([None if v is None else decimal.Decimal(v) / 100 for v in vals], t)
    if pa.types.is_boolean(t):
        return pa.array([None if v is None else v % 2 == 0 for v in vals], t)
    if pa.types.is_list(t):
        return pa.array([None if v is None else [v, -v] for v in vals], t)
    if pa.types.is_string(t) or pa.types.is_large_binary(t):
        text = [None if v is None else f"v{v}" for v in vals]
        return pa.array(text if pa.types.is_string(t) else [x and x.encode() for x in text], t)
    storage = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
    return pa.array(vals, storage).view(t)  # numbers, dates, times: their integer storage


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 9), st.booleans()), min_size=1, max_size=6), data=st.data())
def test_held_rows_take_keep_and_to_table_equal_arrow(sizes, data):
    """HeldRows (a join side's rows: numbers as NumPy words, the rest as Arrow
    chunks) against one pyarrow table of the same batches: takes with -1
    (null rows), ``keep`` and ``to_table``, for nulls in every type (in some
    batches only, so validity may start after valid rows were held)."""
    schema = pa.schema([(f"c{j}", t) for j, t in enumerate(HELD_TYPES)])
    held, batches, i = HeldRows(), [], 1
    for n, with_nulls in sizes:
        rows = [i + r for r in range(n)] if with_nulls else [5 * (i + r) + 1 for r in range(n)]
        i += n
        b = pa.record_batch([_held_column(t, rows) for t in HELD_TYPES], schema=schema)
        held.append(b)
        batches.append(b)
    ref = pa.Table.from_batches(batches, schema=schema)
    assert held.num_rows == ref.num_rows
    if ref.num_rows == 0:
        return
    assert held.to_table().equals(ref)
    idx = np.array(data.draw(st.lists(st.integers(-1, ref.num_rows - 1), max_size=15)), np.int64)
    names = data.draw(st.permutations(schema.names))[: data.draw(st.integers(1, len(schema)))]
    got = held.take(idx, names)
    want = ref.select(names).take(pa.array(idx, mask=idx < 0))
    assert [a.to_pylist() for a in got] == [c.to_pylist() for c in want.columns]
    assert [a.type for a in got] == [c.type for c in want.columns]
    keep = np.array(sorted(set(data.draw(st.lists(st.integers(0, ref.num_rows - 1), max_size=8)))), np.int64)
    held.keep(keep)
    assert held.num_rows == len(keep)
    if len(keep):
        assert held.to_table().equals(ref.take(pa.array(keep)))
