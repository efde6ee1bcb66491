"""A live progress bar for a running job.

One line: rows read (of the total when the sources know it), rows per
second, the watermark, the checkpoints completed and the p99 latency from
source to sink over the last 5 s (and, for a job with a QoS, the drop
fraction and the rows shed); above it, a line for
every rescale the autoscaler decides, as it happens. ``env.execute(progress=True)``
draws it on stderr, and ``fastops demo`` uses the same bar. It is drawn by
rich when rich is importable, else by tqdm, else as one plain line rewritten
in place.

The total is known for collections, pandas and Arrow tables, Parquet files
(from their metadata) and Arrow IPC files; a source of another kind may say
by a ``total_rows()`` method. Without a total the bar is open-ended: a count.
After a restore the bar starts at the rows the checkpoint already covers (a
source's ``rows_at(index, parallelism, position)`` says how many rows one
split had read at a position; the built-in sources know), so a resumed job
ends at 100 % like one that ran in one go.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from fastops.runtime.metrics import latency_summary

__all__ = ["Progress", "describe_decision", "source_rows_at", "source_total_rows"]

LATENCY_WINDOW_S = 5.0  # the bar's latency quantile is over this many seconds
_FAR = 2**62  # watermarks beyond this are the start / end markers, not times


def source_total_rows(source: Any) -> int | None:
    """Rows ``source`` will produce in all, or None when that is not known
    without reading it (CSV files, generators, iterators): what the source's
    ``total_rows()`` says, if it has one."""
    own = getattr(source, "total_rows", None)
    return own() if callable(own) else None


def source_rows_at(source: Any, index: int, parallelism: int, position: Any) -> int | None:
    """Rows split ``index`` of ``parallelism`` had read at ``position`` (a
    position from a checkpoint), or None when the source cannot tell: what
    the source's ``rows_at()`` says, if it has one."""
    own = getattr(source, "rows_at", None)
    if callable(own):
        return own(index, parallelism, position)
    return 0 if position is None else None


def describe_decision(decision: dict[str, Any]) -> str:
    """One line for an autoscaler's decision: what changed and why (DS2's
    target rate and the true rate per instance of each operator it rescaled)."""
    ops = {o["name"]: o for o in decision["operators"]}
    changes: dict[str, list[str]] = {}  # operators of one chain read alike: one entry for them
    for name, p in decision["applied"].items():
        o = ops.get(name, {})
        why = ""
        if o.get("true_processing_rate"):
            why = (f" (target {_fmt_rate(o['target_input_rate'])}, "
                   f"{_fmt_rate(o['true_processing_rate'])} per instance)")
        changes.setdefault(f"{o.get('parallelism', '?')} -> {p}{why}", []).append(name)
    return "autoscaler: " + "; ".join(f"{', '.join(names)} {change}" for change, names in changes.items())


def _fmt_ts(ms: int | None) -> str:
    if ms is None or ms < -_FAR:
        return "-"
    if ms > _FAR:
        return "end"
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000.0))


def _fmt_rate(rows_per_s: float) -> str:
    if rows_per_s >= 1e6:
        return f"{rows_per_s / 1e6:.2f} M rows/s"
    if rows_per_s >= 1e3:
        return f"{rows_per_s / 1e3:.1f} k rows/s"
    return f"{rows_per_s:.0f} rows/s"


class Progress:
    """A progress bar fed with the live metrics of a job's tasks.

    Parameters
    ----------
    total
        Rows the sources will read in all; ``None`` asks the sources when the
        bar is attached to a job (and stays open-ended if they do not know).
    stream
        Where to draw (default ``sys.stderr``).
    enabled
        ``False`` draws nothing (the bar still counts).
    label
        The text in front of the bar.
    sources
        Name prefixes of the source tasks, for a bar used without
        :meth:`attach` (an attached bar knows them from the plan).

    Notes
    -----
    ``StreamEnvironment.execute(progress=bar)`` attaches the bar to the job
    (its plan and executor) and calls ``bar(metrics)`` a few times a second
    with every task's ``TaskMetrics``; :meth:`update` draws given numbers
    directly. Call :meth:`close` at the end (``execute(progress=True)`` does).

    Examples
    --------
    >>> import io
    >>> bar = Progress(total=10, stream=io.StringIO(), label="job")
    >>> bar.update(10, watermark=0)
    >>> bar.rows
    10
    >>> bar.close()
    """

    def __init__(self, total: int | None = None, stream: Any = None, enabled: bool = True,
                 label: str = "job", sources: Sequence[str] | None = None):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.label = label
        self.sources = tuple(sources) if sources else None
        self.rows = 0
        self.kind = "plain"
        self.bar: Any = None
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._rows0: int | None = None  # rows at the first update (restored ones)
        self._last_plain = 0.0
        self._plain_width = 0
        self._undrawn: tuple | None = None  # the latest state a rate limit skipped
        self._plan: Any = None
        self._executor: Any = None
        self._restored: tuple[Any, int] = (None, 0)  # (manifest, rows it covers)
        self._started = False
        self._closed = False
        self._decisions_shown = 0
        if enabled:
            self._pick_backend()

    # -- drawing backends ----------------------------------------------------------
    def _pick_backend(self) -> None:
        try:  # deferred: rich and tqdm are optional, and the bar picks whichever is there
            import rich.console
            import rich.progress as rp

            tty = bool(getattr(self.stream, "isatty", lambda: False)())
            console = rich.console.Console(file=self.stream, width=None if tty else 160)
            self.bar = rp.Progress(rp.TextColumn(f"[bold]{self.label}"), rp.BarColumn(bar_width=30),
                                   rp.TaskProgressColumn(), rp.TextColumn("{task.fields[info]}"),
                                   rp.TimeElapsedColumn(), transient=False, console=console)
            self.kind = "rich"
            return
        except ImportError:
            pass
        try:
            import tqdm

            self.bar = tqdm.tqdm(total=self.total, unit="rows", unit_scale=True, file=self.stream,
                                 desc=self.label, leave=True)
            self.kind = "tqdm"
        except ImportError:
            pass

    # -- fed by the job ------------------------------------------------------------
    def attach(self, plan: Any, executor: Any) -> None:
        """Called by ``StreamEnvironment`` before the job runs: the source
        tasks and their total come from ``plan``; the restored checkpoint and
        the checkpoints completed from ``executor``."""
        self._plan = plan
        self._executor = executor
        heads = [c for c in plan.chains if c.head.is_source]
        self.sources = tuple(f"{c.name()}[" for c in heads)
        if self.total is None:
            sizes = [source_total_rows(c.head.source) for c in heads]
            self.total = sum(sizes) if None not in sizes else None  # type: ignore[arg-type]

    def _restored_rows(self) -> int:
        """Rows the checkpoint the current attempt started from already covers."""
        manifest = getattr(self._executor, "restored", None)
        if manifest is self._restored[0]:
            return self._restored[1]
        rows = 0
        if manifest is not None and self._plan is not None:
            if manifest.finished:
                rows = self.total or 0
            else:
                for c in self._plan.chains:
                    if not c.head.is_source:
                        continue
                    for i in range(c.parallelism):
                        pos = manifest.tasks.get(f"{c.index}/{i}", {}).get("position")
                        pos = tuple(pos) if isinstance(pos, list) else pos  # JSON turned tuples into lists
                        rows += source_rows_at(c.head.source, i, c.parallelism, pos) or 0
        self._restored = (manifest, rows)
        return rows

    def __call__(self, metrics: list) -> None:
        """The executor's callback: ``metrics`` holds every task's live ``TaskMetrics``."""
        if self.sources is not None:
            rows = sum(m.rows_in for m in metrics if m.task.startswith(self.sources))
        else:  # no plan: the busiest task's input is the best guess
            rows = max((m.rows_in for m in metrics), default=0)
        rows += self._restored_rows()
        wms = [m.watermark for m in metrics if m.watermark is not None]
        coordinator = getattr(self._executor, "coordinator", None)
        checkpoints = (len(coordinator.stats) if coordinator is not None
                       and getattr(coordinator, "storage", None) is not None else None)
        self._show_decisions()
        p99 = latency_summary(metrics, time.time() - LATENCY_WINDOW_S)["p99_ms"]
        notes = [] if p99 is None else [f"latency p99 {p99:,.0f} ms"]
        monitor = getattr(getattr(self._executor, "config", None), "monitor", None)
        if monitor is not None:  # a QoS job: the drop fraction now and the rows shed so far
            shed = sum(m.shed_rows for m in metrics)
            notes.append(f"shedding {monitor.control.fraction:.0%} ({shed:,} rows shed)")
        self.update(rows, min(wms) if wms else None, checkpoints, note="  ".join(notes))

    def _show_decisions(self) -> None:
        """A line for each rescale the job's autoscaler applied since the last call."""
        scaling = getattr(self._executor, "scaling", None)
        decisions = scaling() if callable(scaling) else []
        for d in decisions[self._decisions_shown:]:
            if d["applied"]:
                self.announce(describe_decision(d))
        self._decisions_shown = len(decisions)

    def announce(self, line: str) -> None:
        """Print ``line`` above the bar (the bar stays the last line)."""
        with self._lock:
            if not self.enabled or self._closed:
                return
            if self.kind == "rich" and self._started:
                self.bar.console.print(line, markup=False, highlight=False)
            elif self.kind == "tqdm":
                self.bar.write(line, file=self.stream)
            else:
                self.stream.write("\r" + line.ljust(self._plain_width) + "\n")
                self._plain_width = 0
                self.stream.flush()

    # -- drawing -------------------------------------------------------------------
    def update(self, rows: int, watermark: int | None = None, checkpoints: int | None = None,
               note: str = "") -> None:
        """Draw ``rows`` read so far, the watermark (ms) and the checkpoints
        completed (``None`` leaves either out). Safe to call from any thread."""
        with self._lock:
            self.rows = rows
            if self._rows0 is None:
                self._rows0 = rows
            if not self.enabled or self._closed:
                return
            self._draw(rows, self._info(rows, watermark, checkpoints, note))

    def _info(self, rows: int, watermark: int | None, checkpoints: int | None, note: str) -> str:
        dt = max(time.perf_counter() - self._t0, 1e-9)
        parts = [f"{rows:,}/{self.total:,} rows" if self.total else f"{rows:,} rows",
                 _fmt_rate((rows - (self._rows0 or 0)) / dt)]
        if watermark is not None:
            parts.append(f"watermark {_fmt_ts(watermark)}")
        if checkpoints is not None:
            parts.append(f"checkpoints {checkpoints}")
        if note:
            parts.append(note)
        return "  ".join(parts)

    def _draw(self, rows: int, info: str) -> None:
        if self.kind == "rich":
            if not self._started:
                self.task = self.bar.add_task("run", total=self.total, info="")
                self.bar.start()
                self._started = True
            self.bar.update(self.task, total=self.total, completed=rows, info=info)
        elif self.kind == "tqdm":
            self.bar.total = self.total
            self.bar.n = rows
            self.bar.set_postfix_str(info, refresh=True)
        else:
            now = time.perf_counter()
            if now - self._last_plain < 0.5 and (self.total is None or rows < self.total):
                self._undrawn = (rows, info)
                return
            self._last_plain, self._undrawn = now, None
            head = f"{self.label} {100.0 * rows / self.total:5.1f}%" if self.total else self.label
            line = f"{head}  {info}"
            self.stream.write("\r" + line.ljust(self._plain_width))
            self._plain_width = len(line)
            self.stream.flush()
        self._started = True

    def close(self) -> None:
        """Draw the last state (a restored finished job never reported any) and end the line."""
        if self._closed:
            return
        if self._plan is not None and not self._started:
            self([])
        with self._lock:
            self._closed = True
            if not self.enabled:
                return
            if self.kind == "plain" and self._undrawn is not None:
                self._last_plain = 0.0  # past the rate limit: draw the last state
                self._draw(*self._undrawn)
            if self.kind == "rich":
                if self._started:
                    self.bar.stop()
            elif self.kind == "tqdm":
                self.bar.close()
            elif self._started:
                self.stream.write("\n")
                self.stream.flush()
