"""Sources: collections, pandas, Arrow, files (Parquet / CSV / IPC) and generators.

The contract (``Source``, ``Reader``, ``END``) is in ``fastops.connectors.base``;
the sources themselves in ``collections`` (in-memory tables), ``files`` and
``generators`` (generator functions and iterators). This module keeps the
names user code has imported from ``fastops.connectors.sources``; the engine
imports from the modules above.
"""
from __future__ import annotations

from fastops.connectors.base import END, MAX_BATCH_SIZE, Reader, Source, check_batch_size
from fastops.connectors.collections import TableSource
from fastops.connectors.files import FileSource
from fastops.connectors.generators import GeneratorSource, IteratorSource

__all__ = ["END", "MAX_BATCH_SIZE", "FileSource", "GeneratorSource", "IteratorSource", "Reader", "Source",
           "TableSource", "check_batch_size"]
