"""MIN / MAX over strings and binary in the Table API (``StringMinMax``),
against a pure-Python model and pandas."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.table import Tumble, col, lit
from fastops.table.aggregates import StringMinMax

WORDS = st.one_of(st.none(), st.text(alphabet="abcé€\U0001F600", max_size=3))


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 5), WORDS), max_size=12), max_size=4),
       merges=st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)),
                                                         max_size=10)), max_size=3),
       is_max=st.booleans(), binary=st.booleans())
def test_string_min_max_equals_a_python_model(batches, merges, is_max, binary):
    """Updates, then merge calls of many pairs each, applied in order by the
    model; a ``scratch`` call merges into slots 8.. that are no source (as
    sliding windows do), the others may chain through slots merged before."""
    t = pa.binary() if binary else pa.string()
    enc = (lambda s: s.encode()) if binary else (lambda s: s)
    a = StringMinMax("s", is_max)
    a.validate(t)
    pick = max if is_max else min
    model: dict[int, object] = {}
    state = a.new_state()
    for rows in batches:
        rows = [(k, enc(v)) for k, v in rows if v is not None]  # the aggregator drops nulls before update
        state = a.update(state, np.array([k for k, _ in rows], np.int64), pa.array([v for _, v in rows], t))
        for k, v in rows:
            model[k] = v if k not in model else pick(model[k], v)
    state = a.from_bytes(a.to_bytes(state))  # through a snapshot
    for scratch, pairs in merges:
        pairs = [(d + 8 if scratch else d, s) for d, s in pairs]
        state = a.merge(state, np.array([d for d, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64))
        for d, s in pairs:
            if s in model:
                model[d] = model[s] if d not in model else pick(model[d], model[s])
    slots = np.arange(17)
    assert a.result(state, slots).to_pylist() == [model.get(i) for i in range(17)]
    state = a.reset(state, np.array([0, 1]))
    assert a.result(state, np.array([0, 1])).to_pylist() == [None, None]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_string_min_max_in_group_by_and_windows(mode):
    rng = np.random.default_rng(5)
    n = 300
    df = pd.DataFrame({"k": rng.integers(0, 4, n),
                       "s": rng.choice(["pear", "apple", "fig", "Äpfel", "zz", None], n),
                       "ts": pd.to_datetime(rng.integers(0, 60_000, n), unit="ms")})
    t_env = fo.TableEnvironment(mode=mode, batch_size=16)
    t = t_env.from_pandas(df, rowtime="ts", watermark="60s")
    got = t.group_by(col("k")).select(col("k"), col("s").min.alias("lo"), col("s").max.alias("hi")).to_pandas()
    ref = df.dropna().groupby("k").s.agg(["min", "max"]).reset_index()
    assert sorted(map(tuple, got.values.tolist())) == sorted(map(tuple, ref.values.tolist()))
    w = (t.window(Tumble.over(lit(10).seconds).on(col("ts")).alias("w"))
         .group_by(col("w"), col("k")).select(col("k"), col("w").start.alias("ws"), col("s").max.alias("hi")))
    got = w.to_pandas()
    ref = (df.dropna().assign(ws=df.ts.dt.floor("10s")).groupby(["k", "ws"]).s.max().reset_index())
    key = lambda r: (r[0], pd.Timestamp(r[1]), r[2])
    assert sorted(map(key, got[["k", "ws", "hi"]].values.tolist())) == \
        sorted(map(key, ref[["k", "ws", "s"]].values.tolist()))


def test_min_of_a_list_column_is_still_refused():
    t_env = fo.TableEnvironment(mode="batch")
    t = t_env.from_arrow(pa.table({"k": [1], "l": pa.array([[1]], pa.list_(pa.int64()))}))
    with pytest.raises(fo.table.PlanError, match="MIN"):
        t.group_by(col("k")).select(col("l").min)
