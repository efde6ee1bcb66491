"""PyFlink's side of ``bench_nexmark.py``: nexmark's queries over events read from a file.

Run by the interpreter of a separate environment where ``apache-flink`` is
installed (``bench_nexmark.py --pyflink-python PATH``); it imports neither
fastops nor anything outside PyFlink and the standard library.

nexmark's ``nexmark`` connector (a Java jar) is not available, so the events
fastops' generator produced are read from a JSON-lines file: ``ddl_gen.sql``
is declared as written (the ``event_type`` / ``person`` / ``auction`` /
``bid`` ROW columns, the computed ``dateTime`` and its
``WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND``) with its WITH
clause replaced by a ``filesystem`` / ``json`` one, and ``ddl_views.sql``
defines the ``person``, ``auction`` and ``bid`` views over it unchanged. Each
query file then runs unchanged (its sink a ``blackhole`` table), in streaming
mode at parallelism 1, in a fresh TableEnvironment of one JVM. q14's
``count_char`` (nexmark's Java UDF) is a pandas UDF here (fastops runs it as
an Arrow UDF).

Modes:

- ``time``: wall seconds per query (TableEnvironment, DDL and the job until
  it finishes), ``--repeats`` runs each; the JVM start-up (the first
  TableEnvironment) is measured once and reported apart.
- ``count``: the rows each query's ``INSERT INTO`` would write, as final rows
  (``SELECT COUNT(*)`` over its SELECT, collected with ``to_pandas``; q9:
  ``COUNT(DISTINCT id)``, see ``UPSERT_KEYS``).

The result is JSON, written to ``--out``::

    {"jvm_start_s": ..., "flink_version": ..., "queries": {"q0": {"seconds": [...]} | {"rows": n} | {"error": "..."}}}
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

_STARTED = time.perf_counter()

_INSERT = re.compile(r"^INSERT\s+INTO\s+(\S+)\s+(.*)$", re.IGNORECASE | re.DOTALL)
_CREATE_COUNT_CHAR = re.compile(r"^CREATE\s+FUNCTION\s+count_char\s+AS\s+'com\.github\.nexmark\.flink\.udf\.CountChar'",
                                re.IGNORECASE)
# q9's Top-1 per auction reaches the client as updates without retractions (+U replacing the previous
# row of its id) while Flink's plan marks the Rank's output insert-only, so COUNT(*) over it counts
# every update: its final rows are its distinct ids
UPSERT_KEYS = {"q9": "id"}
# reading every event and every column: the PyFlink counterpart of the bench's "source only"
SOURCE_ONLY = """CREATE TABLE source_only_sink (event_type INT, person_id BIGINT, auction_id BIGINT, bid_price BIGINT,
                     `dateTime` TIMESTAMP(3)) WITH ('connector' = 'blackhole');
INSERT INTO source_only_sink SELECT event_type, person.id, auction.id, bid.price, `dateTime` FROM datagen"""


def statements(text: str) -> list[str]:
    """The statements of a SQL file: ``--`` comments dropped, split at ``;``."""
    code = re.sub(r"--[^\n]*", "", text)
    return [s.strip() for s in code.split(";") if s.strip()]


def datagen_ddl(queries_dir: Path, events_path: str) -> str:
    """nexmark's ``ddl_gen.sql`` with the WITH clause of a JSON-lines filesystem table."""
    text = (queries_dir / "ddl_gen.sql").read_text()
    head = text[:text.rindex(") WITH (")]
    return (head + ") WITH (\n    'connector' = 'filesystem',\n"
            f"    'path' = 'file://{events_path}',\n    'format' = 'json'\n)")


def query_file(queries_dir: Path, name: str, flink_home: str) -> str:
    """The text of ``name`` (``"q5"``, or ``"source_only"``), ``${FLINK_HOME}`` filled in."""
    if name == "source_only":
        return SOURCE_ONLY
    return (queries_dir / f"{name}.sql").read_text().replace("${FLINK_HOME}", flink_home)


def new_env() -> Any:
    """A streaming TableEnvironment at parallelism 1 (nexmark runs in streaming mode)."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("parallelism.default", "1")
    return t_env


def count_char_udf() -> Any:
    """nexmark's CountChar: how many characters of ``s`` equal the first of ``c`` (0 for null), as a
    vectorized (pandas) UDF, as fastops runs it on Arrow arrays."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    def count_char(s: Any, c: Any) -> Any:
        text = c if isinstance(c, str) else (c.iloc[0] if len(c) else "")  # a literal may come as a str
        first = str(text)[:1] if text is not None else ""
        if not first:
            return s.str.len().mul(0).fillna(0).astype("int64")
        return s.str.count(re.escape(first)).fillna(0).astype("int64")

    return udf(count_char, result_type=DataTypes.BIGINT(), func_type="pandas")


def prepare(queries_dir: Path, events_path: str) -> Any:
    """A TableEnvironment holding the ``datagen`` table and nexmark's views."""
    t_env = new_env()
    t_env.execute_sql(datagen_ddl(queries_dir, events_path))
    views = (queries_dir / "ddl_views.sql").read_text().replace("${NEXMARK_TABLE}", "datagen")
    for stmt in statements(views):
        t_env.execute_sql(stmt)
    return t_env


def run(queries_dir: Path, events_path: str, flink_home: str, name: str, count: bool) -> int | None:
    """Run query ``name``; with ``count``, the number of final rows its INSERT would write."""
    t_env = prepare(queries_dir, events_path)
    rows: int | None = None
    for stmt in statements(query_file(queries_dir, name, flink_home)):
        if _CREATE_COUNT_CHAR.match(stmt):
            t_env.create_temporary_function("count_char", count_char_udf())
            continue
        insert = _INSERT.match(stmt)
        if insert is None:
            t_env.execute_sql(stmt)
        elif not count:
            t_env.execute_sql(stmt).wait()
        else:  # COUNT(*) consumes the query's changelog (retractions included): its final value
            what = f"DISTINCT {UPSERT_KEYS[name]}" if name in UPSERT_KEYS else "*"
            rows = int(t_env.sql_query(f"SELECT COUNT({what}) FROM ({insert.group(2)})").to_pandas().iloc[-1, 0])
    return rows


def reason(exc: BaseException) -> str:
    """The first line of the innermost Java cause (or of the Python error)."""
    text = str(exc)
    causes = re.findall(r"Caused by: ([^\n]+)", text)
    line = causes[-1] if causes else next((s for s in text.splitlines() if s.strip()), type(exc).__name__)
    return line.strip()[:300]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", required=True, help="the JSON-lines file of the events")
    parser.add_argument("--queries-dir", required=True, help="nexmark's SQL files (ddl_gen.sql, q0.sql, ...)")
    parser.add_argument("--flink-home", required=True, help="the directory holding data/side_input.txt (q13)")
    parser.add_argument("--queries", required=True, help="comma-separated: q0,q1,... (source_only: read the events)")
    parser.add_argument("--mode", choices=("time", "count"), default="time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    args = parser.parse_args()
    queries_dir = Path(args.queries_dir)
    events_path = str(Path(args.events).resolve())

    import pyflink

    new_env()  # starts the JVM: measured apart from the queries
    out: dict[str, Any] = {"jvm_start_s": time.perf_counter() - _STARTED,
                           "flink_version": getattr(pyflink, "__version__", "unknown"), "queries": {}}
    if args.mode == "time":  # one untimed job: the JVM loads and compiles the common classes once
        run(queries_dir, events_path, args.flink_home, "source_only", count=False)
    for name in args.queries.split(","):
        print(f"pyflink {args.mode} {name} at {time.perf_counter() - _STARTED:.1f} s", file=sys.stderr, flush=True)
        try:
            if args.mode == "count":
                out["queries"][name] = {"rows": run(queries_dir, events_path, args.flink_home, name, count=True)}
            else:
                seconds = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    run(queries_dir, events_path, args.flink_home, name, count=False)
                    seconds.append(time.perf_counter() - t0)
                out["queries"][name] = {"seconds": seconds}
        except Exception as exc:  # a query Flink refuses or fails: reported with the reason
            out["queries"][name] = {"error": reason(exc)}
        Path(args.out).write_text(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
