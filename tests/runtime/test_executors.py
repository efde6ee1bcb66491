"""Executors chosen by name give the same rows as a pandas reference; the
``threads=`` flag still picks them; local channels keep the Channel protocol
(credits, non-blocking sends, per-channel receive, close)."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Tumbling
from fastops.runtime.channels import Cancelled, Channel, ChannelClosed, InputGate
from fastops.runtime.executors import EXECUTORS, SingleThreadExecutor, ThreadExecutor, create_executor


def events(n: int = 20_000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"ts": np.sort(rng.integers(0, 60_000, n)).astype(np.int64),
                         "user": rng.integers(0, 40, n).astype(np.int64),
                         "amount": rng.integers(-50, 100, n).astype(np.int64)})


def reference(df: pd.DataFrame) -> pd.DataFrame:
    """Tumbling 5 s windows per user over rows with amount > 0: count, sum, max of 2 * amount."""
    kept = df[df.amount > 0].assign(double=lambda d: d.amount * 2)
    kept = kept.assign(window_start=kept.ts // 5000 * 5000)
    g = kept.groupby(["window_start", "user"]).agg(n=("amount", "size"), total=("amount", "sum"),
                                                   top=("double", "max")).reset_index()
    return g.sort_values(["window_start", "user"]).reset_index(drop=True)


def run(df: pd.DataFrame, **env_args) -> pd.DataFrame:
    env = fo.StreamEnvironment(**env_args)
    out = (env.from_pandas(df, batch_size=701)
           .with_watermark("ts", max_out_of_orderness="1s")
           .filter(fo.col("amount") > 0)
           .with_columns(double=pc.multiply(fo.col("amount"), 2))
           .rebalance()
           .key_by("user").window(Tumbling("5s"))
           .aggregate(n=agg.count(), total=agg.sum("amount"), top=agg.max("double"))
           .collect())
    out = out.set_column(out.schema.get_field_index("window_start"), "window_start",
                         out.column("window_start").cast(pa.int64()))  # timestamp[ms] -> ms
    got = out.to_pandas()[["window_start", "user", "n", "total", "top"]]
    return got.sort_values(["window_start", "user"]).reset_index(drop=True)


@pytest.mark.parametrize("env_args", [
    {"executor": "single"}, {"executor": "threads"}, {"executor": "single", "parallelism": 3},
    {"executor": "threads", "parallelism": 3}, {"threads": False, "parallelism": 2}, {"parallelism": 4},
], ids=["single", "threads", "single-p3", "threads-p3", "threads=False-p2", "default-p4"])
def test_every_executor_gives_the_reference_rows(env_args):
    df = events()
    expected = reference(df)
    got = run(df, **env_args)
    assert len(expected) > 400
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_executor_by_name_and_by_the_threads_flag():
    assert fo.StreamEnvironment().executor == "single"
    assert fo.StreamEnvironment(parallelism=2).executor == "threads"
    assert fo.StreamEnvironment(parallelism=2, threads=False).executor == "single"
    assert fo.StreamEnvironment(threads=True).threads is True
    assert fo.StreamEnvironment(executor="single", threads=False).threads is False
    with pytest.raises(ValueError, match=r"unknown executor 'dask'; expected one of \['ray', 'single', 'threads'\]"):
        fo.StreamEnvironment(executor="dask")
    with pytest.raises(ValueError, match="ray_address and ray_init_kwargs apply to executor='ray'"):
        fo.StreamEnvironment(ray_address="ray://head:10001")
    with pytest.raises(ValueError, match="threads=True contradicts executor='single'"):
        fo.StreamEnvironment(executor="single", threads=True)
    assert set(EXECUTORS) == {"threads", "single", "ray"}
    assert isinstance(create_executor("threads", 4), ThreadExecutor)
    assert isinstance(create_executor("single"), SingleThreadExecutor)
    assert create_executor("single").channel_capacity is None  # one thread: a send must never wait
    with pytest.raises(ValueError, match="unknown executor"):
        create_executor("nope")


def batch(n: int = 3) -> pa.RecordBatch:
    return pa.record_batch({"x": np.arange(n)})


def test_local_channel_credits_try_send_receive_and_close():
    gate = InputGate(threading.Event())
    ch: Channel = gate.new_channel(2, input_index=1)
    assert ch.input_index == 1
    assert ch.try_send(batch()) and ch.try_send(batch())
    assert not ch.try_send(batch())  # no credit left: nothing sent
    assert ch.try_send(fo.runtime.Watermark(5))  # control messages need no credit
    assert ch.receive(timeout=0.01).num_rows == 3  # taking a batch grants a credit back
    assert ch.try_send(batch(4))
    got = [ch.receive(timeout=0.01) for _ in range(3)]
    assert got[0].num_rows == 3 and got[1] == fo.runtime.Watermark(5) and got[2].num_rows == 4
    assert ch.receive(timeout=0.01) is None  # nothing came
    assert ch.send(batch()) == 0.0  # credit available: no wait
    ch.close()
    with pytest.raises(ChannelClosed):
        ch.send(batch())
    with pytest.raises(ChannelClosed):
        ch.try_send(fo.runtime.Watermark(6))


def test_a_blocked_send_waits_for_credit_and_gives_up_on_cancel():
    cancel = threading.Event()
    gate = InputGate(cancel)
    ch = gate.new_channel(1)
    ch.send(batch())
    waited = []
    t = threading.Thread(target=lambda: waited.append(ch.send(batch())))
    t.start()
    t.join(0.1)
    assert t.is_alive()  # no credit
    assert gate.get(timeout=1)[1].num_rows == 3
    t.join(2)
    assert not t.is_alive() and waited[0] >= 0.05  # the wait is reported (backpressure)
    errors = []

    def blocked():
        try:
            ch.send(batch())
        except Cancelled as exc:
            errors.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    t.join(0.05)
    cancel.set()
    gate.wake()
    t.join(2)
    assert not t.is_alive() and len(errors) == 1
