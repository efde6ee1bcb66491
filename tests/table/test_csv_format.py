"""Flink's ``'format' = 'csv'`` of the filesystem connector: files have no
header line; columns are the declared ones, in order, with their declared
types. Reading is checked against DuckDB reading the same file header-less;
writing writes no header, and what fastops writes reads back unchanged."""
from __future__ import annotations

import datetime as dt
import decimal
import os

import duckdb
import pyarrow as pa
import pytest

import fastops as fo

D = decimal.Decimal

# header-less, as Flink's csv format reads and writes it; the first line is data
LINES = [
    "1,alice,2.5,2024-01-01 00:00:10,10.25",
    "2,\"bob, jr\",,2024-01-01 00:00:20.500,",
    "3,carol,-1.0,,7.00",
]
DDL = ("CREATE TABLE people (id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP(3), amount DECIMAL(10, 2)) "
       "WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')")
DUCK_COLUMNS = ("{'id': 'BIGINT', 'name': 'VARCHAR', 'score': 'DOUBLE', 'ts': 'TIMESTAMP', "
                "'amount': 'DECIMAL(10, 2)'}")


def _duck(path: str) -> list[tuple]:
    return duckdb.sql(f"SELECT * FROM read_csv('{path}', header = false, columns = {DUCK_COLUMNS}) "
                      "ORDER BY id").fetchall()


def _fastops(t_env: fo.TableEnvironment, sql: str) -> list[tuple]:
    return [tuple(r.values()) for r in t_env.sql_query(sql).execute().to_arrow().to_pylist()]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_csv_table_reads_every_line_as_data(tmp_path, mode):
    path = tmp_path / "people.csv"
    path.write_text("\n".join(LINES) + "\n")
    t_env = fo.TableEnvironment(mode=mode)
    t_env.execute_sql(DDL.format(path=path))
    got = _fastops(t_env, "SELECT * FROM people ORDER BY id")
    expected = _duck(str(path))
    assert len(expected) == 3  # the first line is a row, not a header
    assert got == expected
    assert got[1][1] == "bob, jr" and got[1][2] is None and got[2][3] is None
    assert got[0][3] == dt.datetime(2024, 1, 1, 0, 0, 10) and got[0][4] == D("10.25")


def test_csv_table_of_a_directory_reads_every_file_header_less(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    (d / "a.csv").write_text(LINES[0] + "\n")
    (d / "b.csv").write_text("\n".join(LINES[1:]) + "\n")
    t_env = fo.TableEnvironment(mode="batch")
    t_env.execute_sql(DDL.format(path=d))
    assert _fastops(t_env, "SELECT id, name FROM people ORDER BY id") == [
        (1, "alice"), (2, "bob, jr"), (3, "carol")]


def test_csv_sink_writes_no_header_and_reads_back(tmp_path):
    rows = [(1, "alice", 2.5, dt.datetime(2024, 1, 1, 0, 0, 10), D("10.25")),
            (2, "bob, jr", None, dt.datetime(2024, 1, 1, 0, 0, 20, 500_000), None),
            (3, "carol", -1.0, None, D("7.00"))]
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("src", t_env.from_elements(rows, [
        ("id", "BIGINT"), ("name", "STRING"), ("score", "DOUBLE"), ("ts", "TIMESTAMP(3)"),
        ("amount", "DECIMAL(10, 2)")]))
    out = tmp_path / "out"
    t_env.execute_sql(DDL.format(path=out))
    t_env.execute_sql("INSERT INTO people SELECT * FROM src")
    files = os.listdir(out)
    assert len(files) == 1
    text = (out / files[0]).read_text().splitlines()
    assert len(text) == 3 and not text[0].startswith(("id", '"id"'))  # no header line
    # an independent reader of header-less CSV sees the rows written
    assert _duck(str(out / files[0])) == rows
    # and fastops reads back what it wrote
    assert _fastops(t_env, "SELECT * FROM people ORDER BY id") == rows


def test_csv_round_trip_keeps_nulls_and_empty_strings_apart(tmp_path):
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("src", t_env.from_arrow(pa.table({
        "id": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["", None, "x"], pa.string())})))
    t_env.execute_sql(f"CREATE TABLE t (id BIGINT, s STRING) WITH ('connector' = 'filesystem', "
                      f"'path' = '{tmp_path / 'o'}', 'format' = 'csv')")
    t_env.execute_sql("INSERT INTO t SELECT * FROM src")
    assert _fastops(t_env, "SELECT * FROM t ORDER BY id") == [(1, ""), (2, None), (3, "x")]


def test_csv_line_with_a_missing_field_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,alice,2.5,2024-01-01 00:00:10,1.00\n2,bob\n")
    t_env = fo.TableEnvironment(mode="batch")
    t_env.execute_sql(DDL.format(path=path))
    with pytest.raises(Exception, match="bad.csv"):
        t_env.sql_query("SELECT * FROM people").execute().to_arrow()


def test_csv_options_are_refused_by_name_not_ignored(tmp_path):
    """A field delimiter or null literal left unread would read every row wrong."""
    t_env = fo.TableEnvironment(mode="batch")
    with pytest.raises(fo.table.SqlError, match="csv format option 'csv.field-delimiter' is not supported"):
        t_env.execute_sql(f"CREATE TABLE t (a BIGINT, b STRING) WITH ('connector' = 'filesystem', "
                          f"'path' = '{tmp_path}', 'format' = 'csv', 'csv.field-delimiter' = ';')")
