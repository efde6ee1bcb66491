"""DS2 (Kalavri et al., OSDI'18): the parallelism every operator needs, from
one measurement of its true rates.

An operator's *true processing rate* is the rows it takes in per second of
useful (busy) time, per instance: waiting for input (idle) and for output
credit (backpressure) are not work. Operators are visited from the sources
down: an operator's *target input rate* is the sum of its inputs' target
output rates (a source's: the rate it is offered, its observed rate plus the
growth of its backlog, plus what drains the backlog within the catch-up
time); its parallelism is the target input rate over its
true rate per instance at the target utilisation, rounded up; its target
output rate is its target input rate times its selectivity (rows out per
row in). The policy is a pure function of the measured operators, as
``JobClient.metrics()["operators"]`` gives them, so it is tested without a
job; what holds a decision back (no busy time measured, the band around the
target utilisation, the cap on scaling down, bounds) is named per operator.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastops.core.durations import parse_duration, parse_positive_duration

__all__ = ["Autoscaling", "Controller", "Estimate", "ds2", "estimate"]

SOURCE_HOLDS = "a source keeps its parallelism"


@dataclass(frozen=True)
class Estimate:
    """DS2's view of one operator (rates in rows per second, summed over its instances)."""

    id: Any
    name: str
    parallelism: int  # now
    target_parallelism: int  # what DS2 asks for (the current one where it holds back)
    optimal: float | None  # target input rate / (true rate per instance * utilisation), before rounding
    target_input_rate: float
    target_output_rate: float
    true_processing_rate: float | None  # per instance, rows in per busy second
    selectivity: float
    utilization: float | None  # the share of its capacity the target input rate would use now
    busy_share: float  # busy time per second per instance, measured
    backlog: int | None  # sources: rows ready and not read (None: the source cannot say)
    reason: str  # why target_parallelism is what it is


def _topological(operators: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    by_id = {op["id"]: op for op in operators}
    done: set[Any] = set()
    order: list[Mapping[str, Any]] = []

    def visit(op: Mapping[str, Any], path: tuple) -> None:
        if op["id"] in done:
            return
        if op["id"] in path:
            raise ValueError(f"the operators form a cycle through {op['name']!r}")
        for edge in op.get("inputs", ()):
            up = by_id.get(edge["id"])
            if up is None:
                raise ValueError(f"operator {op['name']!r} reads from an unknown operator id {edge['id']!r}")
            visit(up, path + (op["id"],))
        done.add(op["id"])
        order.append(op)

    for op in operators:
        visit(op, ())
    return order


def _divisor_at_least(p: int, n: int) -> int:
    """The smallest divisor of ``n`` that is >= ``p`` (``n`` if none is smaller)."""
    for d in range(p, n + 1):
        if n % d == 0:
            return d
    return n


def estimate(operators: Sequence[Mapping[str, Any]], *, target_utilization: float = 0.7,
             utilization_band: float = 0.1, max_scale_down: float = 0.6, min_parallelism: int = 1,
             max_parallelism: int = 128, bounds: Mapping[str, tuple[int, int]] | None = None,
             divisor_of_max: bool = False, catch_up_s: float | None = None) -> list[Estimate]:
    """DS2's estimate for every operator, in topological order (see the module docs).

    ``operators``: dicts with ``id``, ``name``, ``parallelism``, ``is_source``,
    ``inputs`` (``[{"id": upstream id, "tag": side output or None}]``; side
    outputs carry no target rate), ``rows_in_per_s`` and ``rows_out_per_s``
    (summed over instances), ``busy_ms_per_s`` (mean per instance) and, for
    sources, ``fixed_parallelism`` (why an operator cannot be rescaled, if
    it cannot: it keeps its parallelism), ``vertex`` (the chain of tasks it
    runs in: one chained to a source keeps the source's parallelism), ``backlog`` (rows ready and not read) and
    ``backlog_growth_per_s`` (its change per second; negative while it
    drains), None or absent when the source cannot say. A source is offered
    its observed rate plus its backlog's growth; with ``catch_up_s``, also
    ``backlog / catch_up_s`` (as Flink's catch-up duration), so that the job
    drains what it is behind within that time. ``target_utilization``: the share of
    an instance's true rate to plan for; inside ``utilization_band`` around
    it nothing changes; one decision scales an operator down by at most
    ``max_scale_down`` of its instances; ``bounds`` (by name) and
    ``min_parallelism`` / ``max_parallelism`` clamp; ``divisor_of_max``
    rounds up to a divisor of ``max_parallelism`` (every task then owns as
    many key groups). Sources keep their parallelism.
    """
    if not 0 < target_utilization <= 1:
        raise ValueError(f"target_utilization must be in (0, 1], got {target_utilization!r}")
    if not 0 <= utilization_band < target_utilization:
        raise ValueError(f"utilization_band must be in [0, target_utilization), got {utilization_band!r}")
    if not 0 <= max_scale_down < 1:
        raise ValueError(f"max_scale_down must be in [0, 1), got {max_scale_down!r}")
    if not 1 <= min_parallelism <= max_parallelism:
        raise ValueError(f"need 1 <= min_parallelism <= max_parallelism, got {min_parallelism}, {max_parallelism}")
    if catch_up_s is not None and not catch_up_s > 0:
        raise ValueError(f"catch_up_s must be > 0 seconds (or None), got {catch_up_s!r}")
    out: dict[Any, Estimate] = {}
    source_tasks = {op["vertex"]: op["name"] for op in operators if op.get("is_source") and "vertex" in op}
    for op in _topological(operators):
        p = int(op["parallelism"])
        rows_in, rows_out = float(op.get("rows_in_per_s", 0.0)), float(op.get("rows_out_per_s", 0.0))
        busy = float(op.get("busy_ms_per_s", 0.0)) / 1000.0
        selectivity = rows_out / rows_in if rows_in > 0 else 1.0
        backlog = op.get("backlog")
        if op.get("is_source"):
            target_in = max(0.0, rows_in + float(op.get("backlog_growth_per_s") or 0.0))
            if catch_up_s and backlog:
                target_in += backlog / catch_up_s
            target_out = target_in * selectivity
            out[op["id"]] = Estimate(op["id"], op["name"], p, p, None, target_in, target_out, None, selectivity,
                                     None, busy, backlog, SOURCE_HOLDS)
            continue
        target_in = sum(out[e["id"]].target_output_rate for e in op.get("inputs", ()) if e.get("tag") is None)
        target_out = target_in * selectivity
        held = (f"cannot change its parallelism: {op['fixed_parallelism']}" if op.get("fixed_parallelism")
                else f"runs in the tasks of source {source_tasks[op['vertex']]!r}: keeps their parallelism"
                if op.get("vertex") in source_tasks else None)
        if held:  # (chained to a source, its busy time is the source's too)
            out[op["id"]] = Estimate(op["id"], op["name"], p, p, None, target_in, target_out, None, selectivity,
                                     None, busy, None, held)
            continue
        if busy <= 0 or rows_in <= 0:
            out[op["id"]] = Estimate(op["id"], op["name"], p, p, None, target_in, target_out, None, selectivity,
                                     None, busy, None, "no busy time measured: holds")
            continue
        rate = rows_in / p / busy  # true processing rate per instance
        optimal = target_in / (rate * target_utilization)
        utilization = target_in / (rate * p)
        want = max(1, math.ceil(optimal - 1e-9))
        lo, hi = min_parallelism, max_parallelism
        if bounds and op["name"] in bounds:
            lo, hi = max(lo, bounds[op["name"]][0]), min(hi, bounds[op["name"]][1])
        reason = f"true rate {rate:.0f} rows/s per instance, target {target_in:.0f} rows/s"
        if abs(utilization - target_utilization) <= utilization_band:
            want, reason = p, f"utilisation {utilization:.2f} within the band: holds"
        elif want < p and want < math.ceil(p * (1 - max_scale_down)):
            want = math.ceil(p * (1 - max_scale_down))
            reason += f"; scale-down capped at {max_scale_down:.0%} of {p}"
        if want < lo or want > hi:
            want = min(max(want, lo), hi)
            reason += f"; bounded to [{lo}, {hi}]"
        if divisor_of_max and want != p:
            want = min(_divisor_at_least(want, max_parallelism), hi)
        out[op["id"]] = Estimate(op["id"], op["name"], p, want, optimal, target_in, target_out, rate, selectivity,
                                 utilization, busy, None, reason)
    return list(out.values())


def ds2(operators: Sequence[Mapping[str, Any]], **options: Any) -> dict[str, int]:
    """The parallelism DS2 gives every operator that is not a source, by name
    (``JobClient.rescale`` takes it as it is); ``operators`` and ``options``
    as ``estimate``. Operators sharing a name get the largest of theirs."""
    result: dict[str, int] = {}
    for e in estimate(operators, **options):
        if e.reason != SOURCE_HOLDS:
            result[e.name] = max(result.get(e.name, 0), e.target_parallelism)
    return result


@dataclass(frozen=True)
class Autoscaling:
    """Closes the loop: every ``interval`` the job driver measures the
    operators over that interval, asks ``ds2`` for their parallelism and
    rescales the job live when it differs (not within ``stabilization``
    after a rescale, nor at the job's start). Every decision is recorded with
    its inputs (``JobResult.scaling``, ``JobClient.metrics()["scaling"]``).
    ``catch_up``: the time to drain a source's backlog in (None: only keep
    up). The other fields are ``estimate``'s; ``max_parallelism`` None: the job's.
    The rates are sampled every 0.25 s: an ``interval`` below about 0.5 s
    sees too few samples to measure any."""

    interval: Any = "10s"
    target_utilization: float = 0.7
    stabilization: Any = "30s"
    min_parallelism: int = 1
    max_parallelism: int | None = None
    utilization_band: float = 0.1
    max_scale_down: float = 0.6
    divisor_of_max: bool = False
    catch_up: Any = "5min"

    def controller(self, max_parallelism: int) -> Controller:
        """A controller for one job whose max_parallelism is ``max_parallelism``."""
        return Controller(self, max_parallelism)


class Controller:
    """One job's autoscaler: called by the job driver from its tick (see ``Autoscaling``)."""

    def __init__(self, config: Autoscaling, max_parallelism: int):
        self.interval_s = parse_positive_duration(config.interval, "interval") / 1000.0
        self.stabilization_s = parse_duration(config.stabilization) / 1000.0
        self.options: dict[str, Any] = {"target_utilization": config.target_utilization,
                        "utilization_band": config.utilization_band, "max_scale_down": config.max_scale_down,
                        "min_parallelism": config.min_parallelism,
                        "max_parallelism": min(config.max_parallelism or max_parallelism, max_parallelism),
                        "divisor_of_max": config.divisor_of_max,
                        "catch_up_s": None if config.catch_up is None
                        else parse_positive_duration(config.catch_up, "catch_up") / 1000.0}
        estimate([], **self.options)  # the options are checked here, where the job is set up
        self.decisions: list[dict[str, Any]] = []
        self._started = self._last_decision = self._last_change = time.perf_counter()

    def __call__(self, job: Any) -> None:
        now = time.perf_counter()
        if now - self._last_decision < self.interval_s:
            return
        self._last_decision = now
        metrics = job.metrics(self.interval_s)
        estimates = estimate(metrics["operators"], **self.options)
        current = {e.name: e.parallelism for e in estimates}
        wanted = {e.name: e.target_parallelism for e in estimates if e.reason != SOURCE_HOLDS}
        changes = {name: p for name, p in wanted.items() if p != current[name]}
        record: dict[str, Any] = {"time": time.time(), "operators": [dict(vars(e)) for e in estimates],
                                  "computed": wanted, "applied": {}, "held": None}
        if changes and now - self._last_change < self.stabilization_s:
            record["held"] = f"within {self.stabilization_s:g} s of the last rescale (or the start)"
        elif changes:
            try:
                job.request_rescale(changes)
                record["applied"] = changes
                self._last_change = now
            except (ValueError, RuntimeError) as exc:  # recorded: the job goes on at its parallelism
                record["held"] = f"refused: {exc}"
        self.decisions.append(record)
