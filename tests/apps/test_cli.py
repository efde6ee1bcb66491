"""The ``fastops`` command line: version, help, one-line errors with exit
status 2, ``run``, ``demo`` and ``bench`` (on a tiny bench directory)."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import textwrap

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import fastops
from fastops.apps import bench_report as br
from fastops.apps import cli, demo

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

    assert len(re.findall(r"^(?:\d+ rows? in set.*|Empty set)$", text, re.M)) == 4
    assert "rows in      300,000" in text
    assert "M events/s at parallelism 1" in text
    assert "busy" in text and "backpressured" in text
    # the Parquet output holds the printed rewards

    rewards = ds.dataset(str(out / "rewards"), format="parquet").to_table()
    line = next(ln for ln in text.splitlines() if ln.startswith("rewards "))
    assert f"{rewards.num_rows:,}" in line

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


def test_demo_progress_plain_line_without_rich_or_tqdm(without_rich_or_tqdm):
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


def _tiny_suite(measurements: list, schema: str = "fastops-bench/1") -> str:
    """A bench script that writes ``measurements`` in the result schema."""
    return textwrap.dedent(f"""
        import argparse, json
        ap = argparse.ArgumentParser(); ap.add_argument("--quick", action="store_true")
        ap.add_argument("--json")
        a = ap.parse_args()
        json.dump({{"schema": {schema!r}, "measurements": {measurements!r}, "details": {{}}}}, open(a.json, "w"))
        print("quick" if a.quick else "full")
    """)


def _m(workload: str, engine: str, rows_per_s: float, role: str = "fastops") -> dict:
    return {"workload": workload, "engine": engine, "role": role, "rows_per_s": rows_per_s}


@pytest.mark.slow
def test_bench_report_on_a_tiny_suite(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "bench_alpha.py").write_text(_tiny_suite([
        _m("W1", "fastops", 3e6), _m("W1", "duckdb", 2e6, "peer"), _m("W1", "polars", 1e6, "peer")]))
    (bench / "bench_beta.py").write_text(_tiny_suite([
        _m("W2", "fastops", 1e6), _m("W2", "pyarrow", 4e6, "peer")]))
    (bench / "bench_broken.py").write_text("raise SystemExit(5)\n")
    # a script still writing one of the shapes read before the schema: refused, named
    (bench / "bench_oldshape.py").write_text(textwrap.dedent("""
        import argparse, json
        ap = argparse.ArgumentParser(); ap.add_argument("--quick", action="store_true")
        ap.add_argument("--json")
        a = ap.parse_args()
        json.dump({"workloads": {"W3": {"fastops": {"events_per_s": 1e6}}}}, open(a.json, "w"))
    """))
    out = tmp_path / "report"
    r = fastops_cmd("bench", "--quick", "--out", str(out), "--bench-dir", str(bench))
    assert r.returncode == 1  # two suites failed; the others are still reported
    assert "alpha: W1" in r.stdout and "1.50x" in r.stdout and "duckdb" in r.stdout
    assert "beta: W2" in r.stdout and "0.25x" in r.stdout
    assert "suite broken: exit 5" in r.stdout
    assert "suite oldshape: bad results: schema is None, expected 'fastops-bench/1'" in r.stdout
    assert "W3" not in r.stdout
    results = json.loads((out / "results.json").read_text())
    by = {w["workload"]: w for w in results["workloads"]}
    assert set(by) == {"alpha: W1", "beta: W2"}
    assert by["alpha: W1"]["ratio"] == pytest.approx(1.5)
    assert by["alpha: W1"]["peers_rows_per_s"] == {"duckdb": 2e6, "polars": 1e6}
    assert by["alpha: W1"]["fastops_rows_per_s"] == 3e6 and by["alpha: W1"]["fastops_engine"] == "fastops"
    assert by["beta: W2"]["best_peer"] == "pyarrow" and by["beta: W2"]["best_peer_rows_per_s"] == 4e6
    assert results["suites"]["alpha"]["status"] == "ok" and results["suites"]["alpha"]["workloads"] == 1
    assert results["suites"]["oldshape"]["status"].startswith("bad results")
    assert results["machine"]["cpu_count"] == os.cpu_count()
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


BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")


def _bench_common():
    """The repo's ``bench/_common.py`` (the writer of the result schema)."""
    spec = importlib.util.spec_from_file_location("bench_common_under_test", os.path.join(BENCH_DIR, "_common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_results_written_by_the_scripts_helper_read_back(tmp_path):
    common = _bench_common()
    path = tmp_path / "sql.json"
    common.write_results(str(path), [
        common.measurement("W1", "fastops SQL", 4e6),
        common.measurement("W1", "fastops DataStream", 5e6, "variant"),
        common.measurement("W1", "DuckDB (1 thread)", 2e6, "peer"),
        common.measurement("no peers", "fastops", 5.0)], {"events": 10})
    data = json.loads(path.read_text())
    assert data["schema"] == br.SCHEMA and data["details"] == {"events": 10}
    assert set(data["machine"]) >= {"python", "platform", "cpu_count", "time"}
    got = br.read_results("sql", data)
    # a workload with variants is named after the fastops run it compares
    assert [w.name for w in got] == ["sql: W1 (fastops SQL)", "sql: no peers"]
    assert got[0].fastops == 4e6 and got[0].fastops_engine == "fastops SQL"
    assert got[0].peers == {"DuckDB (1 thread)": 2e6} and got[0].ratio == pytest.approx(2.0)
    assert got[1].fastops == 5.0 and got[1].best_peer is None and got[1].ratio is None
    table = br.summary_table(got)
    assert "sql: W1 (fastops SQL)" in table and "2.00x" in table
    with pytest.raises(ValueError, match="expected a JSON object"):
        br.read_results("sql", ["not", "a", "dict"])


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d.pop("schema"), "schema is None"),
    (lambda d: d.update(schema="fastops-bench/0"), "expected 'fastops-bench/1'"),
    (lambda d: d.update(measurements=[]), "non-empty list"),
    (lambda d: d["measurements"].append("row"), "measurement 2 is not an object"),
    (lambda d: d["measurements"][0].pop("workload"), "measurement 0: 'workload'"),
    (lambda d: d["measurements"][1].update(engine=""), "measurement 1: 'engine'"),
    (lambda d: d["measurements"][1].update(role="baseline"), "role is 'baseline'"),
    (lambda d: d["measurements"][0].update(rows_per_s=float("nan")), "finite number"),
    (lambda d: d["measurements"][0].update(rows_per_s=-1.0), "finite number"),
    (lambda d: d["measurements"][0].update(rows_per_s=True), "finite number"),
    (lambda d: d["measurements"][0].update(rows_per_s="3e6"), "finite number"),
    (lambda d: d["measurements"][1].update(role="fastops"), "2 measurements of role 'fastops'"),
    (lambda d: d["measurements"][0].update(role="variant"), "0 measurements of role 'fastops'"),
    (lambda d: d["measurements"][1].update(engine="fastops"), "engine 'fastops' measured twice"),
])
def test_bench_results_schema_is_checked(change, fragment, tmp_path):
    data = {"schema": br.SCHEMA, "measurements": [_m("W1", "fastops", 3e6), _m("W1", "duckdb", 2e6, "peer")]}
    assert [w.ratio for w in br.read_results("x", data)] == [pytest.approx(1.5)]
    change(data)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        br.read_results("x", data)
    # the scripts' writer refuses the same measurements before writing anything
    if isinstance(data.get("measurements"), list) and data["measurements"] and data.get("schema") == br.SCHEMA:
        common = _bench_common()
        path = tmp_path / "x.json"
        with pytest.raises(ValueError, match=re.escape(fragment)):
            common.write_results(str(path), data["measurements"])
        assert not path.exists()


def test_every_bench_script_writes_through_the_one_writer():
    scripts = sorted(n for n in os.listdir(BENCH_DIR) if n.startswith("bench_") and n.endswith(".py"))
    assert scripts
    for name in scripts:
        with open(os.path.join(BENCH_DIR, name), encoding="utf-8") as fh:
            text = fh.read()
        assert "write_results(args.json" in text, name
        assert "json.dump(" not in text and "open(args.json" not in text, name  # json.dumps of data is fine


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


def test_run_serves_each_job_of_the_file_with_ui(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import json, sys, urllib.request
        import numpy as np, pyarrow as pa
        import fastops as fo

        def gen():
            for i in range(20):
                yield pa.record_batch({"x": np.arange(100)})

        env = fo.StreamEnvironment()
        env.from_generator(gen, rate=2000).sink_to(lambda b: None)
        client = env.execute_async("cli job")
        body = urllib.request.urlopen(client.ui_url + "/api/job", timeout=10).read()
        print("served", json.loads(body)["name"], sys.argv[1:])
        client.wait()
    '''))
    out = fastops_cmd("run", str(job), "--ui", "0", "--ui-keep", "extra")
    assert out.returncode == 0, out.stderr
    assert "served cli job ['extra']" in out.stdout  # --ui options are the CLI's, the rest the job's
    assert re.search(r"job 'cli job': page and metrics at http://127\.0\.0\.1:\d+/", out.stderr)
    plain = fastops_cmd("run", str(job))  # without --ui nothing is served
    assert plain.returncode != 0 and "NoneType" in plain.stderr


def test_demo_serves_its_page_with_ui():
    out = fastops_cmd("demo", "--events", "200k", "--players", "2000", "--no-progress", "--ui", "0")
    assert out.returncode == 0, out.stderr
    assert re.search(r"the job's page and metrics: http://127\.0\.0\.1:\d+/", out.stderr)
