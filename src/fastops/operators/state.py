"""Operator snapshots made of several Arrow tables, as one Arrow IPC stream.

A snapshot is a table of two columns, ``name`` (utf8) and ``payload``
(binary: the IPC stream of one part, or null for an absent part), whose
schema metadata holds the operator kind and a few scalars (a watermark).
Nothing is pickled: restoring runs no code from the snapshot.
"""
from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from fastops.core.arrow import from_ipc, to_ipc

_KIND = b"fastops.operators.state.kind"


def pack_state(kind: str, parts: Mapping[str, pa.Table | pa.RecordBatch | None],
               meta: Mapping[str, str] | None = None) -> bytes:
    """``parts`` (name -> table, or None) and ``meta`` (name -> text) as bytes tagged ``kind``."""
    metadata = {_KIND: kind.encode()}
    metadata.update({k.encode(): v.encode() for k, v in (meta or {}).items()})
    payloads = [None if t is None else to_ipc(t) for t in parts.values()]
    schema = pa.schema([pa.field("name", pa.string()), pa.field("payload", pa.binary())], metadata=metadata)
    table = pa.table([pa.array(list(parts), pa.string()), pa.array(payloads, pa.binary())], schema=schema)
    return to_ipc(table)


def unpack_state(kind: str, data: bytes) -> tuple[dict[str, pa.Table | None], dict[str, str]]:
    """The parts and metadata ``pack_state`` wrote; ValueError if ``data`` is
    not a state of ``kind``."""
    try:
        table = from_ipc(data)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"not a {kind} state: {exc}") from None
    metadata = table.schema.metadata or {}
    found = metadata.get(_KIND)
    if found != kind.encode():
        what = "no operator state" if found is None else f"a {found.decode()} state"
        raise ValueError(f"not a {kind} state: the bytes hold {what}")
    meta = {k.decode(): v.decode() for k, v in metadata.items() if k != _KIND}
    parts = {name: None if payload is None else from_ipc(payload)
             for name, payload in zip(table.column("name").to_pylist(), table.column("payload").to_pylist())}
    return parts, meta


def required_part(parts: Mapping[str, pa.Table | None], name: str) -> pa.Table:
    """The part ``name`` of an unpacked state, which must be there."""
    table = parts.get(name)
    if table is None:
        raise ValueError(f"operator state without its part {name!r}")
    return table
