"""Pandas UDAFs of several arguments (PyFlink's ``@udaf(result_type=...,
func_type="pandas")`` of ``(v: pd.Series, w: pd.Series)``): each argument
arrives as a Series of the group's (or window's) rows, in the same row order.
Checked against pandas computing the same function per group / window."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.table import Tumble, col, udaf


def weighted_mean(v: pd.Series, w: pd.Series) -> float:
    return float((v * w).sum() / w.sum())


def spread(v: pd.Series, w: pd.Series, z: pd.Series) -> float:
    """Three arguments, each used, and their rows kept together."""
    assert len(v) == len(w) == len(z) and isinstance(v, pd.Series)
    return float((v * w).max() - z.min())


WAVG = udaf(weighted_mean, result_type="DOUBLE", func_type="pandas")
SPREAD = udaf(spread, result_type="DOUBLE", func_type="pandas")


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"k": rng.integers(0, 4, n), "v": rng.normal(size=n).round(3),
                         "w": rng.integers(1, 5, n).astype(float), "z": rng.normal(size=n).round(3),
                         "ts": np.sort(rng.integers(0, 10_000, n))})


def _ref(df: pd.DataFrame, by) -> pd.DataFrame:
    g = df.groupby(by)
    return pd.DataFrame({"m": g.apply(lambda p: weighted_mean(p.v, p.w), include_groups=False),
                         "s": g.apply(lambda p: spread(p.v, p.w, p.z), include_groups=False)})


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_group_by_table_api(mode):
    df = _frame(60, 1)
    t = fo.TableEnvironment(mode=mode, batch_size=7).from_pandas(df)
    got = (t.group_by(col("k")).select(col("k"), WAVG(col("v"), col("w")).alias("m"),
                                       SPREAD(col("v"), col("w"), col("z")).alias("s"))
           .to_pandas().set_index("k").sort_index())
    ref = _ref(df, "k")
    assert list(got.index) == list(ref.index)
    assert np.allclose(got.m, ref.m) and np.allclose(got.s, ref.s)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_group_window_table_api(mode):
    df = _frame(80, 2)
    t = fo.TableEnvironment(mode=mode, batch_size=9).from_pandas(df, rowtime="ts", watermark="0s")
    got = (t.window(Tumble.over("2 s").on(col("ts")).alias("win")).group_by(col("win"), col("k"))
           .select(col("k"), col("win").start.alias("ws"), WAVG(col("v"), col("w")).alias("m"),
                   SPREAD(col("v"), col("w"), col("z")).alias("s"))
           .to_pandas())
    got["bucket"] = (got.ws - pd.Timestamp(0)) // pd.Timedelta(seconds=2)
    got = got.set_index(["bucket", "k"]).sort_index()
    ref = _ref(df.assign(bucket=df.ts // 2000), ["bucket", "k"])
    assert list(got.index) == list(ref.index)
    assert np.allclose(got.m, ref.m) and np.allclose(got.s, ref.s)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_sql_group_by_and_window_tvf(mode):
    df = _frame(50, 3)
    t_env = fo.TableEnvironment(mode=mode, batch_size=5)
    t_env.create_temporary_view("t", t_env.from_pandas(df, rowtime="ts", watermark="0s"))
    t_env.create_temporary_function("wavg", WAVG)
    got = t_env.execute_sql("SELECT k, wavg(v, w) AS m FROM t GROUP BY k").to_pandas().set_index("k").sort_index()
    assert np.allclose(got.m, _ref(df, "k").m)
    got = t_env.execute_sql(
        "SELECT window_start, wavg(v, w) AS m FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '3' SECOND)) "
        "GROUP BY window_start, window_end").to_pandas().sort_values("window_start")
    assert np.allclose(got.m, _ref(df.assign(bucket=df.ts // 3000), "bucket").m)


def test_a_single_argument_pandas_udaf_still_gets_one_series():
    df = _frame(30, 4)
    t = fo.TableEnvironment(mode="batch", batch_size=4).from_pandas(df)
    rng = udaf(lambda s: float(s.max() - s.min()), result_type="DOUBLE", func_type="pandas")
    got = t.group_by(col("k")).select(col("k"), rng(col("v")).alias("r")).to_pandas().set_index("k").sort_index()
    assert np.allclose(got.r, df.groupby("k").v.agg(lambda s: s.max() - s.min()))


@settings(max_examples=15, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 5), st.integers(1, 4)), min_size=1, max_size=40),
       mode=st.sampled_from(["batch", "streaming"]), batch=st.integers(1, 8))
def test_random_splits_give_the_groups_rows(rows, mode, batch):
    t_env = fo.TableEnvironment(mode=mode, batch_size=batch)
    t = t_env.from_elements(rows, [("k", "BIGINT"), ("v", "BIGINT"), ("w", "BIGINT")])
    got = t.group_by(col("k")).select(col("k"), WAVG(col("v"), col("w")).alias("m")).to_pandas()
    df = pd.DataFrame(rows, columns=["k", "v", "w"])
    ref = (df.v * df.w).groupby(df.k).sum() / df.w.groupby(df.k).sum()
    assert dict(zip(got.k, got.m)) == pytest.approx(ref.to_dict())
