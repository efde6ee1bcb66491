"""DS2's policy against hand-computed cases (the paper's worked shape: a
source, a flat-map that doubles its rows, a keyed count)."""
from __future__ import annotations

import io
import math
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import fastops as fo
from fastops.autoscale import ds2, estimate
from fastops.runtime.progress import Progress


def op(id, name, p, rows_in, rows_out, busy_ms, inputs=(), source=False, backlog=0.0, tag=None):
    return {"id": id, "name": name, "parallelism": p, "is_source": source,
            "inputs": [{"id": i, "tag": tag} for i in inputs], "rows_in_per_s": rows_in,
            "rows_out_per_s": rows_out, "busy_ms_per_s": busy_ms, "backlog_growth_per_s": backlog}


def paper(backlog=3000.0):
    # the source reads 1000 rows/s and falls 3000 rows/s behind: it is offered 4000 rows/s.
    # flat_map: 1 instance, 1000 in, 2000 out, busy half the time -> 2000 rows/s per busy second.
    # count: 1 instance, 2000 in, busy all the time -> 2000 rows/s per busy second.
    return [op(1, "source", 1, 1000, 1000, 300, source=True, backlog=backlog),
            op(2, "flat_map", 1, 1000, 2000, 500, inputs=[1]),
            op(3, "count", 1, 2000, 2000, 1000, inputs=[2]),
            op(4, "sink", 1, 2000, 0, 100, inputs=[3])]


def test_the_papers_shape_sizes_every_operator_in_one_step():
    got = ds2(paper(), target_utilization=0.7)
    # flat_map: 4000 / (2000 * 0.7) = 2.86 -> 3; count: 8000 / (2000 * 0.7) = 5.71 -> 6
    # sink: 8000 rows/s against 2000 / 0.1 = 20000 per instance: 8000 / 14000 = 0.57 -> 1
    assert got == {"flat_map": 3, "count": 6, "sink": 1}
    est = {e.name: e for e in estimate(paper(), target_utilization=0.7)}
    assert est["source"].target_output_rate == 4000
    assert est["flat_map"].target_output_rate == 8000 and est["flat_map"].selectivity == 2
    assert est["count"].true_processing_rate == 2000
    assert est["count"].optimal == pytest.approx(8000 / 1400)


def test_a_draining_source_is_offered_its_arrival_rate_and_catch_up_adds_its_backlog():
    # reads 3000 rows/s while its backlog of 60000 rows shrinks by 2000 rows/s: 1000 rows/s arrive
    ops = paper()
    ops[0] = op(1, "source", 1, 3000, 3000, 300, source=True, backlog=-2000.0)
    ops[0]["backlog"] = 60_000
    est = {e.name: e for e in estimate(ops, target_utilization=1.0, utilization_band=0.0)}
    assert est["source"].target_output_rate == 1000 and est["source"].backlog == 60_000
    # flat_map: 1000 / 2000 -> 1; count: 2000 / 2000 -> 1
    assert (est["flat_map"].target_parallelism, est["count"].target_parallelism) == (1, 1)
    # to drain 60000 rows in 20 s: 1000 + 3000 rows/s -> flat_map 2, count 4
    got = ds2(ops, target_utilization=1.0, utilization_band=0.0, catch_up_s=20)
    assert (got["flat_map"], got["count"]) == (2, 4)
    with pytest.raises(ValueError, match="catch_up_s"):
        ds2(ops, catch_up_s=0)


def test_an_operator_that_cannot_be_rescaled_keeps_its_parallelism_and_says_why():
    ops = paper()
    ops[2]["fixed_parallelism"] = "it keeps state but its input is not keyed"
    est = {e.name: e for e in estimate(ops)}
    assert est["count"].target_parallelism == 1 and "not keyed" in est["count"].reason
    assert est["count"].target_output_rate == 8000  # its downstream still sees what it passes on
    assert ds2(ops)["flat_map"] == 3


def test_an_operator_chained_to_a_source_keeps_its_parallelism():
    ops = paper()
    for o, vertex in zip(ops, (0, 0, 1, 2)):
        o["vertex"] = vertex
    est = {e.name: e for e in estimate(ops)}
    assert est["flat_map"].target_parallelism == 1 and "source 'source'" in est["flat_map"].reason
    assert est["count"].target_parallelism == 6  # the flat_map's target output still flows on


def test_at_full_utilisation_the_optimum_is_the_rate_ratio():
    got = ds2(paper(), target_utilization=1.0, utilization_band=0.0)
    assert got == {"flat_map": 2, "count": 4, "sink": 1}


def test_an_operator_at_the_target_utilisation_holds_and_says_why():
    ops = paper(backlog=0.0)
    # flat_map now runs at 1000 / 2000 = 0.5 of its capacity; with target 0.55 +- 0.1 it holds
    est = {e.name: e for e in estimate(ops, target_utilization=0.55, utilization_band=0.1)}
    assert est["flat_map"].target_parallelism == 1 and "within the band" in est["flat_map"].reason
    assert est["flat_map"].utilization == pytest.approx(0.5)


def test_skewed_instances_are_averaged():
    # two instances, one busy 900 ms/s and one 100 ms/s: mean 500 ms/s; 1000 rows/s in
    # -> 500 rows/s per instance per 0.5 busy s = 1000 rows/s per instance
    ops = [op(1, "source", 1, 1000, 1000, 100, source=True), op(2, "map", 2, 1000, 1000, 500, inputs=[1])]
    est = {e.name: e for e in estimate(ops, target_utilization=0.5, utilization_band=0.0)}
    assert est["map"].true_processing_rate == 1000
    assert est["map"].target_parallelism == 2  # 1000 / (1000 * 0.5)


def test_an_operator_without_busy_time_holds():
    ops = [op(1, "source", 1, 1000, 1000, 100, source=True), op(2, "map", 3, 0, 0, 0, inputs=[1])]
    est = {e.name: e for e in estimate(ops)}
    assert est["map"].target_parallelism == 3 and "no busy time" in est["map"].reason
    assert est["map"].target_output_rate == 1000  # its target still flows downstream


def test_scale_down_is_capped_and_bounds_and_divisors_apply():
    # 100 rows/s into 10 instances that each could take 1000 rows/s: one would do
    ops = [op(1, "source", 1, 100, 100, 10, source=True), op(2, "map", 10, 100, 100, 10, inputs=[1])]
    est = {e.name: e for e in estimate(ops, max_scale_down=0.6)}
    assert est["map"].target_parallelism == math.ceil(10 * 0.4) and "capped" in est["map"].reason
    assert ds2(ops, max_scale_down=0.6, bounds={"map": (5, 8)}) == {"map": 5}
    up = [op(1, "source", 1, 10_000, 10_000, 10, source=True), op(2, "map", 1, 1000, 1000, 1000, inputs=[1])]
    assert ds2(up) == {"map": 15}  # 10000 / 700 = 14.3
    assert ds2(up, divisor_of_max=True, max_parallelism=128) == {"map": 16}
    assert ds2(up, max_parallelism=8) == {"map": 8}


def test_two_inputs_add_their_targets_and_side_outputs_carry_none():
    ops = [op(1, "a", 1, 1000, 1000, 100, source=True), op(2, "b", 1, 3000, 3000, 100, source=True),
           op(3, "join", 1, 4000, 4000, 1000, inputs=[1, 2]),
           op(4, "late", 1, 10, 10, 10, inputs=[3], tag="late")]
    est = {e.name: e for e in estimate(ops, target_utilization=1.0, utilization_band=0.0)}
    assert est["join"].target_input_rate == 4000 and est["join"].target_parallelism == 1
    assert est["late"].target_input_rate == 0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="target_utilization"):
        ds2(paper(), target_utilization=0)
    with pytest.raises(ValueError, match="unknown operator id 9"):
        ds2([op(1, "map", 1, 1, 1, 1, inputs=[9])])
    with pytest.raises(ValueError, match="cycle"):
        ds2([op(1, "a", 1, 1, 1, 1, inputs=[2]), op(2, "b", 1, 1, 1, 1, inputs=[1])])


def slow_rows(batch):
    time.sleep(batch.num_rows * 0.0002)  # a cost per row that waits (an external service), releasing the GIL
    return batch


def autoscaled_job(env, out):
    t = pa.table({"k": np.arange(12_000) % 97, "v": np.arange(12_000), "ts": np.arange(12_000, dtype=np.int64)})
    (env.from_arrow(t, batch_size=200).with_watermark("ts").key_by("k").map(slow_rows, name="slow")
     .key_by("k").window(fo.windows.Tumbling(500)).aggregate(n=fo.agg.count(), s=fo.agg.sum("v"))
     .sink_to_parquet(out))


def test_a_job_under_autoscaling_writes_what_it_writes_at_fixed_parallelism(tmp_path):
    env = fo.StreamEnvironment(parallelism=1)
    autoscaled_job(env, str(tmp_path / "fixed"))
    env.execute()
    env = fo.StreamEnvironment(parallelism=1, executor="threads",
                               autoscaling=fo.Autoscaling(interval="600ms", stabilization="600ms", catch_up="1s"))
    autoscaled_job(env, str(tmp_path / "scaled"))
    shown = io.StringIO()
    bar = Progress(stream=shown)
    result = env.execute(progress=bar)
    bar.close()
    applied = [d for d in result.scaling if d["applied"]]
    # the table is all backlog: to read it in about 1 s the slow operator needs more instances
    assert applied and result.rescales
    slow = next(o for o in applied[0]["operators"] if o["name"] == "slow")
    assert applied[0]["applied"]["slow"] == slow["target_parallelism"] > slow["parallelism"]
    # the progress display printed each rescale as it happened
    assert shown.getvalue().count("autoscaler: ") == len(applied)
    assert f"slow {slow['parallelism']} -> {slow['target_parallelism']}" in shown.getvalue()
    assert result.rows_in == 12_000

    def rows(path):
        return sorted(tuple(r.values()) for r in ds.dataset(path).to_table().to_pylist())
    assert rows(str(tmp_path / "scaled")) == rows(str(tmp_path / "fixed"))


def test_autoscaling_settings_are_checked_where_the_environment_is_made():
    with pytest.raises(ValueError, match="target_utilization"):
        fo.StreamEnvironment(autoscaling=fo.Autoscaling(target_utilization=1.5))
    with pytest.raises(ValueError, match="interval"):
        fo.StreamEnvironment().enable_autoscaling(interval=0)
    with pytest.raises(TypeError, match="fastops.Autoscaling"):
        fo.StreamEnvironment(autoscaling={"interval": "1s"})
