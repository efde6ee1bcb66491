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
