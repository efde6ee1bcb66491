"""The demo job against an independent DuckDB computation of the same rules
on the same generated events, plus the generator, the operators and a
kill-and-resume run of ``fastops demo``."""
from __future__ import annotations

import glob
import io
import os
import signal
import subprocess
import sys
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.apps import cli, demo

BOUND = 5000
# a small world: 2,000 players, 5,000 events per second of event time, so
# 400k events span 80 s and several players pass 500 pops in a minute
SMALL = {"events": 400_000, "players": 2_000, "events_per_s": 5_000, "batch_size": 16_384, "seed": 11,
             "offline_fraction": 0.002, "threads": False}


def small(**kw) -> demo.DemoConfig:
    return demo.DemoConfig(**{**SMALL, **kw})


@pytest.fixture(scope="module")
def run_small():
    cfg = small()
    return cfg, demo.run_demo(cfg, progress=False)


def _con(cfg: demo.DemoConfig) -> duckdb.DuckDBPyConnection:
    """The generated events with their arrival batch and the watermark each
    row meets at a window: ``max(ts of earlier batches) - bound - 1``."""
    events = demo.generate_events(cfg)
    n = events.num_rows
    batch = np.arange(n) // cfg.batch_size
    table = events.append_column("batch", pa.array(batch))
    table = table.set_column(1, "event_type", table.column("event_type").cast(pa.string()))
    con = duckdb.connect()
    con.register("raw", table)
    con.execute(f"""
        CREATE TABLE ev AS
        WITH mx AS (SELECT batch, max(ts) AS m FROM raw GROUP BY batch),
             wm AS (SELECT batch, max(m) OVER (ORDER BY batch ROWS BETWEEN UNBOUNDED PRECEDING
                                               AND 1 PRECEDING) - {BOUND} - 1 AS wm FROM mx)
        SELECT raw.*, coalesce(wm.wm, -9223372036854775807) AS wm
        FROM raw JOIN wm USING (batch)""")
    return con


def reference_rewards(con, threshold: int = 500):
    """Sliding 1 min / 10 s pop counts per player; a row counts in every
    window that was still open (end > watermark) when it arrived."""
    return con.execute(f"""
        WITH w AS (
            SELECT player_id, (ts - ts % 10000) - j * 10000 AS ws, wm
            FROM ev, range(6) t(j) WHERE event_type = 'pop')
        SELECT ws AS window_start, player_id, count(*) AS pops FROM w
        WHERE ws + 60000 > wm
        GROUP BY ALL HAVING count(*) >= {threshold}
        ORDER BY window_start, player_id""").fetchall()


def _ms(col) -> list:
    return col.cast(pa.int64()).to_pylist()


def test_rewards_equal_duckdb(run_small):
    cfg, res = run_small
    con = _con(cfg)
    ref = reference_rewards(con)
    got = list(zip(_ms(res.rewards.column("window_start")), res.rewards.column("player_id").to_pylist(),
                   res.rewards.column("pops").to_pylist()))
    assert len(ref) > 20  # the rule fires in this world
    assert got == ref
    # once per player and window
    assert len({(w, p) for w, p, _ in got}) == len(got)
    assert all(e - s == 60_000 for s, e in zip(_ms(res.rewards.column("window_start")),
                                               _ms(res.rewards.column("window_end"))))


def test_late_rows_and_revenue_equal_duckdb(run_small):
    cfg, res = run_small
    con = _con(cfg)
    late_ref = con.execute("SELECT player_id, ts FROM ev WHERE ts - ts % 60000 + 60000 <= wm "
                           "ORDER BY ts, player_id").fetchall()
    late = sorted(zip(res.late.column("player_id").to_pylist(), res.late.column("ts").to_pylist()),
                  key=lambda r: (r[1], r[0]))
    assert len(late_ref) > 0
    assert late == late_ref
    assert set(res.late.column("reason").to_pylist()) == {"window purged"}
    # rows in = rows counted in minutes + late rows: nothing is lost
    assert sum(res.per_minute.column("events").to_pylist()) + res.late.num_rows == cfg.events
    rev = con.execute("""
        SELECT ts - ts % 60000 AS m, count(*), sum(value) FROM ev
        WHERE event_type = 'purchase' AND ts - ts % 60000 + 60000 > wm GROUP BY m ORDER BY m""").fetchall()
    pm = res.per_minute.filter(pc.is_valid(res.per_minute.column("purchases")))
    got = list(zip(_ms(pm.column("window_start")), pm.column("purchases").to_pylist(),
                   pm.column("revenue").to_pylist()))
    assert [(m, c) for m, c, _ in got] == [(m, c) for m, c, _ in rev]
    assert np.allclose([r for _, _, r in got], [r for _, _, r in rev])


def test_active_players_within_hll_error(run_small):
    cfg, res = run_small
    con = _con(cfg)
    exact = dict(con.execute("SELECT ts - ts % 60000, count(DISTINCT player_id) FROM ev "
                             "WHERE ts - ts % 60000 + 60000 > wm GROUP BY ALL").fetchall())
    got = dict(zip(_ms(res.per_minute.column("window_start")),
                   res.per_minute.column("active_players").to_pylist()))
    assert set(got) == set(exact)
    for m, n in exact.items():  # HyperLogLog p=14: sigma 0.81 %; allow 4 sigma
        assert abs(got[m] - n) <= max(2, 4 * 0.0081 * n), (m, got[m], n)


def test_leaderboard_is_exact_top_n(run_small):
    cfg, res = run_small
    con = _con(cfg)
    ref = con.execute(f"""
        WITH c AS (SELECT ts - ts % 60000 AS ws, player_id, count(*) AS pops FROM ev
                   WHERE event_type = 'pop' AND ts - ts % 60000 + 60000 > wm GROUP BY ALL),
             r AS (SELECT ws, row_number() OVER (PARTITION BY ws ORDER BY pops DESC, player_id) AS rank,
                          player_id, pops FROM c)
        SELECT * FROM r WHERE rank <= {cfg.top_n} ORDER BY ws, rank""").fetchall()
    got = list(zip(_ms(res.leaderboard.column("window_start")), res.leaderboard.column("rank").to_pylist(),
                   res.leaderboard.column("player_id").to_pylist(), res.leaderboard.column("pops").to_pylist()))
    assert got == ref


def test_threads_and_parallelism_give_the_same_rewards(run_small):
    _, res = run_small
    threaded = demo.run_demo(small(threads=True), progress=False)
    assert threaded.rewards.equals(res.rewards)
    # with two source splits the watermark differs, so compare with DuckDB on
    # rows no watermark can make late: the rewards of windows far from the end
    par = demo.run_demo(small(parallelism=2, threads=True, offline_fraction=0.0, slow_fraction=0.0),
                        progress=False)
    ref = demo.run_demo(small(offline_fraction=0.0, slow_fraction=0.0), progress=False)
    key = lambda t: sorted(zip(_ms(t.column("window_start")), t.column("player_id").to_pylist(),
                               t.column("pops").to_pylist()))
    assert key(par.rewards) == key(ref.rewards)
    assert len(key(ref.rewards)) > 0


def test_generator_is_deterministic_and_vectorised():
    cfg = small(events=50_000)
    a, b = demo.generate_events(cfg), demo.generate_events(cfg)
    assert a.equals(b)
    assert a.schema == demo.SCHEMA
    other = demo.generate_events(small(events=50_000, seed=12))
    assert not a.equals(other)
    t = a.to_pandas()
    assert set(t.event_type.astype(str)) == set(demo.EVENT_TYPES)
    # values only on purchases, positive prices
    assert t.value.notna().equals(t.event_type.astype(str) == "purchase")
    assert (t.value.dropna() > 0).all()
    assert t.ts.min() >= demo.START_MS
    # disorder: arrival order is not event-time order, but mostly close to it
    d = np.diff(t.ts.to_numpy())
    assert (d < 0).mean() > 0.2
    assert np.abs(d).mean() < 2000
    # batch b depends only on (seed, b): the source can replay from any batch
    assert demo.generate_batch(cfg, 2).equals(a.slice(2 * cfg.batch_size, cfg.batch_size).to_batches()[0])


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(0, 3))
def test_source_splits_cover_every_batch_once(parallelism, skip):
    cfg = small(events=100_000, batch_size=8192)
    src = demo.PlayerEventSource(cfg)
    seen = []
    for i in range(parallelism):
        r = src.open(i, parallelism, position=0)
        while (b := r.read()) is not demo.END:
            seen.append(b)
    assert sum(b.num_rows for b in seen) == cfg.events
    assert sorted(b.column("ts")[0].as_py() for b in seen) == sorted(
        demo.generate_batch(cfg, k).column("ts")[0].as_py() for k in range(cfg.num_batches))
    # resuming a split at a position continues where it stopped
    r = src.open(0, parallelism, position=skip)
    first = r.read()
    k = skip * parallelism
    if k < cfg.num_batches:
        assert first.equals(demo.generate_batch(cfg, k))
    else:
        assert first is demo.END


def test_pops_per_pane_is_exact():
    batch = demo.generate_batch(small(), 3)
    got = demo.pops_per_pane(batch).to_pandas()
    t = batch.to_pandas()
    t = t[t.event_type.astype(str) == "pop"]
    ref = t.assign(ts=t.ts - t.ts % 10000).groupby(["player_id", "ts"]).size().rename("n").reset_index()
    got = got.sort_values(["player_id", "ts"]).reset_index(drop=True)
    assert got[["player_id", "ts", "n"]].values.tolist() == ref.values.tolist()


def test_reward_filter_once_per_player_and_window():
    f = demo.RewardFilter(500)
    ts = pa.timestamp("ms")

    def b(rows):
        return pa.RecordBatch.from_pylist(
            [{"window_start": s, "window_end": s + 60_000, "player_id": p, "pops": n} for s, p, n in rows],
            schema=pa.schema([("window_start", ts), ("window_end", ts), ("player_id", pa.int64()),
                              ("pops", pa.int64())]))

    out = f.process(b([(0, 1, 600), (0, 2, 499), (10_000, 1, 700)]))
    assert [r["player_id"] for r in out[0].to_pylist()] == [1, 1]
    # a re-emitted window (allowed lateness) does not reward again
    assert f.process(b([(0, 1, 650), (0, 3, 500)]))[0].to_pylist()[0]["player_id"] == 3
    state = f.snapshot()
    g = demo.RewardFilter(500)
    g.restore(state)
    assert g.process(b([(0, 1, 900), (0, 3, 900)])) == []
    g.on_watermark(60_000)  # window 0 is forgotten once the watermark passes its end
    assert 60_000 not in g.seen and 70_000 in g.seen


def test_per_window_operator_snapshot_and_fire():
    op = demo.PerWindow("count", lambda t: pa.table({"window_start": t.column("window_start").slice(0, 1),
                                                     "rows": pa.array([t.num_rows])}))
    ts = pa.timestamp("ms")
    b = pa.RecordBatch.from_pydict({"window_start": pa.array([0, 0, 60_000], ts),
                                    "window_end": pa.array([60_000, 60_000, 120_000], ts)})
    assert op.process(b) == []
    again = demo.PerWindow("count", op.fn)
    again.restore(op.snapshot())
    for o in (op, again):
        fired = o.on_watermark(60_000)
        assert [r.to_pylist() for r in fired] == [[{"window_start": pa.scalar(0, ts).as_py(), "rows": 2}]]
        assert [r.num_rows for r in o.close()] == [1]


def test_sql_face_gives_the_same_rewards(run_small):
    cfg, res = run_small
    sql = demo.run_demo_sql(cfg)
    cols = ["window_start", "window_end", "player_id", "pops"]
    assert sql.rewards.select(cols).equals(res.rewards.select(cols))
    assert sql.leaderboard.equals(res.leaderboard)
    for c in ("window_start", "events", "purchases"):
        assert sql.per_minute.column(c).equals(res.per_minute.column(c))
    assert np.allclose(sql.per_minute.column("revenue").to_numpy(), res.per_minute.column("revenue").to_numpy())
    assert sql.late.num_rows == res.late.num_rows


def test_format_grid_looks_like_pyflink():
    t = pa.table({"word": ["a", "bb"], "n": [1, 22]})
    text = demo.format_grid(t)
    assert text.splitlines() == [
        "+------+----+",
        "| word |  n |",
        "+------+----+",
        "|    a |  1 |",
        "|   bb | 22 |",
        "+------+----+",
        "2 rows in set",
    ]
    assert demo.format_grid(t.slice(0, 1)).endswith("1 row in set")


def test_rate_paces_the_source():
    cfg = small(events=60_000, rate=200_000, threads=True)
    t0 = time.perf_counter()
    res = demo.run_demo(cfg, progress=False)
    assert time.perf_counter() - t0 >= 60_000 / 200_000 * 0.9
    assert res.job.rows_in == 60_000


def test_progress_callback_sees_rows_and_watermark():
    seen = []

    class Recorder(demo.Progress):
        def __call__(self, metrics):
            seen.append((sum(m.rows_in for m in metrics if m.task.startswith("player_events")),
                         max((m.watermark or -(2**63)) for m in metrics)))

    cfg = small(events=200_000, rate=400_000, threads=True)

    env = fo.StreamEnvironment(threads=True)
    streams = demo.build_job(env, cfg)
    demo._collect(streams["rewards"], "rewards")
    env.execute("progress", progress=Recorder(cfg.events, enabled=False))
    assert len(seen) >= 2
    assert seen[-1][0] == cfg.events
    assert seen[-1][1] > demo.START_MS
    assert [r for r, _ in seen] == sorted(r for r, _ in seen)


@pytest.mark.parametrize("kw", [{"events": 0}, {"players": -1}, {"rate": 0}, {"seed": -2},
                                {"offline_fraction": 2.0}, {"parallelism": True}])
def test_config_rejects_bad_values(kw):
    with pytest.raises(ValueError):
        demo.DemoConfig(**kw)


def _wait_for_checkpoint(directory: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if glob.glob(os.path.join(directory, "chk-*", "_manifest.json")):
            return
        if proc.poll() is not None:
            pytest.fail(f"the demo ended before its first checkpoint: {proc.stderr.read()}")
        time.sleep(0.05)
    pytest.fail("no checkpoint within the timeout")


@pytest.mark.slow
def test_kill_and_resume_gives_the_same_rewards(tmp_path):
    ck, out = str(tmp_path / "ck"), str(tmp_path / "out")
    cfg = small(events=300_000)
    args = [sys.executable, "-m", "fastops", "demo", "--events", "300000", "--seed", str(cfg.seed),
            "--checkpoint-dir", ck, "--checkpoint-interval", "200ms", "--output", out,
            "--rate", "100000", "--no-progress", "--players", "2000", "--events-per-s", "5000",
            "--batch-size", "16384", "--offline-fraction", "0.002"]
    with subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        _wait_for_checkpoint(ck, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL  # killed before the end
    # resumed with its progress bar: it counts the rows the checkpoint covers too
    done = subprocess.run([a for a in args if a != "--no-progress"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resumed from checkpoint" in done.stdout
    rows_in = int(next(ln for ln in done.stdout.splitlines() if ln.startswith("rows in")).split()[2]
                  .replace(",", ""))
    assert 0 < rows_in < 300_000  # this run read only the rest
    assert "300,000/300,000 rows" in done.stderr  # the bar still ends at 100 %

    rewards = ds.dataset(os.path.join(out, "rewards"), format="parquet").to_table()
    rows = sorted(zip(_ms(rewards.column("window_start")), rewards.column("player_id").to_pylist(),
                      rewards.column("pops").to_pylist()))
    assert rows == reference_rewards(_con(cfg))


@settings(max_examples=40, deadline=None)
@given(events=st.integers(1, 5000), batch=st.integers(1, 700), p=st.integers(1, 4), k=st.integers(0, 12),
       data=st.data())
def test_source_rows_at_a_position_equal_the_rows_read(events, batch, p, k, data):
    """What the progress bar adds for a restored split: the rows read to its position."""
    cfg = demo.DemoConfig(events=events, batch_size=batch, players=50)
    source = demo.PlayerEventSource(cfg)
    p = min(p, source.splits())
    i = data.draw(st.integers(0, p - 1))
    reader = source.open(i, p)
    rows = 0
    for _ in range(k):
        b = reader.read()
        if b is demo.END:
            break
        rows += b.num_rows
    assert source.rows_at(i, p, reader.position()) == rows
    assert source.total_rows() == events


def test_sql_face_shows_one_bar_over_its_queries():
    cfg = small(events=100_000)
    buf = io.StringIO()
    res = demo.run_demo_sql(cfg, progress=True, stream=buf)
    text = buf.getvalue()
    assert "reward engine (SQL)" in text
    assert "300,000/300,000 rows" in text  # three queries over 100k events each
    assert "query 3/3: per_minute" in text
    assert res.job.rows_in == 100_000


def test_cli_demo_sql_prints_progress(capsys):
    code = cli.main(["demo", "--sql", "--events", "60k", "--players", "2000", "--events-per-s", "5000",
                     "--rows", "1"])
    assert code == 0
    err = capsys.readouterr().err
    assert "reward engine (SQL)" in err and "180,000/180,000 rows" in err


def test_autoscaled_demo_verifies_every_purchase_once_and_reports_its_decisions():
    # a feed that steps from 50k to 200k rows/s: the purchases' verification is sized as it runs
    cfg = small(threads=True, autoscale=True, rate=[(0, 50_000), (2, 200_000)])
    res = demo.run_demo(cfg, progress=False)
    purchases = demo.generate_events(cfg).filter(pc.is_valid(pc.field("value")))
    assert res.verified.num_rows == purchases.num_rows
    assert sorted(res.verified.column("ts").cast(pa.int64()).to_pylist()) == sorted(
        purchases.column("ts").cast(pa.int64()).to_pylist())
    # the other results are those of the run without autoscaling
    con = _con(small())
    got = list(zip(_ms(res.rewards.column("window_start")), res.rewards.column("player_id").to_pylist(),
                   res.rewards.column("pops").to_pylist()))
    assert got == reference_rewards(con)
    text = demo.summary(res)
    assert "autoscaler (DS2)" in text and f"verified     {purchases.num_rows:,} purchases" in text
    assert len(res.job.scaling) >= 1  # decisions were taken (whether they rescale depends on the machine)


def test_demo_under_a_qos_sheds_pops_and_keeps_every_purchase():
    # a 1M rows/s feed, about twice what the anti-cheat screening takes: pops are shed, purchases never
    cfg = small(threads=True, qos="200ms", rate=1_000_000.0, events=4_000_000, batch_size=16_384)
    res = demo.run_demo(cfg, progress=False)
    shedding = res.job.shedding
    assert shedding["mode"] == "semantic" and shedding["rows_offered"] == cfg.events
    assert shedding["rows_shed"] > 0
    events = demo.generate_events(cfg)
    purchases = events.filter(pc.is_valid(pc.field("value")))
    got = pc.sum(res.per_minute.column("purchases")).as_py()
    assert got + res.late.filter(pc.is_valid(pc.field("value"))).num_rows == purchases.num_rows
    kept = pc.sum(res.per_minute.column("events")).as_py() + res.late.num_rows
    assert kept == cfg.events - shedding["rows_shed"]
    assert "load shedding (semantic" in demo.summary(res)


def test_cli_demo_qos_needs_a_rate(capsys):
    assert cli.main(["demo", "--qos", "200ms", "--no-progress"]) == 2
    assert "--rate" in capsys.readouterr().err
    assert cli.main(["demo", "--qos", "0ms", "--rate", "1000", "--no-progress"]) == 2
    assert "latency bound" in capsys.readouterr().err


def test_a_demo_too_short_for_any_reward_still_reports(capsys):
    # 30k events: no player reaches the threshold, so the rewards table is empty but keeps its columns
    assert cli.main(["demo", "--events", "30000", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Rewards (extra lives)\nEmpty set" in out and "Leaderboard" in out
