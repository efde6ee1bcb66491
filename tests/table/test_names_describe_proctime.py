"""Flink's renaming of duplicate select-list names, DESCRIBE's grid, and PROCTIME()."""
from __future__ import annotations

import datetime as dt

import pytest

import fastops as fo

pytest.importorskip("sqlglot")


@pytest.fixture()
def t_env():
    env = fo.TableEnvironment(mode="batch")
    env.create_temporary_view("a", env.from_elements([(1, "x")], ["auction", "s"]))
    env.create_temporary_view("b", env.from_elements([(1, 5)], ["auction", "price"]))
    return env


@pytest.mark.parametrize("query, names", [
    ("SELECT a.auction, b.auction, a.auction FROM a JOIN b ON a.auction = b.auction",
     ["auction", "auction0", "auction1"]),
    ("SELECT B.*, A.* FROM a AS A JOIN b AS B ON A.auction = B.auction", ["auction", "price", "auction0", "s"]),
    ("SELECT auction, auction AS auction0, auction FROM a", ["auction", "auction0", "auction1"]),
    ("SELECT s, COUNT(*) AS s FROM a GROUP BY s", ["s", "s0"]),
])
def test_duplicate_names_are_numbered(t_env, query, names):
    """Calcite's SqlValidatorUtil.uniquify: a taken name gets 0, 1, ... appended."""
    t = t_env.sql_query(query)
    assert t.schema.names == names
    assert t.to_arrow().num_rows == 1


# Flink's documented DESCRIBE of this table (the SQL page "DESCRIBE Statements"), without its comment column
DDL = """CREATE TABLE Orders (
 `user` BIGINT NOT NULl comment 'this is primary key',
 product VARCHAR(32),
 amount INT,
 ts TIMESTAMP(3) comment 'notice: watermark',
 ptime AS PROCTIME() comment 'this is a computed column',
 PRIMARY KEY(`user`) NOT ENFORCED,
 WATERMARK FOR ts AS ts - INTERVAL '1' SECONDS
) with ('connector' = 'blackhole')"""

GRID = """\
+---------+-----------------------------+-------+-----------+---------------+----------------------------+
|    name |                        type |  null |       key |        extras |                  watermark |
+---------+-----------------------------+-------+-----------+---------------+----------------------------+
|    user |                      BIGINT | FALSE | PRI(user) |               |                            |
| product |                 VARCHAR(32) |  TRUE |           |               |                            |
|  amount |                         INT |  TRUE |           |               |                            |
|      ts |      TIMESTAMP(3) *ROWTIME* |  TRUE |           |               | `ts` - INTERVAL '1' SECOND |
|   ptime | TIMESTAMP_LTZ(3) *PROCTIME* | FALSE |           | AS PROCTIME() |                            |
+---------+-----------------------------+-------+-----------+---------------+----------------------------+
5 rows in set
"""


@pytest.mark.parametrize("statement", ["DESCRIBE Orders", "DESC Orders"])
def test_describe_grid(statement):
    env = fo.TableEnvironment(mode="streaming")
    env.execute_sql(DDL)
    assert env.execute_sql(statement).to_string() == GRID


def test_proctime_in_select_and_as_a_computed_column(tmp_path):
    (tmp_path / "part.csv").write_text("1,a\n2,b\n")
    env = fo.TableEnvironment(mode="streaming")
    env.execute_sql(f"CREATE TABLE t (id BIGINT, s STRING, p AS PROCTIME()) WITH ('connector' = 'filesystem', "
                    f"'path' = '{tmp_path}', 'format' = 'csv')")
    before = dt.datetime.now(dt.timezone.utc)
    out = env.execute_sql("SELECT id, p, PROCTIME() AS q FROM t").to_arrow()
    after = dt.datetime.now(dt.timezone.utc)
    assert str(out.schema.field("p").type) == "timestamp[ms, tz=UTC]"
    slack = dt.timedelta(milliseconds=1)
    for r in out.to_pylist():
        assert before - slack <= r["p"] <= after + slack and before - slack <= r["q"] <= after + slack
    assert sorted(out.column("id").to_pylist()) == [1, 2]


class _Paused:
    """A source of two batches with a pause between them, then the end;
    ``times`` records when the second batch and the end were read."""

    def __init__(self, pause: float):
        self.pause = pause
        self.times: dict[str, float] = {}

    def source(self):
        import time

        import pyarrow as pa

        from fastops.connectors.base import END, Reader, Source

        outer = self

        class PausedReader(Reader):
            def __init__(self):
                self.step, self.t0 = 0, time.time()

            def read(self):
                elapsed = time.time() - self.t0
                if self.step == 0:
                    self.step = 1
                    return pa.record_batch({"k": [1, 2, 1]})
                if self.step == 1 and elapsed > outer.pause:
                    self.step, outer.times["second"] = 2, time.time()
                    return pa.record_batch({"k": [2, 2]})
                if self.step == 2 and elapsed > 2 * outer.pause:
                    outer.times["end"] = time.time()
                    return END
                time.sleep(0.01)
                return None  # nothing to read now

            def position(self):
                return self.step

        class PausedSource(Source):
            name = "paused"

            def schema(self):
                return pa.schema([("k", pa.int64())])

            def open(self, index, parallelism, position=None):
                return PausedReader()

        return PausedSource()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_processing_time_windows_close_as_the_clock_passes_them(parallelism):
    """A TUMBLE over PROCTIME() emits a window once the wall clock passes its
    end, while the source has nothing to read: the first batch's counts come
    out before the second batch is read, and every row is counted once."""
    import time

    paused = _Paused(1.5)
    env = fo.StreamEnvironment(parallelism=parallelism)
    t_env = fo.TableEnvironment(mode="streaming", parallelism=parallelism)
    t_env.create_temporary_view("s", t_env.from_data_stream(env.from_source(paused.source())))
    t_env.create_temporary_view("v", t_env.sql_query("SELECT k, PROCTIME() AS pt FROM s"))
    q = ("SELECT k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(pt), INTERVAL '0.2' SECOND)) "
         "GROUP BY k, window_start, window_end")
    assert "proctime_watermarks" in t_env.explain_sql(q)
    seen: list = []
    t_env.to_data_stream(t_env.sql_query(q)).sink_to(lambda b: seen.append((time.time(), b.to_pylist())))
    env.execute()
    first = sorted((r["k"], r["n"]) for t, rows in seen if t < paused.times["second"] for r in rows)
    assert first == [(1, 2), (2, 1)]
    totals: dict = {}
    for _, rows in seen:
        for r in rows:
            totals[r["k"]] = totals.get(r["k"], 0) + r["n"]
    assert totals == {1: 2, 2: 3}
    assert any(t < paused.times["end"] for t, rows in seen if any(r["k"] == 2 and r["n"] == 2 for r in rows))
