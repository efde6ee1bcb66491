"""The same rules in Flink SQL: one query (one job) per result table, each
over the same generated stream."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import fastops
from fastops.apps.demo.generator import DemoConfig, PlayerEventSource
from fastops.apps.demo.progress import Progress
from fastops.apps.demo.results import TIMESTAMP, DemoResult, sorted_table

__all__ = ["run_demo_sql", "sql_available", "sql_queries"]


def sql_available() -> bool:
    return hasattr(fastops, "TableEnvironment")


def sql_queries(cfg: DemoConfig) -> dict[str, str]:
    """The demo's rules in Flink SQL, over a view ``events``.

    The leaderboard query gives the pops per player and minute; the top
    ``top_n`` of each minute are then picked from it (Flink would write
    ``ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY pops DESC)``;
    the SQL face has no OVER windows yet).
    """
    return {
        "rewards": f"""
            SELECT window_start, window_end, player_id, COUNT(*) AS pops
            FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '1' MINUTE))
            WHERE event_type = 'pop'
            GROUP BY window_start, window_end, player_id
            HAVING COUNT(*) >= {int(cfg.threshold)}""",
        "leaderboard": """
            SELECT window_start, player_id, COUNT(*) AS pops
            FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
            WHERE event_type = 'pop'
            GROUP BY window_start, window_end, player_id""",
        "per_minute": """
            SELECT window_start, window_end, APPROX_COUNT_DISTINCT(player_id) AS active_players,
                   COUNT(*) AS events, COUNT(value) AS purchases, SUM(value) AS revenue
            FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
            GROUP BY window_start, window_end""",
    }


def _top_n(counts: pa.Table, n: int) -> pa.Table:
    """The top ``n`` players by pops of each minute (ties: lower id first)."""
    if not counts.num_rows:
        return pa.table({"window_start": pa.array([], TIMESTAMP), "rank": pa.array([], pa.int32()),
                         "player_id": pa.array([], pa.int64()), "pops": pa.array([], pa.int64())})
    ws = counts.column("window_start").cast(pa.int64()).to_numpy()
    pid = counts.column("player_id").to_numpy()
    pops = counts.column("pops").to_numpy()
    order = np.lexsort((pid, -pops, ws))
    ws_sorted = ws[order]
    first = np.r_[0, np.flatnonzero(np.diff(ws_sorted)) + 1]
    rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)])) + 1
    keep = order[rank <= n]
    return pa.table({"window_start": pa.array(ws[keep], TIMESTAMP), "rank": pa.array(rank[rank <= n].astype(np.int32)),
                     "player_id": pa.array(pid[keep]), "pops": pa.array(pops[keep])})


class _SqlJob:
    """What the summary needs of the SQL jobs: rows in, duration, metrics."""

    def __init__(self, jobs: list):
        self.jobs = [j for j in jobs if j is not None]
        self.rows_in = max((j.rows_in for j in self.jobs), default=0)
        self.duration_s = sum(j.duration_s for j in self.jobs)
        self.restored_from = None
        self.metrics = {f"{k} ({i + 1})": m for i, j in enumerate(self.jobs) for k, m in j.metrics.items()}


class _SqlProgress:
    """Feeds the bar of the SQL form from the sources' reads (a query's
    ``execute()`` takes no progress callback): rows of every query, and the
    watermark the sources' splits imply (``min`` of their ``max(ts)`` minus
    the bound, minus 1)."""

    def __init__(self, bar: Progress, cfg: DemoConfig):
        self.bar = bar
        self.splits = min(cfg.parallelism, cfg.num_batches)
        self.bound = cfg.out_of_orderness_ms
        self.lock = threading.Lock()
        self.rows = 0
        self.max_ts: dict[int, int] = {}
        self.note = ""

    def next_query(self, note: str) -> None:
        with self.lock:
            self.max_ts, self.note = {}, note

    def __call__(self, split: int, batch: pa.RecordBatch) -> None:
        ts = batch.column("ts").to_numpy()
        with self.lock:
            self.rows += batch.num_rows
            if len(ts):
                self.max_ts[split] = max(self.max_ts.get(split, int(ts.max())), int(ts.max()))
            wm = (min(self.max_ts.values()) - self.bound - 1 if len(self.max_ts) == self.splits else None)
            rows, note = self.rows, self.note
        self.bar.update(rows, wm, note=note)


def run_demo_sql(cfg: DemoConfig, progress: bool = False, stream: Any = None) -> DemoResult:
    """The same rules through the SQL face: one query (one job) per result
    table, each over the same generated stream. Late rows are not visible
    in SQL; their number is the events not counted in any minute. With
    ``progress`` one bar counts the rows of the three queries."""
    if not sql_available():
        raise RuntimeError("the SQL form of the demo needs fastops.TableEnvironment (the SQL face)")
    if cfg.checkpoint_dir or cfg.output:
        raise ValueError("--checkpoint-dir and --output apply to the DataStream form; drop --sql to use them")
    t_env = fastops.TableEnvironment(parallelism=cfg.parallelism)
    tables, jobs = {}, []
    queries = sql_queries(cfg)
    bar = Progress(cfg.events * len(queries), stream, enabled=progress, label="reward engine (SQL)")
    feed = _SqlProgress(bar, cfg)
    try:
        for i, (name, query) in enumerate(queries.items()):
            feed.next_query(f"query {i + 1}/{len(queries)}: {name}")
            tables[name], job = _run_query(t_env, cfg, query, feed)
            jobs.append(job)
    finally:
        bar.close()
    rewards = sorted_table(tables["rewards"], [("window_start", "ascending"), ("player_id", "ascending")])
    board = _top_n(tables["leaderboard"], cfg.top_n)
    per_minute = sorted_table(tables["per_minute"], [("window_start", "ascending")])
    counted = int(pc.sum(per_minute.column("events")).as_py() or 0)
    late = pa.table({"late_rows": pa.array(np.zeros(max(cfg.events - counted, 0), np.int8))})
    return DemoResult(rewards, board, per_minute, late, _SqlJob(jobs), cfg, "SQL")


def _run_query(t_env: Any, cfg: DemoConfig, query: str, feed: _SqlProgress | None) -> tuple[pa.Table, Any]:
    """One SQL query over a fresh generated stream: (its rows, its JobResult)."""
    env = fastops.StreamEnvironment(parallelism=cfg.parallelism, threads=cfg.threads)
    events = (env.from_source(PlayerEventSource(cfg, feed), cfg.parallelism)
              .with_watermark("ts", max_out_of_orderness=cfg.out_of_orderness_ms))
    for edge in events.node.inputs:  # from_data_stream walks edges by a ``node`` attribute
        if not hasattr(edge, "node"):
            object.__setattr__(edge, "node", edge.upstream)
    t_env.create_temporary_view("events", t_env.from_data_stream(events))
    try:
        result = t_env.sql_query(query).execute()
    finally:
        t_env.drop_temporary_view("events")
    return result.to_arrow(), result.job_result
