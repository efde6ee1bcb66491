"""The benchmark report behind ``fastops bench``.

Runs every ``bench/bench_*.py`` script (each takes ``--quick`` and
``--json PATH`` and measures fastops and its peers in the same process),
reads their results, prints one summary table (workload, fastops rows/s,
best peer, ratio), and writes ``results.json`` and ``throughput.png`` (a bar
chart per workload, fastops against its peers) into the output directory.

Every script writes one result schema (``bench/_common.py`` has the writer)::

    {"schema": "fastops-bench/1",
     "measurements": [{"workload": "W1", "engine": "fastops", "role": "fastops",
                       "rows_per_s": 2.1e7}, ...],
     "details": {...},    # the suite's own figures, not read here
     "machine": {...}}    # where they were measured

A measurement's ``role`` is ``"fastops"`` (the fastops run a workload is
compared by: exactly one per workload), ``"variant"`` (another fastops
configuration of the same workload) or ``"peer"`` (another engine).
:func:`check_results` says what is wrong with a file that breaks the schema;
:func:`read_results` turns a valid one into :class:`Workload` rows.

matplotlib is optional: without it the chart is skipped with a message.
"""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ROLES", "SCHEMA", "Report", "Workload", "check_results", "discover", "machine_info",
           "read_results", "run", "summary_table", "write_chart"]

SCHEMA = "fastops-bench/1"
ROLES = ("fastops", "variant", "peer")
SUITE_ORDER = ("partition", "window", "sketch", "pipeline", "checkpoint", "sql", "join")
TIMEOUT_S = {"quick": 300, "full": 3600}


@dataclass
class Workload:
    """One measured workload: fastops' rows/s and each peer's."""

    suite: str
    name: str
    fastops: float
    peers: dict[str, float] = field(default_factory=dict)
    fastops_engine: str = "fastops"

    @property
    def best_peer(self) -> tuple[str, float] | None:
        if not self.peers:
            return None
        name = max(self.peers, key=lambda k: self.peers[k])
        return name, self.peers[name]

    @property
    def ratio(self) -> float | None:
        """fastops rows/s over the best peer's (> 1: fastops is faster)."""
        best = self.best_peer
        if best is None or best[1] <= 0:
            return None
        return self.fastops / best[1]

    def as_dict(self) -> dict[str, Any]:
        best = self.best_peer
        return {"suite": self.suite, "workload": self.name, "fastops_engine": self.fastops_engine,
                "fastops_rows_per_s": self.fastops, "peers_rows_per_s": dict(self.peers),
                "best_peer": best[0] if best else None,
                "best_peer_rows_per_s": best[1] if best else None, "ratio": self.ratio}


@dataclass
class Report:
    workloads: list[Workload]
    suites: dict[str, dict[str, Any]]  # suite -> {"status", "seconds", "log", "json"?, "workloads"?}
    text: str = ""
    chart: str | None = None

    @property
    def failed(self) -> list[str]:
        return [s for s, info in self.suites.items() if info.get("status") != "ok"]


def discover(bench_dir: str) -> dict[str, str]:
    """Suite name -> script path, for every ``bench_<suite>.py`` in ``bench_dir``."""
    found = {}
    for name in sorted(os.listdir(bench_dir)):
        if name.startswith("bench_") and name.endswith(".py"):
            found[name[len("bench_"):-3]] = os.path.join(bench_dir, name)
    order = {s: i for i, s in enumerate(SUITE_ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def machine_info() -> dict[str, Any]:
    """Where the numbers were measured."""
    try:
        load: tuple[float, float, float] | None = os.getloadavg()
    except (AttributeError, OSError):
        load = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "loadavg": load,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def check_results(data: Any) -> list[dict[str, Any]]:
    """The measurements of a results document, or ValueError saying how it
    breaks the schema (see the module docs)."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"schema is {data.get('schema')!r}, expected {SCHEMA!r}")
    rows = data.get("measurements")
    if not isinstance(rows, list) or not rows:
        raise ValueError("'measurements' must be a non-empty list")
    compared: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(rows):
        where = f"measurement {i}"
        if not isinstance(row, dict):
            raise ValueError(f"{where} is not an object")
        for key in ("workload", "engine"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise ValueError(f"{where}: {key!r} must be a non-empty string")
        if row.get("role") not in ROLES:
            raise ValueError(f"{where}: role is {row.get('role')!r}, expected one of {', '.join(ROLES)}")
        rate = row.get("rows_per_s")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate < 0:
            raise ValueError(f"{where}: rows_per_s must be a finite number >= 0, got {rate!r}")
        pair = (row["workload"], row["engine"])
        if pair in seen:
            raise ValueError(f"{where}: engine {pair[1]!r} measured twice in workload {pair[0]!r}")
        seen.add(pair)
        compared.setdefault(row["workload"], 0)
        if row["role"] == "fastops":
            compared[row["workload"]] += 1
    for workload, count in compared.items():
        if count != 1:
            raise ValueError(f"workload {workload!r} has {count} measurements of role 'fastops', expected 1")
    return rows


def read_results(suite: str, data: Any) -> list[Workload]:
    """The workloads of one suite's results document, in the order measured.

    A workload that has variants is named after the fastops run it compares
    (``"sql: W1 (fastops SQL)"``)."""
    out: dict[str, Workload] = {}
    variants: set[str] = set()
    for row in check_results(data):
        workload, engine, rate = row["workload"], row["engine"], float(row["rows_per_s"])
        w = out.setdefault(workload, Workload(suite, f"{suite}: {workload}", 0.0))
        if row["role"] == "fastops":
            w.fastops, w.fastops_engine = rate, engine
        elif row["role"] == "peer":
            w.peers[engine] = rate
        else:
            variants.add(workload)
    for workload in variants:
        w = out[workload]
        w.name = f"{w.name} ({w.fastops_engine})"
    return list(out.values())


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:,.2f} M"
    if v >= 1e3:
        return f"{v / 1e3:,.1f} k"
    return f"{v:,.0f}"


def summary_table(workloads: Sequence[Workload]) -> str:
    """workload | fastops rows/s | best peer | peer rows/s | ratio."""
    head = ["workload", "fastops rows/s", "best peer", "peer rows/s", "fastops / peer"]
    rows = []
    for w in workloads:
        best, ratio = w.best_peer, w.ratio
        rows.append([w.name, _rate(w.fastops), best[0] if best else "-", _rate(best[1]) if best else "-",
                     f"{ratio:.2f}x" if ratio is not None else "-"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = "+" + "+".join("-" * (x + 2) for x in widths) + "+"
    fmt = lambda cells: "|" + "|".join(
        f" {c.ljust(x) if i == 0 else c.rjust(x)} " for i, (c, x) in enumerate(zip(cells, widths))) + "|"
    return "\n".join([line, fmt(head), line, *[fmt(r) for r in rows], line])


def write_chart(workloads: Sequence[Workload], path: str) -> str | None:
    """Horizontal bars per workload: fastops and the fastest peer of the same
    run (log scale), labelled with the ratio. Returns the path, or None (with a
    message) without matplotlib."""
    try:  # deferred: matplotlib is a heavy optional dependency (the bench extra)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("chart skipped: matplotlib is not installed (pip install matplotlib, or "
              "pip install 'fastops[bench]')", file=sys.stderr)
        return None
    if not workloads:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(workloads) + 1.6))
    h = 0.38
    ys = list(range(len(workloads)))
    ax.barh([y - h / 2 for y in ys], [w.fastops for w in workloads], height=h, label="fastops",
            color="#1f77b4")
    peers = [(y + h / 2, best) for y, w in zip(ys, workloads) if (best := w.best_peer) is not None]
    peer_x = [rate for _, (_, rate) in peers]
    ax.barh([y for y, _ in peers], peer_x, height=h, label="fastest peer (same run)", color="#ff7f0e")
    for y, (name, rate) in peers:
        ax.text(rate, y, f" {name}", va="center", fontsize=7)
    for y, w in zip(ys, workloads):
        ratio = w.ratio
        if ratio is not None:
            ax.text(w.fastops, y - h / 2, f" {ratio:.2f}x", va="center", fontsize=7, weight="bold")
    ax.set_yticks(ys)
    ax.set_yticklabels([w.name for w in workloads], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("rows per second (log scale, higher is better); label: fastops / fastest peer")
    ax.set_title("fastops benchmark report")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlim(right=max([w.fastops for w in workloads] + peer_x) * 4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _run_suite(script: str, json_path: str, quick: bool, log_path: str) -> dict[str, Any]:
    cmd = [sys.executable, script, "--json", json_path] + (["--quick"] if quick else [])
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=TIMEOUT_S["quick" if quick else "full"],
                                  cwd=os.path.dirname(os.path.dirname(os.path.abspath(script))))
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "seconds": time.perf_counter() - t0, "log": log_path}
    info: dict[str, Any] = {"status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}",
                            "seconds": round(time.perf_counter() - t0, 2), "log": log_path}
    if proc.returncode == 0 and not os.path.exists(json_path):
        info["status"] = "no json written"
    return info


def run(bench_dir: str, out_dir: str, quick: bool = False, only: Sequence[str] | None = None,
        echo: bool = True) -> Report:
    """Run the suites, write ``results.json`` and ``throughput.png`` into ``out_dir``."""
    suites = discover(bench_dir)
    if only:
        unknown = [s for s in only if s not in suites]
        if unknown:
            raise ValueError(f"unknown suite(s) {', '.join(unknown)}; available: {', '.join(suites)}")
        suites = {s: p for s, p in suites.items() if s in only}
    if not suites:
        raise ValueError(f"no bench_*.py scripts in {bench_dir!r}")
    os.makedirs(out_dir, exist_ok=True)
    workloads: list[Workload] = []
    status: dict[str, dict[str, Any]] = {}
    for suite, script in suites.items():
        if echo:
            print(f"running {suite} ({os.path.basename(script)}{' --quick' if quick else ''}) ...",
                  end="", flush=True, file=sys.stderr)
        json_path = os.path.join(out_dir, f"{suite}.json")
        if os.path.exists(json_path):
            os.remove(json_path)
        info = _run_suite(script, json_path, quick, os.path.join(out_dir, f"{suite}.log"))
        if info["status"] == "ok":
            try:
                with open(json_path, encoding="utf-8") as fh:
                    data = json.load(fh)
            except (OSError, ValueError) as exc:
                info["status"] = f"unreadable json: {exc}"
            else:
                try:
                    got = read_results(suite, data)
                except ValueError as exc:
                    info["status"] = f"bad results: {exc}"
                else:
                    workloads.extend(got)
                    info["workloads"] = len(got)
                    info["json"] = json_path
        status[suite] = info
        if echo:
            print(f" {info['status']} in {info['seconds']:.1f} s", file=sys.stderr)
    report = Report(workloads, status)
    chart = write_chart(workloads, os.path.join(out_dir, "throughput.png"))
    report.chart = chart
    payload = {"quick": quick, "machine": machine_info(), "suites": status,
               "workloads": [w.as_dict() for w in workloads]}
    results = os.path.join(out_dir, "results.json")
    with open(results, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2, default=str)
        fh.write("\n")
    lines = [summary_table(workloads), ""]
    lines.append("fastops / peer: fastops rows/s over the fastest peer measured in the same run "
                 "(> 1: fastops is faster); medians of each suite's repeats.")
    for suite, info in status.items():
        if info["status"] != "ok":
            lines.append(f"suite {suite}: {info['status']} (log: {info['log']})")
    lines.append(f"wrote {results}" + (f" and {chart}" if chart else ""))
    report.text = "\n".join(lines)
    return report
