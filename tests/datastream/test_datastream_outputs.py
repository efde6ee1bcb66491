"""Several outputs of one DataStream job (``sink_to_table`` then ``.table()``
after ``execute()``) against pandas, and the error that explains the
``collect(); collect(); execute()`` mistake."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo


def _events(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"k": rng.integers(0, 5, n), "ts": np.sort(rng.integers(0, 10_000, n)),
                         "v": np.round(rng.normal(0, 10, n), 3)})


def _job(df: pd.DataFrame, batch_size: int, threads: bool):
    """Three outputs of one job over one source: a filter, a map, a keyed window."""
    env = fo.StreamEnvironment(threads=threads)
    s = env.from_pandas(df, batch_size=batch_size).with_watermark("ts")
    positive = s.filter(fo.col("v") > 0).sink_to_table("positive")
    doubled = s.select("k", "ts", v2=fo.col("v") * 2).sink_to_table("doubled")
    per_second = (s.key_by("k").window(fo.Tumbling("1s"))
                  .aggregate(total=fo.agg.sum("v"), n=fo.agg.count()).sink_to_table("per_second"))
    result = env.execute("three outputs")
    return result, positive.table().to_pandas(), doubled.table().to_pandas(), per_second.table().to_pandas()


def _check(df: pd.DataFrame, batch_size: int, threads: bool) -> None:
    result, positive, doubled, per_second = _job(df, batch_size, threads)
    # one job: the source is read once for all three outputs
    assert result.rows_in == len(df)
    assert len(result.outputs) == 3
    order = ["k", "ts", "v"]
    pd.testing.assert_frame_equal(positive.sort_values(order).reset_index(drop=True),
                                  df[df.v > 0].sort_values(order).reset_index(drop=True))
    ref_doubled = df.assign(v2=df.v * 2)[["k", "ts", "v2"]]
    pd.testing.assert_frame_equal(doubled.sort_values(["k", "ts", "v2"]).reset_index(drop=True),
                                  ref_doubled.sort_values(["k", "ts", "v2"]).reset_index(drop=True))
    ref = (df.assign(ws=df.ts // 1000 * 1000).groupby(["ws", "k"])
           .agg(total=("v", "sum"), n=("v", "size")).reset_index())
    ms = pd.Timedelta(milliseconds=1)
    got = per_second.assign(ws=(per_second.window_start - pd.Timestamp(0)) // ms,
                            we=(per_second.window_end - pd.Timestamp(0)) // ms)
    got = got.sort_values(["ws", "k"]).reset_index(drop=True)
    assert got.ws.tolist() == ref.ws.tolist() and got.k.tolist() == ref.k.tolist()
    assert got.n.tolist() == ref.n.tolist()
    np.testing.assert_allclose(got.total.to_numpy(), ref.total.to_numpy(), rtol=1e-12, atol=1e-9)
    assert (got.we - got.ws == 1000).all()


@pytest.mark.parametrize("threads", [False, True])
def test_several_outputs_of_one_job_equal_pandas(threads):
    _check(_events(2_000, 1), batch_size=128, threads=threads)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**16), batch_size=st.integers(1, 64))
def test_several_outputs_any_batching_equal_pandas(n, seed, batch_size):
    _check(_events(n, seed), batch_size, threads=False)


def test_collect_runs_a_job_at_once_and_keeps_its_rows():
    env = fo.StreamEnvironment()
    s = env.from_collection([(i, float(i)) for i in range(10)], schema=["k", "v"])
    a = s.filter(fo.col("v") < 3).collect()
    b = s.filter(fo.col("v") >= 7).collect()
    assert a.column("k").to_pylist() == [0, 1, 2]
    assert b.column("k").to_pylist() == [7, 8, 9]
    assert env.last_result.rows_in == 10  # each collect() was a whole job of its own


def test_execute_after_collect_says_collect_ran_and_shows_several_outputs():
    env = fo.StreamEnvironment()
    s1 = env.from_collection([(1, 1.0), (2, 2.0)], schema=["k", "v"])
    s2 = s1.filter(fo.col("v") > 1)
    s1.collect()
    s2.collect()
    with pytest.raises(ValueError) as info:
        env.execute()
    msg = str(info.value)
    assert "no sink" in msg
    assert "collect() runs its job at once" in msg
    assert "2 collect() job(s) already ran" in msg
    assert "sink_to_table(" in msg and ".table()" in msg and "env.execute()" in msg


def test_execute_without_sink_and_without_collect_keeps_the_plain_message():
    env = fo.StreamEnvironment()
    env.from_collection([(1,)], schema=["k"])
    with pytest.raises(ValueError) as info:
        env.execute()
    assert "no sink" in str(info.value)
    assert "collect() job" not in str(info.value)


def test_the_pattern_the_error_shows_works():
    env = fo.StreamEnvironment()
    s1 = env.from_collection([(1, 1.0), (2, 2.0), (3, 3.0)], schema=["k", "v"])
    s2 = s1.filter(fo.col("v") > 1)
    a = s1.sink_to_table("a")
    b = s2.sink_to_table("b")
    env.execute()
    assert a.table().column("k").to_pylist() == [1, 2, 3]
    assert b.table().column("k").to_pylist() == [2, 3]
