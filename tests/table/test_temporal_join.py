"""Temporal joins: ``JOIN versioned FOR SYSTEM_TIME AS OF probe.time ON ...``.

Each probe row joins the version of its key valid at its time (the latest
version at or before it), never every version as a regular join would.
Checked against a reference model written here (per probe row: the version
valid at its time) over random version histories, with disorder within the
watermark bound, random batch splits and parallelisms; Flink's documented
examples give their documented rows; the operator's state survives a
snapshot and restore at any cut, also split over key groups."""
from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core.messages import MAX_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.table import PlanError, SqlError, call, col
from fastops.table.temporal import TemporalJoinOperator

T0 = dt.datetime(2024, 1, 1, 12, 0, 0)

# Flink's "Event Time Temporal Join" example (the "Joins" page), read from header-less CSV files: the
# rates hold the versions the documented result reads (EUR 1.14 until 12:05, 1.10 from then on).
ORDERS = "o_001,11.11,EUR,2024-01-01 12:00:00\no_002,12.51,EUR,2024-01-01 12:06:00\n"
RATES = ("USD,1.00,2024-01-01 09:00:00\nEUR,1.14,2024-01-01 11:45:00\nEUR,1.10,2024-01-01 12:05:00\n"
         "EUR,1.20,2024-01-01 12:10:00\n")
DDL_ORDERS = """CREATE TABLE orders (
    order_id    STRING,
    price       DECIMAL(32,2),
    currency    STRING,
    order_time  TIMESTAMP(3),
    WATERMARK FOR order_time AS order_time - INTERVAL '15' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')"""
DDL_RATES = """CREATE TABLE currency_rates (
    currency STRING,
    conversion_rate DECIMAL(32, 2),
    update_time TIMESTAMP(3),
    WATERMARK FOR update_time AS update_time - INTERVAL '15' SECOND,
    PRIMARY KEY(currency) NOT ENFORCED
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')"""
QUERY = """SELECT
     order_id,
     price,
     orders.currency,
     conversion_rate,
     order_time
FROM orders
{join} JOIN currency_rates FOR SYSTEM_TIME AS OF orders.order_time
ON orders.currency = currency_rates.currency"""


@pytest.fixture(params=["batch", "streaming"])
def t_env(request, tmp_path):
    (tmp_path / "orders.csv").write_text(ORDERS)
    (tmp_path / "rates.csv").write_text(RATES)
    env = fo.TableEnvironment(mode=request.param)
    env.execute_sql(DDL_ORDERS.format(path=tmp_path / "orders.csv"))
    env.execute_sql(DDL_RATES.format(path=tmp_path / "rates.csv"))
    return env


def _rows(result) -> list[tuple]:
    return sorted(tuple(r) for r in result.collect())


@pytest.mark.parametrize("join", ["", "LEFT"])
def test_flink_doc_example_gives_its_documented_rows(t_env, join):
    rows = _rows(t_env.execute_sql(QUERY.format(join=join)))
    assert [(r[0], str(r[1]), r[2], str(r[3]), r[4].strftime("%H:%M:%S")) for r in rows] == [
        ("o_001", "11.11", "EUR", "1.14", "12:00:00"),
        ("o_002", "12.51", "EUR", "1.10", "12:06:00")]
    plan = t_env.explain_sql(QUERY.format(join=join))
    assert "TemporalJoin(joinType=[" + ("LEFT" if join else "INNER") in plan, plan


def test_left_join_pads_a_probe_without_a_version(t_env, tmp_path):
    (tmp_path / "orders.csv").write_text(ORDERS + "o_003,1.00,EUR,2024-01-01 11:00:00\no_004,2.00,GBP,"
                                         "2024-01-01 12:00:00\n")
    inner = _rows(t_env.execute_sql(QUERY.format(join="")))
    left = _rows(t_env.execute_sql(QUERY.format(join="LEFT")))
    assert [r[0] for r in inner] == ["o_001", "o_002"]  # o_003 is older than every EUR version
    assert [(r[0], r[3]) for r in left if r[0] in ("o_003", "o_004")] == [("o_003", None), ("o_004", None)]


def test_a_regular_join_still_matches_every_version(t_env):
    rows = t_env.execute_sql(QUERY.format(join="").replace(
        " FOR SYSTEM_TIME AS OF orders.order_time", "")).to_pandas()
    assert len(rows) == 6


def test_rates_history_example(t_env):
    """The Orders / RatesHistory example of Flink's temporal tables page, with its documented input:
    every order converted with the rate valid at its time."""
    orders = [("10:15", 2, "Euro"), ("10:30", 1, "US Dollar"), ("10:32", 50, "Yen"), ("10:52", 3, "Euro"),
              ("11:04", 5, "US Dollar")]
    rates = [("09:00", "US Dollar", 102), ("09:00", "Euro", 114), ("09:00", "Yen", 1), ("10:45", "Euro", 116),
             ("11:15", "Euro", 119), ("11:49", "Pounds", 108)]

    def ts(hm: str) -> dt.datetime:
        return dt.datetime(2024, 1, 1, int(hm[:2]), int(hm[3:]))

    t_env.create_temporary_view("Orders", t_env.from_elements(
        [(ts(t), a, c) for t, a, c in orders], ["rowtime", "amount", "currency"], rowtime="rowtime", watermark="0s"))
    t_env.create_temporary_view("RatesHistory", t_env.from_elements(
        [(ts(t), c, r) for t, c, r in rates], ["r_rowtime", "r_currency", "rate"], rowtime="r_rowtime",
        watermark="0s"))
    t_env.execute_sql("""CREATE VIEW Rates AS SELECT r_rowtime, r_currency, rate FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY r_currency ORDER BY r_rowtime DESC) AS rownum FROM RatesHistory)
        WHERE rownum = 1""")
    got = t_env.execute_sql("""SELECT o.rowtime, o.amount * r.rate AS amount FROM Orders AS o
        JOIN Rates FOR SYSTEM_TIME AS OF o.rowtime AS r ON r.r_currency = o.currency""")
    assert [(r[0].strftime("%H:%M"), r[1]) for r in _rows(got)] == [
        ("10:15", 228), ("10:30", 102), ("10:32", 50), ("10:52", 348), ("11:04", 510)]


def test_lookup_join_against_a_side_input(tmp_path):
    """Nexmark q13's shape: a stream joined with a bounded table read whole (AS OF a column
    that is not an event-time attribute: the current rows), on an expression of the probe."""
    (tmp_path / "side.csv").write_text("".join(f"{k},v{k}\n" for k in range(0, 10, 2)) + "4,w4\n")
    bids = pa.table({"auction": pa.array([1, 2, 4, 14, 7, 12], pa.int64()),
                     "price": pa.array([10, 20, 30, 40, 50, 60], pa.int64())})
    for mode in ("batch", "streaming"):
        env = fo.TableEnvironment(mode=mode, batch_size=2)
        env.execute_sql(f"CREATE TABLE side_input (key BIGINT, `value` VARCHAR) WITH ('connector' = 'filesystem', "
                        f"'path' = '{tmp_path / 'side.csv'}', 'format' = 'csv')")
        env.create_temporary_view("bid", env.from_arrow(bids))
        q = """SELECT B.auction, B.price, S.`value` FROM (SELECT *, auction AS p_time FROM bid) B
               JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S ON mod(B.auction, 10) = S.key"""
        assert "LookupJoin(table=[side_input]" in env.explain_sql(q) and "lookup=[at start]" in env.explain_sql(q)
        got = _rows(env.execute_sql(q))
        want = sorted((a, p, v) for a, p in zip(bids["auction"].to_pylist(), bids["price"].to_pylist())
                      for k, v in [(k, f"v{k}") for k in range(0, 10, 2)] + [(4, "w4")] if a % 10 == k)
        assert got == want
        left = _rows(env.execute_sql(q.replace("JOIN side_input", "LEFT JOIN side_input")))
        assert (1, 10, None) in left and (7, 50, None) in left and len(left) == len(want) + 2


def test_lookup_join_with_a_primary_key_reads_the_current_row(tmp_path):
    (tmp_path / "dim.csv").write_text("1,a\n2,b\n1,c\n")
    env = fo.TableEnvironment(mode="streaming")
    env.execute_sql(f"CREATE TABLE dim (k BIGINT, v STRING, PRIMARY KEY (k) NOT ENFORCED) WITH ("
                    f"'connector' = 'filesystem', 'path' = '{tmp_path / 'dim.csv'}', 'format' = 'csv')")
    env.create_temporary_view("s", env.from_elements([(1, 0), (2, 0), (3, 0)], ["id", "pt"]))
    got = _rows(env.execute_sql("SELECT id, v FROM s LEFT JOIN dim FOR SYSTEM_TIME AS OF s.pt ON s.id = dim.k"))
    assert got == [(1, "c"), (2, "b"), (3, None)]


def test_unsupported_forms_are_refused(t_env):
    with pytest.raises(SqlError, match=r"a temporal join is INNER or LEFT.*at line \d+, column \d+"):
        t_env.sql_query(QUERY.format(join="FULL"))
    with pytest.raises(SqlError, match=r"time travel"):
        t_env.sql_query("SELECT * FROM currency_rates FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00'")
    with pytest.raises(SqlError, match=r"must join on the primary key of currency_rates \(currency\)"):
        t_env.sql_query(QUERY.format(join="").replace("orders.currency = currency_rates.currency",
                                                      "orders.order_id = currency_rates.currency || 'x'"))


def test_a_versioned_table_needs_a_primary_key(t_env, tmp_path):
    t_env.execute_sql(DDL_RATES.replace("currency_rates", "nokey").replace(",\n    PRIMARY KEY(currency) NOT "
                                                                            "ENFORCED", "")
                      .format(path=tmp_path / "rates.csv"))
    with pytest.raises(SqlError) as info:
        t_env.sql_query(QUERY.format(join="").replace("currency_rates", "nokey"))
    assert re.search(r"needs a primary key on nokey .*time attribute 'update_time'", str(info.value)), info.value


# ---------------------------------------------------------------- reference model, random histories

def reference(probes: list, versions: list, how: str, dedup: bool) -> list:
    """Per probe (key, time, id): the version of its key valid at its time. ``versions``
    in arrival order (key, time, value); with ``dedup`` a version older than an earlier
    one of its key is none (a keep-last deduplication drops it)."""
    kept, latest = [], {}
    for k, t, v in versions:
        if dedup and t < latest.get(k, -2**62):
            continue
        latest[k] = max(t, latest.get(k, -2**62))
        kept.append((k, t, v))
    out = []
    for k, t, pid in probes:
        best = None
        for i, (vk, vt, v) in enumerate(kept):
            if vk == k and vt <= t and (best is None or (vt, i) >= (best[0], best[1])):
                best = (vt, i, v)
        if best is not None:
            out.append((pid, k, best[2]))
        elif how == "LEFT":
            out.append((pid, k, None))
    return sorted(out, key=lambda r: r[0])


def _disordered(rng: np.random.Generator, n: int, span: int, bound: int) -> np.ndarray:
    """``n`` times in [0, span) arriving out of order by less than ``bound`` ms."""
    t = np.sort(rng.integers(0, span, n))
    return (t + rng.integers(0, bound, n)) if n else t


@st.composite
def histories(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_keys = draw(st.integers(1, 4))
    nv, npr = draw(st.integers(0, 30)), draw(st.integers(0, 30))
    bound = 50
    vt = _disordered(rng, nv, 1000, bound)
    pt = _disordered(rng, npr, 1000, bound)
    versions = [(int(k), int(t), int(i)) for i, (k, t) in enumerate(zip(rng.integers(0, n_keys, nv), vt))]
    probes = [(int(k), int(t), i) for i, (k, t) in enumerate(zip(rng.integers(0, n_keys, npr), pt))]
    return versions, probes, bound


def _ts(ms: list) -> pa.Array:
    return pa.array(np.asarray(ms, dtype="int64"), pa.int64()).cast(pa.timestamp("ms"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(h=histories(), how=st.sampled_from(["", "LEFT"]), dedup=st.booleans(), batch=st.integers(1, 12),
       parallelism=st.sampled_from([1, 2]), mode=st.sampled_from(["streaming", "batch"]))
def test_random_histories_match_the_reference(tmp_path, h, how, dedup, batch, parallelism, mode):
    versions, probes, bound = h
    env = fo.TableEnvironment(mode=mode, parallelism=parallelism, batch_size=batch)
    probe_t = pa.table({"pid": pa.array([p[2] for p in probes], pa.int64()),
                        "pk": pa.array([p[0] for p in probes], pa.int64()), "pt": _ts([p[1] for p in probes])})
    ver_t = pa.table({"vk": pa.array([v[0] for v in versions], pa.int64()), "vt": _ts([v[1] for v in versions]),
                      "val": pa.array([v[2] for v in versions], pa.int64())})
    env.create_temporary_view("p", env.from_arrow(probe_t, rowtime="pt", watermark=f"{bound}ms"))
    if dedup:
        env.create_temporary_view("raw", env.from_arrow(ver_t, rowtime="vt", watermark=f"{bound}ms"))
        env.execute_sql("CREATE VIEW v AS SELECT vk, vt, val FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY vk "
                        "ORDER BY vt DESC) AS rn FROM raw) WHERE rn = 1")
    else:
        path = tmp_path / f"v{np.random.randint(1 << 30)}.parquet"
        pq.write_table(ver_t, path)
        env.execute_sql(f"CREATE TABLE v (vk BIGINT, vt TIMESTAMP(3), val BIGINT, WATERMARK FOR vt AS vt - "
                        f"INTERVAL '{bound / 1000}' SECOND, PRIMARY KEY (vk) NOT ENFORCED) WITH ("
                        f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet')")
    got = env.execute_sql(f"SELECT pid, pk, val FROM p {how} JOIN v FOR SYSTEM_TIME AS OF p.pt ON p.pk = v.vk")
    rows = sorted((tuple(r) for r in got.collect()), key=lambda r: r[0])
    assert rows == reference(probes, versions, how or "INNER", dedup)


# ---------------------------------------------------------------- the operator: state and restore

LS = pa.schema([("pk", pa.int64()), ("pt", pa.int64()), ("pid", pa.int64())])
RS = pa.schema([("vk", pa.int64()), ("vt", pa.int64()), ("val", pa.int64())])


def _op(how: str = "left outer", dedup: bool = False) -> TemporalJoinOperator:
    return TemporalJoinOperator(["pk"], ["vk"], how, LS, RS, ("pt", "vt"), None, dedup, True)


def _events(versions: list, probes: list, bound: int, rng: np.random.Generator) -> list:
    """(input, batch) and ('wm', t) events: both inputs interleaved in small batches, each
    followed by the watermark both inputs reached."""
    ev: list = []
    i = j = 0
    seen = [-(2**62), -(2**62)]
    while i < len(versions) or j < len(probes):
        side = 0 if j < len(probes) and (i >= len(versions) or rng.random() < 0.5) else 1
        n = int(rng.integers(1, 4))
        rows = (probes[j:j + n] if side == 0 else versions[i:i + n])
        if side == 0:
            j += n
            ev.append((0, pa.record_batch([pa.array([r[0] for r in rows], pa.int64()),
                                           pa.array([r[1] for r in rows], pa.int64()),
                                           pa.array([r[2] for r in rows], pa.int64())], schema=LS)))
        else:
            i += n
            ev.append((1, pa.record_batch([pa.array([r[0] for r in rows], pa.int64()),
                                           pa.array([r[1] for r in rows], pa.int64()),
                                           pa.array([r[2] for r in rows], pa.int64())], schema=RS)))
        seen[side] = max(seen[side], max(r[1] for r in rows))
        ev.append(("wm", min(seen[0] if j < len(probes) else 2**62, seen[1] if i < len(versions) else 2**62)
                   - bound))
    return ev


def _run(ops: list, events: list, owner) -> list:
    out: list = []
    for kind, x in events:
        if kind == "wm":
            for op in ops:
                out += op.on_watermark(x)
            continue
        col = x.column(0).to_numpy()
        for k, op in enumerate(ops):
            part = x.filter(pa.array(owner(col) == k))
            if part.num_rows:
                out += op.process_input(kind, part)
    for op in ops:
        out += op.on_watermark(MAX_WATERMARK)
    return sorted(r for b in out for r in zip(*(c.to_pylist() for c in b.select(["pid", "pk", "val"]).columns)))


@settings(max_examples=30, deadline=None)
@given(h=histories(), cut=st.floats(0, 1), dedup=st.booleans(), how=st.sampled_from(["inner", "left outer"]))
def test_snapshot_and_restore_at_any_cut_also_split_over_key_groups(h, cut, dedup, how):
    versions, probes, bound = h
    ev = _events(versions, probes, bound, np.random.default_rng(len(versions) * 31 + len(probes)))
    whole = _run([_op(how, dedup)], ev, lambda c: np.zeros(len(c), int))
    want = reference([(k, t, i) for k, t, i in probes], versions, "LEFT" if how == "left outer" else "INNER", dedup)
    assert whole == sorted(want)
    at = int(cut * len(ev))
    first = _op(how, dedup)
    before = _run_part([first], ev[:at], lambda c: np.zeros(len(c), int))
    state = first.snapshot()
    again = _op(how, dedup)
    again.restore(state)
    assert sorted(before + _run([again], ev[at:], lambda c: np.zeros(len(c), int))) == whole
    # rescaled to two tasks: each keeps the keys of its key groups
    groups = [KeyGroups(np.arange(128) % 2 == part) for part in (0, 1)]
    halves = [_op(how, dedup), _op(how, dedup)]
    for op, g in zip(halves, groups):
        op.restore_groups([state], g)

    def owner(col: np.ndarray) -> np.ndarray:
        return np.where(groups[0].mask(pa.table({"k": pa.array(col, pa.int64())}), ["k"]), 0, 1)

    assert sorted(before + _run(halves, ev[at:], owner)) == whole


def _run_part(ops: list, events: list, owner) -> list:
    out: list = []
    for kind, x in events:
        if kind == "wm":
            for op in ops:
                out += op.on_watermark(x)
        else:
            out += ops[0].process_input(kind, x)
    return sorted(r for b in out for r in zip(*(c.to_pylist() for c in b.select(["pid", "pk", "val"]).columns)))


def test_versions_no_probe_can_need_are_dropped():
    op = _op("inner")
    op.process_input(1, pa.record_batch([pa.array([1] * 5, pa.int64()), pa.array([10, 20, 30, 40, 50], pa.int64()),
                                         pa.array(range(5), pa.int64())], schema=RS))
    assert op.held() == 5
    op.on_watermark(35)  # 30 is the version a probe later than 35 may need; 10 and 20 are gone
    assert sorted(op.ts[1].tolist()) == [30, 40, 50]
    op.process_input(0, pa.record_batch([pa.array([1], pa.int64()), pa.array([36], pa.int64()),
                                         pa.array([7], pa.int64())], schema=LS))
    assert op.on_watermark(36)[0].column("val").to_pylist() == [2]


def test_table_api_temporal_table_function(t_env):
    """PyFlink's create_temporal_table_function / join_lateral: the same rows as SQL's
    FOR SYSTEM_TIME AS OF (the RatesHistory example, its documented input)."""
    orders = t_env.from_elements([(T0 + dt.timedelta(minutes=m), a, c) for m, a, c in
                                  [(15, 2, "Euro"), (30, 1, "US Dollar"), (32, 50, "Yen"), (52, 3, "Euro"),
                                   (64, 5, "US Dollar"), (1, 7, "Pounds")]],
                                 ["o_time", "amount", "currency"], rowtime="o_time", watermark="0s")
    history = t_env.from_elements([(T0 + dt.timedelta(minutes=m), c, r) for m, c, r in
                                   [(0, "US Dollar", 102), (0, "Euro", 114), (0, "Yen", 1), (45, "Euro", 116),
                                    (75, "Euro", 119), (109, "Pounds", 108)]],
                                  ["r_time", "r_currency", "rate"], rowtime="r_time", watermark="0s")
    rates = history.create_temporal_table_function(col("r_time"), col("r_currency"))
    t_env.create_temporary_system_function("rates", rates)
    inner = orders.join_lateral(rates(col("o_time")), col("currency") == col("r_currency")) \
        .select(col("amount") * col("rate"))
    assert sorted(r[0] for r in inner.execute().collect()) == [50, 102, 228, 348, 510]
    left = orders.left_outer_join_lateral(call(rates, col("o_time")),
                                          col("currency") == col("r_currency"))
    assert sorted((r[2], r[4]) for r in left.execute().collect() if r[2] == "Pounds") == [("Pounds", None)]
    with pytest.raises(PlanError, match="no column 'nope'"):
        history.create_temporal_table_function(col("r_time"), col("nope"))
