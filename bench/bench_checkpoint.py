"""Checkpoint benchmark.

1. The W1 pipeline (Parquet -> watermark -> key_by -> tumbling 1 s
   count/sum/max -> collect) on 30M events (``--quick``: 1M), with
   exactly-once checkpoints every 1 s vs without: throughput loss.
2. Snapshot time and size of a window operator holding 1M keys, and the time
   to restore it (decode + load), the recovery cost before replay.

    python bench/bench_checkpoint.py [--quick] [--json results/checkpoint.json]
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
import fastops as fo
from _common import measurement, median_time, parse_args, print_table, write_results
from bench_pipeline import AGGS, BATCH, make_events
from fastops.core.window.aggregator import State, WindowAggregator
from fastops.core.window.assigners import Tumbling


def pipeline(path: str, checkpoint_dir: str | None, interval: str = "1s") -> tuple[int, int]:
    if checkpoint_dir and os.path.exists(checkpoint_dir):
        shutil.rmtree(checkpoint_dir)
    env = fo.StreamEnvironment(parallelism=1, threads=True, checkpoint_dir=checkpoint_dir,
                               checkpoint_interval=interval)
    out = (env.from_parquet(path, batch_size=BATCH).with_watermark("ts", max_out_of_orderness="2s")
           .key_by("user_id").window(Tumbling("1s")).aggregate(**AGGS()).collect())
    return out.num_rows, len(env.last_result.checkpoints)


def big_state(keys: int) -> WindowAggregator:
    """A tumbling-window operator with ``keys`` keys, each in one open window."""
    rng = np.random.default_rng(0)
    w = WindowAggregator(Tumbling("1 min"), ["user_id"], AGGS(), time="ts")
    ids = rng.permutation(keys).astype(np.int64)
    for chunk in np.array_split(ids, max(1, keys // 200_000)):
        w.process(pa.record_batch({"user_id": chunk, "ts": np.full(len(chunk), 1000, np.int64),
                                   "value": rng.normal(size=len(chunk))}))
    return w


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 1_000_000 if args.quick else 30_000_000  # long enough for checkpoints every 1 s
    keys = 200_000 if args.quick else 1_000_000
    repeats = args.repeats or (2 if args.quick else 3)
    tmp = tempfile.mkdtemp(prefix="fastops-bench-")
    path = os.path.join(tmp, "events.parquet")
    pq.write_table(make_events(n), path, row_group_size=4 * BATCH)
    ck = os.path.join(tmp, "ck")

    rows_plain, _ = pipeline(path, None)
    results = [{"workload": "W1 no checkpoints", "rows_per_s": 0.0, "seconds": 0.0, "checkpoints": 0}]
    plain = median_time(lambda: pipeline(path, None), repeats)
    results[0].update(rows_per_s=n / plain, seconds=plain)
    losses = {}
    per_checkpoint_s = float("nan")
    # the job may finish within 1 s here, so a shorter interval shows the cost too
    for interval in ("1s", "100ms"):
        rows_ck, taken = pipeline(path, ck, interval)
        assert rows_ck == rows_plain, (rows_ck, rows_plain)
        t = median_time(lambda interval=interval: pipeline(path, ck, interval), repeats)
        results.append({"workload": f"W1 checkpoint every {interval}", "rows_per_s": n / t,
                        "seconds": t, "checkpoints": taken})
        losses[interval] = 1 - plain / t
        if taken:
            per_checkpoint_s = max(t - plain, 0.0) / taken
    print_table(results, ["workload", "rows_per_s", "seconds", "checkpoints"])

    w = big_state(keys)
    snap_s = median_time(lambda: w.snapshot().to_bytes(), repeats)
    data = w.snapshot().to_bytes()

    def restore() -> None:
        fresh = WindowAggregator(Tumbling("1 min"), ["user_id"], AGGS(), time="ts")
        fresh.restore(State.from_bytes(data))

    restore_s = median_time(restore, repeats)
    summary = {
        "events": n,
        "throughput_loss_every_1s": losses["1s"],
        "throughput_loss_every_100ms": losses["100ms"],
        # the job is shorter than 1 s here: the cost of one checkpoint, and the loss
        # it implies at one checkpoint per second of processing
        "seconds_per_checkpoint": per_checkpoint_s,
        "implied_loss_at_1s": per_checkpoint_s / (1.0 + per_checkpoint_s),
        "state_keys": keys,
        "snapshot_s": snap_s,
        "snapshot_bytes": len(data),
        "restore_s": restore_s,
    }
    print()
    print_table([{"metric": k, "value": v} for k, v in summary.items()], ["metric", "value"])
    write_results(args.json, [measurement(r["workload"], "fastops", r["rows_per_s"]) for r in results],
                  {"results": results, "summary": summary})
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
