"""Shared helpers for the benchmark scripts in ``bench/``.

Small and stable on purpose: every ``bench/bench_*.py`` may import it.

- ``parse_args(description)``: ``--quick`` and ``--json PATH`` (plus ``--repeats``);
- ``median_time(fn, repeats, setup=None)``: median wall time of ``fn()`` in seconds;
- ``median_times(fns, repeats)``: the same for several contenders, run in
  interleaved rounds so that a noisy machine slows them alike;
- ``median_times_cpu(fns, repeats)``: as ``median_times``, with the median CPU
  seconds of the process (all its threads) beside each wall time;
- ``print_table(rows, columns)``: a plain text table;
- ``measurement(workload, engine, rows_per_s, role)``: one row of the result schema;
- ``write_results(path, measurements, details)``: the one writer of the result
  schema that ``fastops bench`` reads (``fastops.apps.bench_report`` defines it).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, TextIO

from fastops.apps.bench_report import SCHEMA, check_results, machine_info

__all__ = [
    "machine_info",
    "measurement",
    "median_time",
    "median_times",
    "median_times_cpu",
    "parse_args",
    "print_table",
    "write_results",
]


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the common benchmark options: ``--quick``, ``--json PATH``, ``--repeats N``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="small inputs and few repeats (finishes in well under a minute)")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="write the results as JSON to PATH")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed repeats per measurement (the median is reported)")
    return parser.parse_args(argv)


def median_time(fn: Callable[[], Any], repeats: int = 5,
                setup: Callable[[], Any] | None = None, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs, in seconds.

    ``setup()`` (untimed) runs before every call, warm-up calls included; if it
    returns something other than None, ``fn`` is called with it. The garbage
    collector is paused while timing.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")

    def once() -> float:
        arg = setup() if setup is not None else None
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            t0 = time.perf_counter()
            if arg is None:
                fn()
            else:
                fn(arg)
            return time.perf_counter() - t0
        finally:
            if gc_was_enabled:
                gc.enable()

    for _ in range(warmup):
        once()
    return statistics.median(once() for _ in range(repeats))


def median_times(fns: Mapping[str, Callable[[], Any]], repeats: int = 5,
                 warmup: int = 1) -> dict[str, float]:
    """Median wall time (s) of each ``fns[name]()``, measured in ``repeats``
    interleaved rounds (every contender once per round, in order)."""
    return {name: wall for name, (wall, _) in median_times_cpu(fns, repeats, warmup).items()}


def median_times_cpu(fns: Mapping[str, Callable[[], Any]], repeats: int = 5,
                     warmup: int = 1) -> dict[str, tuple[float, float]]:
    """``{name: (median wall s, median CPU s)}`` of each ``fns[name]()`` over
    ``repeats`` interleaved rounds. CPU is the process's (every thread), so
    CPU / wall is the number of cores a run kept busy."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for rnd in range(warmup + repeats):
        for name, fn in fns.items():
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                c0 = time.process_time()
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                dc = time.process_time() - c0
            finally:
                if gc_was_enabled:
                    gc.enable()
            if rnd >= warmup:
                samples[name].append((dt, dc))
    return {name: (statistics.median(t for t, _ in ts), statistics.median(c for _, c in ts))
            for name, ts in samples.items()}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str],
                title: str | None = None, file: TextIO | None = None) -> None:
    """Print ``rows`` (mappings) as a text table with the given ``columns``."""
    file = file if file is not None else sys.stdout
    cells = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    if title:
        print(title, file=file)
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for r in cells:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)), file=file)
    file.flush()


def measurement(workload: str, engine: str, rows_per_s: float, role: str = "fastops") -> dict[str, Any]:
    """One row of the result schema: ``engine`` ran ``workload`` at ``rows_per_s``.

    ``role``: ``"fastops"`` (the fastops run the workload is compared by, one
    per workload), ``"variant"`` (another fastops configuration) or ``"peer"``."""
    return {"workload": workload, "engine": engine, "role": role, "rows_per_s": float(rows_per_s)}


def write_results(path: str | None, measurements: Iterable[Mapping[str, Any]],
                  details: Mapping[str, Any] | None = None) -> None:
    """Write the result schema to ``path`` (no-op if path is None): the
    measurements, the suite's own figures (``details``, free-form) and
    ``machine_info()``. Malformed measurements raise ValueError before
    anything is written."""
    data = {"schema": SCHEMA, "measurements": [dict(m) if isinstance(m, Mapping) else m for m in measurements],
            "details": dict(details or {}), "machine": machine_info()}
    check_results(data)
    if not path:
        return
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")
    print(f"wrote {path}")
