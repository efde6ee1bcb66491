"""What the runtime knows of sources and sinks: protocols, never concrete classes.

A connector (a file format, a broker, a database) implements these; the
runtime reads through ``Source`` / ``Reader`` and commits through
``TransactionalSink`` without importing the connector. A class may subclass a
protocol to inherit its default methods (``class MySource(Source)``) or just
provide the same attributes and methods.

Sources
    A ``Source`` describes an input; ``open(index, parallelism, position)``
    gives the ``Reader`` of split ``index`` of ``parallelism``. ``read()``
    returns a ``pyarrow.RecordBatch``, ``None`` (no data right now: the source
    is idle) or ``END`` (nothing more, ever). ``position()`` is how far the
    reader got, JSON-serialisable: a checkpoint stores it, and a replayable
    source opened with it continues right after it. A source that can change
    its parallelism (as Flink reassigns unfinished splits) has
    ``rescale_positions(positions, parallelism)``: from the positions of the
    old readers, those of the new ones; the method is optional (a source
    without it keeps its parallelism).

Sinks
    A sink is the last operator of a chain (see ``fastops.operators.base``):
    it writes what it gets and emits nothing. A ``TransactionalSink`` follows
    two-phase commit driven by checkpoints (see ``fastops.connectors.sinks``
    for the base class that implements the bookkeeping): rows between two
    checkpoints form one transaction, an *epoch*; the barrier of checkpoint
    ``n`` seals epoch ``n`` (``snapshot_barrier``, whose handle goes into the
    checkpoint) and ``commit(n)`` makes every sealed epoch up to ``n`` visible
    once the checkpoint is complete. On recovery ``recover(handles, n)``
    commits checkpoint ``n``'s epochs and drops everything else uncommitted.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from typing import TypeGuard

__all__ = ["END", "MAX_BATCH_SIZE", "Reader", "Sink", "Source", "TransactionalSink", "check_batch_size",
           "is_transactional"]


class _End:
    """The type of ``END``: one instance."""

    def __repr__(self) -> str:
        return "END"

    def __reduce__(self) -> str:
        return "END"  # unpickles as this module's END: ``is END`` holds in another process


END = _End()  # a reader has nothing more, ever


@runtime_checkable
class Reader(Protocol):
    """Reads one split of a source, one batch at a time."""

    def read(self) -> Any:
        """A ``pyarrow.RecordBatch``, ``None`` (nothing right now) or ``END``."""
        ...

    def position(self) -> Any:
        """How far the reader got (JSON-serialisable); None if it cannot say."""
        return None

    def close(self) -> None:
        """Release files or connections; called once, also after a failure."""
        return None

    def backlog(self) -> int | None:
        """Rows ready to be read and not read yet: a paced source behind its
        schedule, the unread rows of files, a broker's lag; None when unknown.
        The autoscaler sizes the job to catch up with it. Called from the
        metrics thread while the reader reads: cheap, never blocking."""
        return None

    def arrival_time(self) -> float | None:
        """When the rows of the batch last read arrived at the source (wall
        clock, ``time.time()``): a broker's append time, a paced schedule's
        offer; None: as they were read. Latency is measured from it."""
        return None

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        """``isinstance(x, Reader)`` asks for the members every reader has:
        ``backlog`` and ``arrival_time`` are optional."""
        return _has_members(cls, Reader, other, optional={"backlog", "arrival_time"})


@runtime_checkable
class Source(Protocol):
    """A named input, possibly splittable and replayable.

    ``replayable`` declares that ``open(..., position)`` continues right after
    ``position``: checkpoints need it for exactly-once results.
    """

    name: str = "source"
    replayable: bool = True

    def splits(self) -> int:
        """How many readers can share the input (1: not splittable)."""
        return 1

    def schema(self) -> pa.Schema | None:
        """The batches' schema when known before reading, else None."""
        return None

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        """The reader of split ``index`` of ``parallelism``, from ``position``
        (None: from the start)."""
        ...

    def rescale_positions(self, positions: list, parallelism: int) -> list:
        """The positions of ``parallelism`` new readers (opened as splits ``0 ..
        parallelism - 1`` of ``parallelism``) that together read every row the
        old readers had not read, each once, and nothing they had read:
        ``positions[i]`` is where old split ``i`` of ``len(positions)`` got
        (None: not started). Optional; this default keeps the parallelism (the
        same number of readers keep their positions) and raises ValueError for
        another."""
        if parallelism == len(positions):
            return list(positions)
        raise ValueError(f"source {self.name!r} cannot change its parallelism "
                         f"(from {len(positions)} to {parallelism})")

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        """``isinstance(x, Source)`` asks for the members every source has:
        ``rescale_positions`` is optional."""
        return _has_members(cls, Source, other, optional={"rescale_positions"})


def _has_members(cls: type, protocol: type, other: type, optional: set[str]) -> Any:
    """True when ``other`` has every public member of ``protocol`` but the
    ``optional`` ones (for subclasses of the protocol: the default check)."""
    if cls is not protocol:
        return NotImplemented
    required = {name for name in vars(protocol) if not name.startswith("_")} - optional
    have = {name for klass in other.__mro__ for name in vars(klass)}
    return True if required <= have else NotImplemented


@runtime_checkable
class Sink(Protocol):
    """An operator that writes its input out and emits nothing downstream."""

    name: str
    transactional: bool  # True: a TransactionalSink

    def write(self, batch: pa.RecordBatch) -> None:
        """Write one batch (the operator's ``process`` calls it)."""
        ...


@runtime_checkable
class TransactionalSink(Sink, Protocol):
    """A two-phase commit sink (see the module docs). ``epoch`` numbers the open
    transaction: the id of the checkpoint that will seal it."""

    epoch: int

    def begin(self, epoch: int) -> None:
        """Start a transaction for the rows up to checkpoint ``epoch``."""
        ...

    def snapshot_barrier(self, checkpoint_id: int) -> Any:
        """Barrier ``checkpoint_id`` passed: seal the open transaction, begin the
        next; returns the JSON-serialisable handle the checkpoint stores."""
        ...

    def pre_commit(self, checkpoint_id: int) -> Any:
        """Seal the open transaction (at the end of input); returns its handle."""
        ...

    def commit(self, checkpoint_id: int) -> None:
        """Make every sealed transaction up to ``checkpoint_id`` visible (idempotent)."""
        ...

    def abort(self) -> None:
        """Drop all work that was not committed."""
        ...

    def recover(self, handles: list, checkpoint_id: int) -> None:
        """Restart after ``checkpoint_id``: commit its ``handles``, abort the rest."""
        ...

    def finished(self) -> None:
        """The job ended and every epoch is committed."""
        ...

    # Called on a sink made for the job (not opened) before it runs, for all
    # parallel instances at once; checkpoint_id 0 means "from the start".
    def committed_after(self, checkpoint_id: int) -> list[str]:
        """Committed output of epochs after ``checkpoint_id``."""
        ...

    def roll_back(self, checkpoint_id: int) -> list[str]:
        """Take away the committed output of epochs after ``checkpoint_id``
        (before a replay from it); returns what was moved where."""
        ...


def is_transactional(operator: Any) -> TypeGuard[TransactionalSink]:
    """Whether ``operator`` is a two-phase commit sink (it says so by ``transactional = True``)."""
    return getattr(operator, "transactional", False) is True


MAX_BATCH_SIZE = 2**31 - 1  # rows; Arrow's scanners take a C int


def check_batch_size(value: Any) -> int:
    """``batch_size`` as an int in ``[1, 2**31 - 1]``, else TypeError / ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"batch_size must be an int of rows, got {type(value).__name__} {value!r}")
    if not 1 <= value <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be between 1 and 2**31 - 1 rows, got {value}")
    return int(value)
