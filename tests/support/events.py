"""Event files and output readers shared by the checkpoint and recovery tests."""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

# the worker script the kill-and-recover tests run in a subprocess
CHECKPOINT_JOB = os.path.join(os.path.dirname(__file__), "checkpoint_job.py")


def write_events(path: str, n: int = 60_000, seed: int = 7) -> pa.Table:
    """``n`` events (user, ts, value, kind) written as Parquet: 500 events/s with up to 0.4 s of disorder."""
    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.int64) * 2 - rng.integers(0, 400, n)
    table = pa.table({"user": rng.integers(0, 50, n), "ts": np.maximum(ts, 0),
                      "value": np.round(rng.normal(0, 1, n), 4),
                      "kind": pa.array([f"k{i}" for i in rng.integers(0, 9, n)])})
    pq.write_table(table, path, row_group_size=4000)
    return table


def output_rows(directory: str) -> Counter:
    """Every row a reader of the sink's directory sees (``_``-folders are skipped)."""
    if not os.path.exists(directory):
        return Counter()
    t = ds.dataset(directory, format="parquet").to_table()
    return Counter(tuple(r.values()) for r in t.to_pylist())
