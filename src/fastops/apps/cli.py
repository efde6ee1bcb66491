"""The ``fastops`` command line.

::

    fastops --version
    fastops demo [--events N] [--rate ROWS_PER_S] [--parallelism P] [--seed S]
                 [--checkpoint-dir DIR] [--output PATH] [--sql] [--no-progress]
    fastops bench [--quick] [--out DIR] [--only SUITES]
    fastops run job.py [ARGS ...]
    fastops sql "SELECT ..." --table name=path.parquet [--table ...]

Bad arguments give a one-line error on stderr and exit status 2; a job that
fails exits with status 1.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import fastops
from fastops.apps import bench_report
from fastops.apps import demo as d
from fastops.apps.demo import streams
from fastops.connectors.files import _expand
from fastops.datastream import DEFAULTS as ENV_DEFAULTS
from fastops.monitoring import DEFAULTS as UI_DEFAULTS
from fastops.runtime.checkpoint import load_snapshot
from fastops.runtime.errors import JobFailed
from fastops.runtime.executors import EXECUTORS
from fastops.runtime.rescale import describe_snapshot

__all__ = ["build_parser", "main"]

PROG = "fastops"


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line: ``fastops demo: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number ``>= minimum`` (``_`` separators allowed)."""
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value
    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _count(text: str) -> int:
    """``1000000``, ``1_000_000``, ``1e6``, ``2M`` or ``500k``."""
    t = text.strip().replace("_", "").lower()
    scale = 1
    if t.endswith(("k", "m", "g")):
        scale = {"k": 10**3, "m": 10**6, "g": 10**9}[t[-1]]
        t = t[:-1]
    try:
        value = float(t) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of events such as 2000000 or 2M, got {text!r}") from None
    if value != value or value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number of events >= 1, got {text!r}")
    return int(value)


def _rate(text: str) -> float:
    try:
        value = float(_count(text)) if text.strip()[-1:].lower() in "kmg" else float(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected rows per second > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected rows per second > 0, got {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}")
    return value


def _table_arg(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected name=path.parquet, got {text!r}")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"table name {name!r} is not a valid identifier")
    return name, path


def _add_ui(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ui", nargs="?", const=8081, default=None, type=_port, metavar="PORT",
                        help="serve the job's page, Prometheus /metrics and /api on 127.0.0.1:PORT "
                        "(default 8081) while it runs")
    parser.add_argument("--ui-keep", action="store_true", help="keep serving the final figures after the job ends")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number in [0, 65535], got {text!r}")
    return int(text)


def _ui_options(args: list[str]) -> tuple[list[str], Any, bool]:
    """``--ui [PORT]`` and ``--ui-keep`` taken out of the arguments after job.py."""
    rest, ui, keep = [], None, False
    i = 0
    while i < len(args):
        if args[i] == "--ui":
            ui = 8081
            if i + 1 < len(args) and args[i + 1].isdigit():
                ui = _port(args[i + 1])
                i += 1
        elif args[i] == "--ui-keep":
            keep = True
        else:
            rest.append(args[i])
        i += 1
    return rest, ui, keep


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="fastops: stream processing over Apache Arrow "
                     "with compiled kernels. Run 'fastops demo' to see a job.")
    parser.add_argument("--version", action="version", version=f"fastops {fastops.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the reward-engine demo job on generated events",
                          description="A mobile game's reward engine over a seeded generator of "
                          "player events: extra lives for >= 500 pops in a sliding minute, a "
                          "per-minute leaderboard, distinct active players (HyperLogLog), revenue "
                          "per minute and the late events.")
    demo.add_argument("--events", type=_count, default=None, metavar="N",
                      help="number of events (default 50M: about 10-20 s on 2 cores; accepts 2M, 500k)")
    demo.add_argument("--rate", type=_rate, default=None, metavar="ROWS_PER_S",
                      help="pace the source like a live feed (default: as fast as possible)")
    demo.add_argument("--parallelism", type=_positive_int, default=1, metavar="P",
                      help="parallel tasks per operator (default 1)")
    demo.add_argument("--seed", type=_nonneg_int, default=7, help="generator seed (default 7)")
    demo.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                      help="take checkpoints here; a run started again with the same DIR resumes")
    demo.add_argument("--checkpoint-interval", default="2s", metavar="DURATION",
                      help="time between checkpoints (default 2s)")
    demo.add_argument("--output", default=None, metavar="PATH",
                      help="also write every result table as Parquet under PATH (exactly once)")
    demo.add_argument("--rows", type=_positive_int, default=10, metavar="N",
                      help="rows shown per result table (default 10)")
    demo.add_argument("--sql", action="store_true", help="run the same job through the SQL face")
    demo.add_argument("--autoscale", action="store_true",
                      help="a live feed whose rate steps up 2x, 4x and back (from --rate, default 250k "
                      "rows/s, 8 s per step), sized as it runs by the DS2 autoscaler; its decisions "
                      "are printed as they happen")
    demo.add_argument("--qos", default=None, metavar="LATENCY",
                      help="keep the p99 latency within LATENCY (e.g. 200ms) by shedding events when the "
                      "feed (--rate) outruns the job: pops go first, purchases never before them")
    gen = demo.add_argument_group("generator (advanced)")
    gen.add_argument("--players", type=_positive_int, default=50_000, help="number of players (default 50000)")
    gen.add_argument("--events-per-s", type=_positive_int, default=20_000, metavar="N",
                     help="events per second of event time (default 20000)")
    gen.add_argument("--batch-size", type=_positive_int, default=None, metavar="N",
                     help="rows per generated batch (default 131072; 16384 with --autoscale)")
    gen.add_argument("--offline-fraction", type=_fraction, default=0.00005, metavar="F",
                     help="share of events that arrive minutes late (default 0.00005)")
    demo.add_argument("--produce", default=None, metavar="URL",
                      help="write the generated events into a Redis stream (redis://host:port/db?stream=NAME, "
                      "default stream game_events) and exit")
    demo.add_argument("--source", default=None, metavar="URL",
                      help="read the events from a Redis stream written by --produce (it ends at the stream's end)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_ui(demo)

    bench = sub.add_parser("bench", help="run the benchmark suites in bench/ and write a report",
                           description="Runs the benchmark scripts (bench/bench_*.py) with their "
                           "peers, prints one summary table, writes results.json and a PNG chart.")
    bench.add_argument("--quick", action="store_true", help="small inputs (under 2 minutes in all)")
    bench.add_argument("--out", default="bench-results", metavar="DIR",
                       help="where results.json, the chart and each suite's JSON go (default bench-results)")
    bench.add_argument("--only", default=None, metavar="SUITES",
                       help="comma-separated suites to run (e.g. window,pipeline)")
    bench.add_argument("--bench-dir", default=None, metavar="DIR",
                       help="directory of the bench scripts (default: ./bench, or the source checkout's)")

    run = sub.add_parser("run", help="run a job file (a script that builds and executes a job)",
                         description="Runs a Python file as __main__, with the remaining arguments "
                         "in sys.argv, as 'python job.py ARGS' would. --ui [PORT] (before or after "
                         "job.py) serves each job's page and metrics (default port 8081); --ui-keep "
                         "keeps serving after a job ends; --executor NAME (before or after job.py) "
                         "runs its jobs on that executor.")
    _add_ui(run)
    run.add_argument("--executor", choices=sorted(EXECUTORS), default=None,
                     help="run every job the file starts on this executor (e.g. ray: each task in a Ray "
                     "actor), unless the job names its own")
    run.add_argument("file", metavar="job.py")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the job")

    savepoint = sub.add_parser("savepoint", help="look into a savepoint or checkpoint",
                               description="Savepoints (JobClient.stop_with_savepoint) and checkpoints.")
    sp_sub = savepoint.add_subparsers(dest="action", metavar="ACTION", required=True)
    inspect = sp_sub.add_parser("inspect", help="print what a savepoint or checkpoint holds",
                                description="Verifies the savepoint (or a checkpoint directory chk-N) "
                                "and prints its job, its operators, their key groups per task, "
                                "state bytes and keys held.")
    inspect.add_argument("path", metavar="PATH")
    inspect.add_argument("--json", action="store_true", help="print it as JSON")

    sql = sub.add_parser("sql", help="ad-hoc SQL over Parquet files",
                         description="Registers each --table name=path as a table and runs the query.")
    sql.add_argument("query", metavar="QUERY")
    sql.add_argument("--table", type=_table_arg, action="append", default=[], metavar="NAME=PATH",
                     help="a Parquet file (or directory / glob) registered as NAME; repeatable")
    sql.add_argument("--rows", type=_positive_int, default=50, metavar="N",
                     help="rows to print (default 50)")
    return parser


def _fail(prog: str, message: str, code: int = 1) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def _unreadable(path: str) -> str | None:
    """Why ``path`` cannot be read, as a short sentence (None when it can)."""
    if not os.path.exists(path):
        where = "" if os.path.isabs(path) else f" (relative to {os.getcwd()})"
        return f"no such file or directory: {path!r}{where}"
    if not os.access(path, os.R_OK):
        return f"permission denied: {path!r}"
    return None


def _read_parquet_arg(path: str) -> pa.Table:
    """A ``--table`` path (a file, a directory or a glob) read as one Arrow table.

    Raises FileNotFoundError, PermissionError or ValueError with a sentence naming
    the file at fault (pyarrow's own errors name a path and little else)."""
    if not any(ch in path for ch in "*?["):
        problem = _unreadable(path)
        if problem:
            raise (PermissionError if os.path.exists(path) else FileNotFoundError)(problem)
    files = _expand(path)  # a glob matching nothing is a FileNotFoundError naming it
    if not files:
        raise FileNotFoundError(f"directory {path!r} holds no data files")
    for f in files:
        if not os.access(f, os.R_OK):
            raise PermissionError(f"permission denied: {f!r}")
    try:
        return ds.dataset(files, format="parquet").to_table()
    except (pa.ArrowException, OSError, ValueError) as exc:
        for f in files:  # name the file at fault, with the first sentence of the reason
            try:
                pq.read_metadata(f)
            except (pa.ArrowException, OSError, ValueError) as bad:
                reason = str(bad).split(". ")[0].strip()
                raise ValueError(f"{f!r} is not a Parquet file ({reason})") from None
        raise ValueError(f"cannot read {path!r} as one Parquet table: {exc}") from None


# ------------------------------------------------------------------ commands

AUTOSCALE_BASE_RATE = 250_000  # rows/s of `fastops demo --autoscale`, then 2x, 4x, back
AUTOSCALE_STEPS = (1, 2, 4, 1)
AUTOSCALE_STEP_S = 8


def _demo(args: argparse.Namespace) -> int:
    if args.sql and not d.sql_available():
        return _fail("fastops demo", "--sql needs the SQL face (fastops.TableEnvironment), "
                     "which this build of fastops does not have yet; run 'fastops demo' without "
                     "--sql for the DataStream form")
    rate: float | list[tuple[float, float]] | None = args.rate
    events = args.events or d.DEFAULT_EVENTS
    if args.qos is not None:
        if args.sql:
            return _fail("fastops demo", "--qos applies to the DataStream form; drop --sql to use it", 2)
        if args.rate is None and not args.autoscale:
            return _fail("fastops demo", "--qos sheds load when the feed outruns the job: give the feed's "
                         "rate with --rate ROWS_PER_S", 2)
    if args.autoscale:
        if args.sql:
            return _fail("fastops demo", "--autoscale applies to the DataStream form; drop --sql to use it", 2)
        base = args.rate or AUTOSCALE_BASE_RATE
        rate = [(k * AUTOSCALE_STEP_S, base * m) for k, m in enumerate(AUTOSCALE_STEPS)]
        events = args.events or int(base * AUTOSCALE_STEP_S * sum(AUTOSCALE_STEPS))
    if args.source is not None and args.sql:
        return _fail("fastops demo", "--source applies to the DataStream form; drop --sql to use it", 2)
    if args.source is not None and args.events is None:
        try:
            events = streams.stream_length(args.source) or 1
        except (ValueError, ImportError) as exc:
            return _fail("fastops demo", str(exc), 2)
    try:
        cfg = d.DemoConfig(events=events, seed=args.seed, rate=rate, source=args.source,
                           parallelism=args.parallelism, checkpoint_dir=args.checkpoint_dir,
                           checkpoint_interval=args.checkpoint_interval, output=args.output,
                           players=args.players, events_per_s=args.events_per_s,
                           batch_size=args.batch_size or (16_384 if args.autoscale else 131_072),
                           offline_fraction=args.offline_fraction, autoscale=args.autoscale,
                           ui=args.ui, ui_keep=args.ui_keep, qos=args.qos)
    except ValueError as exc:
        return _fail("fastops demo", str(exc), 2)
    if args.produce is not None:
        try:
            written = streams.produce(cfg, args.produce)
        except (ValueError, ImportError) as exc:
            return _fail("fastops demo", str(exc), 2)
        print(f"wrote {written:,} events to the Redis stream {streams.split_url(args.produce)[1]!r}; read them "
              f"with: fastops demo --source {args.produce}")
        return 0
    if isinstance(rate, list):
        paced = (", paced at " + ", ".join(f"{r / 1e3:,.0f}k" for _, r in rate)
                 + f" rows/s for {AUTOSCALE_STEP_S} s each, autoscaled by DS2")
    else:
        paced = f", paced at {rate:,.0f} rows/s" if rate else ""
    print(f"reward engine: {cfg.events:,} events, {cfg.players:,} players, seed {cfg.seed}, "
          f"parallelism {cfg.parallelism}" + paced
          + (f", checkpoints in {cfg.checkpoint_dir}" if cfg.checkpoint_dir else ""), flush=True)
    if args.sql and (cfg.checkpoint_dir or cfg.output):
        return _fail("fastops demo", "--checkpoint-dir and --output apply to the DataStream form; "
                     "drop --sql to use them", 2)
    try:
        if args.sql:
            print("running the three SQL queries (rewards, leaderboard, per minute) ...", flush=True)
            res = d.run_demo_sql(cfg, progress=not args.no_progress)
        else:
            res = d.run_demo(cfg, progress=not args.no_progress)
    except JobFailed as exc:
        return _fail("fastops demo", str(exc))
    except ValueError as exc:  # recovery refused: another job's checkpoint, or committed output
        return _fail("fastops demo", f"{exc}\n(from the command line: use another --output "
                                     "directory or --checkpoint-dir, or delete them)")
    except ImportError as exc:  # an optional dependency of the chosen face
        return _fail("fastops demo", str(exc))
    except KeyboardInterrupt:
        msg = "interrupted"
        if cfg.checkpoint_dir:
            msg += f"; run the same command again to resume from the latest checkpoint in {cfg.checkpoint_dir}"
        return _fail("fastops demo", msg, 130)
    print(d.report(res, max_rows=args.rows))
    if cfg.output:
        print(f"\nresult tables written as Parquet under {cfg.output}/")
    return 0


def _find_bench_dir(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    here = os.path.abspath("bench")
    candidates = [here, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "bench")]
    for c in candidates:
        if os.path.isdir(c) and any(n.startswith("bench_") and n.endswith(".py") for n in os.listdir(c)):
            return c
    return None


def _bench(args: argparse.Namespace) -> int:
    bench_dir = _find_bench_dir(args.bench_dir)
    if bench_dir is None or not os.path.isdir(bench_dir):
        return _fail("fastops bench", "no bench/ directory with bench_*.py scripts here; run it from "
                     "a source checkout of fastops or pass --bench-dir DIR", 2)
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    try:
        report = bench_report.run(bench_dir, args.out, quick=args.quick, only=only)
    except ValueError as exc:
        return _fail("fastops bench", str(exc), 2)
    print(report.text)
    return 0 if not report.failed else 1


def _run(args: argparse.Namespace) -> int:
    path = args.file
    problem = _unreadable(path)
    if problem is None and os.path.isdir(path):
        problem = f"{path!r} is a directory, not a Python job file"
    if problem:
        return _fail("fastops run", problem, 2)
    rest, ui, keep = _ui_options(args.args)
    ui = args.ui if args.ui is not None else ui
    executor = args.executor
    if "--executor" in rest:  # also after job.py, as --ui may be
        i = rest.index("--executor")
        if i + 1 >= len(rest) or rest[i + 1] not in EXECUTORS:
            return _fail("fastops run", f"--executor takes one of {sorted(EXECUTORS)}", 2)
        executor = rest[i + 1]
        del rest[i:i + 2]
    old_argv, old_path, old_ui, old_env = sys.argv, list(sys.path), dict(UI_DEFAULTS), dict(ENV_DEFAULTS)
    sys.argv = [path, *rest]
    ENV_DEFAULTS["executor"] = executor
    UI_DEFAULTS.update(ui=ui, keep=args.ui_keep or keep, announce=ui is not None)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        UI_DEFAULTS.update(old_ui)
        ENV_DEFAULTS.update(old_env)
    return 0


def _sql(args: argparse.Namespace) -> int:
    if not hasattr(fastops, "TableEnvironment"):
        return _fail("fastops sql", "needs the SQL face (fastops.TableEnvironment), which this "
                     "build of fastops does not have")
    tenv = fastops.TableEnvironment(mode="batch")
    for name, path in args.table:
        try:
            data = _read_parquet_arg(path)
        except (OSError, ValueError) as exc:
            return _fail("fastops sql", f"--table {name}={path}: {exc}".replace("\n", " "), 2)
        tenv.create_temporary_view(name, tenv.from_arrow(data))
    try:
        table = tenv.sql_query(args.query).execute().to_arrow()
    except Exception as exc:
        return _fail("fastops sql", f"{type(exc).__name__}: {exc}".replace("\n", " "))
    print(d.format_grid(table, max_rows=args.rows))
    return 0


def _savepoint(args: argparse.Namespace) -> int:
    prog = f"{PROG} savepoint {args.action}"
    try:
        info = describe_snapshot(load_snapshot(args.path))
    except ValueError as exc:
        return _fail(prog, str(exc))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    kind = "savepoint" if info["savepoint"] else "checkpoint"
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["created"])) if info["created"] else "?"
    print(f"{kind} {info['path']}: id {info['checkpoint_id']}, taken {created}, "
          f"{info['state_bytes']:,} bytes of state{' (final: the job had finished)' if info['finished'] else ''}")
    print(f"job fingerprint {info['fingerprint']} (structure {info['structure']}), "
          f"max_parallelism {info['max_parallelism']}")
    for op in info["operators"]:
        keys = "" if op["keys"] is None else f", {op['keys']:,} keys"
        print(f"  [{op['uid']}] {op['name']}: parallelism {op['parallelism']}"
              f"{', keyed' if op['keyed'] else ''}, {op['state_bytes']:,} bytes{keys}")
        for t in op["tasks"]:
            parts = []
            if "key_groups" in t:
                parts.append(f"key groups {t['key_group_ranges']} ({t['key_groups']})")
            if t["state_bytes"]:
                parts.append(f"{t['state_bytes']:,} bytes")
            if t["keys"]:
                parts.append(f"{t['keys']:,} keys")
            if t.get("position") is not None:
                parts.append(f"position {t['position']}")
            if parts:
                print(f"      task {t['task'] + 1}/{op['parallelism']}: " + ", ".join(parts))
    return 0


_COMMANDS = {"demo": _demo, "bench": _bench, "run": _run, "savepoint": _savepoint, "sql": _sql}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fastops`` command (returns the exit status)."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        parser.print_help()
        return 0
    return _COMMANDS[args.command](args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
