"""PyFlink's Table API points: column access (``t.a``, ``t["a"]``), the
row-based operations (``map``, ``flat_map``, ``aggregate``,
``flat_aggregate`` with ``udtaf``), row-wise ``AggregateFunction``,
``get_schema()`` as a TableSchema, ``collect()`` as a closeable iterator, and
PyFlink's ``Row``.

- Random tables cut into random batches, batch and streaming mode,
  parallelism 1 and 2: each operation's rows equal a pure-Python reference;
  in streaming mode the changelog is valid (every ``-U`` / ``-D`` retracts a
  row emitted before and still held) and the rows it leaves equal the
  reference.
- PyFlink's documented examples (the row-based operations page, the UDF
  page) with their documented output grids.
"""
from __future__ import annotations

import pickle
from collections import Counter, defaultdict

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.table import (
    AggregateFunction,
    DataTypes,
    EnvironmentSettings,
    Row,
    Session,
    TableAggregateFunction,
    Tumble,
    col,
    udaf,
    udf,
    udtaf,
    udtf,
)
from fastops.table.plan import PlanError
from fastops.table.rowops import RowAggregateOperator, aggregate_of, flat_aggregate_of
from support.restore import assert_restores_at
from support.sql_diff import applied, changelog_of

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROW = st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(-20, 20)), st.sampled_from(["a", "bb", "", "c d"]))
ROWS = st.lists(ROW, min_size=0, max_size=30)
SCHEMA = [("k", "BIGINT"), ("v", "BIGINT"), ("s", "STRING")]
MODES = st.sampled_from(["batch", "streaming"])
PARALLELISM = st.sampled_from([1, 2])
BATCH = st.integers(1, 8)


def _env(mode: str, batch: int = 65536, parallelism: int = 1) -> fo.TableEnvironment:
    return fo.TableEnvironment(mode=mode, batch_size=batch, parallelism=parallelism)


def _table(t_env: fo.TableEnvironment, rows: list[tuple]) -> fo.Table:
    return t_env.from_elements(rows, SCHEMA) if rows else t_env.from_arrow(
        pa.table({"k": pa.array([], pa.int64()), "v": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))


def _key(row: tuple) -> tuple:
    return tuple((v is None, v) for v in row)


def _final(result) -> list[tuple]:
    return sorted(applied(changelog_of(result)).elements(), key=_key)


def _same(got: list[tuple], ref: list[tuple]) -> None:
    assert sorted(got, key=_key) == sorted(ref, key=_key)


# ---------------------------------------------------------------- the functions under test

@udf(result_type="ROW<k BIGINT, w BIGINT, t STRING>")
def _twice(k, v, s):
    return Row(k, None if v is None else 2 * v, s.upper())


@udf(result_type="ROW<k BIGINT, w BIGINT, t STRING>")
def _twice_row(r: Row):
    return Row(r.k, None if r.v is None else 2 * r["v"], r[2].upper())


@udf(result_type="ROW<k BIGINT, w BIGINT, t STRING>", func_type="pandas")
def _twice_pandas(df):
    return pd.DataFrame({"k": df.k, "w": df.v * 2, "t": df.s.str.upper()})


def _twice_ref(rows):
    return [(k, None if v is None else 2 * v, s.upper()) for k, v, s in rows]


@udtf(result_types=["BIGINT", "BIGINT"])
def _repeat(k, v):
    for i in range(0 if v is None else v % 3):
        yield k, i


@udtf(result_types=["BIGINT", "BIGINT"])
def _repeat_row(r: Row):
    for i in range(0 if r.v is None else r.v % 3):
        yield Row(r.k, i)


def _repeat_ref(rows):
    return [(k, i) for k, v, _ in rows for i in range(0 if v is None else v % 3)]


class CountAndSum(AggregateFunction):
    """PyFlink's documented CountAndSumAggregateFunction, over a Row of all columns."""

    def create_accumulator(self):
        return Row(0, 0)

    def accumulate(self, acc, row):
        acc[0] += 1
        acc[1] += row.v or 0

    def retract(self, acc, row):
        acc[0] -= 1
        acc[1] -= row.v or 0

    def merge(self, acc, accs):
        for other in accs:
            acc[0] += other[0]
            acc[1] += other[1]

    def get_value(self, acc):
        return Row(acc[0], acc[1])

    def get_result_type(self):
        return "ROW<n BIGINT, total BIGINT>"


class MinMax(AggregateFunction):
    """Over one argument (nulls skipped): the least and greatest value."""

    def create_accumulator(self):
        return [None, None]

    def accumulate(self, acc, v):
        if v is not None:
            acc[0] = v if acc[0] is None else min(acc[0], v)
            acc[1] = v if acc[1] is None else max(acc[1], v)

    def get_value(self, acc):
        return tuple(acc)


class Top2(TableAggregateFunction):
    """PyFlink's documented Top2, over a column ``v`` of the Row."""

    def create_accumulator(self):
        return [None, None]

    def accumulate(self, acc, row):
        v = row.v
        if v is not None:
            if acc[0] is None or v > acc[0]:
                acc[1] = acc[0]
                acc[0] = v
            elif acc[1] is None or v > acc[1]:
                acc[1] = v

    def emit_value(self, acc):
        yield Row(acc[0])
        yield Row(acc[1])

    def get_result_type(self):
        return "ROW<top BIGINT>"


class TopValues(TableAggregateFunction):
    """The values of one argument, greatest first, at most ``n`` (a scalar result type)."""

    def __init__(self, n: int = 2):
        self.n = n

    def create_accumulator(self):
        return []

    def accumulate(self, acc, v):
        if v is not None:
            acc.append(v)

    def retract(self, acc, v):
        if v is not None:
            acc.remove(v)

    def emit_value(self, acc):
        yield from sorted(acc, reverse=True)[: self.n]


def _groups(rows):
    g = defaultdict(list)
    for k, v, s in rows:
        g[k].append((v, s))
    return g


def _top2_ref(rows):
    out = []
    for k, vals in _groups(rows).items():
        vs = sorted((v for v, _ in vals if v is not None), reverse=True)[:2]
        vs += [None] * (2 - len(vs))
        out += [(k, v) for v in vs]
    return out


# ---------------------------------------------------------------- column access

def test_column_access_by_attribute_and_item():
    t_env = _env("batch")
    t = t_env.from_elements([(1, "Hi", 3), (2, "Hello", 4)], ["id", "data", "select"])
    got = t.where(t.id > 1).select(t["data"], (t.id * 10).alias("x"), t["select"]).to_pandas()
    assert got.values.tolist() == [["Hello", 20, 4]]
    grouped = t.group_by(t.data).select(t.data, t.id.sum.alias("n")).to_pandas()
    assert sorted(grouped.values.tolist()) == [["Hello", 2], ["Hi", 1]]
    assert callable(t.select)  # a column named like a method is reached by t["select"]
    with pytest.raises(AttributeError, match=r"no column named 'nope' \(columns: id, data, select\)"):
        t.nope  # noqa: B018
    with pytest.raises(KeyError, match=r"no column named 'nope'"):
        t["nope"]
    assert not hasattr(t, "nope")


# ---------------------------------------------------------------- map / flat_map

@SETTINGS
@given(rows=ROWS, mode=MODES, batch=BATCH, parallelism=PARALLELISM)
def test_map_against_python(rows, mode, batch, parallelism):
    t = _table(_env(mode, batch, parallelism), rows)
    ref = _twice_ref(rows)
    for mapped in (t.map(_twice(col("k"), t.v, t.s)), t.map(_twice_row)):
        assert mapped.get_schema().get_field_names() == ["k", "w", "t"]
        _same(_final(mapped.execute()), ref)
    if rows and all(v is not None for _, v, _ in rows):  # a pandas frame of all-int values stays BIGINT
        _same(_final(t.map(_twice_pandas).execute()), ref)
    renamed = t.map(_twice_row).alias("a", "b", "c")
    assert renamed.get_schema().get_field_names() == ["a", "b", "c"]


@SETTINGS
@given(rows=ROWS, mode=MODES, batch=BATCH, parallelism=PARALLELISM)
def test_flat_map_against_python(rows, mode, batch, parallelism):
    t = _table(_env(mode, batch, parallelism), rows)
    ref = _repeat_ref(rows)
    for out in (t.flat_map(_repeat(t.k, t.v)), t.flat_map(_repeat_row)):
        assert out.get_schema().get_field_names() == ["f0", "f1"]
        _same(_final(out.execute()), ref)
    named = t.flat_map(_repeat(t.k, t.v).alias("key", "i")).select(col("i"), col("key"))
    _same(_final(named.execute()), [(i, k) for k, i in ref])


def test_map_of_a_scalar_result_and_wrong_use():
    t = _env("batch").from_elements([(1, "a")], ["id", "s"])
    plus = udf(lambda x: x + 1, result_type="BIGINT")
    assert [tuple(r) for r in t.map(plus(t.id)).execute().collect()] == [(2,)]
    assert t.map(plus(t.id)).get_schema().get_field_names() == ["_c0"]
    with pytest.raises(TypeError, match="map\\(\\) takes a scalar UDF"):
        t.map(col("id") + 1)
    with pytest.raises(PlanError, match="1 names \\['x'\\] for the 3 columns"):
        t.map(_twice_row.alias("x"))


# ---------------------------------------------------------------- aggregate / flat_aggregate

@SETTINGS
@given(rows=ROWS, mode=MODES, batch=BATCH, parallelism=PARALLELISM)
def test_aggregate_against_python(rows, mode, batch, parallelism):
    t = _table(_env(mode, batch, parallelism), rows)
    agg = udaf(CountAndSum())
    got = t.group_by(t.k).aggregate(agg.alias("c", "d")).select(col("k"), col("c"), col("d"))
    ref = [(k, len(vals), sum(v or 0 for v, _ in vals)) for k, vals in _groups(rows).items()]
    _same(_final(got.execute()), ref)
    # with arguments, a tuple result, and the names of the result type
    mm = udaf(MinMax(), result_type="ROW<lo BIGINT, hi BIGINT>")
    got = t.group_by(t.k).aggregate(mm(t.v)).select("*")
    assert got.get_schema().get_field_names() == ["k", "lo", "hi"]
    ref = []
    for k, vals in _groups(rows).items():
        vs = [v for v, _ in vals if v is not None]
        ref.append((k, min(vs) if vs else None, max(vs) if vs else None))
    _same(_final(got.execute()), ref)
    # over the whole table: one row (batch mode: also over no rows, as SQL's global aggregate)
    whole = t.aggregate(agg.alias("c", "d")).select(col("d"), col("c"))
    expect = [(sum(v or 0 for _, v, _ in rows), len(rows))] if rows or mode == "batch" else []
    _same(_final(whole.execute()), expect)


@SETTINGS
@given(rows=ROWS, mode=MODES, batch=BATCH, parallelism=PARALLELISM)
def test_flat_aggregate_against_python(rows, mode, batch, parallelism):
    t = _table(_env(mode, batch, parallelism), rows)
    got = t.group_by(t.k).flat_aggregate(udtaf(Top2())).select(col("k"), col("top"))
    result = got.execute()
    _same(_final(result), _top2_ref(rows))
    if mode == "streaming":  # a group's earlier rows are deleted before its new ones are inserted
        kinds = {r.get_row_kind() for r in got.execute().collect()}
        assert kinds <= {"+I", "-D"}
    # arguments, a scalar result type (column f0), a computed key
    top = udtaf(TopValues(3), result_type="BIGINT")
    got = t.group_by((t.k % 2).alias("p")).flat_aggregate(top(t.v).alias("x")).select("*")
    assert got.get_schema().get_field_names() == ["p", "x"]
    ref = []
    parts = defaultdict(list)
    for k, v, _ in rows:
        parts[k % 2].append(v)
    for p, vs in parts.items():
        ref += [(p, v) for v in sorted((v for v in vs if v is not None), reverse=True)[:3]]
    _same(_final(got.execute()), ref)
    flat = t.flat_aggregate(udtaf(Top2()).alias("best")).select(col("best"))
    vs = sorted((v for _, v, _ in rows if v is not None), reverse=True)[:2]
    expect = [(v,) for v in vs + [None] * (2 - len(vs))] if rows else []
    _same(_final(flat.execute()), expect)


@SETTINGS
@given(rows=st.lists(ROW, min_size=1, max_size=30), batch=BATCH, parallelism=PARALLELISM)
def test_aggregates_of_an_updating_table_retract(rows, batch, parallelism):
    """A GROUP BY's changelog fed to aggregate / flat_aggregate: ``retract`` is called
    for its ``-U`` rows; the final rows equal the batch answer."""
    t_env = _env("streaming", batch, parallelism)
    t = _table(t_env, rows)
    counts = t.group_by(t.k).select(t.k, t.v.count.alias("v"), t.s.max.alias("s"))  # updating
    per_k = {k: sum(v is not None for v, _ in vals) for k, vals in _groups(rows).items()}
    got = counts.group_by(col("s")).aggregate(udaf(CountAndSum()).alias("n", "total")).select("*")
    ref_rows = [(k, per_k[k], max(s for _, s in vals)) for k, vals in _groups(rows).items()]
    ref = defaultdict(lambda: [0, 0])
    for _, v, s in ref_rows:
        ref[s][0] += 1
        ref[s][1] += v
    _same(_final(got.execute()), [(s, n, tot) for s, (n, tot) in ref.items()])
    top = udtaf(TopValues(2), result_type="BIGINT")
    got = counts.flat_aggregate(top(col("v"))).select("*")
    _same(_final(got.execute()), [(v,) for v in sorted((v for _, v, _ in ref_rows), reverse=True)[:2]])
    with pytest.raises(PlanError, match="needs a retract\\(\\) method"):
        counts.flat_aggregate(udtaf(Top2())).select("*")


@SETTINGS
@given(rows=ROWS, sizes=st.lists(st.integers(1, 6), max_size=8), cut=st.integers(0, 10), table_agg=st.booleans())
def test_row_aggregate_state_survives_restore(rows, sizes, cut, table_agg):
    """A snapshot taken at any cut, restored (also split over key groups), gives the same output."""
    node = _table(_env("streaming"), rows)._node
    plan = (flat_aggregate_of(node, [col("k")], udtaf(Top2()), True) if table_agg else
            aggregate_of(node, [col("k")], udaf(CountAndSum()), True))
    make = lambda: RowAggregateOperator(plan.keys, plan.impl, plan.args, plan.row_columns, plan.result_fields,
                                        table_agg, True, plan.schema, plan.fn_name, plan.row_result)
    batches, at = [], 0
    for n in sizes + [len(rows)]:
        if rows[at:at + n]:
            batches.append(pa.RecordBatch.from_pylist(
                [dict(zip(["k", "v", "s"], r)) for r in rows[at:at + n]],
                schema=pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string())])))
        at += n
    cut = min(cut, len(batches))
    assert_restores_at(make, batches, cut, ["k"])


def test_aggregate_select_refuses_aggregates_and_window():
    t = _env("batch").from_elements([(1, 2)], ["a", "b"])
    agg = udaf(CountAndSum())
    with pytest.raises(PlanError, match="takes no aggregate functions"):
        t.group_by(t.a).aggregate(agg).select(col("n").sum)
    with pytest.raises(PlanError, match="clashes with a grouping key"):
        t.group_by(t.a).aggregate(agg.alias("a", "x"))
    w = Tumble.over("1 s").on(col("b")).alias("w")
    with pytest.raises(PlanError, match="over a group window is not supported"):
        t.window(w).group_by(col("w")).aggregate(agg)


# ---------------------------------------------------------------- row-wise AggregateFunction

class WeightedAvg(AggregateFunction):
    """PyFlink's documented WeightedAvg, unchanged."""

    def create_accumulator(self):
        return Row(0, 0)

    def get_value(self, accumulator):
        if accumulator[1] == 0:
            return None
        return accumulator[0] / accumulator[1]

    def accumulate(self, accumulator, value, weight):
        accumulator[0] += value * weight
        accumulator[1] += weight

    def retract(self, accumulator, value, weight):
        accumulator[0] -= value * weight
        accumulator[1] -= weight

    def merge(self, accumulator, accumulators):
        for other in accumulators:
            accumulator[0] += other[0]
            accumulator[1] += other[1]

    def get_result_type(self):
        return DataTypes.DOUBLE()

    def get_accumulator_type(self):
        return DataTypes.ROW([DataTypes.FIELD("f0", DataTypes.BIGINT()), DataTypes.FIELD("f1", DataTypes.BIGINT())])


@SETTINGS
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 5), st.integers(1, 4), st.integers(0, 5000)),
                     min_size=1, max_size=30), mode=MODES, batch=BATCH)
def test_row_wise_udaf_in_group_by_sql_and_session_windows(rows, mode, batch):
    t_env = _env(mode, batch)
    t = t_env.from_elements(rows, [("k", "BIGINT"), ("v", "BIGINT"), ("w", "BIGINT"), ("ts", "BIGINT")])
    wavg = udaf(WeightedAvg())
    got = dict(tuple(r) for r in t.group_by(t.k).select(t.k, wavg(t.v, t.w).alias("m")).to_pandas().values)
    sums: dict = defaultdict(lambda: [0, 0])
    for k, v, w, _ in rows:
        sums[k][0] += v * w
        sums[k][1] += w
    assert set(got) == set(sums)
    for k, (vw, w) in sums.items():
        assert got[k] == pytest.approx(vw / w)
    t_env.create_temporary_function("weighted_avg", WeightedAvg())
    t_env.create_temporary_view("src", t)
    sql = t_env.execute_sql("SELECT k, weighted_avg(v, w) AS m FROM src GROUP BY k").to_pandas()
    assert {k: pytest.approx(m) for k, m in sql.values} == {k: vw / w for k, (vw, w) in sums.items()}
    # session windows merge accumulators (PyFlink's merge(acc, accumulators))
    s = t.window(Session.with_gap(1000).on(col("ts")).alias("sw")).group_by(col("sw"), t.k) \
        .select(t.k, col("sw").start.alias("ws"), wavg(t.v, t.w).alias("m")).to_pandas()
    ref = []
    for k in {r[0] for r in rows}:
        pts = sorted((ts, v, w) for kk, v, w, ts in rows if kk == k)
        sessions: list[list] = []
        for ts, v, w in pts:
            if sessions and ts - sessions[-1][-1][0] < 1000:
                sessions[-1].append((ts, v, w))
            else:
                sessions.append([(ts, v, w)])
        for sess in sessions:
            ref.append((k, sum(v * w for _, v, w in sess) / sum(w for _, _, w in sess)))
    got_s = sorted((int(k), float(m)) for k, m in zip(s.k, s.m))
    assert len(got_s) == len(ref)
    for (gk, gm), (rk, rm) in zip(got_s, sorted(ref)):
        assert gk == rk and gm == pytest.approx(rm)


class CountNulls(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def accumulate(self, acc, v):
        acc[0] += 1
        acc[1] += v is None

    def get_value(self, acc):
        return Row(*acc)


@SETTINGS
@given(rows=ROWS, mode=MODES, batch=BATCH)
def test_row_wise_udaf_sees_null_values(rows, mode, batch):
    """PyFlink calls accumulate for every row, a NULL value as None (one argument too)."""
    t_env = _env(mode, batch)
    t = _table(t_env, rows)
    c = udaf(CountNulls(), result_type="ROW<n BIGINT, nulls BIGINT>")
    got = t.group_by(t.k).select(t.k, c(t.v).alias("r")).to_arrow().to_pylist()
    ref = {k: {"n": len(vals), "nulls": sum(v is None for v, _ in vals)} for k, vals in _groups(rows).items()}
    assert {r["k"]: r["r"] for r in got} == ref
    t_env.create_temporary_function("count_nulls", c)
    t_env.create_temporary_view("src", t)
    got = t_env.execute_sql("SELECT k, count_nulls(v) AS r FROM src GROUP BY k").to_arrow().to_pylist()
    assert {r["k"]: r["r"] for r in got} == ref


# ---------------------------------------------------------------- get_schema / collect / Row

def test_get_schema_as_pyflink_table_schema_and_pyarrow_schema():
    t = _env("batch").from_elements([(1, "Hi", 1.5)], ["a", "b", "c"])
    s = t.get_schema()
    assert s.get_field_names() == ["a", "b", "c"] and s.get_field_count() == 3
    assert s.get_field_data_type("a") == DataTypes.BIGINT() and s.get_field_data_type(1) == DataTypes.STRING()
    assert s.get_field_data_types() == [DataTypes.BIGINT(), DataTypes.STRING(), DataTypes.DOUBLE()]
    assert s.get_field_data_type("nope") is None and s.get_field_data_type(7) is None
    assert s.get_field_name(2) == "c"
    assert str(s) == "root\n |-- a: BIGINT\n |-- b: STRING\n |-- c: DOUBLE\n"
    # still the pyarrow schema
    ref = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())])
    assert s == ref and s.to_arrow().equals(ref) and s.names == ref.names and s.types == ref.types
    assert s.field("b") == ref.field("b") and [f.name for f in s] == ["a", "b", "c"] and len(s) == 3
    assert pa.schema(s).equals(ref)
    assert t.execute().get_table_schema().get_field_names() == ["a", "b", "c"]


def test_collect_is_a_closeable_iterator():
    t = _env("streaming").from_elements([(1, "a"), (2, "b"), (1, "c")], ["k", "s"])
    counts = t.group_by(t.k).select(t.k, t.s.count.alias("n"))
    seen = []
    with counts.execute().collect() as results:
        for r in results:
            seen.append((r.get_row_kind(), r.k, r.n))
    assert Counter(seen) == Counter([("+I", 1, 2), ("+I", 2, 1)])
    it = counts.execute().collect()
    assert next(it) is not None
    it.close()
    assert list(it) == []
    assert len(list(counts.execute().collect())) == 2


def test_row_as_pyflink_row():
    r = Row(1, "a")
    r[0] += 4
    assert r[0] == 5 and list(r) == [5, "a"] and len(r) == 2 and "a" in r
    assert r == (5, "a") and r == Row(5, "a") and hash(r) == hash((5, "a"))
    assert repr(r) == "<Row(5, 'a')>"
    n = Row(name="Alice", age=11)
    assert n.name == "Alice" and n["age"] == 11 and n.as_dict() == {"name": "Alice", "age": 11}
    n["age"] = 12
    assert repr(n) == "Row(name='Alice', age=12)"
    assert Row("x", "y")(1, 2) == Row(x=1, y=2)
    back = pickle.loads(pickle.dumps(n))
    assert back == n and back.age == 12 and back.get_row_kind() == "+I"
    with pytest.raises(AttributeError, match="no field 'nope'"):
        n.nope  # noqa: B018
    with pytest.raises(ValueError, match="not both"):
        Row(1, a=2)


# ---------------------------------------------------------------- PyFlink's documented examples

def _grid(result) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result.print()
    return buf.getvalue()


MAP_GRID = """\
+----------------------+--------------------------------+
|                   id |                           data |
+----------------------+--------------------------------+
|                    1 |                           HiHi |
|                    2 |                     HelloHello |
+----------------------+--------------------------------+
2 rows in set
"""


def test_documented_map():
    table = fo.TableEnvironment(EnvironmentSettings.in_batch_mode()).from_elements(
        [(1, "Hi"), (2, "Hello")], ["id", "data"])

    @udf(result_type="ROW<id BIGINT, data STRING>")
    def func1(id: int, data: str) -> Row:
        return Row(id, data * 2)

    @udf(result_type="ROW<id BIGINT, data STRING>")
    def func2(data: Row) -> Row:
        return Row(data.id, data.data * 2)

    @udf(result_type="ROW<id BIGINT, data STRING>", func_type="pandas")
    def func3(data: pd.DataFrame) -> pd.DataFrame:
        return pd.concat([data.id, data.data * 2], axis=1)

    assert _grid(table.map(func1(col("id"), col("data"))).execute()) == MAP_GRID
    assert _grid(table.map(func2).execute()) == MAP_GRID
    assert _grid(table.map(func3).execute()) == MAP_GRID

    # the older page's form: DataTypes.ROW, then alias
    @udf(result_type=DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT()),
                                    DataTypes.FIELD("data", DataTypes.STRING())]))
    def func4(data: Row) -> Row:
        return Row(data[0], data[1] * 2)

    assert table.map(func4).alias("id", "data").to_pandas().values.tolist() == [[1, "HiHi"], [2, "HelloHello"]]


def test_documented_flat_map_and_join_lateral():
    table = fo.TableEnvironment(EnvironmentSettings.in_batch_mode()).from_elements(
        [(1, "Hi,Flink"), (2, "Hello")], ["id", "data"])

    @udtf(result_types=["INT", "STRING"])
    def split(x: Row) -> Row:
        for s in x.data.split(","):
            yield x.id, s

    assert _grid(table.flat_map(split).execute()) == """\
+-------------+--------------------------------+
|          f0 |                             f1 |
+-------------+--------------------------------+
|           1 |                             Hi |
|           1 |                          Flink |
|           2 |                          Hello |
+-------------+--------------------------------+
3 rows in set
"""
    assert _grid(table.join_lateral(split.alias("a", "b")).execute()) == """\
+----------------------+--------------------------------+-------------+--------------------------------+
|                   id |                           data |           a |                              b |
+----------------------+--------------------------------+-------------+--------------------------------+
|                    1 |                       Hi,Flink |           1 |                             Hi |
|                    1 |                       Hi,Flink |           1 |                          Flink |
|                    2 |                          Hello |           2 |                          Hello |
+----------------------+--------------------------------+-------------+--------------------------------+
3 rows in set
"""


class CountAndSumAggregateFunction(AggregateFunction):
    """The row-based operations page's example, unchanged."""

    def get_value(self, accumulator):
        return Row(accumulator[0], accumulator[1])

    def create_accumulator(self):
        return Row(0, 0)

    def accumulate(self, accumulator, row):
        accumulator[0] += 1
        accumulator[1] += row.b

    def retract(self, accumulator, row):
        accumulator[0] -= 1
        accumulator[1] -= row.b

    def merge(self, accumulator, accumulators):
        for other_acc in accumulators:
            accumulator[0] += other_acc[0]
            accumulator[1] += other_acc[1]

    def get_accumulator_type(self):
        return "ROW<a BIGINT, b BIGINT>"

    def get_result_type(self):
        return "ROW<a BIGINT, b BIGINT>"


def test_documented_aggregate():
    function = CountAndSumAggregateFunction()
    agg = udaf(function, result_type=function.get_result_type(),
               accumulator_type=function.get_accumulator_type(), name=str(function.__class__.__name__))
    t = fo.TableEnvironment(EnvironmentSettings.in_streaming_mode()).from_elements(
        [(1, 2), (2, 1), (1, 3)], ["a", "b"])
    result = t.group_by(col("a")).aggregate(agg.alias("c", "d")).select(col("a"), col("c"), col("d"))
    assert _grid(result.execute()) == """\
+----+----------------------+----------------------+----------------------+
| op |                    a |                    c |                    d |
+----+----------------------+----------------------+----------------------+
| +I |                    1 |                    2 |                    5 |
| +I |                    2 |                    1 |                    1 |
+----+----------------------+----------------------+----------------------+
2 rows in set
"""
    t = fo.TableEnvironment(EnvironmentSettings.in_batch_mode()).from_elements(
        [(1, 2), (2, 1), (1, 3)], ["a", "b"])
    pandas_udaf = udaf(lambda pd: (pd.b.mean(), pd.b.max()), result_type="ROW<a FLOAT, b INT>", func_type="pandas")
    assert _grid(t.aggregate(pandas_udaf.alias("a", "b")).select(col("a"), col("b")).execute()) == """\
+--------------------------------+-------------+
|                              a |           b |
+--------------------------------+-------------+
|                            2.0 |           3 |
+--------------------------------+-------------+
1 row in set
"""


class DocTop2(TableAggregateFunction):
    """The row-based operations page's Top2, unchanged."""

    def emit_value(self, accumulator):
        yield Row(accumulator[0])
        yield Row(accumulator[1])

    def create_accumulator(self):
        return [None, None]

    def accumulate(self, accumulator, row):
        if row.a is not None:
            if accumulator[0] is None or row.a > accumulator[0]:
                accumulator[1] = accumulator[0]
                accumulator[0] = row.a
            elif accumulator[1] is None or row.a > accumulator[1]:
                accumulator[1] = row.a

    def get_accumulator_type(self):
        return "ARRAY<BIGINT>"

    def get_result_type(self):
        return "ROW<a BIGINT>"


def test_documented_flat_aggregate():
    t_env = fo.TableEnvironment(EnvironmentSettings.in_streaming_mode())
    top2 = udtaf(DocTop2())
    t = t_env.from_elements([(1, "Hi", "Hello"), (3, "Hi", "hi"), (5, "Hi2", "hi"), (7, "Hi", "Hello"),
                             (2, "Hi", "Hello")], ["a", "b", "c"])
    grid = _grid(t.group_by(col("b")).flat_aggregate(top2).select(col("*")).execute())
    documented = """\
+----+--------------------------------+----------------------+
| op |                              b |                    a |
+----+--------------------------------+----------------------+
| +I |                            Hi2 |                    5 |
| +I |                            Hi2 |               <NULL> |
| +I |                             Hi |                    7 |
| +I |                             Hi |                    3 |
+----+--------------------------------+----------------------+
4 rows in set
"""
    # the same lines; the order of the groups is the engine's
    lines, doc_lines = grid.splitlines(), documented.splitlines()
    assert lines[:3] == doc_lines[:3] and lines[-2:] == doc_lines[-2:]
    assert sorted(lines[3:-2]) == sorted(doc_lines[3:-2])
    # the older page's form, with the explicit result type and to_pandas()
    top2 = udtaf(DocTop2(), result_type=DataTypes.ROW([DataTypes.FIELD("a", DataTypes.BIGINT())]),
                 accumulator_type="ARRAY<BIGINT>")
    df = t.group_by(t.b).flat_aggregate(top2).select("*").to_pandas()
    got = sorted(((b, None if pd.isna(a) else int(a)) for b, a in df.values), key=_key)
    assert got == sorted([("Hi2", 5), ("Hi2", None), ("Hi", 7), ("Hi", 3)], key=_key)


def test_documented_weighted_avg():
    """The UDF page's WeightedAvg, inline, registered, and in SQL (streaming); its
    result declared DOUBLE here (the page declares BIGINT and shows no output)."""
    t_env = fo.TableEnvironment(EnvironmentSettings.in_streaming_mode())
    DocWeightedAvg = WeightedAvg
    weighted_avg = udaf(DocWeightedAvg())
    t = t_env.from_elements([(1, 2, "Lee"), (3, 4, "Jay"), (5, 6, "Jay"), (7, 8, "Lee")]) \
        .alias("value", "count", "name")
    inline = t.group_by(t.name).select(weighted_avg(t.value, t["count"]).alias("avg")).to_pandas()
    t_env.create_temporary_function("weighted_avg", DocWeightedAvg())  # registered as the class itself
    t_env.create_temporary_view("source", t)
    sql = t_env.sql_query("SELECT weighted_avg(`value`, `count`) AS avg FROM source GROUP BY name").to_pandas()
    # (1*2 + 7*8) / 10 = 5.8 and (3*4 + 5*6) / 10 = 4.2
    for df in (inline, sql):
        assert sorted(df.avg.tolist()) == [pytest.approx(4.2), pytest.approx(5.8)]
