"""Executors by name: ``threads`` (a thread per task), ``single`` (every
task in the driver's thread) and ``ray`` (a Ray actor per task; the optional
``fastops[ray]``). See ``base.Executor`` for the protocol."""
from __future__ import annotations

from typing import Any

from fastops.runtime.executors.base import Attempt, AttemptResult, Executor
from fastops.runtime.executors.local import LocalExecutor
from fastops.runtime.executors.single import SingleThreadExecutor
from fastops.runtime.executors.threads import ThreadExecutor

EXECUTORS: dict[str, Any] = {"threads": ThreadExecutor, "single": SingleThreadExecutor, "ray": None}

__all__ = ["EXECUTORS", "Attempt", "AttemptResult", "Executor", "LocalExecutor", "SingleThreadExecutor",
           "ThreadExecutor", "create_executor"]


def create_executor(name: str, channel_capacity: int = 8, options: dict | None = None) -> Executor:
    """A new executor of kind ``name`` (one per job: it keeps the job's cancel);
    ``options``: the executor's own (``ray``: ``address``, ``init``)."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; expected one of {sorted(EXECUTORS)}")
    if name == "ray":  # imported here: Ray is optional and slow to import
        from fastops.runtime.executors.ray import RayExecutor
        return RayExecutor(channel_capacity, **(options or {}))
    return EXECUTORS[name](channel_capacity)
