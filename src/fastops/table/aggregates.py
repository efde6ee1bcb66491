"""Aggregates the Table API adds on top of ``fastops.agg``.

:class:`StringMinMax` (``MIN`` / ``MAX`` over string and binary columns) now
lives in :mod:`fastops.agg`, where ``agg.min`` / ``agg.max`` pick it for such
columns; it is re-exported here under its old name.
"""
from __future__ import annotations

from fastops.agg import StringMinMax

__all__ = ["StringMinMax"]
