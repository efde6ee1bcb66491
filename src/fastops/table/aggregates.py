"""Aggregates the Table API adds on top of ``fastops.core.aggregates``.

:class:`StringMinMax` (``MIN`` / ``MAX`` over string and binary columns) now
lives in :mod:`fastops.core.aggregates`, where ``agg.min`` / ``agg.max`` pick it for such
columns; it is re-exported here under its old name.
"""
from __future__ import annotations

from fastops.core.aggregates import StringMinMax

__all__ = ["StringMinMax"]
