"""Flink's ``datagen`` connector: generated rows from the table's declared columns,
with Flink's options; the same seed gives the same rows whatever the batch size or
where a reader resumed."""
from __future__ import annotations

import re
import time

import numpy as np
import pyarrow as pa
import pytest

import fastops as fo
from fastops.connectors.base import END
from fastops.connectors.datagen import DatagenSource
from fastops.table import PlanError

DDL = """CREATE TABLE gen (
    id BIGINT, k INT, price DOUBLE, name STRING, flag BOOLEAN, ts TIMESTAMP(3), amount DECIMAL(10, 2)
) WITH (
    'connector' = 'datagen', {opts}
)"""
OPTS = ("'number-of-rows' = '{n}', 'rows-per-second' = '1000000', 'seed' = '{seed}', "
        "'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000', "
        "'fields.k.min' = '-3', 'fields.k.max' = '3', 'fields.price.min' = '10', 'fields.price.max' = '20', "
        "'fields.name.length' = '6', 'fields.name.null-rate' = '0.25', 'fields.ts.max-past' = '1 min', "
        "'fields.amount.min' = '0', 'fields.amount.max' = '5'")


def _read(n: int, seed: int = 7, batch_size: int = 65536, mode: str = "batch") -> pa.Table:
    env = fo.TableEnvironment(mode=mode, batch_size=batch_size)
    env.execute_sql(DDL.format(opts=OPTS.format(n=n, seed=seed)))
    return env.sql_query("SELECT * FROM gen").to_arrow()


def test_flink_options_shape_the_rows():
    before = time.time()
    t = _read(2000).sort_by("id")
    assert t["id"].to_pylist() == list(range(1, 2001))
    k = t["k"].to_numpy()
    assert k.min() == -3 and k.max() == 3 and len(np.unique(k)) == 7
    price = t["price"].to_numpy()
    assert (price >= 10).all() and (price <= 20).all() and price.std() > 2
    names = t["name"]
    assert 350 < names.null_count < 650  # null-rate 0.25 of 2000
    assert all(len(s) == 6 and set(s) <= set("0123456789abcdef") for s in names.drop_null().to_pylist())
    ts = t["ts"].cast(pa.int64()).to_numpy()
    assert (ts <= time.time() * 1000 + 1).all() and (ts >= (before - 61) * 1000).all() and ts.std() > 1000
    amount = [float(a) for a in t["amount"].to_pylist()]
    assert min(amount) >= 0 and max(amount) <= 5
    flags = t["flag"].to_numpy(zero_copy_only=False)
    assert 0.4 < flags.mean() < 0.6


@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_the_same_seed_gives_the_same_rows_whatever_the_batch_size(batch_size):
    a = _read(300, seed=3, batch_size=batch_size, mode="streaming").drop_columns(["ts"]).sort_by("id")
    b = _read(300, seed=3).drop_columns(["ts"]).sort_by("id")
    assert a.drop_columns([c for c in a.column_names if c not in b.column_names]).equals(b)
    c = _read(300, seed=4).drop_columns(["ts"]).sort_by("id")
    assert not c.equals(b)


def test_a_reader_resumes_at_its_position():
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("v", pa.int16())])
    src = DatagenSource(schema, {"number-of-rows": "50", "seed": "11", "fields.s.var-len": "true",
                                 "fields.s.length": "5"}, batch_size=8)
    whole = pa.Table.from_batches(list(_drain(src.open(0, 1))))
    r = src.open(0, 1)
    first = [r.read() for _ in range(3)]
    again = src.open(0, 1, r.position())
    resumed = pa.Table.from_batches([b for b in first if b is not None] + list(_drain(again)))
    assert resumed.equals(whole) and whole.num_rows == 50
    lens = [len(s) for s in whole["s"].to_pylist()]
    assert min(lens) >= 1 and max(lens) <= 5 and len(set(lens)) > 1


def _drain(reader):
    while True:
        b = reader.read()
        if b is END:
            return
        if b is not None:
            yield b


def test_a_sequence_ends_the_source_and_rows_per_second_paces_it():
    env = fo.TableEnvironment(mode="streaming")
    env.execute_sql("CREATE TABLE s (n INT, w STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '200', "
                    "'fields.n.kind' = 'sequence', 'fields.n.start' = '5', 'fields.n.end' = '64', "
                    "'fields.w.kind' = 'sequence', 'fields.w.start' = '100', 'fields.w.end' = '1000')")
    t0 = time.perf_counter()
    t = env.sql_query("SELECT n, w FROM s").to_arrow()
    took = time.perf_counter() - t0
    assert sorted(t["n"].to_pylist()) == list(range(5, 65))
    assert sorted(t["w"].to_pylist()) == sorted(str(v) for v in range(100, 160))
    assert took >= 0.25  # 60 rows at 200 rows/s


@pytest.mark.parametrize("opts, message", [
    ("'fields.nope.min' = '1'", "unknown option 'fields.nope.min'"),
    ("'fields.id.kind' = 'sequence'", "a sequence needs 'fields.id.start'"),
    ("'fields.id.kind' = 'zipf'", "'random' or 'sequence'"),
    ("'rows-per-sec' = '5'", "unknown option 'rows-per-sec'"),
    ("'fields.k.min' = '5', 'fields.k.max' = '1'", "max is below min"),
])
def test_bad_options_are_named(opts, message):
    env = fo.TableEnvironment(mode="batch")
    env.execute_sql(DDL.format(opts=opts))
    with pytest.raises(PlanError, match=re.escape(message)):
        env.sql_query("SELECT * FROM gen")

