"""The reward engine in DataStream form: :func:`build_job` adds it to an
environment, :func:`run_demo` runs it and returns its tables.

The job
    * rewards: pops per player in sliding windows of one minute every 10
      seconds (``Sliding("1 min", "10 s")``); a window with at least
      ``threshold`` (500) pops earns that player an extra life. The window
      operator emits each (player, window) once (allowed lateness 0: a
      window fires once, when the watermark passes its end);
      :class:`RewardFilter` keeps windows over the threshold and also drops
      any repeated (player, window) pair, so the rule stays "once per player
      and window" even with allowed lateness > 0.
    * leaderboard: the top ``top_n`` players by pops per minute, exact, from
      the sliding windows that start on a minute boundary (those are the
      tumbling minutes) -- :class:`PerWindow` ranks them once the watermark
      has passed the minute.
    * per minute (a tumbling minute window over all events, without keys,
      as Flink's ``windowAll``: one task): distinct active
      players by HyperLogLog (``agg.approx_distinct``, precision 14: 0.81 %
      relative standard error), events, purchases and revenue (``count`` and
      ``sum`` of ``value``, which is null except on purchases).
    * late events: the ``side_output("late")`` of the per-minute window, with
      the reason and the watermark they met; rows counted in minutes + late
      rows = rows in.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

import fastops
from fastops.apps.demo.generator import DemoConfig, PlayerEventSource
from fastops.apps.demo.operators import (
    PANE_COUNTS,
    PerWindow,
    RewardFilter,
    leaderboard_fn,
    local_top_n,
    pops_per_pane,
    screen_events,
    verify_purchases,
)
from fastops.apps.demo.progress import Progress
from fastops.apps.demo.results import DemoResult, sorted_table
from fastops.apps.demo.streams import redis_events
from fastops.connectors.base import Source
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Sliding, Tumbling
from fastops.operators.window import WindowOperator

__all__ = ["build_job", "run_demo"]


# under load shedding, pops go first: a purchase (an event with a value) is never dropped while a pop is kept
PURCHASES_FIRST = pc.if_else(pc.is_valid(pc.field("value")), 1, 0)


def build_job(env: Any, cfg: DemoConfig, source: Source | None = None) -> dict[str, Any]:
    """Add the reward engine to ``env``; returns the output streams by name
    (``rewards``, ``leaderboard``, ``per_minute``, ``late``; with ``cfg.autoscale`` also
    ``verified``: the purchases, each checked with a simulated payment service)."""
    head = (redis_events(env, cfg, cfg.source) if cfg.source is not None and source is None
            else env.from_source(source or PlayerEventSource(cfg), cfg.parallelism))
    events = head.with_watermark("ts", max_out_of_orderness=cfg.out_of_orderness_ms)
    if cfg.qos is not None:  # every event screened by an anti-cheat service: what a fast feed overloads
        events = events.key_by("player_id").map(screen_events, name="screen_events")
    pops = (events.map(pops_per_pane, name="pops_per_pane", schema=PANE_COUNTS)
            .key_by("player_id")
            .window(Sliding("1 min", "10 s"))
            .aggregate(pops=agg.sum("n")))
    # their output schemas are known: a run with no reward or no window still shows their columns
    rewards = pops.transform("rewards", lambda: RewardFilter(cfg.threshold), schema=pops.schema)
    board = None if pops.schema is None else pa.schema(
        [pops.schema.field("window_start"), pa.field("rank", pa.int32()), pops.schema.field("player_id"),
         pops.schema.field("pops")])
    leaderboard = (pops.map(local_top_n(cfg.top_n), name="local_top_n")
                   .key_by("window_start")
                   .transform("leaderboard", lambda: PerWindow("leaderboard", leaderboard_fn(cfg.top_n)),
                              schema=board))
    # per minute over the whole game: a window without keys (Flink's windowAll),
    # so it runs as one task that every source task feeds
    minute_aggs = {"active_players": agg.approx_distinct("player_id", precision=14),
                   "events": agg.count(), "purchases": agg.count("value"), "revenue": agg.sum("value")}
    minutes = events.transform(
        "per_minute", lambda: WindowOperator(Tumbling("1 min"), (), minute_aggs, "ts"), parallelism=1)
    per_minute = minutes.select("window_start", "window_end", "active_players", "events", "purchases",
                                "revenue")
    late = minutes.side_output("late")
    streams = {"rewards": rewards, "leaderboard": leaderboard, "per_minute": per_minute, "late": late}
    if cfg.autoscale:  # purchases verified with a payment service: the operator the autoscaler sizes
        streams["verified"] = (events.filter(pc.is_valid(pc.field("value")), name="purchases")
                               .key_by("player_id").map(verify_purchases, name="verify_purchases")
                               .select("player_id", "ts", "value"))
    return streams


def _collect(stream: Any, name: str) -> Any:
    """A collect sink added to the job (results read after ``env.execute``)."""
    return stream.sink_to_table(f"collect({name})")


def _read_output(directory: str) -> pa.Table | None:
    if not os.path.isdir(directory):
        return None
    try:
        return ds.dataset(directory, format="parquet").to_table()
    except (pa.ArrowInvalid, FileNotFoundError):
        return None


def run_demo(cfg: DemoConfig, progress: bool = True, stream: Any = None) -> DemoResult:
    """Build and run the job; returns its tables (complete across restarts
    when ``cfg.output`` is set, since the Parquet sinks are exactly-once)."""
    env = fastops.StreamEnvironment(parallelism=cfg.parallelism, checkpoint_dir=cfg.checkpoint_dir,
                                    checkpoint_interval=cfg.checkpoint_interval, threads=cfg.threads,
                                    qos=None if cfg.qos is None else fastops.QoS(
                                        max_latency=cfg.qos, shedding="semantic", priority=PURCHASES_FIRST))
    if cfg.autoscale:
        env.enable_autoscaling(interval="2s", stabilization="4s")
    streams = build_job(env, cfg)
    results = {name: _collect(s, name) for name, s in streams.items()}
    if cfg.output:
        for name, s in streams.items():
            s.sink_to_parquet(os.path.join(cfg.output, name))
    bar = Progress(cfg.events, stream, enabled=progress)  # counts rows a restored checkpoint covers
    try:
        client = env.execute_async("reward engine", progress=bar, ui=cfg.ui, ui_keep=cfg.ui_keep)
        if client.ui_url is not None:
            print(f"the job's page and metrics: {client.ui_url}/", file=stream or sys.stderr, flush=True)
        job = client.wait()
    finally:
        bar.close()
    tables = {name: r.table() for name, r in results.items()}
    if cfg.output:  # a resumed run: the files hold the rows of every attempt, exactly once
        for name in tables:
            t = _read_output(os.path.join(cfg.output, name))
            if t is not None:
                tables[name] = t
    rewards = sorted_table(tables["rewards"], [("window_start", "ascending"), ("player_id", "ascending")])
    board = sorted_table(tables["leaderboard"], [("window_start", "ascending"), ("rank", "ascending")])
    late = tables["late"]
    per_minute = sorted_table(tables["per_minute"], [("window_start", "ascending")])
    return DemoResult(rewards, board, per_minute, late, job, cfg, verified=tables.get("verified"))
