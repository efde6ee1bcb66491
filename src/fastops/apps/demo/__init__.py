"""The demo job of ``fastops demo``: a mobile game's reward engine over generated player events."""
from __future__ import annotations

from fastops.apps.demo.generator import (
    DEFAULT_EVENTS,
    EVENT_TYPES,
    SCHEMA,
    START_MS,
    DemoConfig,
    DemoResult,
    PerWindow,
    PlayerEventSource,
    Progress,
    RewardFilter,
    build_job,
    format_grid,
    generate_batch,
    generate_events,
    pops_per_pane,
    report,
    run_demo,
    run_demo_sql,
    sql_available,
    summary,
)
from fastops.apps.demo.generator import _collect as _collect  # the tests add collect sinks with it
from fastops.connectors.sources import END as END  # what a PlayerEventSource reader returns at the end

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
