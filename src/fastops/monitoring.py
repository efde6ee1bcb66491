"""A running job over HTTP: Prometheus metrics and the live metrics as JSON.

``env.execute(ui=8081)`` (or ``execute_async(ui=...)``; ``ui=0`` picks a free
port, ``JobClient.ui_url`` says which) serves, on loopback unless a host is
given, while the job runs:

- ``/metrics``: the Prometheus text format (through ``prometheus_client``),
  with Flink's metric names where one exists, labelled by job, task and
  subtask (``fastops_numRecordsInPerSecond{task="...",subtask="0"}``), and
  fastops' own (source backlog, end-to-end latency quantiles, rescales and
  autoscaling decisions);
- ``/api/metrics``: ``JobClient.metrics()`` as JSON; ``/api/job``: its ``job`` part;
- ``/``: a page (``monitoring.html``, small SVG and script of its own, so it
  works offline) with the job graph, each operator coloured by its busy /
  backpressured share as Flink colours it, live throughput and watermark-lag
  charts, the checkpoints and the autoscaler's decisions, polling the JSON.

Every request reads ``JobClient.metrics()``, which copies sampled counters:
serving never touches the tasks. The server stops when the job ends (or
stays up with the final figures with ``ui_keep=True``, until ``stop()``).
It sits beside the DataStream face because ``execute(ui=...)`` starts it.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fastops.core.durations import parse_positive_duration

__all__ = ["DEFAULTS", "MetricsServer", "parse_ui"]

# the page at /: the job graph coloured by busy / backpressured share, live
# charts and tables, polling /api/metrics; one file, no build step, no CDN
PAGE = Path(__file__).with_name("monitoring.html")

# Flink's task metric name -> the key of a task in JobClient.metrics()["tasks"]
TASK_GAUGES = {
    "numRecordsIn": "rows_in",
    "numRecordsOut": "rows_out",
    "numRecordsInPerSecond": "rows_in_per_s",
    "numRecordsOutPerSecond": "rows_out_per_s",
    "busyTimeMsPerSecond": "busy_ms_per_s",
    "idleTimeMsPerSecond": "idle_ms_per_s",
    "backPressuredTimeMsPerSecond": "backpressured_ms_per_s",
    "currentInputWatermark": "watermark",
}


# what execute() uses when its own ui argument is None: set by `fastops run --ui` for
# the jobs of the file it runs (and put back afterwards); announce: print where it serves
DEFAULTS: dict[str, Any] = {"ui": None, "keep": False, "announce": False}


def parse_ui(ui: Any) -> tuple[str, int] | None:
    """``(host, port)`` of an ``execute(ui=...)`` argument: a port (0: any
    free one), ``True`` (8081, Flink's), ``"host:port"``, or None / False."""
    if ui is None or ui is False:
        return None
    if ui is True:
        return "127.0.0.1", 8081
    host, port = "127.0.0.1", ui
    if isinstance(ui, str):
        host, _, port_s = ui.rpartition(":")
        host = host or "127.0.0.1"
        if not port_s.isdigit():
            raise ValueError(f"ui must be a port, True or 'host:port', got {ui!r}")
        port = int(port_s)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"ui must be a port in [0, 65535], True or 'host:port', got {ui!r}")
    return host, port


class _Collector:
    """Builds the metric families from one ``metrics()`` read per scrape."""

    def __init__(self, client: Any, window_s: float):
        self.client = client
        self.window_s = window_s

    def collect(self) -> Iterator[Any]:
        # deferred: prometheus_client is optional (the ``ui`` extra), needed only when serving
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        m = self.client.metrics(f"{int(self.window_s * 1000)}ms")
        job = m["job"]
        base = {"job_id": job["id"], "job_name": job["name"]}
        task_labels = [*base, "task", "subtask"]
        for name, key in TASK_GAUGES.items():
            family = GaugeMetricFamily(f"fastops_{name}", f"{name} of a task (Flink's name)", labels=task_labels)
            for t in m["tasks"]:
                value = t.get(key)
                if value is not None:
                    family.add_metric([*base.values(), t["task"], str(t["subtask"])], float(value))
            yield family
        backlog = GaugeMetricFamily("fastops_source_backlog", "rows ready at a source and not read",
                                    labels=[*base, "operator"])
        for op in m["operators"]:
            if op["is_source"] and op.get("backlog") is not None:
                backlog.add_metric([*base.values(), op["name"]], float(op["backlog"]))
        yield backlog
        latency = GaugeMetricFamily("fastops_latency_ms", "source read -> sink, over the window (latency markers)",
                                    labels=[*base, "quantile"])
        for q, key in (("0.5", "p50_ms"), ("0.99", "p99_ms"), ("1", "max_ms")):
            if job["latency"][key] is not None:
                latency.add_metric([*base.values(), q], float(job["latency"][key]))
        yield latency
        cp = m["checkpoints"]
        yield _gauge(GaugeMetricFamily, "numberOfCompletedCheckpoints", "checkpoints completed", base,
                     cp["completed"])
        if cp["last"] is not None:
            yield _gauge(GaugeMetricFamily, "lastCheckpointDuration", "the last checkpoint's duration (ms)", base,
                         cp["last"]["duration_ms"])
            yield _gauge(GaugeMetricFamily, "lastCheckpointSize", "the last checkpoint's state (bytes)", base,
                         cp["last"]["size_bytes"])
        late = CounterMetricFamily("fastops_late_rows", "rows a task's windows or joins found late",
                                   labels=task_labels)
        for t in m["tasks"]:
            late.add_metric([*base.values(), t["task"], str(t["subtask"])], float(t["late_rows"]))
        yield late
        reason = m["shedding"].get("mode", "none")  # how the rows were chosen: random, semantic or window
        shed = CounterMetricFamily("fastops_rows_shed", "rows a task dropped to shed load",
                                   labels=[*task_labels, "reason"])
        for t in m["tasks"]:
            shed.add_metric([*base.values(), t["task"], str(t["subtask"]), reason], float(t["shed_rows"]))
        yield shed
        if m["shedding"]:  # a QoS job
            yield _gauge(GaugeMetricFamily, "drop_fraction", "the share of rows the load shedder drops now", base,
                         m["shedding"]["drop_fraction"])
            offered = CounterMetricFamily("fastops_rows_offered", "rows the sources read, before any shedding",
                                          labels=list(base))
            offered.add_metric(list(base.values()), float(m["shedding"]["rows_offered"]))
            yield offered
        yield _gauge(GaugeMetricFamily, "numRestarts", "restarts after failures", base, job["restarts"])
        yield _gauge(GaugeMetricFamily, "uptime", "time since the job started (ms)", base, 1000.0 * job["uptime_s"])
        rescales = CounterMetricFamily("fastops_rescales", "live rescales", labels=list(base))
        rescales.add_metric(list(base.values()), float(len(m["rescales"])))
        yield rescales
        decisions = CounterMetricFamily("fastops_scaling_decisions", "autoscaler decisions, applied or held",
                                        labels=[*base, "applied"])
        applied = sum(1 for d in m["scaling"] if d["applied"])
        decisions.add_metric([*base.values(), "true"], float(applied))
        decisions.add_metric([*base.values(), "false"], float(len(m["scaling"]) - applied))
        yield decisions


def _gauge(family: Any, name: str, doc: str, base: dict[str, str], value: float) -> Any:
    g = family(f"fastops_{name}", doc, labels=list(base))
    g.add_metric(list(base.values()), float(value))
    return g


class MetricsServer:
    """Serves one job's metrics (see the module docs) from a daemon thread."""

    def __init__(self, client: Any, host: str = "127.0.0.1", port: int = 0, window: Any = "5s"):
        # deferred: prometheus_client is optional (the ``ui`` extra)
        try:
            from prometheus_client import CollectorRegistry, generate_latest
        except ImportError:
            raise ImportError("serving a job's metrics needs prometheus_client: pip install 'fastops[ui]'") from None
        self.client = client
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(client, parse_positive_duration(window, "window") / 1000.0))
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path in ("/", "/index.html"):
                    body, kind = PAGE.read_bytes(), "text/html; charset=utf-8"
                elif path == "/metrics":
                    body, kind = generate_latest(registry), "text/plain; version=0.0.4; charset=utf-8"
                elif path in ("/api/metrics", "/api/job"):
                    m = server.client.metrics()
                    body = json.dumps(m if path == "/api/metrics" else m["job"], default=str).encode()
                    kind = "application/json"
                else:
                    self.send_error(404, "not found: /, /metrics, /api/metrics and /api/job are served")
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet: a scrape every few seconds
                return

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        address = self.httpd.server_address
        self.host, self.port = str(address[0]), int(address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fastops metrics server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, keep: bool = False) -> MetricsServer:
        """Serve; stop when the job ends unless ``keep``."""
        self._thread.start()
        if not keep:
            threading.Thread(target=self._stop_at_end, name="fastops metrics server stop", daemon=True).start()
        return self

    def _stop_at_end(self) -> None:
        while not self.client.done():
            time.sleep(0.2)
        self.stop()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
