"""A keyed window job that rescales itself while it runs, killed by a test.

    python rescale_job.py INPUT.parquet OUT_DIR CHECKPOINT_DIR [--parallelism P] [--to P2]

File source -> paced map -> watermark -> key_by -> tumbling window -> Parquet
sink (exactly once), checkpoints every 50 ms. With ``--to``, once a third
of the input has been read it prints ``rescaling``, calls
``JobClient.rescale(P2)`` and prints ``rescaled``; without it, it runs (or
resumes from CHECKPOINT_DIR) to the end.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Tumbling
from fastops.runtime.checkpoint import CheckpointStorage


def build(env: fo.StreamEnvironment, src: str, out: str, pace: float, reached: threading.Event,
          at: int) -> None:
    seen = [0]
    lock = threading.Lock()

    def paced(batch):
        with lock:
            seen[0] += 1
            if seen[0] >= at:
                reached.set()
        time.sleep(pace)
        return batch

    (env.from_parquet(src, batch_size=500).map(paced).with_watermark("ts", max_out_of_orderness="500ms")
     .key_by("user").window(Tumbling("1s")).aggregate(n=agg.count(), total=agg.sum("value"))
     .sink_to_parquet(os.path.join(out, "tumbling")))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("checkpoints")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--to", type=int, default=None)
    p.add_argument("--pace", type=float, default=0.0)
    a = p.parse_args()
    env = fo.StreamEnvironment(parallelism=a.parallelism, max_parallelism=16, checkpoint_dir=a.checkpoints,
                               checkpoint_interval="50ms", key_group_assignment="fewest_moves")
    reached = threading.Event()
    build(env, a.src, a.out, a.pace, reached, at=20)
    client = env.execute_async()
    if a.to is not None:
        reached.wait()
        storage = CheckpointStorage(a.checkpoints)
        while storage.latest() is None and not client.done():  # a busy machine can be slow to the first one
            time.sleep(0.01)
        print("rescaling", flush=True)
        client.rescale(a.to)
        print("rescaled", flush=True)
    result = client.wait()
    print(f"restored_from={result.restored_from} rescales={len(result.rescales)}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
