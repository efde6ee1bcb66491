"""Aggregates for window and keyed aggregation, and the plug-in protocol.

Built-ins: ``count()`` (rows), ``count(col)`` (non-null values), ``sum``,
``min``, ``max``, ``mean``, ``var`` / ``stddev`` (``ddof=1`` sample, ``ddof=0``
population; Welford updates, Chan merges), ``first`` / ``last`` (by event
time). SQL null rules: null inputs are skipped and a slot without a non-null
value gives null (``count`` gives 0).

Types
    ``sum`` of integers is int64; a sum that leaves the int64 range raises
    :class:`SumOverflowError` naming the aggregate and its column (never a
    wrapped value; see :func:`sum`). ``sum`` of floats is float64 with Neumaier
    compensation. ``mean``/``var``/``stddev`` are float64. ``min``, ``max``,
    ``first``, ``last`` keep the input type (integers, floats, bool, timestamp,
    date, time, duration); float NaN values are ignored by ``min``/``max``
    (as pandas does). ``min``/``max`` of strings and binary compare bytes
    (:class:`StringMinMax`, picked by :func:`for_input`); other types raise
    ``TypeError`` naming the column and type.

Slots and state
    A *slot* is one accumulator (one key in one window or pane), a dense int64
    id allocated by the window aggregator and reused after purge. An
    aggregate object is configuration only; its per-slot state is one value
    returned by ``new_state`` and threaded through the calls below (for the
    built-ins: :class:`Columns`, one record of a few 8-byte fields per slot,
    readable as one NumPy array per field).

Plug-ins
    Subclass :class:`SlotAggregate` and make a constructor reachable as
    ``fastops.core.aggregates.<name>(...)`` with :func:`register`. The aggregator calls
    ``update`` once per batch, ``merge`` to combine sessions, ``combine``
    to build sliding windows from their panes (the default uses ``merge``
    and ``result``), ``result`` at emission, ``reset`` at purge, and
    ``to_bytes``/``from_bytes`` in snapshots. ``update`` and ``merge`` may see
    slot ids beyond the current size (for ``merge``: fresh destination slots
    that hold nothing yet) and must grow the state to cover them.

Modules
    :mod:`~fastops.core.aggregates.base` (the protocol and the registry),
    :mod:`~fastops.core.aggregates.records` (record layouts, storage, result
    columns), :mod:`~fastops.core.aggregates.builtins` (the built-ins),
    :mod:`~fastops.core.aggregates.strings` (string and binary picks),
    :mod:`~fastops.core.aggregates.sketch` (``approx_distinct``,
    ``approx_quantile``, ``top_k``). This package re-exports them.
"""
from __future__ import annotations

from typing import Callable

from fastops.core.aggregates.base import SlotAggregate, lookup, register, registered, reserve
from fastops.core.aggregates.builtins import (
    BuiltinAggregate,
    Count,
    FirstLast,
    MinMax,
    Moments,
    Sum,
    SumOverflowError,
    builtin_layout,
    count,
    first,
    last,
    max,
    mean,
    min,
    stddev,
    sum,
    sum_overflow,
    update_builtins,
    var,
)
from fastops.core.aggregates.records import (
    Columns,
    Finalised,
    ResultColumns,
    ResultPlan,
    aligned_records,
    as_storage,
    from_storage,
    record_width,
)
from fastops.core.aggregates.records import _Records as _Records
from fastops.core.aggregates.sketch import (
    ApproxDistinct,
    ApproxQuantile,
    TopK,
    approx_distinct,
    approx_quantile,
    top_k,
)
from fastops.core.aggregates.strings import StringFirstLast, StringMinMax, for_input
from fastops.core.aggregates.strings import _Picks as _Picks

__all__ = [
    "ApproxDistinct",
    "ApproxQuantile",
    "BuiltinAggregate",
    "Columns",
    "Count",
    "Finalised",
    "FirstLast",
    "MinMax",
    "Moments",
    "ResultColumns",
    "ResultPlan",
    "SlotAggregate",
    "StringFirstLast",
    "StringMinMax",
    "Sum",
    "SumOverflowError",
    "TopK",
    "aligned_records",
    "approx_distinct",
    "approx_quantile",
    "as_storage",
    "builtin_layout",
    "count",
    "first",
    "for_input",
    "from_storage",
    "last",
    "max",
    "mean",
    "min",
    "record_width",
    "register",
    "registered",
    "stddev",
    "sum",
    "sum_overflow",
    "top_k",
    "update_builtins",
    "var",
]

# a registered aggregate may not hide a name of this package
reserve(list(globals()))


def __getattr__(name: str) -> Callable[..., SlotAggregate]:
    """Aggregates registered after import (``register("my_agg", factory)``)."""
    factory = lookup(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return factory
