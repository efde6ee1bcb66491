"""Table API and SQL in the style of PyFlink, compiled to the fastops engine.

>>> import fastops as fo
>>> from fastops.table import col
>>> t_env = fo.TableEnvironment(mode="batch")
>>> orders = t_env.from_elements([(1, "a", 10.0), (2, "b", 5.0), (3, "a", 1.5)], ["id", "k", "amount"])
>>> totals = orders.group_by(col("k")).select(col("k"), col("amount").sum.alias("total"))
>>> totals.order_by(col("k")).to_pandas().values.tolist()
[['a', 11.5], ['b', 5.0]]

Expressions: :func:`col` / :func:`lit` (:class:`~fastops.table.expressions.Expr`);
pyarrow.compute expressions (``fastops.col``) are accepted for scalar use.

SQL (``sql_query`` / ``execute_sql``) needs the ``sqlglot`` package; it is
imported only when SQL is used.
"""
from fastops.table.environment import EnvironmentSettings, TableEnvironment
from fastops.table.expressions import Expr, call, coalesce, col, concat, if_then_else, lit
from fastops.table.functions import (
                                     AggregateFunction,
                                     ScalarFunction,
                                     TableAggregateFunction,
                                     TableFunction,
                                     UDFError,
                                     udaf,
                                     udf,
                                     udtaf,
                                     udtf,
)
from fastops.table.over import CURRENT_RANGE, CURRENT_ROW, UNBOUNDED_RANGE, UNBOUNDED_ROW, Over, row_interval
from fastops.table.plan import PlanError, SqlError
from fastops.table.table import Row, Session, Slide, Table, TableResult, Tumble
from fastops.table.types import DataTypes

__all__ = [
                                     "CURRENT_RANGE",
                                     "CURRENT_ROW",
                                     "UNBOUNDED_RANGE",
                                     "UNBOUNDED_ROW",
                                     "AggregateFunction",
                                     "DataTypes",
                                     "EnvironmentSettings",
                                     "Expr",
                                     "Over",
                                     "PlanError",
                                     "Row",
                                     "ScalarFunction",
                                     "Session",
                                     "Slide",
                                     "SqlError",
                                     "Table",
                                     "TableAggregateFunction",
                                     "TableEnvironment",
                                     "TableFunction",
                                     "TableResult",
                                     "Tumble",
                                     "UDFError",
                                     "call",
                                     "coalesce",
                                     "col",
                                     "concat",
                                     "if_then_else",
                                     "lit",
                                     "row_interval",
                                     "udaf",
                                     "udf",
                                     "udtaf",
                                     "udtf",
]
