"""Flink's ``'format' = 'csv'`` for filesystem tables (``CREATE TABLE ... WITH``).

Flink's csv format has no header line, reading or writing: every line is a
row, its fields are the table's declared columns in order, converted to the
declared types. Fields are comma-separated and may be double-quoted (a quoted
field holds commas, quotes doubled, line breaks). An unquoted empty field is
NULL; a quoted empty field (``""``) is the empty string, so what fastops
writes reads back unchanged. (The DataStream API's ``from_csv`` reads files
with a header; this is the Table face's format.)
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.dataset as ds

from fastops.connectors.files import FileSource

__all__ = ["CsvTableSource", "write_csv"]


def csv_file_format(schema: pa.Schema) -> ds.CsvFileFormat:
    """Header-less CSV whose columns are ``schema``'s names and types."""
    return ds.CsvFileFormat(
        read_options=pcsv.ReadOptions(column_names=schema.names),
        convert_options=pcsv.ConvertOptions(
            column_types=schema, null_values=[""], strings_can_be_null=True,
            quoted_strings_can_be_null=False))


class CsvTableSource(FileSource):
    """The files of a csv filesystem table (a file, a directory or a glob),
    read header-less as ``schema``; splits and positions as ``FileSource``'s."""

    def __init__(self, path: str | Sequence[str], schema: pa.Schema, batch_size: int = 65536):
        super().__init__(path, "csv", batch_size, schema, file_format=csv_file_format(schema))


def write_csv(data: pa.Table, path: str | os.PathLike) -> None:
    """Write ``data`` as Flink's csv format does: rows only, no header line."""
    pcsv.write_csv(data, path, write_options=pcsv.WriteOptions(include_header=False))
