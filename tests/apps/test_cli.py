"""The ``fastops`` command line: version, help, one-line errors with exit
status 2, ``run``, ``demo`` and ``bench`` (on a tiny bench directory)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastops
from fastops.apps import cli

PY = [sys.executable, "-m", "fastops"]


def fastops_cmd(*args: str, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([*PY, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def test_version():
    r = fastops_cmd("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"fastops {fastops.__version__}"


@pytest.mark.parametrize("sub", [[], ["demo"], ["bench"], ["run"], ["sql"]])
def test_help_everywhere(sub, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([*sub, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: fastops")
    for word in {"demo": ["--events", "--rate", "--parallelism", "--checkpoint-dir", "--output", "--seed",
                          "--sql"],
                 "bench": ["--quick", "--out"], "run": ["job.py"], "sql": ["--table"]}.get(
                     sub[0] if sub else "", ["demo", "bench", "run", "sql", "--version"]):
        assert word in out


@pytest.mark.parametrize("args, fragment", [
    (["frobnicate"], "invalid choice"),
    (["demo", "--events", "many"], "--events"),
    (["demo", "--events", "0"], "--events"),
    (["demo", "--parallelism", "0"], "--parallelism"),
    (["demo", "--rate", "-5"], "--rate"),
    (["demo", "--seed", "x"], "--seed"),
    (["demo", "--no-such-flag"], "unrecognized arguments"),
    (["sql", "SELECT 1", "--table", "nopath"], "name=path"),
    (["sql", "SELECT 1", "--table", "1x=a.parquet"], "identifier"),
    (["run"], "job.py"),
    (["run", "/no/such/job.py"], "no such file"),
    (["bench", "--only", "nosuchsuite"], "nosuchsuite"),
])
def test_bad_arguments_give_one_line_and_exit_2(args, fragment, tmp_path, capsys):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "bench_tiny.py").write_text("print('hi')\n")
    if args[0] == "bench":
        args = [*args, "--bench-dir", str(bench)]
    try:
        code = cli.main(args)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fastops")
    assert "error:" in lines[0] and fragment in lines[0]


def test_bad_arguments_exit_status_of_the_installed_command():
    r = fastops_cmd("demo", "--events", "many")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_count_parser_accepts_suffixes():
    assert cli._count("2M") == 2_000_000
    assert cli._count("500k") == 500_000
    assert cli._count("1_000") == 1000
    assert cli._count("1e6") == 1_000_000
    with pytest.raises(Exception):
        cli._count("1.5")


def test_run_executes_a_job_file(tmp_path):
    out = tmp_path / "out.parquet"
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f"""
        import sys
        import pyarrow.parquet as pq
        import fastops as fo

        assert __name__ == "__main__"
        factor = int(sys.argv[1])
        env = fo.StreamEnvironment()
        s = env.from_collection([(k, float(k)) for k in range(10)], schema=["k", "v"])
        t = s.filter(fo.col("v") >= 5).select("k", v2=fo.col("v") * factor).collect()
        pq.write_table(t, {str(out)!r})
        print("rows", t.num_rows)
    """))
    r = fastops_cmd("run", str(job), "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "rows 5"
    t = pq.read_table(out)
    assert t.column("k").to_pylist() == [5, 6, 7, 8, 9]
    assert t.column("v2").to_pylist() == [15.0, 18.0, 21.0, 24.0, 27.0]


def test_run_reports_a_failing_job(tmp_path):
    job = tmp_path / "bad.py"
    job.write_text("raise RuntimeError('boom in the job')\n")
    r = fastops_cmd("run", str(job))
    assert r.returncode == 1
    assert "RuntimeError: boom in the job" in r.stderr
    job.write_text("import sys\nsys.exit(3)\n")
    assert fastops_cmd("run", str(job)).returncode == 3


def test_demo_small_run_prints_tables_and_summary(tmp_path):
    out = tmp_path / "out"
    r = fastops_cmd("demo", "--events", "300k", "--no-progress", "--players", "2000",
                    "--events-per-s", "5000", "--output", str(out), "--seed", "3")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for title in ("Rewards", "Leaderboard", "Per minute", "Late events"):
        assert title in text
    import re

    assert len(re.findall(r"^(?:\d+ rows? in set.*|Empty set)$", text, re.M)) == 4
    assert "rows in      300,000" in text
    assert "M events/s at parallelism 1" in text
    assert "busy" in text and "backpressured" in text
    # the Parquet output holds the printed rewards
    import pyarrow.dataset as ds

    rewards = ds.dataset(str(out / "rewards"), format="parquet").to_table()
    line = next(ln for ln in text.splitlines() if ln.startswith("rewards "))
    assert f"{rewards.num_rows:,}" in line
    from fastops.apps import demo

    cfg = demo.DemoConfig(events=300_000, players=2000, events_per_s=5000, seed=3, threads=False)
    ref = demo.run_demo(cfg, progress=False)
    assert rewards.sort_by([("window_start", "ascending"), ("player_id", "ascending")]).select(
        ["window_start", "player_id", "pops"]).equals(ref.rewards.select(["window_start", "player_id", "pops"]))
    # a second run into the same output would write its rows again: refused, output untouched
    again = fastops_cmd("demo", "--events", "300k", "--no-progress", "--players", "2000",
                        "--events-per-s", "5000", "--output", str(out), "--seed", "3")
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert "already holds" in again.stderr and "another --output" in again.stderr
    assert ds.dataset(str(out / "rewards"), format="parquet").to_table().num_rows == rewards.num_rows


def test_demo_progress_plain_line_without_rich_or_tqdm(monkeypatch):
    import io

    from fastops.apps import demo

    real_import = __import__

    def fake_import(name, *a, **k):
        if name.startswith(("rich", "tqdm")):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr("builtins.__import__", fake_import)
    buf = io.StringIO()
    p = demo.Progress(100, buf)
    assert p.kind == "plain"

    class M:
        task, rows_in, watermark = "player_events -> watermark[1/1]", 100, demo.START_MS

    p([M()])
    p.close()
    assert "100.0%" in buf.getvalue() and "watermark 22:14:00" in buf.getvalue()


def test_demo_sql_face_gives_the_same_rewards():
    args = ["--events", "300k", "--no-progress", "--players", "2000", "--events-per-s", "5000", "--seed", "3"]
    ds_run, sql_run = fastops_cmd("demo", *args), fastops_cmd("demo", "--sql", *args)
    assert ds_run.returncode == 0 and sql_run.returncode == 0, sql_run.stderr
    grab = lambda out: next(ln for ln in out.splitlines() if ln.startswith("rewards "))
    assert grab(ds_run.stdout) == grab(sql_run.stdout)
    assert "face         SQL" in sql_run.stdout
    r = fastops_cmd("demo", "--sql", "--output", "x")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_sql_over_parquet_files_equals_duckdb(tmp_path):
    import duckdb
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5)
    orders = pa.table({"user_id": rng.integers(0, 6, 500), "amount": np.round(rng.random(500) * 100, 2)})
    users = pa.table({"user_id": np.arange(6), "name": [f"u{i}" for i in range(6)]})
    pq.write_table(orders, tmp_path / "orders.parquet")
    pq.write_table(users, tmp_path / "users.parquet")
    q = ("SELECT u.name, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o JOIN users u "
         "ON o.user_id = u.user_id GROUP BY u.name HAVING COUNT(*) > 10 ORDER BY u.name")
    r = fastops_cmd("sql", q, "--table", f"orders={tmp_path / 'ord*.parquet'}",
                    "--table", f"users={tmp_path / 'users.parquet'}")
    assert r.returncode == 0, r.stderr
    con = duckdb.connect()
    con.register("orders", orders)
    con.register("users", users)
    expected = con.execute(q).fetchall()
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == f"{len(expected)} rows in set"
    body = [ln.strip("|").split("|") for ln in lines[3:-2]]
    got = [(a.strip(), int(b), float(c)) for a, b, c in body]
    assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in expected]
    assert np.allclose([c for *_, c in got], [c for *_, c in expected])
    bad = fastops_cmd("sql", "SELEC nonsense", "--table", f"orders={tmp_path / 'orders.parquet'}")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    missing = fastops_cmd("sql", "SELECT 1", "--table", f"t={tmp_path / 'nope.parquet'}")
    assert missing.returncode == 2 and "nope.parquet" in missing.stderr


def test_bench_report_on_a_tiny_suite(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "bench_alpha.py").write_text(textwrap.dedent("""
        import argparse, json
        ap = argparse.ArgumentParser(); ap.add_argument("--quick", action="store_true")
        ap.add_argument("--json")
        a = ap.parse_args()
        json.dump({"results": [
            {"workload": "W1", "engine": "fastops", "rows_per_s": 3e6},
            {"workload": "W1", "engine": "duckdb", "rows_per_s": 2e6, "peer": True},
            {"workload": "W1", "engine": "polars", "rows_per_s": 1e6, "peer": True}]}, open(a.json, "w"))
        print("quick" if a.quick else "full")
    """))
    (bench / "bench_beta.py").write_text(textwrap.dedent("""
        import argparse, json
        ap = argparse.ArgumentParser(); ap.add_argument("--quick", action="store_true")
        ap.add_argument("--json")
        a = ap.parse_args()
        json.dump({"workloads": {"W2": {"fastops": {"events_per_s": 1e6},
                                        "pyarrow": {"events_per_s": 4e6}}}}, open(a.json, "w"))
    """))
    (bench / "bench_broken.py").write_text("raise SystemExit(5)\n")
    out = tmp_path / "report"
    r = fastops_cmd("bench", "--quick", "--out", str(out), "--bench-dir", str(bench))
    assert r.returncode == 1  # one suite failed; the others are still reported
    assert "alpha: W1" in r.stdout and "1.50x" in r.stdout and "duckdb" in r.stdout
    assert "beta: W2" in r.stdout and "0.25x" in r.stdout
    assert "suite broken: exit 5" in r.stdout
    results = json.loads((out / "results.json").read_text())
    by = {w["workload"]: w for w in results["workloads"]}
    assert by["alpha: W1"]["ratio"] == pytest.approx(1.5)
    assert by["beta: W2"]["best_peer"] == "pyarrow"
    assert results["suites"]["alpha"]["status"] == "ok"
    assert (out / "alpha.log").read_text().strip() == "quick"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in r.stderr
    else:
        png = (out / "throughput.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    r = fastops_cmd("bench", "--quick", "--out", str(out), "--bench-dir", str(bench), "--only", "alpha")
    assert r.returncode == 0 and "beta" not in r.stdout


def test_bench_report_reads_every_shape_of_the_repo_scripts():
    from fastops.apps import bench_report as br

    got = br.normalise("partition", {"results": [
        {"P": 8, "fastops Mrows/s": 40.0, "numpy Mrows/s": 8.0, "polars Mrows/s": 10.0, "best peer": "polars"}]})
    assert len(got) == 1 and got[0].name == "partition: P=8"
    assert got[0].fastops == 40e6 and got[0].best_peer == ("polars", 10e6) and got[0].ratio == 4.0
    got = br.normalise("checkpoint", {"results": [{"workload": "no checkpoints", "rows_per_s": 5.0}]})
    assert got[0].fastops == 5.0 and got[0].ratio is None
    got = br.normalise("sketch", {"results": [
        {"sketch": "hll p=14", "data": "int64", "impl": "fastops", "updates_per_s": 9e7},
        {"sketch": "hll p=14", "data": "int64", "impl": "polars approx_n_unique", "updates_per_s": 3e7},
        {"sketch": "kll", "data": "float64", "impl": "fastops", "updates_per_s": 1e7}]})
    assert [w.name for w in got] == ["sketch: hll p=14 / int64", "sketch: kll / float64"]
    assert got[0].ratio == pytest.approx(3.0) and got[1].best_peer is None
    got = br.normalise("sql", {"results": [
        {"workload": "W1", "engine": "fastops SQL", "events_per_s": 4e6},
        {"workload": "W1", "engine": "fastops DataStream", "events_per_s": 5e6},
        {"workload": "W1", "engine": "DuckDB (1 thread)", "events_per_s": 2e6}]})
    assert got[0].name == "sql: W1 (fastops SQL)" and got[0].ratio == pytest.approx(2.0)
    assert br.normalise("x", ["not", "a", "dict"]) == []


def _one_line_error(args, capsys) -> tuple[int, str]:
    code = cli.main(args)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return code, err


@pytest.mark.parametrize("spec, fragments", [
    ("nope.parquet", ["no such file or directory: 'nope.parquet'", "relative to"]),
    ("no_dir/x.parquet", ["no such file or directory: 'no_dir/x.parquet'"]),
    ("{tmp}/nope.parquet", ["no such file or directory", "nope.parquet"]),
    ("nope*.parquet", ["no file matches 'nope*.parquet'"]),
    ("empty", ["directory 'empty' holds no data files"]),
    ("text.parquet", ["'text.parquet' is not a Parquet file", "magic bytes"]),
    ("mixed", ["is not a Parquet file", "bad.parquet"]),
])
def test_sql_table_file_errors_say_what_is_wrong(spec, fragments, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "text.parquet").write_text("id,name\n1,a\n")
    (tmp_path / "mixed").mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "mixed" / "a.parquet")
    (tmp_path / "mixed" / "bad.parquet").write_text("not parquet at all")
    code, err = _one_line_error(["sql", "SELECT * FROM t", "--table",
                                 "t=" + spec.format(tmp=tmp_path)], capsys)
    assert code == 2
    assert err.startswith("fastops sql: error: --table t=")
    for fragment in fragments:
        assert fragment in err, err


def test_sql_table_file_without_read_permission(tmp_path, monkeypatch, capsys):
    path = tmp_path / "secret.parquet"
    pq.write_table(pa.table({"a": [1]}), path)
    real_access = os.access   # root reads any file: deny this one as a non-root user is denied
    monkeypatch.setattr(os, "access", lambda p, mode, **kw:
                        False if os.fspath(p) == str(path) else real_access(p, mode, **kw))
    code, err = _one_line_error(["sql", "SELECT * FROM t", "--table", f"t={path}"], capsys)
    assert code == 2 and f"permission denied: {str(path)!r}" in err


def test_sql_table_directory_and_glob_still_read(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "d" / "p1.parquet")
    pq.write_table(pa.table({"a": [3]}), tmp_path / "d" / "p2.parquet")
    for spec in (tmp_path / "d", tmp_path / "d" / "p*.parquet"):
        assert cli.main(["sql", "SELECT SUM(a) AS s FROM t", "--table", f"t={spec}"]) == 0
        out = capsys.readouterr().out
        assert "| 6 |" in out and "1 row" in out, out


@pytest.mark.parametrize("make, fragment", [
    (lambda d: "nope.py", "no such file or directory: 'nope.py'"),
    (lambda d: (d / "jobs").mkdir() or "jobs", "'jobs' is a directory, not a Python job file"),
])
def test_run_file_errors_say_what_is_wrong(make, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = _one_line_error(["run", make(tmp_path)], capsys)
    assert code == 2 and err.startswith("fastops run: error:") and fragment in err, err
