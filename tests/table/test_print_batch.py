"""Batch-mode ``print()`` lays the grid out as PyFlink does: column widths from
the column types (Flink's ``TableauStyle.columnWidthsByType``, the same as in
streaming mode), only without the ``op`` column. ``TableResult.print()`` in
Flink builds its style with ``PrintStyle.tableauWithTypeInferredColumnWidths(
schema, converter, maxColumnWidth, false, isStreamingMode)``, so the widths do
not depend on the rows printed."""
from __future__ import annotations

import datetime as dt
import decimal

import pytest

import fastops as fo
from fastops.table import DataTypes

D = decimal.Decimal

# The schema and rows of Flink's TableauStyleTest (flink-table-common,
# org.apache.flink.table.utils.print), first four rows.
SCHEMA = [("boolean", DataTypes.BOOLEAN()), ("int", DataTypes.INT()), ("bigint", DataTypes.BIGINT()),
          ("varchar", DataTypes.STRING()), ("decimal(10, 5)", DataTypes.DECIMAL(10, 5)),
          ("timestamp", DataTypes.TIMESTAMP(6))]
ROWS = [
    (None, 1, 2, "abc", D("1.23"), dt.datetime(2020, 3, 1, 18, 39, 14)),
    (False, None, 0, "", D("1"), dt.datetime(2020, 3, 1, 18, 39, 14, 100_000)),
    (True, 2147483647, None, "abcdefg", D("12345"), dt.datetime(2020, 3, 1, 18, 39, 14, 120_000)),
    (False, -2147483648, 9223372036854775807, None, D("12345.06789"),
     dt.datetime(2020, 3, 1, 18, 39, 14, 123_000)),
]

# testPrintWithMultipleRowsAndRowKind's grid (type-inferred widths) without its op
# column, NULLs printed as <NULL> (TableResult.print passes printNullAsEmpty = false)
# and booleans as Flink's CAST(... AS STRING) gives them (TRUE / FALSE).
FLINK_BATCH_GRID = (
    "+---------+-------------+----------------------+--------------------------------"
    "+----------------+----------------------------+\n"
    "| boolean |         int |               bigint |                        varchar "
    "| decimal(10, 5) |                  timestamp |\n"
    "+---------+-------------+----------------------+--------------------------------"
    "+----------------+----------------------------+\n"
    "|  <NULL> |           1 |                    2 |                            abc "
    "|        1.23000 | 2020-03-01 18:39:14.000000 |\n"
    "|   FALSE |      <NULL> |                    0 |                                "
    "|        1.00000 | 2020-03-01 18:39:14.100000 |\n"
    "|    TRUE |  2147483647 |               <NULL> |                        abcdefg "
    "|    12345.00000 | 2020-03-01 18:39:14.120000 |\n"
    "|   FALSE | -2147483648 |  9223372036854775807 |                         <NULL> "
    "|    12345.06789 | 2020-03-01 18:39:14.123000 |\n"
    "+---------+-------------+----------------------+--------------------------------"
    "+----------------+----------------------------+\n"
    "4 rows in set\n"
)


def _table(mode: str, rows: list) -> fo.Table:
    return fo.TableEnvironment(mode=mode).from_elements(rows, SCHEMA)


def test_batch_print_matches_flinks_type_inferred_grid(capsys):
    _table("batch", ROWS).execute().print()
    assert capsys.readouterr().out == FLINK_BATCH_GRID


def test_batch_grid_is_the_streaming_grid_without_op():
    batch = _table("batch", ROWS).execute().to_string().splitlines()
    streaming = _table("streaming", ROWS).execute().to_string().splitlines()
    assert len(batch) == len(streaming)
    for b, s in zip(batch[:-1], streaming[:-1]):
        cut = s.index("+", 1) if s.startswith("+") else s.index("|", 1)
        assert b == s[0] + s[cut + 1:]
    assert batch[-1] == streaming[-1] == "4 rows in set"


@pytest.mark.parametrize("rows", [ROWS[:1], ROWS[2:3]])
def test_batch_widths_do_not_depend_on_the_rows(rows):
    grid = _table("batch", rows).execute().to_string().splitlines()
    assert grid[0] == FLINK_BATCH_GRID.splitlines()[0]
