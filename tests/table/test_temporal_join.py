"""Temporal joins are refused, never run as a regular join.

A regular join of the orders with the currency rates matches every version of
a rate; Flink's event-time temporal join (``JOIN ... FOR SYSTEM_TIME AS OF``)
matches only the version valid at each order's time. Until fastops has one,
the query is refused where it is written: the example of Flink's "Joins" page
(a versioned table with a primary key and a watermark), in SQL and in the
Table API (``create_temporal_table_function``)."""
from __future__ import annotations

import re

import pytest

import fastops as fo
from fastops.table import PlanError, SqlError

# Flink's "Event Time Temporal Join" example, read from header-less CSV files
ORDERS = "o_001,10.00,EUR,2024-01-01 00:00:10\no_002,20.00,EUR,2024-01-01 00:00:30\n"
RATES = "EUR,1.10,2024-01-01 00:00:00\nEUR,1.20,2024-01-01 00:00:20\n"
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


def _assert_refused(info: pytest.ExceptionInfo) -> None:
    msg = str(info.value)
    assert "FOR SYSTEM_TIME AS OF" in msg and "temporal table joins" in msg and "is not supported" in msg, msg
    assert re.search(r"at line \d+, column \d+", msg), msg  # where the clause is
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("join", ["", "LEFT"])
def test_flink_doc_example_is_refused_by_every_entry_point(t_env, join):
    query = QUERY.format(join=join)
    for run in (t_env.execute_sql, t_env.sql_query, t_env.explain_sql,
                lambda q: t_env.execute_sql("EXPLAIN " + q),
                lambda q: t_env.execute_sql("CREATE TEMPORARY VIEW v AS " + q),
                lambda q: t_env.execute_sql("INSERT INTO orders SELECT order_id, price, orders.currency, order_time "
                                            + q[q.index("FROM"):])):
        with pytest.raises(SqlError) as info:
            run(query)
        _assert_refused(info)
    with pytest.raises(SqlError, match="at line 8, column"):  # the line of FOR SYSTEM_TIME AS OF
        t_env.sql_query(query)
    assert "v" not in t_env.list_tables()


def test_a_regular_join_still_matches_every_version(t_env):
    """What the temporal join must not silently be: both rates match each order."""
    rows = t_env.execute_sql(QUERY.format(join="").replace(
        " FOR SYSTEM_TIME AS OF orders.order_time", "")).to_pandas()
    assert len(rows) == 4


def test_table_api_temporal_table_function_is_refused(t_env):
    rates = t_env.from_path("currency_rates")
    with pytest.raises(PlanError, match=r"create_temporal_table_function \(temporal table joins\) is not "
                                        r"supported yet"):
        rates.create_temporal_table_function("update_time", "currency")
