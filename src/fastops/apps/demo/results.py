"""The result tables of a run and how they are printed: PyFlink-style grids
and the closing summary (rows, rewards, late rows, throughput, operator load)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.apps.demo.generator import DemoConfig
from fastops.apps.demo.operators import VERIFY_S
from fastops.runtime.progress import describe_decision
from fastops.table.printing import render

__all__ = ["TIMESTAMP", "DemoResult", "format_grid", "report", "sorted_table", "summary"]

TIMESTAMP = pa.timestamp("ms")  # the type of event time in the printed tables


def format_grid(table: pa.Table, max_rows: int | None = 20) -> str:
    """A table as PyFlink's ``TableResult.print()`` draws it (batch layout: a
    boxed grid, values right-aligned, ending in ``N rows in set``), through
    the Table API's printer. Doubles are rounded to cents; at most
    ``max_rows`` rows are drawn."""
    cols = [pa.array(np.round(c.to_numpy(zero_copy_only=False), 2), mask=pc.is_null(c).to_numpy(
        zero_copy_only=False)) if pa.types.is_floating(c.type) else c for c in table.columns]
    t = pa.Table.from_arrays(cols, names=table.column_names)
    shown = t if max_rows is None else t.slice(0, max_rows)
    rows = list(zip(*[c.to_pylist() for c in shown.columns])) if shown.num_columns else []
    text = render(t.column_names, t.schema.types, rows).rstrip("\n")
    if max_rows is not None and t.num_rows > max_rows:
        head, _, _ = text.rpartition("\n")
        text = f"{head}\n{t.num_rows} rows in set (first {max_rows} shown)"
    return text


@dataclass
class DemoResult:
    """Tables of one run, its ``JobResult`` and the config."""

    rewards: pa.Table
    leaderboard: pa.Table
    per_minute: pa.Table
    late: pa.Table
    job: Any
    config: DemoConfig
    face: str = "DataStream"
    verified: pa.Table | None = None  # purchases verified with the payment service (--autoscale)

    @property
    def throughput(self) -> float:
        return self.job.rows_in / self.job.duration_s if self.job.duration_s > 0 else float("nan")


def sorted_table(t: pa.Table, keys: list[tuple[str, str]]) -> pa.Table:
    """``t`` sorted by ``keys`` (``[(column, "ascending" | "descending"), ...]``); an empty table as it is."""
    return t.sort_by(keys) if t.num_rows else t


def summary(res: DemoResult) -> str:
    """The closing summary: rows, rewards, late rows, throughput, operator load."""
    job = res.job
    sql = res.face == "SQL"
    late_note = ("not visible in SQL: events counted in no minute" if sql
                 else "reported on side_output('late'), not lost")
    lines = [
        f"face         {res.face}" + (f" ({len(job.jobs)} queries, one job each)" if sql else ""),
        f"rows in      {job.rows_in:,}" + (f" (resumed from checkpoint {job.restored_from})"
                                          if job.restored_from is not None and not getattr(job, "rescales", None)
                                          else ""),
        f"rewards      {res.rewards.num_rows:,} (players with >= {res.config.threshold} pops in a "
        f"1 min window, once per player and window)",
        f"late rows    {res.late.num_rows:,} ({late_note})",
        f"duration     {job.duration_s:.2f} s",
        f"throughput   {res.throughput / 1e6:.2f} M events/s at parallelism {res.config.parallelism}"
        + (" (rows in / total duration of the queries)" if sql else ""),
        "",
        "operator load (share of each task's wall time):",
    ]
    width = max([len(m.task) for m in job.metrics.values()] + [4])
    lines.append(f"  {'task'.ljust(width)}  {'busy':>6}  {'backpressured':>13}  {'idle':>6}  {'rows in':>12}")
    for m in job.metrics.values():
        lines.append(f"  {m.task.ljust(width)}  {m.busy_ms_per_s / 10:5.1f}%  "
                     f"{m.backpressured_ms_per_s / 10:12.1f}%  {m.idle_ms_per_s / 10:5.1f}%  "
                     f"{m.rows_in:12,}")
    if not res.config.threads and not sql:
        lines.append("  (all tasks share one thread here, so each is 'busy' for the whole run)")
    scaling = getattr(job, "scaling", None) or []
    if res.config.autoscale and not sql:
        applied = [d for d in scaling if d["applied"]]
        if res.verified is not None:
            lines += ["", f"verified     {res.verified.num_rows:,} purchases, each a call of "
                      f"{VERIFY_S * 1000:g} ms to the payment service"]
        lines += ["", f"autoscaler (DS2): {len(scaling)} decisions, {len(applied)} rescales"]
        t0 = scaling[0]["time"] if scaling else 0.0
        lines += [f"  {d['time'] - t0:6.1f} s  {describe_decision(d).removeprefix('autoscaler: ')}" for d in applied]
    shedding = getattr(job, "shedding", None) or {}
    if shedding:
        lines += ["", *describe_shedding(shedding)]
    return "\n".join(lines)


def describe_shedding(shedding: dict) -> list[str]:
    """The load shedder's summary: what it dropped and how the fraction moved."""
    offered, shed = shedding["rows_offered"], shedding["rows_shed"]
    decisions = shedding["decisions"]
    lines = [f"load shedding ({shedding['mode']}: pops first, purchases never before them; "
             f"p99 bound {shedding['max_latency_ms']:g} ms): {shed:,} of {offered:,} events shed "
             f"({shed / max(offered, 1):.1%}); the answers above count the events kept"]
    t0 = decisions[0]["time"] if decisions else 0.0
    last = 0.0
    for d in decisions:
        if d["fraction"] != last:
            p99 = "" if d["p99_ms"] is None else f", p99 {d['p99_ms']:,.0f} ms"
            lines.append(f"  {d['time'] - t0:6.1f} s  drop {last:.0%} -> {d['fraction']:.0%}{p99}: {d['reason']}")
            last = d["fraction"]
    return lines


def report(res: DemoResult, max_rows: int = 10) -> str:
    """Result tables (PyFlink-style grids) and the summary."""
    rewards = res.rewards.select(["window_start", "window_end", "player_id", "pops"])
    parts = [
        "Rewards (extra lives)", format_grid(rewards, max_rows),
        "", "Leaderboard (top players by pops per minute)", format_grid(res.leaderboard, max_rows),
        "", "Per minute: active players (HyperLogLog), events, purchases, revenue",
        format_grid(res.per_minute, max_rows),
    ]
    if res.face != "SQL":
        late = res.late.select([c for c in ("player_id", "event_type", "ts", "reason", "watermark")
                                if c in res.late.column_names])
        if "ts" in late.column_names:  # event time as a timestamp, next to the watermark it met
            late = late.set_column(late.column_names.index("ts"), "ts", late.column("ts").cast(TIMESTAMP))
        parts += ["", "Late events", format_grid(late, 5)]
    parts += ["", summary(res)]
    return "\n".join(parts)
