"""CREATE TABLE with computed columns (``name AS expr``), ROW<...> column types
and field access (``r.f``), on a filesystem table; the reference is pyarrow /
plain Python over the file's rows."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastops.table import TableEnvironment
from fastops.table.plan import PlanError

T0 = dt.datetime(2024, 1, 1)


@pytest.fixture
def path(tmp_path):
    n = 40
    ts = [T0 + dt.timedelta(milliseconds=700 * i) for i in range(n)]
    info = pa.array([{"id": i, "tag": f"t{i % 3}"} for i in range(n)],
                    pa.struct([("id", pa.int64()), ("tag", pa.string())]))
    table = pa.table({"v": pa.array(range(n), pa.int32()), "ts": pa.array(ts, pa.timestamp("ms")), "info": info})
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    return str(p)


DDL = """CREATE TABLE t (
    v INT,
    ts TIMESTAMP(3),
    info ROW<id BIGINT, `tag` VARCHAR>,
    v2 AS v * 2 + info.id,
    t2 AS ts + INTERVAL '1' SECOND,
    WATERMARK FOR t2 AS t2 - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet')"""


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_computed_columns_and_fields(path, mode):
    env = TableEnvironment(mode=mode)
    env.execute_sql(DDL.format(path=path))
    got = env.sql_query("SELECT v, v2, t2, info.`tag` AS tag FROM t WHERE info.id >= 10").to_arrow().to_pylist()
    want = [{"v": i, "v2": 3 * i, "t2": T0 + dt.timedelta(milliseconds=700 * i + 1000), "tag": f"t{i % 3}"}
            for i in range(10, 40)]
    assert sorted(got, key=lambda r: r["v"]) == want
    described = {r["name"]: r["type"] for r in env.execute_sql("DESCRIBE t").to_arrow().to_pylist()}
    assert described["info"] == "ROW<`id` BIGINT, `tag` STRING>"


def test_watermark_on_a_computed_column_drives_windows(path):
    env = TableEnvironment(mode="streaming")
    env.execute_sql(DDL.format(path=path))
    got = env.sql_query("""SELECT window_start, COUNT(*) AS n, SUM(v2) AS s
                           FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t2), INTERVAL '5' SECOND))
                           GROUP BY window_start, window_end""").to_arrow().to_pylist()
    want: dict = {}
    for i in range(40):
        t2 = 700 * i + 1000
        start = T0 + dt.timedelta(milliseconds=t2 // 5000 * 5000)
        n, s = want.get(start, (0, 0))
        want[start] = (n + 1, s + 3 * i)
    assert {r["window_start"]: (r["n"], r["s"]) for r in got} == want


def test_field_of_a_column_that_is_not_a_row(path):
    env = TableEnvironment(mode="batch")
    env.execute_sql(DDL.format(path=path))
    with pytest.raises(PlanError):
        env.sql_query("SELECT v.x FROM t")
