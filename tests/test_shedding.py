"""Load shedding (``fastops.shedding``): random shedding's estimates against
the exact answers, semantic and window drops against what they promise, the
monitor's policy by hand, a live overloaded job, and bad input."""
from __future__ import annotations

import math
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops import agg
from fastops.operators.shedding import INCLUSION, keep_highest
from fastops.shedding import QoS, plan


def exact(table: pa.Table, size_ms: int = 1000) -> dict[tuple[int, int], dict[str, float]]:
    """Per (window start, key): count, sum, mean and max of x, by pyarrow."""
    w = pc.multiply(pc.divide(table.column("t"), size_ms), size_ms)
    g = pa.table({"w": w, "k": table.column("k"), "x": table.column("x")}).group_by(["w", "k"]).aggregate(
        [("x", "count"), ("x", "sum"), ("x", "mean"), ("x", "max")]).to_pylist()
    return {(r["w"], r["k"]): {"count": r["x_count"], "sum": r["x_sum"], "mean": r["x_mean"], "max": r["x_max"]}
            for r in g}


def by_window(out: pa.Table) -> dict[tuple[int, int], dict]:
    starts = out.column("window_start").cast(pa.int64()).to_pylist()
    return {(s, r["k"]): r for s, r in zip(starts, out.to_pylist())}


def windowed(env: fo.StreamEnvironment, table: pa.Table, batch_size: int, window: object = None) -> pa.Table:
    return (env.from_arrow(table, batch_size=batch_size).with_watermark("t").key_by("k")
            .window(window or fo.Tumbling(1000))
            .aggregate(n=agg.count(), s=agg.sum("x"), m=agg.mean("x"), mx=agg.max("x")).collect())


# -- random shedding: Horvitz-Thompson estimates --------------------------------------------

def test_random_shedding_estimates_count_and_sum_within_their_intervals():
    """1,000 windows of 10,000 rows each, half the rows shed: the median
    relative error of COUNT and SUM is at most 1 %, and the 95 % intervals
    cover the exact answer in 93-97 % of the windows."""
    rng = np.random.default_rng(20261206)
    windows, keys, rows = 100, 10, 10_000
    t = np.concatenate([w * 1000 + np.sort(rng.integers(0, 1000, keys * rows)) for w in range(windows)])
    k = np.concatenate([rng.permutation(np.repeat(np.arange(keys), rows)) for _ in range(windows)])
    table = pa.table({"t": t, "k": k, "x": rng.uniform(0.0, 100.0, len(t))})
    env = fo.StreamEnvironment(parallelism=2, qos=QoS(shedding="random", fixed_drop=0.5, seed=5))
    out = by_window(windowed(env, table, 65536))
    truth = exact(table)
    assert set(out) == set(truth) and len(out) == 1000
    assert min(v["count"] for v in truth.values()) >= 10_000
    for name, true in (("n", "count"), ("s", "sum")):
        errors = np.array([abs(out[w][name] - truth[w][true]) for w in truth])
        relative = errors / np.array([truth[w][true] for w in truth])
        covered = np.mean([abs(out[w][name] - truth[w][true]) <= out[w][f"{name}_error"] for w in truth])
        assert np.median(relative) <= 0.01, name
        assert 0.93 <= covered <= 0.97, (name, covered)
    fractions = np.array([r["sampled_fraction"] for r in out.values()])
    assert np.all(np.abs(fractions - 0.5) < 0.03)
    assert 0.49 < env.last_result.shedding["rows_shed"] / len(t) < 0.51


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 3000), batch=st.integers(1, 700), parallelism=st.integers(1, 3),
       fixed=st.sampled_from([None, 0.0]), seed=st.integers(0, 2 ** 32))
def test_random_shedding_that_sheds_nothing_is_exact_with_zero_errors(n, batch, parallelism, fixed, seed):
    rng = np.random.default_rng(seed)
    table = pa.table({"t": np.sort(rng.integers(0, 5000, n)), "k": rng.integers(0, 4, n),
                      "x": rng.integers(-50, 50, n).astype(np.float64)})
    qos = QoS(max_latency="1h", shedding="random") if fixed is None else QoS(shedding="random", fixed_drop=fixed)
    env = fo.StreamEnvironment(parallelism=parallelism, qos=qos)
    result = windowed(env, table, batch)
    assert result.schema.names == ["window_start", "window_end", "k", "n", "n_error", "s", "s_error",
                                   "m", "m_error", "mx", "mx_error", "sampled_fraction"]
    out, truth = by_window(result), exact(table)
    assert set(out) == set(truth)
    for w, true in truth.items():
        got = out[w]
        assert got["n"] == true["count"] and got["s"] == pytest.approx(true["sum"], abs=1e-9)
        assert got["m"] == pytest.approx(true["mean"]) and got["mx"] == true["max"]
        assert got["n_error"] == got["s_error"] == got["m_error"] == got["mx_error"] == 0.0
        assert got["sampled_fraction"] == 1.0


def test_under_shedding_aggregates_without_an_estimate_say_so_with_a_null_error():
    rng = np.random.default_rng(3)
    table = pa.table({"t": np.sort(rng.integers(0, 3000, 6000)), "k": rng.integers(0, 2, 6000),
                      "x": rng.uniform(0, 1, 6000)})
    env = fo.StreamEnvironment(qos=QoS(shedding="random", fixed_drop=0.5))
    out = windowed(env, table, 500)
    assert out.column("mx_error").null_count == out.num_rows  # a max of kept rows: a lower bound only
    assert out.column("n_error").null_count == 0
    truth = exact(table)
    for w, r in by_window(out).items():
        assert r["mx"] <= truth[w]["max"]


def test_select_keeps_the_inclusion_probability_and_a_map_that_drops_it_is_named():
    table = pa.table({"t": [1, 2, 3], "k": [1, 1, 2], "x": [1.0, 2.0, 3.0]})
    env = fo.StreamEnvironment(qos=QoS(shedding="random", fixed_drop=0.0))
    s = env.from_arrow(table).select("t", "k", "x")
    assert INCLUSION in s.schema.names
    out = s.with_watermark("t").key_by("k").window(fo.Tumbling(10)).aggregate(n=agg.count()).collect()
    assert sorted(out.column("n").to_pylist()) == [1.0, 2.0]
    env = fo.StreamEnvironment(qos=QoS(shedding="random", fixed_drop=0.0))
    dropped = env.from_arrow(table).map(lambda b: b.select(["t", "k", "x"]))
    with pytest.raises(fo.JobFailed, match=INCLUSION):
        dropped.with_watermark("t").key_by("k").window(fo.Tumbling(10)).aggregate(n=agg.count()).collect()


# -- semantic shedding --------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2000), batch=st.integers(1, 400), fraction=st.floats(0.0, 0.9),
       seed=st.integers(0, 2 ** 32), negate=st.booleans())
def test_semantic_shedding_never_keeps_a_lower_priority_row_over_a_higher_one(n, batch, fraction, seed, negate):
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 20, n).astype(np.float64)  # ties
    table = pa.table({"i": np.arange(n), "p": pa.array(p, mask=rng.random(n) < 0.1)})
    priority = pc.negate(fo.col("p")) if negate else "p"
    env = fo.StreamEnvironment(qos=QoS(shedding="semantic", priority=priority, fixed_drop=fraction))
    kept = set(env.from_arrow(table, batch_size=batch).collect().column("i").to_pylist())
    rank = np.where(table.column("p").is_valid().to_numpy(zero_copy_only=False),
                    -p if negate else p, -np.inf)
    for start in range(0, n, batch):
        rows = range(start, min(start + batch, n))
        kept_here = [rank[i] for i in rows if i in kept]
        dropped_here = [rank[i] for i in rows if i not in kept]
        assert len(kept_here) == len(rows) - math.floor(fraction * len(rows))
        if kept_here and dropped_here:
            assert min(kept_here) >= max(dropped_here)
    assert env.last_result.shedding["rows_shed"] == n - len(kept)


def test_keep_highest_breaks_ties_by_position_and_ranks_nan_lowest():
    mask = keep_highest(np.array([1.0, np.nan, 3.0, 1.0, 1.0]), 3)
    assert mask.tolist() == [True, False, True, True, False]


# -- window shedding ----------------------------------------------------------------------

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(50, 3000), parallelism=st.integers(1, 3), seed=st.integers(0, 2 ** 32))
def test_window_shedding_emits_only_exact_windows(batch, parallelism, seed):
    rng = np.random.default_rng(seed)
    n = 20_000
    table = pa.table({"t": np.sort(rng.integers(0, 40_000, n)), "k": rng.integers(0, 10, n),
                      "x": rng.uniform(0, 10, n)})
    env = fo.StreamEnvironment(parallelism=parallelism, qos=QoS(shedding="window", fixed_drop=0.5, seed=seed % 1000))
    out, truth = by_window(windowed(env, table, batch)), exact(table)
    assert set(out) <= set(truth)
    assert 0.3 < len(out) / len(truth) < 0.7
    for w, r in out.items():
        assert r["n"] == truth[w]["count"] and r["s"] == pytest.approx(truth[w]["sum"])
        assert r["mx"] == truth[w]["max"]
    dropped = sum(v["count"] for w, v in truth.items() if w not in out)
    assert env.last_result.shedding["rows_shed"] == dropped


# -- the monitor's policy -----------------------------------------------------------------

def _ops(read: float, growth: float, busy_ms: float, backlog: int = 0) -> list[dict]:
    return [
        {"id": 1, "name": "gen", "vertex": 0, "is_source": True, "inputs": [], "rows_in_per_s": read,
         "backlog": backlog, "backlog_growth_per_s": growth},
        {"id": 2, "name": "shed", "vertex": 0, "inputs": [{"id": 1}], "max_busy_ms_per_s": 300.0},
        {"id": 3, "name": "map(svc)", "vertex": 1, "inputs": [{"id": 2}], "max_busy_ms_per_s": busy_ms},
        {"id": 4, "name": "window(Tumbling)", "vertex": 2, "inputs": [{"id": 3}], "max_busy_ms_per_s": 100.0},
    ]


def test_plan_sheds_what_brings_the_bottleneck_to_its_target_utilisation():
    # offered 2000 rows/s, read 1000, the service saturated: keep 0.85 * 1000 / 2000
    fraction, d = plan(_ops(1000, 1000, 1000), p99_ms=200, bound_ms=500, fraction=0.0)
    assert d.overloaded and d.bottleneck == "map(svc)"
    assert fraction == pytest.approx(1 - 0.425, abs=1e-3)
    # the bound missed too: the same model (under 0.8 of 1 already)
    assert plan(_ops(1000, 1000, 1000), p99_ms=900, bound_ms=500, fraction=0.0)[0] == pytest.approx(0.575, abs=1e-3)
    # a backlog is caught up within one interval: offered 1000 + 1000 / 0.5
    fraction, _ = plan(_ops(1000, 0, 1000, backlog=1000), p99_ms=900, bound_ms=500, fraction=0.0, interval_s=0.5)
    assert fraction == pytest.approx(1 - 0.85 / 3, abs=1e-3)


def test_plan_sheds_less_as_load_falls_and_nothing_when_the_job_keeps_up():
    # keeping half, the service is busy half the time: it could take 0.85 / 0.5 as much
    fraction, d = plan(_ops(1000, 0, 500), p99_ms=50, bound_ms=500, fraction=0.5)
    assert fraction == pytest.approx(1 - 0.85, abs=1e-3) and not d.overloaded
    assert plan(_ops(1000, 0, 200), p99_ms=50, bound_ms=500, fraction=0.5)[0] == 0.0
    fraction, d = plan(_ops(1000, 0, 900), p99_ms=50, bound_ms=500, fraction=0.0)
    assert fraction == 0.0 and d.reason == "keeps up: nothing to shed"


def test_plan_drains_a_missed_bound_and_respects_max_drop():
    # the sources keep up (no backlog), the service saturated: each look keeps a fifth less than the model
    fraction, _ = plan(_ops(1000, 0, 1000), p99_ms=900, bound_ms=500, fraction=0.5)
    assert fraction == pytest.approx(1 - 0.5 * 0.8)
    fraction, d = plan(_ops(1000, 50_000, 1000), p99_ms=900, bound_ms=500, fraction=0.0, max_drop=0.7)
    assert fraction == pytest.approx(0.7) and "max_drop" in d.reason


def test_plan_holds_when_the_bottleneck_is_before_the_drops():
    # the service is before the windows: window drops cannot relieve it, and the windows are not busy
    fraction, d = plan(_ops(1000, 1000, 1000), p99_ms=900, bound_ms=500, fraction=0.1, mode="window")
    assert fraction == 0.1 and d.overloaded and "cannot relieve" in d.reason
    ops = _ops(1000, 1000, 1000)
    ops[3]["max_busy_ms_per_s"] = 950.0  # now the windows are saturated too
    fraction, d = plan(ops, p99_ms=100, bound_ms=500, fraction=0.0, mode="window")
    assert d.bottleneck == "window(Tumbling)" and fraction == pytest.approx(1 - 0.85 / 0.95 / 2, abs=1e-3)


# -- a live job ---------------------------------------------------------------------------

def test_an_overloaded_job_sheds_until_its_latency_is_within_the_bound():
    cost_s, rate, seconds = 0.00005, 40_000.0, 6.0  # the service takes 20k rows/s; offered twice that

    def service(batch: pa.RecordBatch) -> pa.RecordBatch:
        time.sleep(batch.num_rows * cost_s)
        return batch

    def rows():
        rng = np.random.default_rng(1)
        for start in range(0, int(rate * seconds), 500):
            i = np.arange(start, start + 500)
            yield pa.record_batch({"t": (i * 1000 / rate).astype(np.int64), "k": i % 4, "x": rng.uniform(0, 1, 500)})

    env = fo.StreamEnvironment(qos=QoS(max_latency="300ms", interval="500ms"))
    (env.from_generator(rows, rate=rate).with_watermark("t").key_by("k").map(service).key_by("k")
     .window(fo.Tumbling(1000)).aggregate(n=agg.count()).sink_to_table("w"))
    client = env.execute_async("overloaded")
    time.sleep(2.0)
    live = client.metrics()["shedding"]
    result = client.wait()
    assert live["mode"] == "random" and live["rows_offered"] > 0
    decisions = result.shedding["decisions"]
    assert any(d["fraction"] > 0.2 for d in decisions)
    assert result.shedding["rows_shed"] > 0.2 * result.rows_in
    assert result.shedding["rows_offered"] == result.rows_in
    late = [d["p99_ms"] for d in decisions[len(decisions) // 2:] if d["p99_ms"] is not None]
    assert late and np.median(late) <= 300


# -- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, match", [
    ({"max_latency": "0ms"}, ValueError, "max_latency"),
    ({"max_latency": "-5ms"}, ValueError, "max_latency"),
    ({}, ValueError, "max_latency"),
    ({"max_latency": "1s", "max_drop": 0}, ValueError, "max_drop"),
    ({"max_latency": "1s", "max_drop": 1.5}, ValueError, "max_drop"),
    ({"max_latency": "1s", "max_drop": True}, ValueError, "max_drop"),
    ({"fixed_drop": 0.95}, ValueError, "fixed_drop"),
    ({"max_latency": "1s", "shedding": "oldest"}, ValueError, "shedding"),
    ({"max_latency": "1s", "shedding": "semantic"}, ValueError, "priority"),
    ({"max_latency": "1s", "priority": "p"}, ValueError, "priority"),
    ({"max_latency": "1s", "shedding": "semantic", "priority": 3}, TypeError, "priority"),
    ({"max_latency": "1s", "target_utilization": 0}, ValueError, "target_utilization"),
])
def test_bad_qos_settings_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        QoS(**kwargs)


def test_bad_uses_are_refused_where_the_job_is_built():
    with pytest.raises(TypeError, match="qos"):
        fo.StreamEnvironment(qos="500ms")
    table = pa.table({"t": [1, 2], "k": [1, 2], "x": [1.0, 2.0]})
    env = fo.StreamEnvironment(qos=QoS(max_latency="1s", shedding="semantic", priority="missing"))
    with pytest.raises(ValueError, match="missing"):
        env.from_arrow(table)
    env = fo.StreamEnvironment(qos=QoS(max_latency="1s", shedding="window"))
    keyed = env.from_arrow(table).with_watermark("t").key_by("k")
    with pytest.raises(ValueError, match="tumbling"):
        keyed.window(fo.Sliding(10, 5)).aggregate(n=agg.count())
    env = fo.StreamEnvironment(qos=QoS(max_latency="1s"))
    with pytest.raises(ValueError, match="running aggregate"):
        env.from_arrow(table).key_by("k").aggregate(n=agg.count())
