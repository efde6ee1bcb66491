"""The benchmark report behind ``fastops bench``.

Runs every ``bench/bench_*.py`` script (each takes ``--quick`` and
``--json PATH`` and measures fastops and its peers in the same process),
collects their JSON, prints one summary table (workload, fastops rows/s,
best peer, ratio), and writes ``results.json`` and ``throughput.png`` (a bar
chart per workload, fastops against its peers) into the output directory.

The scripts write JSON of a few shapes; :func:`normalise` reads them all:

- ``{"results": [{"workload", "engine", "rows_per_s", "peer"?}, ...]}`` (also
  ``impl`` for the engine, ``events_per_s`` / ``updates_per_s`` for the rate,
  and, without ``workload``, the row's other text fields as its name);
- ``{"results": [{"P": 8, "fastops Mrows/s": ..., "polars Mrows/s": ...}, ...]}``
  (one workload per row, engines as ``<name> Mrows/s`` / ``Mvalues/s`` columns);
- ``{"workloads": {"W1": {"fastops": {"events_per_s"}, "duckdb": {...}}, ...}}``.

matplotlib is optional: without it the chart is skipped with a message.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Report", "Workload", "discover", "normalise", "run", "summary_table", "write_chart"]

SUITE_ORDER = ("partition", "window", "sketch", "pipeline", "checkpoint", "sql", "join")
TIMEOUT_S = {"quick": 300, "full": 3600}


@dataclass
class Workload:
    """One measured workload: fastops' rows/s and each peer's."""

    suite: str
    name: str
    fastops: float | None
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
        if best is None or self.fastops is None or best[1] <= 0:
            return None
        return self.fastops / best[1]

    def as_dict(self) -> dict:
        best = self.best_peer
        return {"suite": self.suite, "workload": self.name, "fastops_engine": self.fastops_engine,
                "fastops_rows_per_s": self.fastops, "peers_rows_per_s": dict(self.peers),
                "best_peer": best[0] if best else None,
                "best_peer_rows_per_s": best[1] if best else None, "ratio": self.ratio}


@dataclass
class Report:
    workloads: list[Workload]
    suites: dict[str, dict]  # suite -> {"status", "seconds", "json", "error"?}
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


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if v == v and v >= 0 else None


_RATE_KEYS = ("rows_per_s", "events_per_s", "updates_per_s", "values_per_s")
_ENGINE_KEYS = ("engine", "impl", "implementation")
_MRATE = re.compile(r"^(.+) M(?:rows|values|events)/s$")  # "polars Mrows/s" -> "polars"


def _is_fastops(engine: str) -> bool:
    return engine.lower().startswith("fastops")


def _from_result_rows(suite: str, rows: list) -> list[Workload]:
    out: dict[str, Workload] = {}
    engines: dict[str, set] = {}
    for r in rows:
        if not isinstance(r, dict):
            continue
        rate_cols = {m.group(1): _num(v) * 1e6 for k, v in r.items()
                     if isinstance(k, str) and (m := _MRATE.match(k)) and _num(v) is not None}
        if rate_cols:  # engines as columns; the other scalar fields name the workload
            label = ", ".join(f"{k}={v}" for k, v in r.items()
                              if not isinstance(k, str) or (" " not in k and isinstance(v, (int, str))
                                                            and not isinstance(v, bool)))
            name = f"{suite}: {label}" if label else suite
            fast = {k: v for k, v in rate_cols.items() if _is_fastops(k)}
            peers = {k: v for k, v in rate_cols.items() if not _is_fastops(k)}
            eng = max(fast, key=fast.get) if fast else "fastops"
            out[name] = Workload(suite, name, fast.get(eng), peers, eng)
            continue
        rate_key = next((k for k in _RATE_KEYS if _num(r.get(k)) is not None), None)
        if rate_key is None:
            rate_key = next((k for k in r if isinstance(k, str) and k.endswith("_per_s")
                             and _num(r[k]) is not None), None)
        if rate_key is None:
            continue
        rate = _num(r[rate_key])
        engine_key = next((k for k in _ENGINE_KEYS if k in r), None)
        engine = str(r[engine_key]) if engine_key else "fastops"
        if "workload" in r:
            label = str(r["workload"])
        else:  # the other text fields name the workload ("hll p=14 / int64")
            label = " / ".join(str(v) for k, v in r.items()
                               if k != engine_key and isinstance(v, str) and k not in ("peer",))
        name = f"{suite}: {label}" if label else suite
        w = out.setdefault(name, Workload(suite, name, None))
        is_peer = r.get("peer")
        if is_peer is None:
            is_peer = not _is_fastops(engine)
        if is_peer:
            w.peers[engine] = max(rate, w.peers.get(engine, 0.0))
        else:
            engines.setdefault(name, set()).add(engine)
            # the fastest variant, unless one is named after the suite ("fastops SQL" in "sql")
            named = suite.lower() in engine.lower()
            held = suite.lower() in w.fastops_engine.lower() and w.fastops is not None
            if w.fastops is None or (named and not held) or (named == held and rate > w.fastops):
                w.fastops, w.fastops_engine = rate, engine
    for name, w in out.items():  # several fastops variants: say which one is compared
        if len(engines.get(name, ())) > 1:
            w.name = f"{w.name} ({w.fastops_engine})"
    return list(out.values())


def _from_workloads(suite: str, workloads: dict) -> list[Workload]:
    out = []
    for name, engines in workloads.items():
        if not isinstance(engines, dict):
            continue
        rates = {}
        for eng, m in engines.items():
            if isinstance(m, dict):
                r = _num(m.get("events_per_s", m.get("rows_per_s")))
                if r is not None:
                    rates[eng] = r
        if not rates:
            continue
        fast = {k: v for k, v in rates.items() if _is_fastops(k)}
        peers = {k: v for k, v in rates.items() if not _is_fastops(k)}
        eng = max(fast, key=fast.get) if fast else "fastops"
        out.append(Workload(suite, f"{suite}: {name}", fast.get(eng), peers, eng))
    return out


def normalise(suite: str, data: Any) -> list[Workload]:
    """The workloads of one suite's JSON (see module docs for the shapes read)."""
    if not isinstance(data, dict):
        return []
    if isinstance(data.get("results"), list):
        got = _from_result_rows(suite, data["results"])
        if got:
            return got
    if isinstance(data.get("workloads"), dict):
        return _from_workloads(suite, data["workloads"])
    return []


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
        best = w.best_peer
        rows.append([w.name, _rate(w.fastops), best[0] if best else "-", _rate(best[1]) if best else "-",
                     f"{w.ratio:.2f}x" if w.ratio is not None else "-"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = "+" + "+".join("-" * (x + 2) for x in widths) + "+"
    fmt = lambda cells: "|" + "|".join(
        f" {c.ljust(x) if i == 0 else c.rjust(x)} " for i, (c, x) in enumerate(zip(cells, widths))) + "|"
    return "\n".join([line, fmt(head), line, *[fmt(r) for r in rows], line])


def write_chart(workloads: Sequence[Workload], path: str) -> str | None:
    """Horizontal bars per workload: fastops and the fastest peer of the same
    run (log scale), labelled with the ratio. Returns the path, or None (with a message) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("chart skipped: matplotlib is not installed (pip install matplotlib, or "
              "pip install 'fastops[bench]')", file=sys.stderr)
        return None
    shown = [w for w in workloads if w.fastops is not None]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(shown) + 1.6))
    h = 0.38
    ys = list(range(len(shown)))
    ax.barh([y - h / 2 for y in ys], [w.fastops for w in shown], height=h, label="fastops",
            color="#1f77b4")
    peer_y = [y + h / 2 for y, w in zip(ys, shown) if w.best_peer]
    peer_x = [w.best_peer[1] for w in shown if w.best_peer]
    ax.barh(peer_y, peer_x, height=h, label="fastest peer (same run)", color="#ff7f0e")
    for y, w in zip(ys, shown):
        best = w.best_peer
        if best:
            ax.text(best[1], y + h / 2, f" {best[0]}", va="center", fontsize=7)
        if w.ratio is not None:
            ax.text(w.fastops, y - h / 2, f" {w.ratio:.2f}x", va="center", fontsize=7, weight="bold")
    ax.set_yticks(ys)
    ax.set_yticklabels([w.name for w in shown], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("rows per second (log scale, higher is better); label: fastops / fastest peer")
    ax.set_title("fastops benchmark report")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlim(right=max([w.fastops for w in shown] + peer_x) * 4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _run_suite(script: str, json_path: str, quick: bool, log_path: str) -> dict:
    cmd = [sys.executable, script, "--json", json_path] + (["--quick"] if quick else [])
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=TIMEOUT_S["quick" if quick else "full"],
                                  cwd=os.path.dirname(os.path.dirname(os.path.abspath(script))))
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "seconds": time.perf_counter() - t0, "log": log_path}
    info = {"status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}",
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
    status: dict[str, dict] = {}
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
                got = normalise(suite, data)
                workloads.extend(got)
                info["workloads"] = len(got)
                info["json"] = json_path
            except (OSError, ValueError) as exc:
                info["status"] = f"unreadable json: {exc}"
        status[suite] = info
        if echo:
            print(f" {info['status']} in {info['seconds']:.1f} s", file=sys.stderr)
    report = Report(workloads, status)
    chart = write_chart(workloads, os.path.join(out_dir, "throughput.png"))
    report.chart = chart
    machine = None
    try:
        sys.path.insert(0, bench_dir)
        from _common import machine_info  # type: ignore[import-not-found]

        machine = machine_info()
    except ImportError:
        pass
    finally:
        if sys.path and sys.path[0] == bench_dir:
            sys.path.pop(0)
    payload = {"quick": quick, "machine": machine, "suites": status,
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
