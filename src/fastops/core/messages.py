"""Control messages that travel on channels between tasks, beside record batches."""
from __future__ import annotations

from dataclasses import dataclass

MIN_WATERMARK = -(2**63)
MAX_WATERMARK = 2**63 - 1  # sent when a bounded input ends: fires every window


@dataclass(frozen=True)
class Watermark:
    """No more rows with event time <= ``t_ms`` will follow on this channel."""

    t_ms: int


@dataclass(frozen=True)
class Idle:
    """The sender has no data for a while: don't let it hold the watermark back."""


@dataclass(frozen=True)
class CheckpointBarrier:
    """Separates the rows before and after checkpoint ``checkpoint_id``."""

    checkpoint_id: int


@dataclass(frozen=True)
class LatencyMarker:
    """A source read a batch at ``t`` (wall clock, s) just before this marker:
    it follows that batch through the queues, and the tasks that write to
    sinks record how long it took (as Flink's latency markers, they pass
    operators by)."""

    t: float


@dataclass(frozen=True)
class EndOfStream:
    """The sender will send nothing more."""


END_OF_STREAM = EndOfStream()
IDLE = Idle()
