"""Aggregates for ``window(...).aggregate(...)``: ``agg.count()``, ``agg.sum("x")``, ...

The public face of :mod:`fastops.core.aggregates`. Aggregates added with
:func:`register` (the sketch aggregates ``approx_distinct``, ``approx_quantile``
and ``top_k`` among them) are reachable here by name as well.
"""
from __future__ import annotations

from typing import Any

from fastops.core import aggregates as _aggregates
from fastops.core.aggregates import (
    SlotAggregate,
    SumOverflowError,
    approx_distinct,
    approx_quantile,
    count,
    first,
    last,
    max,
    mean,
    min,
    register,
    registered,
    stddev,
    sum,
    top_k,
    var,
)

__all__ = [
    "SlotAggregate",
    "SumOverflowError",
    "approx_distinct",
    "approx_quantile",
    "count",
    "first",
    "last",
    "max",
    "mean",
    "min",
    "register",
    "registered",
    "stddev",
    "sum",
    "top_k",
    "var",
]


def __getattr__(name: str) -> Any:
    """Aggregates registered after import (``agg.register("my_agg", factory)``)."""
    if name in _aggregates.registered():
        return getattr(_aggregates, name)
    raise AttributeError(f"module 'fastops.agg' has no attribute {name!r}")
