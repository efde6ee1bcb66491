"""The demo job of ``fastops demo``: a mobile game's reward engine over generated player events.

Run it with ``fastops demo`` (or ``python -m fastops demo``). One module per concern:

- :mod:`~fastops.apps.demo.generator`: the seeded, vectorised generator of player events
  (:class:`DemoConfig`, :func:`generate_batch`, :class:`PlayerEventSource`);
- :mod:`~fastops.apps.demo.operators`: the job's own operators (the per-pane combiner, the
  reward filter, the leaderboard's ranking);
- :mod:`~fastops.apps.demo.job`: the job in DataStream form (:func:`build_job`, :func:`run_demo`);
- :mod:`~fastops.apps.demo.sql`: the same rules in SQL (:func:`run_demo_sql`);
- :mod:`~fastops.apps.demo.results`: the result tables, their grids and the summary;
- :mod:`~fastops.apps.demo.progress`: the progress bar.
"""
from __future__ import annotations

from fastops.apps.demo.generator import (
    DEFAULT_EVENTS,
    EVENT_TYPES,
    SCHEMA,
    START_MS,
    DemoConfig,
    PlayerEventSource,
    generate_batch,
    generate_events,
)
from fastops.apps.demo.job import _collect as _collect  # the tests add collect sinks with it
from fastops.apps.demo.job import build_job, run_demo
from fastops.apps.demo.operators import PerWindow, RewardFilter, pops_per_pane
from fastops.apps.demo.progress import Progress
from fastops.apps.demo.results import DemoResult, format_grid, report, summary
from fastops.apps.demo.sql import run_demo_sql, sql_available
from fastops.connectors.base import END as END  # what a PlayerEventSource reader returns at the end

__all__ = [
    "DEFAULT_EVENTS",
    "EVENT_TYPES",
    "SCHEMA",
    "START_MS",
    "DemoConfig",
    "DemoResult",
    "PerWindow",
    "PlayerEventSource",
    "Progress",
    "RewardFilter",
    "build_job",
    "format_grid",
    "generate_batch",
    "generate_events",
    "pops_per_pane",
    "report",
    "run_demo",
    "run_demo_sql",
    "sql_available",
    "summary",
]
