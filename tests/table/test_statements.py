"""CREATE / DROP FUNCTION ... LANGUAGE PYTHON, EXECUTE STATEMENT SET and the Table
API's StatementSet (every INSERT of a set runs as one job)."""
from __future__ import annotations

import re
import textwrap

import pyarrow.csv as pcsv
import pytest

import fastops as fo
from fastops.datastream import StreamEnvironment
from fastops.table import SqlError

MODULE = textwrap.dedent('''
    from fastops.table import udf, udtf

    plus_one = udf(lambda x: x + 1, result_type="BIGINT")

    @udtf(result_types=["BIGINT"])
    def twice(x):
        yield x,
        yield x,

    def plain(x):
        return x
''')


@pytest.fixture
def t_env(tmp_path, monkeypatch):
    (tmp_path / "fo_test_udfs.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = fo.TableEnvironment(mode="batch")
    env.create_temporary_view("t", env.from_elements([(1,), (2,), (3,)], ["x"]))
    return env


def test_create_function_from_a_module_and_drop_it(t_env):
    t_env.execute_sql("CREATE TEMPORARY FUNCTION plus_one AS 'fo_test_udfs.plus_one' LANGUAGE PYTHON")
    t_env.execute_sql("CREATE FUNCTION IF NOT EXISTS plus_one AS 'fo_test_udfs.nothing' LANGUAGE PYTHON")
    t_env.execute_sql("CREATE TEMPORARY SYSTEM FUNCTION twice AS 'fo_test_udfs.twice'")
    assert [r[0] for r in t_env.execute_sql("SHOW FUNCTIONS").collect()] == ["plus_one", "twice"]
    got = sorted(r[0] for r in t_env.execute_sql("SELECT plus_one(x) FROM t").collect())
    assert got == [2, 3, 4]
    got = sorted(tuple(r) for r in t_env.execute_sql("SELECT x, y FROM t, LATERAL TABLE(twice(x)) AS u(y)").collect())
    assert got == [(1, 1), (1, 1), (2, 2), (2, 2), (3, 3), (3, 3)]
    t_env.execute_sql("DROP TEMPORARY FUNCTION plus_one")
    t_env.execute_sql("DROP FUNCTION IF EXISTS plus_one")
    assert t_env.list_user_defined_functions() == ["twice"]
    with pytest.raises(SqlError, match="function 'plus_one' not found; known: twice"):
        t_env.execute_sql("DROP FUNCTION plus_one")


@pytest.mark.parametrize("target, message", [
    ("no_such_module_xyz.f", "cannot import module 'no_such_module_xyz'"),
    ("fo_test_udfs.missing", "module 'fo_test_udfs' has no attribute 'missing'; its udf / udaf / udtf objects: "
                             "plus_one, twice"),
    ("fo_test_udfs.plain", "'fo_test_udfs.plain' is a function, not a udf / udaf / udtf"),
    ("plus_one", "must name a module and an attribute"),
])
def test_create_function_names_what_is_missing(t_env, target, message):
    with pytest.raises(SqlError, match=re.escape(message)):
        t_env.execute_sql(f"CREATE TEMPORARY FUNCTION f AS '{target}' LANGUAGE PYTHON")


def test_create_function_refuses_java_and_duplicates(t_env):
    with pytest.raises(SqlError, match="LANGUAGE JAVA is not supported"):
        t_env.execute_sql("CREATE FUNCTION f AS 'com.example.F' LANGUAGE JAVA")
    t_env.execute_sql("CREATE FUNCTION f AS 'fo_test_udfs.plus_one' LANGUAGE PYTHON")
    with pytest.raises(SqlError, match="function 'f' exists already"):
        t_env.execute_sql("CREATE FUNCTION f AS 'fo_test_udfs.plus_one' LANGUAGE PYTHON")


def _sinks(env, tmp_path) -> None:
    for name in ("small", "big"):
        env.execute_sql(f"CREATE TABLE {name} (x BIGINT, s STRING) WITH ('connector' = 'filesystem', "
                        f"'path' = '{tmp_path / name}', 'format' = 'csv')")


def _read(path) -> list:
    rows = []
    for f in sorted(path.iterdir()):
        t = pcsv.read_csv(f, read_options=pcsv.ReadOptions(column_names=["x", "s"]))
        rows += list(zip(t["x"].to_pylist(), t["s"].to_pylist()))
    return sorted(rows)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_execute_statement_set_runs_every_insert_in_one_job(tmp_path, monkeypatch, mode):
    env = fo.TableEnvironment(mode=mode)
    env.create_temporary_view("t", env.from_elements([(i, f"v{i}") for i in range(6)], ["x", "s"]))
    _sinks(env, tmp_path)
    jobs = []
    run = StreamEnvironment.execute
    monkeypatch.setattr(StreamEnvironment, "execute", lambda self, *a, **k: jobs.append(1) or run(self, *a, **k))
    result = env.execute_sql("""EXECUTE STATEMENT SET
        BEGIN
        INSERT INTO small SELECT x, s FROM t WHERE x < 3;
        -- a comment; with a semicolon
        INSERT INTO big SELECT x, UPPER(s) FROM t WHERE x >= 3;
        END;""")
    assert len(jobs) == 1
    assert result.get_table_schema().names == ["default_catalog.default_database.small",
                                               "default_catalog.default_database.big"]
    assert [tuple(r) for r in result.collect()] == [(-1, -1)]
    assert _read(tmp_path / "small") == [(0, "v0"), (1, "v1"), (2, "v2")]
    assert _read(tmp_path / "big") == [(3, "V3"), (4, "V4"), (5, "V5")]


def test_table_api_statement_set(tmp_path, capsys):
    env = fo.TableEnvironment(mode="streaming")
    env.create_temporary_view("t", env.from_elements([(i, f"v{i}") for i in range(4)], ["x", "s"]))
    _sinks(env, tmp_path)
    env.execute_sql("CREATE TABLE out (x BIGINT, s STRING) WITH ('connector' = 'print')")
    ss = env.create_statement_set()
    ss.add_insert_sql("INSERT INTO small SELECT x, s FROM t WHERE x < 2")
    ss.add_insert("big", env.from_path("t").where(fo.table.col("x") >= 2))
    ss.add_insert("out", env.from_path("t").where(fo.table.col("x") == 0))
    assert "INSERT INTO big" in ss.explain()
    ss.execute()
    assert _read(tmp_path / "small") == [(0, "v0"), (1, "v1")]
    assert _read(tmp_path / "big") == [(2, "v2"), (3, "v3")]
    assert capsys.readouterr().out == "+I[0, v0]\n"
    with pytest.raises(SqlError, match="a statement set holds INSERT statements"):
        ss.add_insert_sql("SELECT x FROM t")
    with pytest.raises(ValueError, match="sink table 'nope' not found"):
        ss.add_insert("nope", env.from_path("t"))
