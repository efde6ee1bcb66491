"""Load shedding: a QoS monitor that keeps latency within a bound by dropping
rows when the input outruns the job, and answers that say how approximate
they are (Tatbul et al., VLDB 2003; Babcock, Datar, Motwani, ICDE 2004).

``StreamEnvironment(qos=QoS(max_latency="500ms", shedding="random"))`` puts
a drop operator after every source (``fastops.operators.shedding``). Every
``interval`` the job driver's tick calls the ``Monitor``: it measures the
latency of the batches (source arrival to sink, p99 over the interval) and
the load, and sets the drop fraction with ``plan``:

- load: the rows the sources are offered per second (read rate plus the
  growth of their backlog, plus the backlog itself to be caught up within
  one interval);
- capacity: each operator the drops relieve can take ``target_utilization``
  of its busy time; its measured busy share at the current keep fraction
  says what keep fraction would bring it there at the offered load;
- overloaded (p99 above the bound, or sources falling behind) while an
  operator after the drops is busy at least ``target_utilization``: keep no more
  than the least of those (and, while the bound is missed with no backlog
  at the sources, a fifth less than now); otherwise raise the keep fraction
  back toward the model's, to 1 (nothing shed) when the job keeps up.
  ``max_drop`` caps it. A growing overload is acted on within a quarter
  of an interval.

The policy is a pure function of the measured operators, tested without a job.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc

from fastops.core.durations import parse_positive_duration
from fastops.operators.shedding import INCLUSION, MODES, SheddingControl

__all__ = ["INCLUSION", "Decision", "Monitor", "QoS", "plan"]

BEHIND = 0.05  # a source whose backlog grows by this share of its read rate is falling behind
DRAIN_STEP = 0.8  # while the latency bound is missed, keep at most this share of what is kept now
BAND = 0.05  # keep fractions this close to the current one change nothing


@dataclass(frozen=True)
class QoS:
    """What a job promises its readers, and how it keeps the promise.

    ``max_latency``: the bound on the p99 latency from a row's arrival at
    its source to its sink; ``shedding``: ``"random"`` (rows dropped
    uniformly; window aggregates become estimates with error columns),
    ``"semantic"`` (the rows of lowest ``priority``, a column name or an
    expression, go first) or ``"window"`` (whole (key, window) groups of
    tumbling windows go, so every emitted window is exact); ``max_drop``:
    the largest fraction ever dropped, in (0, 1]; ``interval``: how often
    the monitor decides; ``target_utilization``: the share of an operator's
    capacity the shedder plans for; ``seed``: the drops' random seed;
    ``fixed_drop``: drop this fraction throughout instead (no monitor; for
    approximate answers on purpose, and for tests). See docs/shedding.md.
    """

    max_latency: Any = None
    shedding: str = "random"
    priority: Any = None
    max_drop: float = 0.9
    interval: Any = "1s"
    target_utilization: float = 0.85
    seed: int = 0
    fixed_drop: float | None = None

    def __post_init__(self) -> None:
        if self.shedding not in MODES:
            raise ValueError(f"QoS shedding must be one of {MODES}, got {self.shedding!r}")
        if self.max_latency is None and self.fixed_drop is None:
            raise ValueError("QoS needs max_latency (the latency bound, e.g. '500ms'), or a fixed_drop")
        if self.max_latency is not None:
            parse_positive_duration(self.max_latency, "QoS max_latency")
        parse_positive_duration(self.interval, "QoS interval")
        if isinstance(self.max_drop, bool) or not isinstance(self.max_drop, (int, float)) \
                or not 0 < self.max_drop <= 1:
            raise ValueError(f"QoS max_drop must be a fraction in (0, 1], got {self.max_drop!r}")
        if self.fixed_drop is not None and (isinstance(self.fixed_drop, bool)
                                            or not isinstance(self.fixed_drop, (int, float))
                                            or not 0 <= self.fixed_drop <= self.max_drop):
            raise ValueError(f"QoS fixed_drop must be a fraction in [0, max_drop={self.max_drop}], "
                             f"got {self.fixed_drop!r}")
        if not 0 < self.target_utilization <= 1:
            raise ValueError(f"QoS target_utilization must be in (0, 1], got {self.target_utilization!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2 ** 63:
            raise ValueError(f"QoS seed must be an int in [0, 2**63), got {self.seed!r}")
        if self.shedding == "semantic":
            if self.priority is None:
                raise ValueError("QoS shedding='semantic' needs a priority: the column (or expression) "
                                 "whose highest values are kept longest")
            if not isinstance(self.priority, (str, pc.Expression)):
                raise TypeError("QoS priority must be a column name or an expression (fastops.col(...)), "
                                f"got {type(self.priority).__name__}")
        elif self.priority is not None:
            raise ValueError(f"QoS priority applies to shedding='semantic', not {self.shedding!r}")

    @property
    def bound_ms(self) -> float | None:
        return None if self.max_latency is None else float(parse_positive_duration(self.max_latency,
                                                                                   "QoS max_latency"))

    def control(self) -> SheddingControl:
        """The drop fraction the drop operators of one environment's jobs read."""
        return SheddingControl(self.shedding, self.seed, self.fixed_drop or 0.0)


@dataclass(frozen=True)
class Decision:
    """One look of the monitor."""

    time: float  # wall clock
    p99_ms: float | None  # of the batches that reached a sink in the interval
    offered_per_s: float  # rows the sources are offered (with the backlog to catch up)
    read_per_s: float  # rows the sources read
    backlog: int  # rows ready at the sources and not read
    overloaded: bool
    fraction_before: float
    fraction: float  # the drop fraction from now on
    bottleneck: str | None  # the operator whose capacity sets the fraction
    reason: str


def _downstream(operators: Sequence[Mapping[str, Any]], roots: set[Any]) -> set[Any]:
    """The ids of ``roots`` and of every operator they feed."""
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for op in operators:
            if op["id"] not in out and any(e["id"] in out for e in op.get("inputs", ())):
                out.add(op["id"])
                changed = True
    return out


def plan(operators: Sequence[Mapping[str, Any]], *, p99_ms: float | None, bound_ms: float, fraction: float,
         mode: str = "random", interval_s: float = 1.0, target_utilization: float = 0.85,
         max_drop: float = 0.9) -> tuple[float, Decision]:
    """The drop fraction from now on, and why (see the module docs).

    ``operators``: as ``JobClient.metrics()["operators"]`` gives them (rates
    over the last interval, at the current drop ``fraction``)."""
    sources = [op for op in operators if op.get("is_source")]
    read = sum(float(op.get("rows_in_per_s") or 0.0) for op in sources)
    growth = sum(float(op.get("backlog_growth_per_s") or 0.0) for op in sources)
    backlog = sum(int(op.get("backlog") or 0) for op in sources)
    offered = max(read + growth, 0.0) + backlog / interval_s
    behind = growth > BEHIND * max(read, 1.0)
    overloaded = behind or (p99_ms is not None and p99_ms > bound_ms)
    # the operators drops relieve: after the drop operators, not in a source's tasks
    source_vertices = {op.get("vertex") for op in sources}
    drops_at = {op["id"] for op in operators
                if (op["name"] == "shed" if mode != "window" else op["name"].startswith("window"))}
    relieved = [op for op in operators if op["id"] in _downstream(operators, drops_at)
                and op.get("vertex") not in source_vertices and not op.get("is_source")]
    keep = 1.0 - fraction
    model, bottleneck = float("inf"), None
    for op in relieved:
        busy = float(op.get("max_busy_ms_per_s", op.get("busy_ms_per_s")) or 0.0) / 1000.0
        if busy > 0 and offered > 0:
            need = keep * (target_utilization / busy) * (read / offered)
            if need < model:
                model, bottleneck = need, op["name"]
    least_keep = 1.0 - max_drop
    saturated = any(float(op.get("max_busy_ms_per_s", op.get("busy_ms_per_s")) or 0.0) / 1000.0
                    >= target_utilization for op in relieved)
    if overloaded and not saturated:  # the bottleneck is before the drops (a source's own tasks)
        new_keep, reason = keep, ("overloaded, but no operator after the drops is busy: shedding cannot "
                                  "relieve what comes before them")
    elif overloaded:
        new_keep = min(keep, model)
        why = ("sources fall behind" if behind else "") + (" and " if behind and p99_ms is not None
                                                           and p99_ms > bound_ms else "")
        if p99_ms is not None and p99_ms > bound_ms:
            if not backlog:  # the delay is inside the job (the model drains a source's backlog itself)
                new_keep = min(new_keep, keep * DRAIN_STEP)
            why += f"p99 {p99_ms:.0f} ms over the bound {bound_ms:.0f} ms"
        reason = f"overloaded: {why}"
    elif fraction > 0:
        new_keep = min(1.0, model)
        reason = "keeps up: sheds less" if new_keep > keep else "keeps up at this fraction"
        if new_keep <= keep:
            new_keep = keep
    else:
        new_keep, reason = 1.0, "keeps up: nothing to shed"
    if abs(new_keep - keep) < BAND and new_keep < 1.0:
        new_keep = keep
    if new_keep < least_keep:
        new_keep, reason = least_keep, reason + f"; capped at max_drop {max_drop:g}"
    new_fraction = round(1.0 - new_keep, 4)
    if new_fraction < 0.005:
        new_fraction = 0.0
    return new_fraction, Decision(time.time(), p99_ms, offered, read, backlog, overloaded, fraction,
                                  new_fraction, bottleneck, reason)


class Monitor:
    """One job's QoS monitor: called by the job driver from its tick (see the module docs)."""

    def __init__(self, qos: QoS, control: SheddingControl):
        self.qos = qos
        self.control = control
        self.interval_s = parse_positive_duration(qos.interval, "QoS interval") / 1000.0
        self.decisions: list[Decision] = []
        control.fraction = qos.fixed_drop or 0.0  # a new job starts without shedding
        self._last = time.perf_counter()

    def __call__(self, job: Any) -> None:
        """Look every ``interval``; between two looks, every quarter of it, act
        only on an overload that needs more shedding (reacting within a
        quarter of an interval, deciding everything else once per interval)."""
        if self.qos.fixed_drop is not None:
            return
        now = time.perf_counter()
        since = now - self._last
        if since < self.interval_s / 4:
            return
        metrics = job.metrics(since)
        bound = self.qos.bound_ms
        assert bound is not None
        fraction, decision = plan(metrics["operators"], p99_ms=metrics["job"]["latency"]["p99_ms"],
                                  bound_ms=bound, fraction=self.control.fraction, mode=self.qos.shedding,
                                  interval_s=self.interval_s, target_utilization=self.qos.target_utilization,
                                  max_drop=self.qos.max_drop)
        if since < self.interval_s and not (decision.overloaded and fraction > self.control.fraction):
            return
        self._last = now
        self.control.fraction = fraction
        self.decisions.append(decision)

    def state(self) -> dict[str, Any]:
        """What ``JobClient.metrics()["shedding"]`` shows."""
        return {"mode": self.qos.shedding, "max_latency_ms": self.qos.bound_ms, "drop_fraction": self.control.fraction,
                "decisions": [dict(vars(d)) for d in self.decisions]}
