"""Rescaling benchmark: live rescales and savepoints of a job holding 1M keys.

The job is W1-shaped: from_arrow -> watermark -> key_by(user_id) -> tumbling
1 h count/sum -> sink_to_table. Its input is a *bulk* of 4 rows for each of
1M keys (``--quick``: 100k) and then a paced *tail* of small batches over
the same keys: the window never fires before the end of input, so from the
first tail batch on the window state holds every key, and the pacing (a
``map`` that sleeps per tail batch until the benchmark lets it go) keeps the
job running while it is rescaled or stopped.

1. Live rescale with ``JobClient.rescale({window: P', sink: P'})`` from
   parallelism 1 to 2, 4, then 3 in one job ("chained"), and 2 -> 4 and
   4 -> 3 in jobs started at 2 and 4 ("fresh"), with both key-group
   assignments ("contiguous", "fewest_moves"): the pause per rescale
   (``RescaleRecord.pause_ms``: stop checkpoint complete -> every new task
   running), the call's wall time, key groups moved, and the bytes moved
   (``bytes_moved``: each task's state share of the key groups that changed
   owner) and handed (``bytes_handed``: snapshot bytes given to another task)
   against the key-group bound ``state_bytes * key_groups_moved /
   key_groups``. The window operator hands each new task the whole snapshots
   of the earlier tasks that owned any of its key groups (and keeps them,
   filtered, until their windows fire), so ``bytes_handed`` exceeds the bound
   and a chained rescale starts from the state the previous one left.
2. Savepoint: ``stop_with_savepoint`` at the first tail batch (parallelism 2),
   then ``execute(restore=path)`` at 2 and at 4 against the same job from
   scratch at 2 and at 4: wall time to the job's final result.

Every run checks its output (count and sum of each key) against NumPy.
``rows_per_s`` in the results: for a rescale, keys held per second of pause;
for the savepoint runs, the job's rows per second of wall time to its result.

    python bench/bench_rescale.py [--quick] [--json results/rescale.json]
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))
import fastops as fo
from _common import measurement, median_times, parse_args, print_table, write_results
from fastops import agg
from fastops.core.partitioning import moved_bound
from fastops.runtime.checkpoint import load_snapshot
from fastops.runtime.rescale import describe_snapshot
from fastops.windows import Tumbling

MAX_PARALLELISM = 128
ROWS_PER_KEY = 4  # bulk rows per key
BULK_BATCH = 65536
TAIL_BATCH = 500
TAIL_TS = 1_000_000  # event time (ms) of the first tail row; every row is in the first 1 h window
PACE_S = 0.02  # sleep per tail batch until released
WINDOW_OP = "window(Tumbling)"
SINK = "windows"
STEPS = {"chained": (1, (2, 4, 3)), "fresh 2": (2, (4,)), "fresh 4": (4, (3,))}
WAIT_S = 600.0

tail_seen = threading.Event()  # the source has read the whole bulk
released = threading.Event()  # the tail runs unpaced


def pace(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The job's ``map``: marks the first tail batch and slows the tail until released."""
    if batch.num_rows and batch.column("ts")[0].as_py() >= TAIL_TS:
        tail_seen.set()
        if not released.is_set():
            time.sleep(PACE_S)
    return batch


def make_input(keys: int, tail_batches: int, seed: int = 7) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The input (bulk in BULK_BATCH chunks, tail in TAIL_BATCH chunks) and
    the expected count and sum of every key."""
    rng = np.random.default_rng(seed)
    bulk = rng.permutation(np.repeat(np.arange(keys, dtype=np.int64), ROWS_PER_KEY))
    tail = rng.integers(0, keys, tail_batches * TAIL_BATCH, dtype=np.int64)
    user = np.concatenate([bulk, tail])
    ts = np.concatenate([np.sort(rng.integers(0, TAIL_TS, len(bulk))),
                         np.sort(rng.integers(TAIL_TS, 2 * TAIL_TS, len(tail)))]).astype(np.int64)
    value = rng.integers(0, 1000, len(user), dtype=np.int64)
    table = pa.table({"user_id": user, "ts": ts, "value": value})
    chunks = (table.slice(0, len(bulk)).to_batches(max_chunksize=BULK_BATCH)
              + table.slice(len(bulk)).to_batches(max_chunksize=TAIL_BATCH))
    return (pa.Table.from_batches(chunks), np.bincount(user, minlength=keys),
            np.bincount(user, weights=value, minlength=keys).astype(np.int64))


class Workload:
    """The input, its expected output, and the job built on it."""

    def __init__(self, keys: int, tail_batches: int):
        self.keys = keys
        self.table, self.counts, self.sums = make_input(keys, tail_batches)

    def build(self, env: fo.StreamEnvironment) -> Any:
        return (env.from_arrow(self.table, batch_size=BULK_BATCH).map(pace, name="pace").with_watermark("ts")
                .key_by("user_id").window(Tumbling("1 h")).aggregate(n=agg.count(), total=agg.sum("value"))
                .sink_to_table(SINK))

    def check(self, out: pa.Table) -> None:
        out = out.sort_by("user_id")
        assert out.column("user_id").to_numpy().tolist() == list(range(self.keys)), "keys lost or repeated"
        assert np.array_equal(out.column("n").to_numpy(), self.counts), "counts differ"
        assert np.array_equal(out.column("total").to_numpy(), self.sums), "sums differ"


def start(w: Workload, env: fo.StreamEnvironment) -> tuple[Any, Any]:
    """Start the job paced; return (client, its output) once the bulk is read."""
    tail_seen.clear()
    released.clear()
    out = w.build(env)
    client = env.execute_async("rescale bench")
    if not tail_seen.wait(WAIT_S):
        client.cancel()
        raise RuntimeError("the job did not reach its tail")
    return client, out


def rescale_run(w: Workload, start_p: int, steps: tuple[int, ...], how: str) -> list[dict[str, Any]]:
    """One job from ``start_p``, rescaled live to each of ``steps``: a row per rescale."""
    env = fo.StreamEnvironment(parallelism=start_p, max_parallelism=MAX_PARALLELISM, key_group_assignment=how)
    client, out = start(w, env)
    rows = []
    before = start_p
    try:
        for p in steps:
            t0 = time.perf_counter()
            rec = client.rescale({WINDOW_OP: p, SINK: p}, timeout=WAIT_S)
            call_s = time.perf_counter() - t0
            assert rec.parallelism_before[WINDOW_OP] == before and rec.parallelism_after[WINDOW_OP] == p
            bound = rec.state_bytes * rec.key_groups_moved / rec.key_groups
            rows.append({"how": how, "step": f"{before}->{p}", "pause_ms": rec.pause_ms, "call_s": call_s,
                         "key_groups_moved": rec.key_groups_moved, "key_groups": rec.key_groups,
                         "moved_bound": moved_bound(before, p, MAX_PARALLELISM), "state_bytes": rec.state_bytes,
                         "bound_bytes": bound, "bytes_moved": rec.bytes_moved, "bytes_handed": rec.bytes_handed,
                         "moved_over_bound": rec.bytes_moved / bound if bound else float("nan"),
                         "handed_over_bound": rec.bytes_handed / bound if bound else float("nan")})
            before = p
    finally:
        released.set()
    result = client.wait(WAIT_S)
    assert len(result.rescales) == len(steps)
    w.check(out.table())
    return rows


def medians(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per rescale, the median of each numeric field over the repeats."""
    out = []
    for same in zip(*runs):
        row = dict(same[0])
        for k, v in row.items():
            if isinstance(v, (int, float)):
                row[k] = statistics.median(r[k] for r in same)
        out.append(row)
    return out


def bench_rescales(w: Workload, repeats: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The medians per rescale, and every repeat's rows."""
    rows, samples = [], []
    for how in ("contiguous", "fewest_moves"):
        for start_kind, (start_p, steps) in STEPS.items():
            runs = [rescale_run(w, start_p, steps, how) for _ in range(repeats)]
            for r in [row for run in runs for row in run]:
                r["start"] = start_kind.split()[0]
            rows += medians(runs)
            samples += [row for run in runs for row in run]
    return rows, samples


def bench_savepoint(w: Workload, repeats: int, tmp: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = os.path.join(tmp, "savepoint")
    env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAX_PARALLELISM)
    client, _ = start(w, env)
    t0 = time.perf_counter()
    try:
        client.stop_with_savepoint(path, timeout=WAIT_S)
    finally:
        released.set()
    stop_s = time.perf_counter() - t0
    stopped = client.wait(WAIT_S)
    info = describe_snapshot(load_snapshot(path))
    window = next(op for op in info["operators"] if op["name"] == WINDOW_OP)
    assert window["keys"] == w.keys, (window["keys"], w.keys)
    results: dict[str, list[Any]] = {}

    def run(p: int, restore: str | None) -> Any:
        env = fo.StreamEnvironment(parallelism=p, max_parallelism=MAX_PARALLELISM)
        out = w.build(env)
        result = env.execute("rescale bench", restore=restore)
        w.check(out.table())
        return result

    runs = {"restore at 2 (same)": (2, path), "restore at 4": (4, path),
            "from scratch at 2": (2, None), "from scratch at 4": (4, None)}
    contenders = {name: lambda name=name, p=p, r=r: results.setdefault(name, []).append(run(p, r))
                  for name, (p, r) in runs.items()}
    times = median_times(contenders, repeats, warmup=0)
    rows = [{"run": name, "seconds": t, "rows_per_s": w.table.num_rows / t, "rows_read": results[name][0].rows_in,
             "restore_s": statistics.median(res.restore_s for res in results[name])} for name, t in times.items()]
    details = {"savepoint_bytes": info["state_bytes"], "savepoint_keys": window["keys"],
               "stop_with_savepoint_s": stop_s, "rows_before_savepoint": stopped.rows_in,
               "restore_over_scratch_at_2": times["restore at 2 (same)"] / times["from scratch at 2"],
               "restore_over_scratch_at_4": times["restore at 4"] / times["from scratch at 4"]}
    return rows, details


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    keys = 100_000 if args.quick else 1_000_000
    tail_batches = 500 if args.quick else 1000
    repeats = args.repeats or (1 if args.quick else 3)
    tmp = tempfile.mkdtemp(prefix="fastops-bench-")
    try:
        rescale_run(Workload(1000, 50), *STEPS["chained"], "contiguous")  # warm-up, not measured
        w = Workload(keys, tail_batches)
        print(f"{w.table.num_rows:,} rows, {keys:,} keys held from the first tail batch on; "
              f"medians of {repeats} repeat(s)")
        rescales, rescale_samples = bench_rescales(w, repeats)
        mb = lambda b: b / 1e6
        print_table([{**r, "state_MB": mb(r["state_bytes"]), "bound_MB": mb(r["bound_bytes"]),
                      "moved_MB": mb(r["bytes_moved"]), "handed_MB": mb(r["bytes_handed"]),
                      "kg_moved": f"{r['key_groups_moved']:g}/{r['key_groups']:g}",
                      "kg_bound": r["moved_bound"]} for r in rescales],
                    ["how", "start", "step", "pause_ms", "call_s", "kg_moved", "kg_bound", "state_MB", "bound_MB",
                     "moved_MB", "handed_MB", "moved_over_bound", "handed_over_bound"],
                    title="live rescale (bound = state * key groups moved / key groups)")
        print()
        savepoints, sp_details = bench_savepoint(w, repeats, tmp)
        print_table(savepoints, ["run", "seconds", "rows_per_s", "rows_read", "restore_s"],
                    title="finish the job: from a savepoint taken at the first tail batch, or from scratch")
        print()
        print_table([{"metric": k, "value": v} for k, v in sp_details.items()], ["metric", "value"])
        measurements = []
        for r in rescales:
            name = f"{r['step']} {r['start']}, keys held per s of pause"
            role = "fastops" if r["how"] == "contiguous" else "variant"
            measurements.append(measurement(name, f"fastops {r['how']}", keys / (r["pause_ms"] / 1000.0), role))
        for r, role in zip(savepoints, ("fastops", "variant", "variant", "variant")):
            measurements.append(measurement("finish after a savepoint", f"fastops {r['run']}", r["rows_per_s"], role))
        write_results(args.json, measurements,
                      {"keys": keys, "rows": w.table.num_rows, "repeats": repeats, "rescales": rescales,
                       "rescale_samples": rescale_samples,
                       "savepoint": savepoints, "savepoint_summary": sp_details})
    finally:
        released.set()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
