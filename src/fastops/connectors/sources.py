"""Sources: collections, pandas, Arrow, files (Parquet / CSV / IPC) and generators.

The contract (``Source``, ``Reader``, ``END``) is in ``fastops.connectors.base``;
the sources themselves in ``collections`` (in-memory tables), ``files`` and
``generators`` (generator functions and iterators). This module gathers them
under the names they always had.
"""
from __future__ import annotations

from fastops.connectors.base import END, MAX_BATCH_SIZE, Reader, Source, check_batch_size
from fastops.connectors.collections import TableSource
from fastops.connectors.files import FileSource, _expand
from fastops.connectors.generators import GeneratorSource, IteratorSource

__all__ = ["END", "MAX_BATCH_SIZE", "FileSource", "GeneratorSource", "IteratorSource", "Reader", "Source",
           "TableSource", "_expand", "check_batch_size"]
