"""Mistakes are reported where the graph is built, at the user's line.

When a stream's schema is known (pandas, Arrow, collection and file sources,
then filter / select / key_by / windows ...) or a value is given, a wrong
column, type, duration, batch size or parallelism raises TypeError or
ValueError naming it right at the call, not later inside a ``JobFailed``
after a dozen engine frames. For each case the test checks the exception
type, its message, and that the last traceback frame outside fastops is the
line of the call (here: the case's lambda), with no job run.
"""
from __future__ import annotations

import os
import traceback

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import fastops as fo
from fastops.connectors.collections import TableSource
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Session, Sliding, Tumbling
from fastops.runtime.errors import JobFailed

FASTOPS_DIR = os.path.dirname(fo.__file__) + os.sep

DF = pd.DataFrame({"ts": pd.to_datetime([1_000, 2_000, 7_000], unit="ms"), "user": ["a", "b", "a"],
                   "amount": np.array([1, 2, 3], dtype=np.int64), "price": [1.0, 2.5, 4.0],
                   "tags": [[1], [2, 3], []]})
COLUMNS = "['ts', 'user', 'amount', 'price', 'tags']"


def env() -> fo.StreamEnvironment:
    return fo.StreamEnvironment()


def src() -> fo.DataStream:
    return env().from_pandas(DF)


def timed() -> fo.DataStream:
    return src().with_watermark("ts")


# (id, case(path), exception type, message regex)
CASES = [
    # columns of a known schema
    ("key_by missing", lambda p: src().key_by("usr"),
     KeyError, r"key column 'usr' not in stream \(columns: " + COLUMNS.replace("[", r"\[").replace("]", r"\]")),
    ("key_by missing is a ValueError too", lambda p: src().key_by("user", "usr"),
     ValueError, r"key column 'usr' not in stream"),
    ("key_by unsupported type", lambda p: src().key_by("tags"),
     TypeError, r"key column 'tags' has unsupported type list"),
    ("key_by on a parquet source", lambda p: env().from_parquet(p["parquet"]).key_by("usr"),
     KeyError, r"key column 'usr' not in stream \(columns: \['ts', 'user', 'amount', 'price'\]\)"),
    ("time column missing", lambda p: src().with_watermark("time"),
     KeyError, r"time column 'time' not in stream"),
    ("time column of a wrong type", lambda p: src().with_watermark("user"),
     TypeError, r"time column 'user' has type (large_)?string"),
    ("window aggregate column missing",
     lambda p: timed().key_by("user").window(Tumbling("5s")).aggregate(total=agg.sum("amt")),
     KeyError, r"aggregate 'total': column 'amt' not in stream \(columns: \['ts', 'user'"),
    ("window aggregate of a string column",
     lambda p: timed().key_by("user").window(Sliding("10s", "5s")).aggregate(total=agg.sum("user")),
     TypeError, r"sum\('user'\): column 'user' has type (large_)?string"),
    ("window after the time column was dropped",
     lambda p: timed().select("user", "amount").key_by("user").window(Tumbling("5s")).aggregate(n=agg.count()),
     KeyError, r"time column 'ts' not in stream \(columns: \['user', 'amount'\]\)"),
    ("running aggregate column missing", lambda p: src().key_by("user").aggregate(m=agg.mean("cost")),
     KeyError, r"aggregate 'm': column 'cost' not in stream"),
    ("filter column missing", lambda p: src().filter(fo.col("usr") == "a"),
     KeyError, r"filter .*: column 'usr' not in stream \(columns: \['ts'"),
    ("filter types without a kernel", lambda p: src().filter(fo.col("user") > 1),
     TypeError, r"filter \(user > 1\): .*no kernel matching input types \((large_)?string, int"),
    ("filter that is not boolean", lambda p: src().filter(fo.col("price") + 1),
     TypeError, r"filter .*must evaluate to bool.*double"),
    ("select column missing", lambda p: src().select("user", "amt"),
     KeyError, r"select: column 'amt' not in stream"),
    ("select expression column missing", lambda p: src().select(x=fo.col("amt") * 2),
     KeyError, r"select: column 'amt' not in stream"),
    ("select of a non-expression", lambda p: src().select(x=3),
     TypeError, r"select: column 'x': expected a column name or a pyarrow.compute expression"),
    ("with_columns types without a kernel", lambda p: src().with_columns(y=fo.col("user") * 2),
     TypeError, r"with_columns: .*multiply.*string"),
    ("window after a filter", lambda p: timed().filter(fo.col("price") > 0).key_by("usr"),
     KeyError, r"key column 'usr' not in stream"),
    ("window after a window", lambda p: timed().key_by("user").window(Tumbling("5s")).aggregate(n=agg.count())
     .filter(fo.col("total") > 0),
     KeyError, r"column 'total' not in stream \(columns: \['window_start', 'window_end', 'user', 'n'\]\)"),
    ("join key missing on the right",
     lambda p: timed().join(env().from_pandas(DF.drop(columns="user")).with_watermark("ts")).on("user"),
     KeyError, r"join key \(right\) 'user' not in stream"),
    ("join with a session window", lambda p: timed().join(timed()).on("user").window(Session("1s")),
     TypeError, r"a window join needs Tumbling or Sliding windows, got Session"),
    ("window of the wrong kind", lambda p: timed().key_by("user").window("5s"),
     TypeError, r"window must be Tumbling, Sliding, Session, GlobalWindow or None, got str"),
    # durations
    ("negative out-of-orderness", lambda p: src().with_watermark("ts", max_out_of_orderness="-5s"),
     ValueError, r"max_out_of_orderness must be a duration >= 0, got '-5s'"),
    ("zero idle timeout", lambda p: src().with_watermark("ts", idle_timeout="0s"),
     ValueError, r"idle_timeout must be a positive duration, got '0s'"),
    ("negative lateness", lambda p: timed().key_by("user").window(Tumbling("5s")).allowed_lateness("-1s"),
     ValueError, r"allowed_lateness must be a duration >= 0, got '-1s'"),
    # batch sizes, every source
    ("from_parquet batch_size 2**31", lambda p: env().from_parquet(p["parquet"], batch_size=2**31),
     ValueError, r"batch_size must be between 1 and 2\*\*31 - 1 rows, got 2147483648"),
    ("from_csv batch_size 0", lambda p: env().from_csv(p["csv"], batch_size=0),
     ValueError, r"batch_size must be between 1 and 2\*\*31 - 1 rows, got 0"),
    ("from_ipc batch_size float", lambda p: env().from_ipc(p["ipc"], batch_size=1.5),
     TypeError, r"batch_size must be an int of rows, got float 1.5"),
    ("from_pandas batch_size 2**31", lambda p: env().from_pandas(DF, batch_size=2**31),
     ValueError, r"batch_size must be between 1 and 2\*\*31 - 1 rows"),
    ("from_arrow batch_size str", lambda p: env().from_arrow(pa.table({"a": [1]}), batch_size="10"),
     TypeError, r"batch_size must be an int of rows, got str '10'"),
    ("from_arrow iterator batch_size", lambda p: env().from_arrow(iter([]), batch_size=-1),
     ValueError, r"batch_size must be between 1 and 2\*\*31 - 1 rows, got -1"),
    ("from_collection batch_size bool",
     lambda p: env().from_collection([(1,)], schema=[("a", pa.int64())], batch_size=True),
     TypeError, r"batch_size must be an int of rows, got bool True"),
    # parallelism and rates
    ("set_parallelism of a str", lambda p: env().from_parquet(p["parquet"]).set_parallelism("2"),
     ValueError, r"parallelism must be an int >= 1, got '2'"),
    ("from_source parallelism 0",
     lambda p: env().from_source(TableSource(pa.table({"a": [1]})), parallelism=0),
     ValueError, r"parallelism must be an int >= 1, got 0"),
    ("transform parallelism 0", lambda p: src().transform("t", fo.operators.Operator, parallelism=0),
     ValueError, r"parallelism must be an int >= 1, got 0"),
    ("generator rate NaN", lambda p: env().from_generator(lambda: iter([]), rate=float("nan")),
     ValueError, r"rate must be a finite number > 0 rows/s, got nan"),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("build_errors")
    table = pa.Table.from_pandas(DF.drop(columns="tags"), preserve_index=False)
    out = {"parquet": str(d / "e.parquet"), "csv": str(d / "e.csv"), "ipc": str(d / "e.arrow")}
    pq.write_table(table, out["parquet"])
    pacsv.write_csv(table, out["csv"])
    with pa.ipc.new_file(out["ipc"], table.schema) as w:
        w.write_table(table)
    return out


@pytest.mark.parametrize("case, exc_type, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_raised_at_the_users_line(paths, case, exc_type, message):
    with pytest.raises(exc_type, match=message) as info:
        case(paths)
    assert not isinstance(info.value, JobFailed)
    frames = traceback.extract_tb(info.tb)
    outside = [f for f in frames if not f.filename.startswith(FASTOPS_DIR)]
    # the last frame outside fastops is the case's own line: nothing ran in a task
    assert outside[-1].filename == __file__, frames
    assert outside[-1].lineno == case.__code__.co_firstlineno or \
        outside[-1].lineno in _lines_of(case), frames
    assert not any("runtime" + os.sep in f.filename for f in frames), frames


def _lines_of(fn) -> set[int]:
    return {line for _, _, line in fn.__code__.co_lines() if line is not None}


def test_unknown_schema_still_fails_in_the_job():
    """After map the schema is unknown: the check happens when the job runs, as before."""
    s = src().map(lambda b: b.drop_columns(["user"]))
    keyed = s.key_by("user")  # no error here: the map's output is not known
    with pytest.raises(JobFailed, match="user"):
        keyed.aggregate(n=agg.count()).collect()


def test_valid_jobs_still_run():
    out = (env().from_pandas(DF).with_watermark("ts", max_out_of_orderness="1s", idle_timeout="5s")
           .filter(fo.col("price") > 1).key_by("user").window(Tumbling("5s")).allowed_lateness("1s")
           .aggregate(n=agg.count(), total=agg.sum("amount")).collect())
    assert sorted(zip(out["user"].to_pylist(), out["total"].to_pylist())) == [("a", 3), ("b", 2)]
