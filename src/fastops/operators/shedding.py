"""Load shedding in the tasks: the drop operator after each source and the
shared drop fraction a QoS monitor sets (``fastops.shedding``).

``random`` keeps each row with probability 1 - fraction and stamps what it
keeps with that probability (``INCLUSION``), so that window aggregates
estimate the true answer (``estimating_aggregates``); ``semantic`` keeps the
rows of highest priority of each batch; ``window`` leaves rows to the window
operators, which drop whole (key, window) groups (``WindowShedder``).
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.aggregates import builtins
from fastops.core.hashing import hash64
from fastops.core.watermarks import to_ms
from fastops.operators.base import Operator, OperatorContext
from fastops.operators.basic import evaluate

INCLUSION = "_inclusion_probability"  # per row: the probability it was kept (random shedding)
MODES = ("random", "semantic", "window")
WINDOWS_REMEMBERED = 4096  # window starts whose drop fraction is kept (the oldest are forgotten)


class SheddingControl:
    """What the monitor sets and the drop operators read: the mode and the
    current drop fraction (read once per batch; a float write is atomic)."""

    def __init__(self, mode: str, seed: int = 0, fraction: float = 0.0):
        if mode not in MODES:
            raise ValueError(f"shedding must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.seed = seed
        self.fraction = fraction
        self._lock = threading.Lock()
        self._by_window: dict[int, float] = {}
        self.owner: Any = None  # the job that sets it

    def window_fraction(self, start_ms: int) -> float:
        """The drop fraction of the windows starting at ``start_ms``: the one
        current when any task first saw that start, so that every task and
        every row of a (key, window) group decide alike."""
        with self._lock:
            f = self._by_window.get(start_ms)
            if f is None:
                f = self._by_window[start_ms] = self.fraction
                if len(self._by_window) > WINDOWS_REMEMBERED:
                    for old in sorted(self._by_window)[:len(self._by_window) // 2]:
                        del self._by_window[old]
            return f


Priority = Callable[[pa.RecordBatch], Any]


def priority_of(priority: Any) -> Priority:
    """``priority``: a column name or a pyarrow.compute expression, as a
    function of a batch (higher: kept longer)."""
    expr = pc.field(priority) if isinstance(priority, str) else priority
    if not isinstance(expr, pc.Expression):
        raise TypeError("QoS priority must be a column name or an expression (fastops.col(...)), "
                        f"got {type(priority).__name__}")

    def values(batch: pa.RecordBatch) -> pa.Array:
        try:
            return evaluate(batch, {"priority": expr}).column(0)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise ValueError(f"QoS priority {expr}: {exc} (columns: {', '.join(batch.schema.names)})") from None
    return values


def keep_highest(priority: np.ndarray, keep: int) -> np.ndarray:
    """A mask of ``keep`` rows such that no row left out ranks above a row
    kept (NaN ranks lowest; ties: the first rows)."""
    n = len(priority)
    if keep >= n:
        return np.ones(n, dtype=bool)
    if keep <= 0:
        return np.zeros(n, dtype=bool)
    p = np.where(np.isnan(priority), -np.inf, priority)
    threshold = np.partition(p, n - keep)[n - keep]
    mask = p > threshold
    ties = np.flatnonzero(p == threshold)
    mask[ties[:keep - int(mask.sum())]] = True
    return mask


class Shedder(Operator):
    """Drops rows after a source as the control says (see the module docs)."""

    name = "shed"
    marks_every_batch = True  # the source task measures the latency of every batch

    def __init__(self, control: SheddingControl, priority: Priority | None = None):
        self.control = control
        self.priority = priority

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.rng = np.random.default_rng([self.control.seed, ctx.task_index])

    def process(self, batch: pa.RecordBatch) -> list:
        mode, fraction, n = self.control.mode, self.control.fraction, batch.num_rows
        if mode == "random":
            if fraction > 0:
                batch = batch.filter(pa.array(self.rng.random(n) >= fraction))
            batch = with_inclusion(batch, 1.0 - fraction)
        elif mode == "semantic" and fraction > 0 and n:
            assert self.priority is not None
            values = self.priority(batch)
            p = values.cast(pa.float64()).fill_null(math.nan).to_numpy(zero_copy_only=False)
            batch = batch.filter(pa.array(keep_highest(p, n - math.floor(fraction * n))))
        if self.ctx.metrics is not None:
            self.ctx.metrics.shed_rows += n - batch.num_rows
        return [batch]


def with_inclusion(batch: pa.RecordBatch, probability: float) -> pa.RecordBatch:
    """``batch`` with its rows' inclusion probability times ``probability``."""
    i = batch.schema.get_field_index(INCLUSION)
    if i < 0:
        return batch.append_column(INCLUSION, pa.array(np.full(batch.num_rows, probability)))
    if probability == 1.0:
        return batch
    return batch.set_column(i, INCLUSION, pc.multiply(batch.column(i), probability))


class WindowShedder:
    """Window-aware shedding in a tumbling window operator: a (key, window)
    group is dropped or kept whole, decided by a hash of its key and window
    against the fraction of its window (``SheddingControl.window_fraction``),
    so every emitted window is exact and the output a subset of the true one."""

    def __init__(self, control: SheddingControl, keys: list[str], time_column: str, window: Any):
        self.control = control
        self.keys = keys
        self.time_column = time_column
        self.window = window  # a Tumbling window: one window per row

    def keep(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """A mask of the rows to keep (None: all)."""
        if self.control.fraction <= 0 and not self.control._by_window:
            return None
        starts = self.window.assign_rows(to_ms(batch.column(self.time_column), self.time_column))[1]
        fractions = np.empty(len(starts))
        for s in np.unique(starts):
            fractions[starts == s] = self.control.window_fraction(int(s))
        if not fractions.any():
            return None
        parts = [batch.column(k) for k in self.keys] + [pa.array(starts)]
        h = hash64(parts, seed=self.control.seed).to_numpy()
        u = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)  # uniform in [0, 1) per group
        return u >= fractions


Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
DERIVED = "__ht_"  # prefix of the columns the estimates add to a window's input


class Estimates:
    """Horvitz–Thompson estimates of a window's aggregates from the rows
    random shedding kept, each with its inclusion probability p (weight
    w = 1/p; the variance of a sum of independent inclusions is estimated by
    sum((1 - p) / p**2 * x**2)).

    ``count`` and ``sum`` are scaled by w; ``mean`` is the ratio of the two
    (its variance by linearisation); each gets ``<name>_error``, the
    half-width of a 95 % normal interval. Other aggregates are computed on
    the kept rows as they are; their ``<name>_error`` is 0 where the window
    is exact and null where rows were shed (no interval: a min of the kept
    rows is only an upper bound of the true min). ``sampled_fraction``: kept
    rows over the estimated rows of the window.
    """

    def __init__(self, aggs: dict[str, Any]):
        self.user = dict(aggs)
        self.plan: dict[str, tuple[str, str | None]] = {}  # name -> (kind, column) of the estimated ones
        self.internal: dict[str, Any] = {f"{DERIVED}kept": builtins.count(),
                                         f"{DERIVED}w": builtins.sum(f"{DERIVED}w"),
                                         f"{DERIVED}c": builtins.sum(f"{DERIVED}c")}
        for name, a in aggs.items():
            kind = ("count" if isinstance(a, builtins.Count) else "sum" if isinstance(a, builtins.Sum)
                    else "mean" if isinstance(a, builtins.Moments) and a.name == "mean" else None)
            if kind is None:
                self.internal[name] = a
                continue
            self.plan[name] = (kind, a.column)
            for part in self._parts(kind):
                self.internal[f"{DERIVED}{name}_{part}"] = builtins.sum(f"{DERIVED}{name}_{part}")

    @staticmethod
    def _parts(kind: str) -> tuple[str, ...]:
        return {"count": ("w", "c"), "sum": ("wx", "cxx"), "mean": ("w", "wx", "c", "cx", "cxx")}[kind]

    def prepare(self, batch: pa.RecordBatch, operator: str) -> pa.RecordBatch:
        """``batch`` with the weighted columns the internal sums add up."""
        i = batch.schema.get_field_index(INCLUSION)
        if i < 0:
            raise ValueError(
                f"{operator}: under random load shedding a window estimates its aggregates from each row's "
                f"inclusion probability, column {INCLUSION!r}, which an earlier operator dropped "
                f"(its input has {', '.join(batch.schema.names)}); keep that column in map / process "
                "functions, or shed with shedding='semantic' or 'window'")
        p = batch.column(i).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        w = 1.0 / p
        c = w * w - w
        cols = {f"{DERIVED}w": w, f"{DERIVED}c": c}
        for name, (kind, column) in self.plan.items():
            if column is None:
                x, valid = None, np.ones(len(p))
            else:
                arr = batch.column(column)
                valid = np.asarray(arr.is_valid(), dtype=np.float64)
                x = arr.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False) * valid
            values = {"w": w * valid, "c": c * valid}
            if x is not None:
                values.update(wx=w * x, cx=c * x, cxx=c * x * x)
            for part in self._parts(kind):
                cols[f"{DERIVED}{name}_{part}"] = values[part]
        for name, values in cols.items():
            batch = batch.append_column(name, pa.array(values, pa.float64()))
        return batch

    def finish(self, out: pa.RecordBatch, leading: int) -> pa.RecordBatch:
        """The user's columns from the internal ones of a window result;
        ``leading``: the columns before the aggregates (bounds and keys)."""
        def col(name: str) -> np.ndarray:
            return out.column(name).to_numpy(zero_copy_only=False).astype(np.float64)

        names, arrays = list(out.schema.names[:leading]), list(out.columns[:leading])
        w_all, c_all = col(f"{DERIVED}w"), col(f"{DERIVED}c")
        exact = c_all == 0
        for name in self.user:
            if name in self.plan:
                kind = self.plan[name][0]
                parts = {part: col(f"{DERIVED}{name}_{part}") for part in self._parts(kind)}
                null = None
                if kind == "count":
                    value, var = parts["w"], parts["c"]
                elif kind == "sum":
                    value, var = parts["wx"], parts["cxx"]
                else:
                    n = parts["w"]
                    null = n == 0
                    safe = np.where(null, 1.0, n)
                    value = parts["wx"] / safe
                    var = (parts["cxx"] - 2 * value * parts["cx"] + value * value * parts["c"]) / (safe * safe)
                error = Z95 * np.sqrt(np.maximum(var, 0.0))
                arrays += [pa.array(value, pa.float64(), mask=null), pa.array(error, pa.float64(), mask=null)]
            else:
                arrays += [out.column(name), pa.array(np.zeros(len(exact)), pa.float64(), mask=~exact)]
            names += [name, f"{name}_error"]
        kept = col(f"{DERIVED}kept")
        arrays.append(pa.array(np.divide(kept, w_all, out=np.ones_like(kept), where=w_all > 0), pa.float64()))
        names.append("sampled_fraction")
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def schema(self, internal: pa.Schema, leading: int) -> pa.Schema:
        """The user's output schema from the internal one."""
        fields = list(internal)[:leading]
        for name in self.user:
            value = pa.field(name, pa.float64()) if name in self.plan else internal.field(name)
            fields += [value, pa.field(f"{name}_error", pa.float64())]
        return pa.schema(fields + [pa.field("sampled_fraction", pa.float64())])
