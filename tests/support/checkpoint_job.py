"""A windowed job with checkpoints, run as a subprocess by the crash tests.

    python checkpoint_job.py INPUT.parquet OUT_DIR CHECKPOINT_DIR [--slow SECONDS]
                             [--mode exactly_once|at_least_once] [--no-checkpoints]

File source -> watermark -> key_by -> tumbling 1 s (count, sum, approx_distinct)
and sliding 4 s / 1 s (count, max) -> two Parquet sinks.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Sliding, Tumbling


def build(env: fo.StreamEnvironment, src: str, out: str, slow: float, overwrite: bool = False) -> None:
    seen = [0]
    lock = threading.Lock()

    def pace(batch):
        with lock:  # the crash test kills after a chosen batch
            seen[0] += 1
            sys.stdout.write(f"batch {seen[0]}\n")
            sys.stdout.flush()
        if slow:
            time.sleep(slow)
        return batch

    events = env.from_parquet(src, batch_size=1000).map(pace).with_watermark("ts", max_out_of_orderness="500ms")
    keyed = events.key_by("user")
    aggs = {"n": agg.count(), "total": agg.sum("value")}
    if hasattr(agg, "approx_distinct"):
        aggs["kinds"] = agg.approx_distinct("kind")
    keyed.window(Tumbling("1s")).aggregate(**aggs).sink_to_parquet(os.path.join(out, "tumbling"),
                                                                        overwrite=overwrite)
    events.key_by("user").window(Sliding("4s", "1s")).aggregate(
        n=agg.count(), top=agg.max("value")).sink_to_parquet(os.path.join(out, "sliding"), overwrite=overwrite)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("checkpoints")
    p.add_argument("--slow", type=float, default=0.0)
    p.add_argument("--mode", default="exactly_once")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--no-checkpoints", action="store_true")
    p.add_argument("--fail-at", type=int, default=-1, help="raise in the pacing map at this batch")
    p.add_argument("--overwrite", action="store_true", help="sinks may delete committed output")
    a = p.parse_args()
    env = fo.StreamEnvironment(
        parallelism=a.parallelism, threads=True, mode=a.mode,
        checkpoint_dir=None if a.no_checkpoints else a.checkpoints, checkpoint_interval="50ms")
    build(env, a.src, a.out, a.slow, a.overwrite)
    result = env.execute("checkpointed job")
    print(f"restored_from={result.restored_from} checkpoints={len(result.checkpoints)}", flush=True)


if __name__ == "__main__":
    main()
