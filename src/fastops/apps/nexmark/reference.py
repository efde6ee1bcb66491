"""Nexmark's queries written out for DuckDB over the finished input: the
reference of the tests (``tests/apps/test_nexmark.py``) and the peer of the
benchmark (``bench/bench_nexmark.py``).

``tables(data)`` splits the generated ``datagen`` table (``fastops.connectors.
nexmark.generate``) into ``person``, ``auction`` and ``bid`` Arrow tables
(the columns of nexmark's views); register them with DuckDB and run
``REFERENCE[q]``. Windows are assigned explicitly from the event time in
milliseconds: ``TUMBLE(10 s)`` by ``t // 10000``, ``HOP(10 s, 2 s)`` as the
five window starts ``(t // 2000 - k) * 2000``, sessions of 10 s per bidder
by the gaps between its bids.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["REFERENCE", "tables"]


def tables(data: pa.Table) -> dict[str, pa.Table]:
    """``person``, ``auction`` and ``bid`` of a ``datagen`` table, as nexmark's views."""
    out = {}
    kinds = data.column("event_type")
    for code, name in enumerate(("person", "auction", "bid")):
        rows = data.column(name).filter(pc.equal(kinds, code)).combine_chunks()
        out[name] = pa.table({f.name: rows.field(i) for i, f in enumerate(rows.type)})
    return out


MS = "epoch_ms(CAST(\"dateTime\" AS TIMESTAMP))"  # event time in ms, for the window assignment

REFERENCE = {
    "q0": 'SELECT auction, bidder, price, "dateTime", extra FROM bid',
    "q1": 'SELECT auction, bidder, 0.908 * price AS price, "dateTime", extra FROM bid',
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P ON A.seller = P.id
             WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    "q4": """SELECT category, AVG(final) FROM (
               SELECT MAX(B.price) AS final, A.category FROM auction A JOIN bid B ON A.id = B.auction
               WHERE B."dateTime" BETWEEN A."dateTime" AND A.expires GROUP BY A.id, A.category)
             GROUP BY category""",
    # HOP(10 s, slide 2 s): the five windows [s, s + 10 s) holding t, s = (t // 2000 - k) * 2000
    "q5": f"""WITH w AS (SELECT auction, (({MS} // 2000) - k) * 2000 AS ws FROM bid, range(5) r(k)),
                   c AS (SELECT auction, ws, count(*) AS num FROM w GROUP BY auction, ws),
                   m AS (SELECT ws, max(num) AS maxn FROM c GROUP BY ws)
              SELECT c.auction, c.num FROM c JOIN m ON c.ws = m.ws AND c.num >= m.maxn""",
    # TUMBLE(10 s): window_end = (t // 10000 + 1) * 10000
    "q7": f"""WITH b1 AS (SELECT max(price) AS maxprice, ({MS} // 10000 + 1) * 10000 AS we FROM bid
                          GROUP BY {MS} // 10000)
              SELECT B.auction, B.price, B.bidder, B."dateTime", B.extra FROM bid B JOIN b1
              ON B.price = b1.maxprice
              WHERE epoch_ms(CAST(B."dateTime" AS TIMESTAMP)) BETWEEN b1.we - 10000 AND b1.we""",
    "q8": f"""WITH p AS (SELECT DISTINCT id, name, {MS} // 10000 AS w FROM person),
                   a AS (SELECT DISTINCT seller, {MS} // 10000 AS w FROM auction)
              SELECT p.id, p.name, make_timestamp(p.w * 10000 * 1000) FROM p JOIN a
              ON p.id = a.seller AND p.w = a.w""",
    "q9": """SELECT * EXCLUDE (rownum) FROM (
               SELECT A.*, B.auction, B.bidder, B.price, B."dateTime" AS bid_dateTime, B.extra AS bid_extra,
                 ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B."dateTime" ASC) AS rownum
               FROM auction A JOIN bid B ON A.id = B.auction
               WHERE B."dateTime" BETWEEN A."dateTime" AND A.expires) WHERE rownum <= 1""",
    "q10": """SELECT auction, bidder, price, "dateTime", extra, strftime("dateTime", '%Y-%m-%d'),
              strftime("dateTime", '%H:%M') FROM bid""",
    # sessions of 10 s per bidder: a new one when a bid comes 10 s or more after the previous
    "q11": f"""WITH t AS (SELECT bidder, {MS} AS ms,
                  CASE WHEN {MS} - lag({MS}) OVER (PARTITION BY bidder ORDER BY {MS}) < 10000 THEN 0 ELSE 1 END
                  AS first FROM bid),
                s AS (SELECT bidder, ms, sum(first) OVER (PARTITION BY bidder ORDER BY ms) AS session FROM t)
               SELECT bidder, count(*), make_timestamp(min(ms) * 1000), make_timestamp((max(ms) + 10000) * 1000)
               FROM s GROUP BY bidder, session""",
    "q13": """SELECT auction, bidder, price, "dateTime", CAST(auction % 10000 AS VARCHAR) FROM bid""",
    "q14": """SELECT auction, bidder, 0.908 * price AS price,
                CASE WHEN hour("dateTime") >= 8 AND hour("dateTime") <= 18 THEN 'dayTime'
                     WHEN hour("dateTime") <= 6 OR hour("dateTime") >= 20 THEN 'nightTime'
                     ELSE 'otherTime' END AS bidTimeType,
                "dateTime", extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
              FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q15": """SELECT strftime("dateTime", '%Y-%m-%d') AS day, count(*),
                count(*) FILTER (WHERE price < 10000), count(*) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(*) FILTER (WHERE price >= 1000000), count(DISTINCT bidder),
                count(DISTINCT bidder) FILTER (WHERE price < 10000),
                count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(DISTINCT bidder) FILTER (WHERE price >= 1000000), count(DISTINCT auction),
                count(DISTINCT auction) FILTER (WHERE price < 10000),
                count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(DISTINCT auction) FILTER (WHERE price >= 1000000)
              FROM bid GROUP BY day""",
    "q16": """SELECT channel, strftime("dateTime", '%Y-%m-%d') AS day, max(strftime("dateTime", '%H:%M')),
                count(*), count(*) FILTER (WHERE price < 10000),
                count(*) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(*) FILTER (WHERE price >= 1000000), count(DISTINCT bidder),
                count(DISTINCT bidder) FILTER (WHERE price < 10000),
                count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(DISTINCT bidder) FILTER (WHERE price >= 1000000), count(DISTINCT auction),
                count(DISTINCT auction) FILTER (WHERE price < 10000),
                count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(DISTINCT auction) FILTER (WHERE price >= 1000000)
              FROM bid GROUP BY channel, day""",
    "q17": """SELECT auction, strftime("dateTime", '%Y-%m-%d') AS day, count(*),
                count(*) FILTER (WHERE price < 10000), count(*) FILTER (WHERE price >= 10000 AND price < 1000000),
                count(*) FILTER (WHERE price >= 1000000), min(price), max(price), avg(price), sum(price)
              FROM bid GROUP BY auction, day""",
    "q18": """SELECT auction, bidder, price, channel, url, "dateTime", extra FROM (
                SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY "dateTime" DESC) AS r FROM bid)
              WHERE r <= 1""",
    "q19": """SELECT auction, price, r FROM (
                SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS r FROM bid)
              WHERE r <= 10""",
    # Flink numbers the second dateTime and extra of the select list (Calcite's uniquify): dateTime0, extra0
    "q20": """SELECT auction, bidder, price, channel, url, B."dateTime", B.extra, itemName, description, initialBid,
                reserve, A."dateTime" AS "dateTime0", expires, seller, category, A.extra AS extra0
              FROM bid B JOIN auction A ON B.auction = A.id WHERE A.category = 10""",
    "q21": """SELECT auction, bidder, price, channel,
                CASE WHEN lower(channel) = 'apple' THEN '0' WHEN lower(channel) = 'google' THEN '1'
                     WHEN lower(channel) = 'facebook' THEN '2' WHEN lower(channel) = 'baidu' THEN '3'
                     ELSE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) END
              FROM bid WHERE regexp_matches(url, '(&|^)channel_id=([^&]*)')
                 OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q22": """SELECT auction, bidder, price, channel, split_part(url, '/', 4), split_part(url, '/', 5),
                split_part(url, '/', 6) FROM bid""",
}
