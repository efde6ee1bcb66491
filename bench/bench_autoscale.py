"""Autoscaling benchmark: DS2 against a threshold controller on a load that steps.

The job: a paced source -> filter (keeps every other row: selectivity 0.5)
-> key_by -> ``service`` -> sink. ``service`` stands for a call to an
external service: it waits ``COST_S`` per row (a sleep, which releases the
GIL), so an instance's capacity does not depend on free cores and the
optimum is exact: ``ceil(rate * 0.5 * COST_S / utilisation)``. The offered
rate steps: the base rate, 2x, 4x, and back to the base.

Two controllers run the same load, one after the other, with the same
interval and stabilisation period:

- ``ds2``: ``fo.Autoscaling`` (the engine's DS2 controller, in the job driver);
- ``threshold``: outside the job, through ``JobClient``: add one ``service``
  instance while its input is backpressured (or the source falls behind),
  remove one while it is idle more than half the time.

Printed per step: the decisions applied in it, the final parallelism of
``service`` against the optimum, overshoot (the most instances above the
optimum once the step's first decision applied, or below it when the
step goes down), reversals (a change against the direction of the one before, in
the step), and the backlog drain time (from the step's start until the
source's backlog is under 0.5 s of input after the step's last decision).
Every run checks that the sink saw each kept row once (ids summed against
the arithmetic series).

    python bench/bench_autoscale.py [--quick] [--json results/autoscale.json]
"""
from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fastops as fo
from _common import measurement, parse_args, print_table, write_results

COST_S = 0.0005  # the service's wait per row: 2000 rows/s per instance
BASE = 3360  # rows/s offered at first: 1680 rows/s reach the service, 1.2 instances at 0.7
STEPS = (1, 2, 4, 1)  # the offered rate, in multiples of BASE
UTILISATION = 0.7
BATCH = 400
INTERVAL_S = 2.0
STABILISATION_S = 4.0


def optimum(multiple: float) -> int:
    return math.ceil(BASE * multiple * 0.5 * COST_S / UTILISATION)


def service(batch: pa.RecordBatch) -> pa.RecordBatch:
    time.sleep(batch.num_rows * COST_S)  # the external service answers in proportion to the rows
    return batch


def rows(total: int):
    def gen():
        for start in range(0, total, BATCH):
            ids = np.arange(start, min(start + BATCH, total), dtype=np.int64)
            yield pa.record_batch({"id": ids, "k": ids % 1009})
    return gen


class Counter:
    """The sink: rows seen and the sum of their ids."""

    def __init__(self) -> None:
        self.rows = 0
        self.id_sum = 0
        self.lock = threading.Lock()

    def __call__(self, batch: pa.RecordBatch) -> None:
        with self.lock:
            self.rows += batch.num_rows
            self.id_sum += pc.sum(batch["id"]).as_py() or 0


@dataclass
class Timeline:
    """Samples of the running job: (seconds since start, service parallelism, source backlog)."""

    samples: list[tuple[float, int, int]] = field(default_factory=list)
    changes: list[tuple[float, int, int]] = field(default_factory=list)  # (t, from, to)


def service_and_source(metrics: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    ops = metrics["operators"]
    return (next((o for o in ops if o["name"] == "service"), None),
            next((o for o in ops if o["is_source"]), None))


def threshold_decision(metrics: dict[str, Any]) -> int | None:
    """The threshold rule: +1 while the service's input is backpressured or
    the source falls behind, -1 while the service idles more than half the time."""
    svc, src = service_and_source(metrics)
    if svc is None or src is None:
        return None
    upstream = [o for o in metrics["operators"] if o["id"] in {e["id"] for e in svc["inputs"]}]
    pressured = any(o["backpressured_ms_per_s"] > 500 for o in upstream)
    behind = (src.get("backlog_growth_per_s") or 0) > 0.1 * max(src["rows_in_per_s"], 1.0)
    if pressured or behind:
        return svc["parallelism"] + 1
    if svc["idle_ms_per_s"] > 500 and svc["parallelism"] > 1:
        return svc["parallelism"] - 1
    return None


def run(controller: str, step_s: float) -> dict[str, Any]:
    schedule = [(k * step_s, BASE * m) for k, m in enumerate(STEPS)]
    total = int(sum(BASE * m * step_s for m in STEPS))
    env = fo.StreamEnvironment(parallelism=1, executor="threads", max_parallelism=64)
    if controller == "ds2":
        env.enable_autoscaling(interval=f"{INTERVAL_S}s", stabilization=f"{STABILISATION_S}s",
                               target_utilization=UTILISATION)
    sink = Counter()
    (env.from_generator(rows(total), rate=schedule, deterministic=True)
     .filter(pc.equal(pc.bit_wise_and(pc.field("id"), 1), 0))
     .key_by("k").map(service, name="service").sink_to(sink))
    client = env.execute_async(f"autoscale {controller}")
    timeline = Timeline()
    t0 = time.perf_counter()
    last_change = t0
    next_decision = t0 + INTERVAL_S
    current = 1
    while not client.done():
        time.sleep(0.25)
        now = time.perf_counter()
        try:
            m = client.metrics(f"{int(INTERVAL_S * 1000)}ms")
        except RuntimeError:
            continue
        svc, src = service_and_source(m)
        if svc is not None and src is not None:
            timeline.samples.append((now - t0, svc["parallelism"], src.get("backlog") or 0))
            if svc["parallelism"] != current:
                timeline.changes.append((now - t0, current, svc["parallelism"]))
                current = svc["parallelism"]
        if controller == "threshold" and now >= next_decision:
            next_decision = now + INTERVAL_S
            want = threshold_decision(m)
            if want is not None and now - last_change >= STABILISATION_S:
                try:
                    client.rescale({"service": want})
                except (RuntimeError, ValueError):
                    continue  # the job ended meanwhile
                last_change = time.perf_counter()
    result = client.wait()
    kept = total // 2 + total % 2  # even ids of 0 .. total-1
    assert sink.rows == kept, (controller, sink.rows, kept)
    assert sink.id_sum == sum(range(0, total, 2)), controller
    return {"controller": controller, "timeline": timeline, "rescales": len(result.rescales),
            "decisions": result.scaling if controller == "ds2" else None, "total": total, "step_s": step_s}


def per_step(r: dict[str, Any]) -> list[dict[str, Any]]:
    step_s, tl = r["step_s"], r["timeline"]
    out = []
    p_before = 1
    for k, mult in enumerate(STEPS):
        start, end = k * step_s, (k + 1) * step_s
        changes = [c for c in tl.changes if start <= c[0] < end]
        inside = [s for s in tl.samples if start <= s[0] < end]
        final = inside[-1][1] if inside else p_before
        best = optimum(mult)
        directions = [1 if b > a else -1 for _, a, b in changes]
        reversals = sum(1 for a, b in zip(directions, directions[1:]) if a != b)
        settle = changes[-1][0] if changes else start
        rate = BASE * mult
        drained = next((s[0] for s in inside if s[0] >= settle and s[2] <= 0.5 * rate), None)
        out.append({"controller": r["controller"], "step": f"{mult}x ({rate} rows/s)", "optimum": best,
                    "start_p": p_before, "final_p": final, "decisions": len(changes),
                    "overshoot": max([(p - best) * (1 if best >= p_before else -1)
                                      for t, p, _ in inside if changes and t >= changes[0][0]] + [0]),
                    "reversals": reversals,
                    "drain_s": None if drained is None else round(drained - start, 1)})
        p_before = final
    return out


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    step_s = 4.0 if args.quick else 40.0  # quick: a smoke test (too short to settle)
    if args.repeats:  # a short run for a look (the schedule in seconds per step)
        step_s = float(args.repeats)
    print(f"service cost {COST_S * 1000:g} ms/row, base {BASE} rows/s, steps {STEPS}, {step_s:g} s each, "
          f"interval {INTERVAL_S:g} s, stabilisation {STABILISATION_S:g} s, utilisation {UTILISATION}")
    runs = [run(c, step_s) for c in ("ds2", "threshold")]
    rows_out = [row for r in runs for row in per_step(r)]
    print_table(rows_out, ["controller", "step", "optimum", "start_p", "final_p", "decisions", "overshoot",
                           "reversals", "drain_s"], title="service parallelism per step of the offered rate")
    totals = {r["controller"]: sum(x["decisions"] for x in per_step(r)) for r in runs}
    ds2_rows = [x for x in rows_out if x["controller"] == "ds2"]
    goals = {
        "ds2 settles in <= 2 decisions per step": all(x["decisions"] <= 2 for x in ds2_rows),
        "ds2 ends at the optimum (+-1)": all(abs(x["final_p"] - x["optimum"]) <= 1 for x in ds2_rows),
        "ds2 reverses never": all(x["reversals"] == 0 for x in ds2_rows),
        "ds2 decides less than the threshold controller": totals["ds2"] < totals["threshold"],
    }
    print()
    print_table([{"goal": g, "met": ok} for g, ok in goals.items()]
                + [{"goal": f"decisions in all ({c})", "met": n} for c, n in totals.items()], ["goal", "met"])
    measurements = []
    for r in runs:
        role = "fastops" if r["controller"] == "ds2" else "variant"
        measurements.append(measurement("stepped load, rows delivered per s", f"fastops {r['controller']}",
                                        r["total"] / 2 / (len(STEPS) * step_s), role))
    write_results(args.json, measurements,
                  {"steps": rows_out, "goals": goals, "decisions": totals, "cost_s": COST_S, "base": BASE,
                   "step_s": step_s, "interval_s": INTERVAL_S, "stabilization_s": STABILISATION_S,
                   "ds2_log": [{"time": d["time"], "computed": d["computed"], "applied": d["applied"],
                                "held": d["held"]} for d in runs[0]["decisions"]]})


if __name__ == "__main__":
    main()
