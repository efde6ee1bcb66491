"""Flink's SQL documentation examples, run as the pages show them.

Each example takes the input table printed on its page and compares fastops'
result with the result grid printed there: as rows (order-insensitive, as
none of these queries orders its result) and as the grid ``print()`` writes,
cell by cell. In streaming mode the final rows are those of the changelog
applied, and the changelog must be valid (every -U / -D retracts a row
emitted before).

The pages' grids are Flink SQL Client output, not PyFlink's ``print()``:
their column widths differ, NULL is ``(NULL)`` or ``null`` where PyFlink
writes ``<NULL>``, and (as the pages say) timestamps are shown without
trailing zeros (``2020-04-15 08:05`` for ``2020-04-15 08:05:00.000``). The
grids are compared after those spellings are made the same.

Examples documented elsewhere in the suite are not repeated here: window
Top-N and window deduplication (test_topn.py), over aggregation
(test_over.py), set operations and IN (test_semi_setops.py), temporal joins
(test_temporal_join.py). The Top-N, deduplication, over aggregation, ORDER
BY, LIMIT and joins pages show no result grid for their other examples.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import io
import re
from collections import Counter

import pyarrow as pa
import pytest

import fastops as fo
from support.sql_diff import applied

MODES = ["batch", "streaming"]
NULLS = {"(NULL)", "null", "<NULL>"}

# ---------------------------------------------------------------- the pages' tables

# Windowing TVF page ("Windowing table-valued functions"): SELECT * FROM Bid;
# bidtime is TIMESTAMP(3) *ROWTIME* with WATERMARK bidtime - INTERVAL '1' SECOND.
TVF_BID = """
+------------------+-------+------+
|          bidtime | price | item |
+------------------+-------+------+
| 2020-04-15 08:05 |  4.00 | C    |
| 2020-04-15 08:07 |  2.00 | A    |
| 2020-04-15 08:09 |  5.00 | D    |
| 2020-04-15 08:11 |  3.00 | B    |
| 2020-04-15 08:13 |  1.00 | E    |
| 2020-04-15 08:17 |  6.00 | F    |
+------------------+-------+------+
"""

# Window Aggregation page: SELECT * FROM Bid; (the same bids with a supplier)
AGG_BID = """
+------------------+-------+------+-------------+
|          bidtime | price | item | supplier_id |
+------------------+-------+------+-------------+
| 2020-04-15 08:05 | 4.00  | C    | supplier1   |
| 2020-04-15 08:07 | 2.00  | A    | supplier1   |
| 2020-04-15 08:09 | 5.00  | D    | supplier2   |
| 2020-04-15 08:11 | 3.00  | B    | supplier2   |
| 2020-04-15 08:13 | 1.00  | E    | supplier1   |
| 2020-04-15 08:17 | 6.00  | F    | supplier2   |
+------------------+-------+------+-------------+
"""

# Window JOIN page: SELECT * FROM LeftTable; SELECT * FROM RightTable;
# row_time is TIMESTAMP(3) *ROWTIME* with WATERMARK row_time - INTERVAL '1' SECOND, num INT.
LEFT_TABLE = """
+------------------+-----+----+
|         row_time | num | id |
+------------------+-----+----+
| 2020-04-15 12:02 |   1 | L1 |
| 2020-04-15 12:06 |   2 | L2 |
| 2020-04-15 12:03 |   3 | L3 |
+------------------+-----+----+
"""
RIGHT_TABLE = """
+------------------+-----+----+
|         row_time | num | id |
+------------------+-----+----+
| 2020-04-15 12:01 |   2 | R2 |
| 2020-04-15 12:04 |   3 | R3 |
| 2020-04-15 12:05 |   4 | R4 |
+------------------+-----+----+
"""

TS = pa.timestamp("ms")
BID_TYPES = {"bidtime": TS, "price": pa.decimal128(10, 2), "item": pa.string(), "supplier_id": pa.string()}
JOIN_TYPES = {"row_time": TS, "num": pa.int32(), "id": pa.string()}

# ---------------------------------------------------------------- the pages' queries and results

# Windowing TVF page, section by section: (query, documented result)
TVF_EXAMPLES = {
    "tumble": ("""
        SELECT * FROM TABLE(
           TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))""", """
+------------------+-------+------+------------------+------------------+-------------------------+
|          bidtime | price | item |     window_start |       window_end |            window_time  |
+------------------+-------+------+------------------+------------------+-------------------------+
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:07 |  2.00 | A    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:09 |  5.00 | D    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:17 |  6.00 | F    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
+------------------+-------+------+------------------+------------------+-------------------------+
"""),
    "tumble named params": ("""
        SELECT * FROM TABLE(
           TUMBLE(
             DATA => TABLE Bid,
             TIMECOL => DESCRIPTOR(bidtime),
             SIZE => INTERVAL '10' MINUTES))""", "tumble"),
    "tumble aggregation": ("""
        SELECT window_start, window_end, SUM(price)
          FROM TABLE(
            TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
          GROUP BY window_start, window_end""", """
+------------------+------------------+-------+
|     window_start |       window_end | price |
+------------------+------------------+-------+
| 2020-04-15 08:00 | 2020-04-15 08:10 | 11.00 |
| 2020-04-15 08:10 | 2020-04-15 08:20 | 10.00 |
+------------------+------------------+-------+
"""),
    "hop": ("""
        SELECT * FROM TABLE(
            HOP(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))""", """
+------------------+-------+------+------------------+------------------+-------------------------+
|          bidtime | price | item |     window_start |       window_end |           window_time   |
+------------------+-------+------+------------------+------------------+-------------------------+
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:05 | 2020-04-15 08:15 | 2020-04-15 08:14:59.999 |
| 2020-04-15 08:07 |  2.00 | A    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:07 |  2.00 | A    | 2020-04-15 08:05 | 2020-04-15 08:15 | 2020-04-15 08:14:59.999 |
| 2020-04-15 08:09 |  5.00 | D    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:09 |  5.00 | D    | 2020-04-15 08:05 | 2020-04-15 08:15 | 2020-04-15 08:14:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:05 | 2020-04-15 08:15 | 2020-04-15 08:14:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:05 | 2020-04-15 08:15 | 2020-04-15 08:14:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:17 |  6.00 | F    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:17 |  6.00 | F    | 2020-04-15 08:15 | 2020-04-15 08:25 | 2020-04-15 08:24:59.999 |
+------------------+-------+------+------------------+------------------+-------------------------+
"""),
    "hop named params": ("""
        SELECT * FROM TABLE(
            HOP(
              DATA => TABLE Bid,
              TIMECOL => DESCRIPTOR(bidtime),
              SLIDE => INTERVAL '5' MINUTES,
              SIZE => INTERVAL '10' MINUTES))""", "hop"),
    "hop aggregation": ("""
        SELECT window_start, window_end, SUM(price)
          FROM TABLE(
            HOP(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
          GROUP BY window_start, window_end""", """
+------------------+------------------+-------+
|     window_start |       window_end | price |
+------------------+------------------+-------+
| 2020-04-15 08:00 | 2020-04-15 08:10 | 11.00 |
| 2020-04-15 08:05 | 2020-04-15 08:15 | 15.00 |
| 2020-04-15 08:10 | 2020-04-15 08:20 | 10.00 |
| 2020-04-15 08:15 | 2020-04-15 08:25 |  6.00 |
+------------------+------------------+-------+
"""),
    "cumulate": ("""
        SELECT * FROM TABLE(
            CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))""", """
+------------------+-------+------+------------------+------------------+-------------------------+
|          bidtime | price | item |     window_start |       window_end |            window_time  |
+------------------+-------+------+------------------+------------------+-------------------------+
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:00 | 2020-04-15 08:06 | 2020-04-15 08:05:59.999 |
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:00 | 2020-04-15 08:08 | 2020-04-15 08:07:59.999 |
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:07 |  2.00 | A    | 2020-04-15 08:00 | 2020-04-15 08:08 | 2020-04-15 08:07:59.999 |
| 2020-04-15 08:07 |  2.00 | A    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:09 |  5.00 | D    | 2020-04-15 08:00 | 2020-04-15 08:10 | 2020-04-15 08:09:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:12 | 2020-04-15 08:11:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:14 | 2020-04-15 08:13:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:16 | 2020-04-15 08:15:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:18 | 2020-04-15 08:17:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:10 | 2020-04-15 08:14 | 2020-04-15 08:13:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:10 | 2020-04-15 08:16 | 2020-04-15 08:15:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:10 | 2020-04-15 08:18 | 2020-04-15 08:17:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
| 2020-04-15 08:17 |  6.00 | F    | 2020-04-15 08:10 | 2020-04-15 08:18 | 2020-04-15 08:17:59.999 |
| 2020-04-15 08:17 |  6.00 | F    | 2020-04-15 08:10 | 2020-04-15 08:20 | 2020-04-15 08:19:59.999 |
+------------------+-------+------+------------------+------------------+-------------------------+
"""),
    "cumulate named params": ("""
        SELECT * FROM TABLE(
            CUMULATE(
              DATA => TABLE Bid,
              TIMECOL => DESCRIPTOR(bidtime),
              STEP => INTERVAL '2' MINUTES,
              SIZE => INTERVAL '10' MINUTES))""", "cumulate"),
    "cumulate aggregation": ("""
        SELECT window_start, window_end, SUM(price)
          FROM TABLE(
            CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))
          GROUP BY window_start, window_end""", """
+------------------+------------------+-------+
|     window_start |       window_end | price |
+------------------+------------------+-------+
| 2020-04-15 08:00 | 2020-04-15 08:06 |  4.00 |
| 2020-04-15 08:00 | 2020-04-15 08:08 |  6.00 |
| 2020-04-15 08:00 | 2020-04-15 08:10 | 11.00 |
| 2020-04-15 08:10 | 2020-04-15 08:12 |  3.00 |
| 2020-04-15 08:10 | 2020-04-15 08:14 |  4.00 |
| 2020-04-15 08:10 | 2020-04-15 08:16 |  4.00 |
| 2020-04-15 08:10 | 2020-04-15 08:18 | 10.00 |
| 2020-04-15 08:10 | 2020-04-15 08:20 | 10.00 |
+------------------+------------------+-------+
"""),
    # section "Window Offset"
    "tumble offset": ("""
        SELECT * FROM TABLE(
           TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES, INTERVAL '1' MINUTES))""", """
+------------------+-------+------+------------------+------------------+-------------------------+
|          bidtime | price | item |     window_start |       window_end |            window_time  |
+------------------+-------+------+------------------+------------------+-------------------------+
| 2020-04-15 08:05 |  4.00 | C    | 2020-04-15 08:01 | 2020-04-15 08:11 | 2020-04-15 08:10:59.999 |
| 2020-04-15 08:07 |  2.00 | A    | 2020-04-15 08:01 | 2020-04-15 08:11 | 2020-04-15 08:10:59.999 |
| 2020-04-15 08:09 |  5.00 | D    | 2020-04-15 08:01 | 2020-04-15 08:11 | 2020-04-15 08:10:59.999 |
| 2020-04-15 08:11 |  3.00 | B    | 2020-04-15 08:11 | 2020-04-15 08:21 | 2020-04-15 08:20:59.999 |
| 2020-04-15 08:13 |  1.00 | E    | 2020-04-15 08:11 | 2020-04-15 08:21 | 2020-04-15 08:20:59.999 |
| 2020-04-15 08:17 |  6.00 | F    | 2020-04-15 08:11 | 2020-04-15 08:21 | 2020-04-15 08:20:59.999 |
+------------------+-------+------+------------------+------------------+-------------------------+
"""),
    "tumble offset named params": ("""
        SELECT * FROM TABLE(
           TUMBLE(
             DATA => TABLE Bid,
             TIMECOL => DESCRIPTOR(bidtime),
             SIZE => INTERVAL '10' MINUTES,
             OFFSET => INTERVAL '1' MINUTES))""", "tumble offset"),
    "tumble offset aggregation": ("""
        SELECT window_start, window_end, SUM(price)
          FROM TABLE(
            TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES, INTERVAL '1' MINUTES))
          GROUP BY window_start, window_end""", """
+------------------+------------------+-------+
|     window_start |       window_end | price |
+------------------+------------------+-------+
| 2020-04-15 08:01 | 2020-04-15 08:11 | 11.00 |
| 2020-04-15 08:11 | 2020-04-15 08:21 | 10.00 |
+------------------+------------------+-------+
"""),
}

# Window Aggregation page (its TUMBLE / HOP / CUMULATE results are those of
# the TVF page's aggregations, on its own Bid table)
GROUPING_SETS_BY_WINDOW = """
+------------------+------------------+-------------+-------+
|     window_start |       window_end | supplier_id | price |
+------------------+------------------+-------------+-------+
| 2020-04-15 08:00 | 2020-04-15 08:10 |      (NULL) | 11.00 |
| 2020-04-15 08:00 | 2020-04-15 08:10 |   supplier2 |  5.00 |
| 2020-04-15 08:00 | 2020-04-15 08:10 |   supplier1 |  6.00 |
| 2020-04-15 08:10 | 2020-04-15 08:20 |      (NULL) | 10.00 |
| 2020-04-15 08:10 | 2020-04-15 08:20 |   supplier2 |  9.00 |
| 2020-04-15 08:10 | 2020-04-15 08:20 |   supplier1 |  1.00 |
+------------------+------------------+-------------+-------+
"""
WINDOW_AGG_EXAMPLES = {
    "tumble": (TVF_EXAMPLES["tumble aggregation"][0], TVF_EXAMPLES["tumble aggregation"][1]),
    "hop": (TVF_EXAMPLES["hop aggregation"][0], TVF_EXAMPLES["hop aggregation"][1]),
    "cumulate": (TVF_EXAMPLES["cumulate aggregation"][0], TVF_EXAMPLES["cumulate aggregation"][1]),
    "grouping sets": ("""
        SELECT window_start, window_end, supplier_id, SUM(price) as price
          FROM TABLE(
            TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
          GROUP BY window_start, window_end, GROUPING SETS ((supplier_id), ())""", GROUPING_SETS_BY_WINDOW),
    # "the following query is equivalent to the one above"
    "rollup": ("""
        SELECT window_start, window_end, supplier_id, SUM(price) as price
        FROM TABLE(
            TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end, ROLLUP (supplier_id)""", GROUPING_SETS_BY_WINDOW),
}

# Group Aggregation page, section GROUPING SETS ("Results:"); its ROLLUP
# query is "equivalent to the one above" (its count is unnamed: EXPR$2).
PRODUCTS = """
    FROM (VALUES
        ('supplier1', 'product1', 4),
        ('supplier1', 'product2', 3),
        ('supplier2', 'product3', 3),
        ('supplier2', 'product4', 4))
    AS Products(supplier_id, product_id, rating)"""
GROUPING_SETS_RESULT = """
+-------------+--------+-------+
| supplier_id | rating | total |
+-------------+--------+-------+
|   supplier1 |      4 |     1 |
|   supplier1 | (NULL) |     2 |
|      (NULL) | (NULL) |     4 |
|   supplier1 |      3 |     1 |
|   supplier2 |      3 |     1 |
|   supplier2 | (NULL) |     2 |
|   supplier2 |      4 |     1 |
+-------------+--------+-------+
"""
GROUP_AGG_EXAMPLES = {
    "grouping sets": ("SELECT supplier_id, rating, COUNT(*) AS total" + PRODUCTS
                      + "\n    GROUP BY GROUPING SETS ((supplier_id, rating), (supplier_id), ())",
                      GROUPING_SETS_RESULT),
    "rollup": ("SELECT supplier_id, rating, COUNT(*)" + PRODUCTS + "\n    GROUP BY ROLLUP (supplier_id, rating)",
               GROUPING_SETS_RESULT),
}

# Window JOIN page. The FULL JOIN grid shows a window on every row, also on
# the rows without a left match, where the page's query selects
# L.window_start and L.window_end: SQL's outer join makes those NULL there.
# The page's query is compared with its grid with those two cells NULL, and
# the same query reading the window from either side (COALESCE) with the
# grid as printed.
L_TVF = "SELECT * FROM TABLE(TUMBLE(TABLE LeftTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))"
R_TVF = "SELECT * FROM TABLE(TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))"
SEMI_RESULT = """
+------------------+-----+----+------------------+------------------+-------------------------+
|         row_time | num | id |     window_start |       window_end |            window_time  |
+------------------+-----+----+------------------+------------------+-------------------------+
| 2020-04-15 12:03 |   3 | L3 | 2020-04-15 12:00 | 2020-04-15 12:05 | 2020-04-15 12:04:59.999 |
+------------------+-----+----+------------------+------------------+-------------------------+
"""
ANTI_RESULT = """
+------------------+-----+----+------------------+------------------+-------------------------+
|         row_time | num | id |     window_start |       window_end |            window_time  |
+------------------+-----+----+------------------+------------------+-------------------------+
| 2020-04-15 12:02 |   1 | L1 | 2020-04-15 12:00 | 2020-04-15 12:05 | 2020-04-15 12:04:59.999 |
| 2020-04-15 12:06 |   2 | L2 | 2020-04-15 12:05 | 2020-04-15 12:10 | 2020-04-15 12:09:59.999 |
+------------------+-----+----+------------------+------------------+-------------------------+
"""
FULL_JOIN_RESULT = """
+-------+------+-------+------+------------------+------------------+
| L_Num | L_Id | R_Num | R_Id |     window_start |       window_end |
+-------+------+-------+------+------------------+------------------+
|     1 |   L1 |  null | null | 2020-04-15 12:00 | 2020-04-15 12:05 |
|  null | null |     2 |   R2 | 2020-04-15 12:00 | 2020-04-15 12:05 |
|     3 |   L3 |     3 |   R3 | 2020-04-15 12:00 | 2020-04-15 12:05 |
|     2 |   L2 |  null | null | 2020-04-15 12:05 | 2020-04-15 12:10 |
|  null | null |     4 |   R4 | 2020-04-15 12:05 | 2020-04-15 12:10 |
+-------+------+-------+------+------------------+------------------+
"""
FULL_JOIN = """
        SELECT L.num as L_Num, L.id as L_Id, R.num as R_Num, R.id as R_Id, {start}, {end}
        FROM ({L_TVF}) L
        FULL JOIN ({R_TVF}) R
        ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end"""


def without_left_window(grid: str) -> str:
    """The FULL JOIN grid with NULL windows on the rows without a left match."""
    lines = []
    for ln in grid.splitlines():
        cells = ln.split("|")
        if len(cells) > 2 and cells[1].strip() == "null":
            cells[-3:-1] = [" null ", " null "]
        lines.append("|".join(cells))
    return "\n".join(lines)


WINDOW_JOIN_EXAMPLES = {
    "full outer": (FULL_JOIN.format(start="L.window_start", end="L.window_end", L_TVF=L_TVF, R_TVF=R_TVF),
                   without_left_window(FULL_JOIN_RESULT)),
    "full outer coalesce": (FULL_JOIN.format(
        start="COALESCE(L.window_start, R.window_start) AS window_start",
        end="COALESCE(L.window_end, R.window_end) AS window_end", L_TVF=L_TVF, R_TVF=R_TVF), FULL_JOIN_RESULT),
    "semi in": (f"""
        SELECT * FROM ({L_TVF}) L WHERE L.num IN (
          SELECT num FROM ({R_TVF}) R WHERE L.window_start = R.window_start AND L.window_end = R.window_end)""",
                SEMI_RESULT),
    "semi exists": (f"""
        SELECT * FROM ({L_TVF}) L WHERE EXISTS (
          SELECT * FROM ({R_TVF}) R
          WHERE L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end)""",
                    SEMI_RESULT),
    "anti not in": (f"""
        SELECT * FROM ({L_TVF}) L WHERE L.num NOT IN (
          SELECT num FROM ({R_TVF}) R WHERE L.window_start = R.window_start AND L.window_end = R.window_end)""",
                    ANTI_RESULT),
    "anti not exists": (f"""
        SELECT * FROM ({L_TVF}) L WHERE NOT EXISTS (
          SELECT * FROM ({R_TVF}) R
          WHERE L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end)""",
                        ANTI_RESULT),
}

# ---------------------------------------------------------------- reading grids


def parse_grid(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and the row cells of a printed grid (stripped strings)."""
    lines = [ln for ln in text.strip().splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip()[1:-1].split("|")] for ln in lines]
    return cells[0], cells[1:]


def doc_cell(cell: str) -> str | None:
    """A grid cell as the pages spell it: NULL as None, timestamps without trailing zeros."""
    if cell in NULLS:
        return None
    return re.sub(r"^(\d{4}-\d\d-\d\d \d\d:\d\d):00\.000$", r"\1", cell)


def typed(cell: str | None, type_: pa.DataType) -> object:
    """A documented cell as the Python value of a column of ``type_``."""
    if cell is None:
        return None
    if pa.types.is_timestamp(type_):
        return dt.datetime.fromisoformat(cell)
    if pa.types.is_decimal(type_):
        return decimal.Decimal(cell)
    if pa.types.is_integer(type_):
        return int(cell)
    return cell


def table_of(grid: str, types: dict[str, pa.DataType]) -> pa.Table:
    """A page's input table from its grid."""
    header, rows = parse_grid(grid)
    return pa.table({name: pa.array([typed(doc_cell(r[i]), types[name]) for r in rows], types[name])
                     for i, name in enumerate(header)})


def printed(result: fo.TableResult) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result.print()
    return buf.getvalue()


def check(t_env: fo.TableEnvironment, sql: str, documented: str, names: list[str] | None = None) -> None:
    """Run ``sql`` and compare its rows and its printed grid with the page's grid.

    ``names`` are the result's column names where they differ from the page's
    header: the pages' grids name an unnamed aggregate (``SUM(price)``,
    ``COUNT(*)``) as the column beside it, where Flink and fastops call it
    ``EXPR$2``.
    """
    res = t_env.execute_sql(sql)
    doc_header, doc_rows = parse_grid(documented)
    types = [f.type for f in res.schema]
    assert res.schema.names == (names or doc_header)

    # rows: the final rows (the changelog applied) against the page's, typed
    log = [(r.get_row_kind(), tuple(r)) for r in res.collect()]
    got = applied(log)
    want = Counter(tuple(typed(doc_cell(c), t) for c, t in zip(row, types)) for row in doc_rows)
    assert got == want, f"\n{sql}\ngot  {sorted(got.items(), key=str)}\nwant {sorted(want.items(), key=str)}"

    # the grid: the same cells, once fastops' spelling of NULL and timestamps is the page's
    header, rows = parse_grid(printed(res))
    if header[0] == "op":
        grid_log = [(r[0], tuple(doc_cell(c) for c in r[1:])) for r in rows]
        header, grid_rows = header[1:], applied(grid_log)
    else:
        grid_rows = Counter(tuple(doc_cell(c) for c in r) for r in rows)
    assert header == (names or doc_header)
    assert grid_rows == Counter(tuple(doc_cell(c) for c in r) for r in doc_rows)


def env(mode: str, batch_size: int = 2, **tables: tuple[str, dict[str, pa.DataType], str]) -> fo.TableEnvironment:
    """A table environment with the pages' tables, each with its rowtime column and a 1 s watermark."""
    t_env = fo.TableEnvironment(mode=mode, batch_size=batch_size)
    for name, (grid, types, rowtime) in tables.items():
        t_env.create_temporary_view(name, t_env.from_arrow(table_of(grid, types), rowtime=rowtime, watermark="1 s"))
    return t_env


# ---------------------------------------------------------------- the examples


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("example", list(TVF_EXAMPLES))
def test_windowing_tvf_page(example, mode):
    sql, documented = TVF_EXAMPLES[example]
    if documented in TVF_EXAMPLES:  # named parameters: the same result as the positional call
        documented = TVF_EXAMPLES[documented][1]
    names = ["window_start", "window_end", "EXPR$2"] if "aggregation" in example else None
    check(env(mode, Bid=(TVF_BID, BID_TYPES, "bidtime")), sql, documented, names)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("example", list(WINDOW_AGG_EXAMPLES))
def test_window_aggregation_page(example, mode):
    sql, documented = WINDOW_AGG_EXAMPLES[example]
    names = None if "GROUPING" in sql or "ROLLUP" in sql else ["window_start", "window_end", "EXPR$2"]
    check(env(mode, Bid=(AGG_BID, BID_TYPES, "bidtime")), sql, documented, names)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("example", list(GROUP_AGG_EXAMPLES))
def test_group_aggregation_page(example, mode):
    sql, documented = GROUP_AGG_EXAMPLES[example]
    names = ["supplier_id", "rating", "EXPR$2"] if example == "rollup" else None
    check(fo.TableEnvironment(mode=mode), sql, documented, names)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("example", list(WINDOW_JOIN_EXAMPLES))
def test_window_join_page(example, mode):
    sql, documented = WINDOW_JOIN_EXAMPLES[example]
    # one batch per table: the page lists L2 (12:06) before L3 (12:03), which a
    # watermark advanced after L2 would make late; the page's result keeps L3.
    # In streaming mode Flink's window join emits only final rows; fastops
    # plans the outer joins as regular joins on the window columns, whose
    # changelog may retract a padded row once its match arrives (checked valid)
    t_env = env(mode, batch_size=65536, LeftTable=(LEFT_TABLE, JOIN_TYPES, "row_time"),
                RightTable=(RIGHT_TABLE, JOIN_TYPES, "row_time"))
    check(t_env, sql, documented)
