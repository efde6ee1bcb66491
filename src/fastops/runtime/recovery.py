"""What recovery does before a job (re)starts: pick the checkpoint, check that
it belongs to this job, and make the sinks' committed output agree with it.

Falling back past a damaged checkpoint is never silent: each one skipped is
logged (logger ``fastops``) and reported in ``JobResult.skipped_checkpoints``.
Restoring a checkpoint older than a sink's last committed epoch rolls that
sink's later output back (file sinks move it into a ``_rolled_back_after_chk-N``
folder) with a warning naming it, so the replay cannot double it; starting from
no checkpoint while a sink holds committed output is refused unless that sink
was asked to overwrite.
"""
from __future__ import annotations

import logging
import os
from typing import Any

from fastops.connectors.base import is_transactional
from fastops.runtime.checkpoint import CheckpointStorage, Manifest, load_snapshot
from fastops.runtime.graph import Node
from fastops.runtime.plan import PhysicalPlan, graph_difference, graph_structure

STRUCTURE = ("config", "schema", "inputs")  # what must match for a restore (parallelism may change)

log = logging.getLogger("fastops")


def restore_point(storage: CheckpointStorage | None, restore: Any, plan: PhysicalPlan,
                  skipped: list) -> Manifest | None:
    """The checkpoint to resume from (``restore``: "latest", the path of a
    checkpoint or savepoint, or None / False for a fresh start); ValueError
    if it was taken from another job."""
    if restore is None or restore is False:
        return None
    if restore == "latest":
        manifest = storage.latest(skipped) if storage is not None else None
    else:
        manifest = load_snapshot(os.fspath(restore))
    if manifest is not None:
        check_same_job(manifest, plan)
    return manifest


def check_same_job(manifest: Manifest, plan: PhysicalPlan) -> None:
    """Allowed: the same job, at the same or other parallelisms. Refused,
    naming the difference: another job, or another max_parallelism."""
    what = ("savepoint" if manifest.savepoint else
            "the final checkpoint of a finished run" if manifest.finished else "checkpoint")
    if manifest.max_parallelism is not None and manifest.max_parallelism != plan.max_parallelism:
        raise ValueError(
            f"{what} {manifest.path!r} was taken with max_parallelism={manifest.max_parallelism}, the job "
            f"now has max_parallelism={plan.max_parallelism}: keyed state is kept in that many key groups, "
            f"which cannot be split again. Run the job with max_parallelism={manifest.max_parallelism}")
    if manifest.fingerprint == plan.fingerprint() or (manifest.structure and manifest.structure == plan.structure()):
        return  # the same job (at other parallelisms: its state moves by key group)
    raise ValueError(
        f"{what} {manifest.path!r} was taken from a different job graph: "
        f"{graph_difference(graph_structure(manifest.graph), graph_structure(plan.describe_graph()), STRUCTURE)}. "
        "Refusing to restore it: run the job it was taken from, use another checkpoint_dir, or start "
        "afresh with restore=None")


def reconcile_sinks(sinks: list[Node], manifest: Manifest | None) -> list[str]:
    """Roll back the sinks' committed output of epochs after ``manifest``
    (everything, for a fresh start); returns what moved, each also logged."""
    checkpoint_id = manifest.checkpoint_id if manifest is not None else 0
    moved: list[str] = []
    for node in sinks:
        sink = node.factory() if node.factory is not None else None
        if is_transactional(sink):
            moved += sink.roll_back(checkpoint_id)
    if moved:
        since = f"checkpoint {checkpoint_id}" if checkpoint_id else "the start (no checkpoint)"
        log.warning("recovery replays from %s, so the output committed after it was rolled back "
                    "(it would be written again): %s", since, "; ".join(moved))
    return moved
