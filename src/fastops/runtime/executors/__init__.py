"""Executors by name: ``threads`` (a thread per task) and ``single`` (every
task in the driver's thread). See ``base.Executor`` for the protocol."""
from __future__ import annotations

from fastops.runtime.executors.base import Attempt, AttemptResult, Executor
from fastops.runtime.executors.local import LocalExecutor
from fastops.runtime.executors.single import SingleThreadExecutor
from fastops.runtime.executors.threads import ThreadExecutor

EXECUTORS: dict[str, type[LocalExecutor]] = {"threads": ThreadExecutor, "single": SingleThreadExecutor}

__all__ = ["EXECUTORS", "Attempt", "AttemptResult", "Executor", "SingleThreadExecutor", "ThreadExecutor",
           "create_executor"]


def create_executor(name: str, channel_capacity: int = 8) -> Executor:
    """A new executor of kind ``name`` (one per job: it keeps the job's cancel)."""
    try:
        kind = EXECUTORS[name]
    except KeyError:
        raise ValueError(f"unknown executor {name!r}; expected one of {sorted(EXECUTORS)}") from None
    return kind(channel_capacity)
