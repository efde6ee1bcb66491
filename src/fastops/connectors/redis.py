"""Redis Streams in: entries read (``XREAD``, or ``XREADGROUP`` in a consumer
group) into Arrow batches of a declared schema, replayable from checkpoints.

An entry's fields are decoded to the schema's types (``decode="fields"``: one
field per column; ``decode="json"``: one field holding a JSON object). Three
metadata columns may be asked for: ``_stream`` (the stream's name), ``_id``
(the entry id) and ``_ts`` (the id's milliseconds, the time Redis appended
the entry, usable as event time).

Positions
    A reader's position is the last id it read of each stream (with a
    consumer group: of each consumer it reads as). A reader opened at a
    position reads right after it: ``XREAD`` from that id; in a group, the
    consumer's pending entries up to that id are acknowledged (a complete
    checkpoint covers them) and those after it are read again first
    (``XREADGROUP`` with an id replays the consumer's own pending entries),
    then new ones (``>``).

Acknowledgements
    A reader never acknowledges what it reads. The operator chained right
    after the source (:class:`RedisAck`) sees every entry's stream and id and
    acknowledges (``XACK``) the entries of an epoch when the checkpoint that
    covers them completes: it is a two-phase participant like a sink, on the
    path by which the runtime commits sinks. It also sends entries that could
    not be decoded to the side output ``"undecodable"`` with the reason.

Dead consumers
    Reader 0 of a group looks for consumers of the group that are not this
    job's (``{consumer}-{n}``), have pending entries and have been idle for
    ``claim_idle``; it adopts each: it reads the dead consumer's pending
    entries under that consumer's name (the same ``XREADGROUP`` replay),
    keeps a position for it, and the entries are acknowledged after the
    checkpoint that covers them, like its own. (``XAUTOCLAIM`` moves entries
    of every consumer idle that long, also those of a live reader of this job
    that wait for a checkpoint; see docs/connectors.md.) Consumers of this job
    that a smaller parallelism leaves behind are handed to the new readers
    with their positions (``rescale_positions``).
"""
from __future__ import annotations

import io
import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from fastops.connectors.base import END, Reader, Source, check_batch_size
from fastops.core.durations import parse_duration
from fastops.operators.base import Operator, OperatorContext, Tagged

_redis: Any = None  # the redis package, an optional dependency imported on first use

__all__ = ["METADATA", "UNDECODABLE", "RedisAck", "RedisStreamSource", "redis_stream_options"]

log = logging.getLogger("fastops")

METADATA = {"_stream": pa.string(), "_id": pa.string(), "_ts": pa.timestamp("ms")}
UNDECODABLE = "undecodable"  # the side output of entries that could not be decoded
UNDECODABLE_SCHEMA = pa.schema([("_stream", pa.string()), ("_id", pa.string()), ("reason", pa.string()),
                                ("fields", pa.string())])
# columns the reader adds for the operator after it (dropped there)
_STREAM, _ID, _ERROR, _RAW = "__redis_stream", "__redis_id", "__redis_error", "__redis_fields"
DECODES = ("fields", "json")
MAX_SPLITS = 256  # readers (consumers) that may share the streams of a group
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
_BACKLOG_EVERY_S = 1.0
_ACK_CHUNK = 10_000


def _require_redis() -> Any:
    global _redis
    if _redis is None:
        try:  # deferred: importing redis takes a tenth of a second that jobs without this source should not pay
            import redis
        except ImportError:
            raise ImportError("the Redis Streams source needs the redis package: pip install "
                              "'fastops[connectors]' (or pip install redis)") from None
        _redis = redis
    return _redis


def connect(url: str) -> Any:
    """A client for ``url`` (``redis://host:port/db``); ValueError naming the URL
    when it is malformed or the server does not answer."""
    r = _require_redis()
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"Redis URL must look like redis://host:port/db, got {url!r}")
    try:
        # no silent retry inside the client: a XREADGROUP whose reply was lost delivered entries that
        # only a replay of the consumer's pending entries gets back (see RedisStreamReader.read)
        client = r.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30, health_check_interval=30,
                                  retry=r.retry.Retry(r.backoff.NoBackoff(), 0))
        client.ping()
    except (r.ConnectionError, r.TimeoutError, r.ResponseError, ValueError) as exc:
        raise ValueError(f"cannot connect to Redis at {url!r}: {exc}") from None
    return client


def _parse_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _check_id(value: Any, what: str) -> str:
    if isinstance(value, bytes):
        value = value.decode()
    if not isinstance(value, str) or not re.fullmatch(r"\d+(-\d+)?", value):
        raise ValueError(f"{what} must be a stream id such as '0-0' or '1700000000000-0', got {value!r}")
    return value if "-" in value else value + "-0"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def output_schema(schema: pa.Schema, metadata: bool) -> pa.Schema:
    """The columns a source of ``schema`` gives: the declared ones (metadata
    names filled from the entry), then, with ``metadata``, the metadata
    columns not declared."""
    extra = [pa.field(n, t) for n, t in METADATA.items() if metadata and n not in schema.names]
    return pa.schema(list(schema) + extra)


class RedisStreamSource(Source):
    """Entries of one or more Redis streams (see the module docs).

    Without ``group`` the streams are split over the readers (reader ``i`` of
    ``p`` reads streams ``i, i + p, ...``) and each reads with ``XREAD`` from
    ``start``. With ``group`` every reader is a consumer ``{consumer}-{i}`` of
    the group (created at ``start`` if missing) and Redis deals the entries.
    ``bounded``: a reader ends when a read finds nothing new (a finished
    stream); else it waits up to ``block`` per read and the stream never ends.
    """

    replayable = True

    def __init__(self, url: str, streams: str | Sequence[str], schema: Any, group: str | None = None,
                 consumer: str | None = None, start: str = "0-0", batch_size: int = 10_000,
                 decode: str = "fields", json_field: str = "data", metadata: bool = True,
                 bounded: bool = False, block: Any = "100ms", claim_idle: Any = "60s",
                 name: str = "from_redis_stream", check: bool = True):
        self.url = url
        names = [streams] if isinstance(streams, (str, bytes)) else list(streams)
        if not names or not all(isinstance(s, str) and s for s in names):
            raise ValueError(f"streams must be a stream name or a list of them, got {streams!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"streams are listed twice: {names}")
        self.streams = names
        self.declared = _as_schema(schema)
        self.fields = pa.schema([f for f in self.declared if f.name not in METADATA])
        for n in ("_stream", "_id"):
            if n in self.declared.names and self.declared.field(n).type not in (pa.string(), pa.large_string()):
                raise TypeError(f"metadata column {n!r} is a string, declared {self.declared.field(n).type}")
        if "_ts" in self.declared.names:
            t = self.declared.field("_ts").type
            if not (pa.types.is_timestamp(t) or t == pa.int64()):
                raise TypeError(f"metadata column '_ts' is a timestamp or int64 (ms), declared {t}")
        for f in self.fields:
            _check_decodable(f)
        self.public = output_schema(self.declared, metadata)
        if decode not in DECODES:
            raise ValueError(f"decode must be one of {DECODES}, got {decode!r}")
        self.decode = decode
        self.json_field = json_field
        self.group = group
        if group is not None and (not isinstance(group, str) or not group):
            raise ValueError(f"group must be a non-empty name, got {group!r}")
        self.consumer = consumer or "fastops"
        if group is None and consumer is not None:
            raise ValueError("consumer names a reader of a consumer group: give group= too")
        self.start = "$" if start == "$" else _check_id(start, "start")
        self.batch_size = check_batch_size(batch_size)
        self.bounded = bool(bounded)
        self.block_ms = int(parse_duration(block))
        self.claim_idle_ms = int(parse_duration(claim_idle))
        self.name = name
        self.stats = {"reconnects": 0, "undecodable": 0, "adopted": 0}
        if check:
            client = connect(url)
            try:
                self._prepare(client)
            finally:
                client.close()

    def _prepare(self, client: Any) -> None:
        """Create the group where missing (at ``start``); resolve ``start="$"``
        to the streams' last ids, so every restart begins at the same place."""
        r = _require_redis()
        if self.group is not None:
            for s in self.streams:
                try:
                    client.xgroup_create(s, self.group, id=self.start, mkstream=True)
                except r.ResponseError as exc:
                    if "BUSYGROUP" not in str(exc):
                        raise ValueError(f"stream {s!r}: cannot create consumer group {self.group!r}: {exc}") from None
                except r.ConnectionError as exc:  # pragma: no cover - after a ping that worked
                    raise ValueError(f"cannot reach Redis at {self.url!r}: {exc}") from None
        elif self.start == "$":
            self.starts = {s: _last_id(client, s) for s in self.streams}

    def splits(self) -> int:
        return MAX_SPLITS if self.group is not None else len(self.streams)

    def schema(self) -> pa.Schema:
        return self.public.append(pa.field(_STREAM, pa.string())).append(pa.field(_ID, pa.string()))

    def consumer_name(self, index: int) -> str:
        return f"{self.consumer}-{index}"

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return RedisStreamReader(self, index, parallelism, position)

    def rescale_positions(self, positions: list, parallelism: int) -> list:
        """Without a group: every new reader gets the last id of every stream
        (it reads its own streams from there). With a group: the consumers of
        the old readers, each to one new reader (``{consumer}-{i}`` stays with
        reader ``i``; the others round robin), which reads their pending
        entries after their positions."""
        if self.group is None:
            merged: dict[str, str] = {}
            for p in positions:
                merged.update((p or {}).get("ids", {}))
            return [{"ids": dict(merged)} for _ in range(parallelism)]
        out: list[dict[str, Any]] = [{"consumers": {}} for _ in range(parallelism)]
        spare = 0
        for p in positions:
            for name, ids in ((p or {}).get("consumers") or {}).items():
                m = re.fullmatch(re.escape(self.consumer) + r"-(\d+)", name)
                if m is not None and int(m.group(1)) < parallelism:
                    target = int(m.group(1))
                else:
                    target, spare = spare % parallelism, spare + 1
                out[target]["consumers"][name] = dict(ids)
        return out

    def acknowledger(self) -> RedisAck:
        """The operator chained after the source (a fresh one per task)."""
        return RedisAck(self)


# CREATE TABLE ... WITH ('connector' = 'redis-stream', ...): option -> from_redis_stream argument
SQL_OPTIONS = {"url": "url", "stream": "streams", "format": "decode", "group": "group", "consumer": "consumer",
               "start": "start", "scan.bounded.mode": "bounded", "json.field": "json_field"}


def redis_stream_options(table: str, options: dict[str, Any]) -> dict[str, Any]:
    """The ``from_redis_stream`` arguments of a ``'redis-stream'`` table's
    options; ValueError naming a missing, unknown or bad one."""
    unknown = sorted(k for k in options if k != "connector" and k not in SQL_OPTIONS)
    if unknown:
        raise ValueError(f"table {table!r}: unknown redis-stream option(s) {unknown}; the options are "
                         f"{sorted(SQL_OPTIONS)}")
    for needed in ("url", "stream"):
        if not options.get(needed):
            raise ValueError(f"table {table!r}: the redis-stream connector needs {needed!r}")
    out: dict[str, Any] = {SQL_OPTIONS[k]: v for k, v in options.items() if k in SQL_OPTIONS}
    out["streams"] = [s.strip() for s in str(out["streams"]).split(",") if s.strip()]
    mode = str(out.get("bounded", "unbounded")).lower()
    if mode not in ("unbounded", "latest-offset"):
        raise ValueError(f"table {table!r}: 'scan.bounded.mode' is 'unbounded' or 'latest-offset', got {mode!r}")
    out["bounded"] = mode == "latest-offset"
    return out


def _as_schema(schema: Any) -> pa.Schema:
    if isinstance(schema, pa.Schema):
        return schema
    if isinstance(schema, dict):
        schema = list(schema.items())
    if schema is None or isinstance(schema, (str, bytes)):
        raise TypeError(f"schema must be a pyarrow.Schema, a dict or (name, type) pairs, got {schema!r}")
    fields = []
    for item in schema:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"schema entries must be (name, type) pairs, got {item!r}")
        name, t = item
        fields.append(pa.field(name, t if isinstance(t, pa.DataType) else pa.type_for_alias(str(t))))
    return pa.schema(fields)


def _check_decodable(field: pa.Field) -> None:
    t = field.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    ok = (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
          or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_timestamp(t)
          or pa.types.is_date(t) or pa.types.is_decimal(t))
    if not ok:
        raise TypeError(f"column {field.name!r}: entries cannot be decoded to {field.type}")


def _last_id(client: Any, stream: str) -> str:
    last = client.xrevrange(stream, "+", "-", count=1)
    return _text(last[0][0]) if last else "0-0"


def _convert(raw: pa.Array, t: pa.DataType) -> pa.Array:
    """Field values (binary, null where missing) as ``t``; raises Arrow errors."""
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return raw.cast(t)
    text = raw.cast(pa.string())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return text.cast(t)
    if pa.types.is_dictionary(t):
        return _convert(raw, t.value_type).dictionary_encode().cast(t)
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)  # empty: null
    if pa.types.is_timestamp(t) and len(text) and pc.all(pc.fill_null(pc.match_substring_regex(
            text, r"^-?\d+$"), True)).as_py():
        return pc.cast(text, pa.int64()).cast(pa.timestamp("ms")).cast(t)  # epoch milliseconds
    return pc.cast(text, t)


def _json_value(value: Any, f: pa.Field) -> pa.Array:
    """One JSON value as ``f``'s type (for the row-by-row path)."""
    raw = None if value is None else (value if isinstance(value, str) else json.dumps(value)).encode()
    return _convert(pa.array([raw], pa.binary()), f.type)


class _Decoded:
    """Columns of a batch of entries and, per row, why it could not be decoded (None: it could)."""

    def __init__(self, columns: list[pa.Array], errors: list[str | None] | None):
        self.columns = columns
        self.errors = errors


class RedisStreamReader(Reader):
    """One reader (see :class:`RedisStreamSource`); position ``{"ids": {stream:
    last id}}`` or, in a group, ``{"consumers": {consumer: {stream: last id}}}``."""

    def __init__(self, source: RedisStreamSource, index: int, parallelism: int, position: Any):
        self.source = source
        self.index = index
        self.parallelism = parallelism
        self.client = connect(source.url)
        self._arrival: float | None = None
        self._backlog: int | None = None
        self._backlog_at = 0.0
        self._failures = 0
        self._next_adopt = 0.0
        self._ended = False
        if source.group is None:
            mine = source.streams[index::parallelism]
            starts = getattr(source, "starts", {})
            given = (position or {}).get("ids", {}) if isinstance(position, dict) else {}
            self.ids = {s: _check_id(given[s], f"position of stream {s!r}") if s in given
                        else starts.get(s, source.start) for s in mine}
        else:
            self.own = source.consumer_name(index)
            given = (position or {}).get("consumers", {}) if isinstance(position, dict) else {}
            self.consumers: dict[str, dict[str, str]] = {c: dict(ids) for c, ids in given.items()}
            self.consumers.setdefault(self.own, {})
            # (consumer, stream) whose pending entries are read again before new ones
            self.history: list[tuple[str, str]] = []
            for c in sorted(self.consumers, key=lambda c: c == self.own):
                for s in source.streams:
                    self._settle(c, s)

    # -- consumer groups ---------------------------------------------------------------
    def _settle(self, consumer: str, stream: str) -> None:
        """Acknowledge ``consumer``'s pending entries up to its position (a
        complete checkpoint covers them) and queue the rest for replay."""
        group = self.source.group
        last = self.consumers[consumer].get(stream)
        if last is not None:
            while True:
                covered = self.client.xpending_range(stream, group, "-", last, _ACK_CHUNK, consumername=consumer)
                if not covered:
                    break
                self.client.xack(stream, group, *[e["message_id"] for e in covered])
        self.history.append((consumer, stream))

    def _adopt_dead(self) -> None:
        """Reader 0: take over the pending entries of consumers that are not this
        job's and have been idle for ``claim_idle`` (see the module docs)."""
        src = self.source
        ours = re.compile(re.escape(src.consumer) + r"-\d+")
        for s in src.streams:
            try:
                infos = self.client.xinfo_consumers(s, src.group)
            except _require_redis().ResponseError:
                continue
            for info in infos:
                name = _text(info["name"])
                if ours.fullmatch(name) or not info.get("pending") or info.get("idle", 0) < src.claim_idle_ms:
                    continue
                if (name, s) in self.history:
                    continue
                self.consumers.setdefault(name, {})
                self.history.append((name, s))
                src.stats["adopted"] += 1
                log.warning("%s: consumer %r of group %r on stream %r has been idle %d ms with %d pending "
                            "entries: reading them as reader %d", src.name, name, src.group, s,
                            info.get("idle", 0), info["pending"], self.index)

    def _read_group(self) -> list[tuple[str, list]]:
        src = self.source
        if self.index == 0 and time.monotonic() >= self._next_adopt:
            self._next_adopt = time.monotonic() + max(src.claim_idle_ms / 1000.0, 1.0)
            self._adopt_dead()
        while self.history:  # pending entries first, one (consumer, stream) at a time
            consumer, s = self.history[0]
            after = self.consumers[consumer].get(s, "0-0")
            got = self.client.xreadgroup(src.group, consumer, {s: after}, count=src.batch_size)
            entries = _entries(got)
            if entries and entries[0][1]:
                self._consumer = consumer
                return entries
            self.history.pop(0)
        self._consumer = self.own
        block = None if src.bounded else src.block_ms
        got = self.client.xreadgroup(src.group, self.own, dict.fromkeys(src.streams, ">"),
                                     count=src.batch_size, block=block)
        return _entries(got)

    # -- reading -----------------------------------------------------------------------
    def read(self) -> Any:
        if self._ended:
            return END
        r = _require_redis()
        try:
            entries = self._read_group() if self.source.group is not None else self._read_plain()
            if self._failures:
                log.warning("%s: reader %d reconnected to Redis after %d failed attempts",
                            self.source.name, self.index, self._failures)
            self._failures = 0
        except (r.ConnectionError, r.TimeoutError) as exc:
            if self.source.group is not None:  # a lost reply may have delivered entries: read them again
                self.history = [(c, s) for c in self.consumers for s in self.source.streams]
            self.source.stats["reconnects"] += 1
            wait = _BACKOFF_S[min(self._failures, len(_BACKOFF_S) - 1)]
            self._failures += 1
            log.warning("%s: reader %d lost its Redis connection (%s); retrying in %.2f s",
                        self.source.name, self.index, exc, wait)
            time.sleep(wait)
            return None
        if not any(e for _, e in entries):
            if self.source.bounded:
                self._ended = True
                return END
            return None
        return self._batch(entries)

    def _read_plain(self) -> list[tuple[str, list]]:
        src = self.source
        if not self.ids:
            return []
        block = None if src.bounded else src.block_ms
        got = self.client.xread(dict(self.ids), count=src.batch_size, block=block)
        return _entries(got)

    def _batch(self, entries: list[tuple[str, list]]) -> pa.RecordBatch:
        src = self.source
        parts: list[pa.Array] = []
        raw_ids: list[bytes] = []
        values: list[Any] = []
        for s, items in entries:
            if not items:
                continue
            last = _text(items[-1][0])
            if src.group is None:
                self.ids[s] = last
            else:
                self.consumers[self._consumer][s] = last
            parts.append(pa.repeat(pa.scalar(s, pa.string()), len(items)))
            raw_ids.extend(i for i, _ in items)
            values.extend(v for _, v in items)
        streams = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        id_arr = pa.array(raw_ids, pa.binary()).cast(pa.string())
        ms = pc.cast(pc.list_element(pc.split_pattern(id_arr, "-", max_splits=1), 0), pa.int64())
        self._arrival = float(pc.min(ms).as_py()) / 1000.0
        decoded = self._decode(values)
        columns = []
        for f in src.public:
            if f.name == "_stream":
                columns.append(streams.cast(f.type))
            elif f.name == "_id":
                columns.append(id_arr.cast(f.type))
            elif f.name == "_ts":
                columns.append(ms.cast(pa.timestamp("ms")).cast(f.type) if pa.types.is_timestamp(f.type) else ms)
            else:
                columns.append(decoded.columns[src.fields.get_field_index(f.name)])
        names = src.public.names + [_STREAM, _ID]
        columns += [streams, id_arr]
        if decoded.errors is not None:
            raw = [None if e is None else json.dumps(_plain(v)) for e, v in zip(decoded.errors, values)]
            columns += [pa.array(decoded.errors, pa.string()), pa.array(raw, pa.string())]
            names += [_ERROR, _RAW]
        self._refresh_backlog()
        return pa.RecordBatch.from_arrays(columns, names=names)

    def _decode(self, values: list[Any]) -> _Decoded:
        src = self.source
        try:
            return _Decoded(self._decode_fast(values), None)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, ValueError, TypeError):
            pass
        errors: list[str | None] = []  # row by row: which entries are bad, and why
        rows: list[list[Any]] = []
        for v in values:
            try:
                rows.append(self._decode_one(v))
                errors.append(None)
            except _BadEntry as exc:
                rows.append([None] * len(src.fields))
                errors.append(str(exc))
        cols = []
        for k, f in enumerate(src.fields):
            parts = [r[k] if r[k] is not None else pa.nulls(1, f.type) for r in rows]
            cols.append(pa.concat_arrays(parts) if parts else pa.array([], f.type))
        return _Decoded(cols, errors)

    def _decode_fast(self, values: list[Any]) -> list[pa.Array]:
        src = self.source
        if src.decode == "fields":
            out = []
            for f in src.fields:
                key = f.name.encode()
                raw = pa.array([None if v is None else v.get(key) for v in values], pa.binary())
                out.append(_convert(raw, f.type))
            return out
        key = src.json_field.encode()
        docs: list[bytes] = [b"" if v is None else v.get(key, b"") for v in values]
        if any(not d or b"\n" in d for d in docs):
            raise ValueError("missing or multi-line JSON documents")
        read_as = pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                             for f in src.fields])
        data = b"\n".join(docs) + b"\n"
        table = pajson.read_json(io.BytesIO(data),
                                 read_options=pajson.ReadOptions(use_threads=False, block_size=len(data) + 1),
                                 parse_options=pajson.ParseOptions(explicit_schema=read_as,
                                                                   unexpected_field_behavior="ignore"))
        if table.num_rows != len(docs):
            raise ValueError("JSON documents and rows differ")
        out = []
        for f in src.fields:
            col = table.column(f.name).combine_chunks()
            out.append(col.dictionary_encode().cast(f.type) if pa.types.is_dictionary(f.type) else col.cast(f.type))
        return out

    def _decode_one(self, value: Any) -> list[pa.Array]:
        src = self.source
        if value is None:
            raise _BadEntry("the entry was deleted from the stream")
        if src.decode == "json":
            doc = value.get(src.json_field.encode())
            if doc is None:
                raise _BadEntry(f"no field {src.json_field!r}")
            try:
                obj = json.loads(doc)
            except ValueError as exc:
                raise _BadEntry(f"field {src.json_field!r} is not JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise _BadEntry(f"field {src.json_field!r} is not a JSON object")
            out = []
            for f in src.fields:
                try:
                    out.append(_json_value(obj.get(f.name), f))
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    raise _BadEntry(f"field {f.name!r}: {obj.get(f.name)!r} is not {f.type} ({exc})") from None
            return out
        out = []
        for f in src.fields:
            raw = value.get(f.name.encode())
            try:
                out.append(_convert(pa.array([raw], pa.binary()), f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                shown = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
                raise _BadEntry(f"field {f.name!r}: {shown!r} is not {f.type} ({exc})") from None
        return out

    # -- what the runtime asks ------------------------------------------------------------
    def position(self) -> Any:
        if self.source.group is None:
            return {"ids": dict(self.ids)}
        return {"consumers": {c: dict(ids) for c, ids in self.consumers.items()}}

    def arrival_time(self) -> float | None:
        """When Redis appended the batch's first entry (its id's milliseconds)."""
        return self._arrival

    def backlog(self) -> int | None:
        """In a group: the entries not yet delivered to any consumer (the
        group's lag, refreshed about once a second while reading); else None."""
        return self._backlog

    def _refresh_backlog(self) -> None:
        src = self.source
        now = time.monotonic()
        if src.group is None or now - self._backlog_at < _BACKLOG_EVERY_S:
            return
        self._backlog_at = now
        total = 0
        for s in src.streams:
            for g in self.client.xinfo_groups(s):
                if _text(g["name"]) == src.group:
                    lag = g.get("lag")
                    if lag is None:
                        return
                    total += int(lag)
        self._backlog = total // max(self.parallelism, 1)

    def close(self) -> None:
        self.client.close()


class _BadEntry(Exception):
    """Why one entry cannot be decoded."""


def _plain(value: Any) -> Any:
    if value is None:
        return None
    return {_text(k): _text(v) for k, v in value.items()}


def _entries(reply: Any) -> list[tuple[str, list]]:
    """``[(stream, [(id, fields), ...])]`` of an XREAD / XREADGROUP reply (RESP2 or 3)."""
    if not reply:
        return []
    items = reply.items() if isinstance(reply, dict) else reply
    out = []
    for stream, entries in items:
        if isinstance(entries, list) and len(entries) == 1 and isinstance(entries[0], list) \
                and entries[0] and isinstance(entries[0][0], (list, tuple)):
            entries = entries[0]  # RESP3 wraps them once more
        out.append((_text(stream), entries))
    return out


class RedisAck(Operator):
    """Chained right after a :class:`RedisStreamSource`: passes the decoded rows
    on, sends undecodable entries to the side output ``"undecodable"``, and in
    a consumer group acknowledges each epoch's entries when the checkpoint
    covering them completes (a two-phase participant, ``transactional``)."""

    transactional = True
    epoch = 0

    def __init__(self, source: RedisStreamSource):
        self.source = source
        self.name = "redis_ack"
        self.idle_timeout_ms: int | None = None  # set by from_redis_stream

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self._client: Any = None
        self._open: dict[str, list[pa.Array]] = {}
        self._sealed: list[tuple[int, dict[str, list[pa.Array]]]] = []
        self._lock = threading.Lock()  # the task seals epochs, the checkpoint coordinator's thread commits them
        self.columns = self.source.public.names
        self.epoch = 1
        self.begin(self.epoch)

    def process(self, batch: pa.RecordBatch) -> list:
        out: list[Any] = []
        if self.source.group is not None and batch.num_rows:
            streams = batch.column(_STREAM)
            ids = batch.column(_ID)
            if len(self.source.streams) == 1:
                self._open.setdefault(self.source.streams[0], []).append(ids)
            else:
                for s in pc.unique(streams).to_pylist():
                    self._open.setdefault(s, []).append(ids.filter(pc.equal(streams, s)))
        if _ERROR in batch.schema.names:
            bad = pc.is_valid(batch.column(_ERROR))
            rejected = batch.filter(bad)
            self.source.stats["undecodable"] += rejected.num_rows
            out.append(Tagged(UNDECODABLE, pa.RecordBatch.from_arrays(
                [rejected.column(_STREAM), rejected.column(_ID), rejected.column(_ERROR), rejected.column(_RAW)],
                schema=UNDECODABLE_SCHEMA)))
            batch = batch.filter(pc.invert(bad))
        out.append(batch.select(self.columns))
        return out

    # -- two-phase participant: acknowledge what completed checkpoints cover ----------------
    def begin(self, epoch: int) -> None:
        self._open = {}

    def write(self, batch: pa.RecordBatch) -> None:  # the Sink protocol; rows go through process
        self.process(batch)

    def snapshot_barrier(self, checkpoint_id: int) -> Any:
        self.pre_commit(checkpoint_id)
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)
        return None

    def pre_commit(self, checkpoint_id: int) -> Any:
        if self._open:
            with self._lock:
                self._sealed.append((checkpoint_id, self._open))
        self._open = {}
        return None

    def commit(self, checkpoint_id: int) -> None:
        with self._lock:
            due = [(e, ids) for e, ids in self._sealed if e <= checkpoint_id]
        if not due:
            return
        r = _require_redis()
        for attempt, wait in enumerate(_BACKOFF_S[:4]):
            try:
                self._acknowledge([ids for _, ids in due])
                break
            except (r.ConnectionError, r.TimeoutError, ValueError) as exc:  # ValueError: connect() failed
                self.source.stats["reconnects"] += 1
                self._client = None
                if attempt == 3:  # kept: acknowledged by a later commit, or at the next restore
                    log.warning("%s: acknowledging checkpoint %d failed (%s); trying again at the next one",
                                self.source.name, checkpoint_id, exc)
                    return
                time.sleep(wait)
        with self._lock:
            self._sealed = [(e, ids) for e, ids in self._sealed if e > checkpoint_id]

    def _acknowledge(self, epochs: list[dict[str, list[pa.Array]]]) -> None:
        if self._client is None:
            self._client = connect(self.source.url)
        group = self.source.group
        pipe = self._client.pipeline(transaction=False)
        for by_stream in epochs:
            for s, arrays in by_stream.items():
                for arr in arrays:
                    values = arr.to_pylist()
                    for k in range(0, len(values), _ACK_CHUNK):
                        pipe.xack(s, group, *values[k:k + _ACK_CHUNK])
        pipe.execute()

    def abort(self) -> None:
        with self._lock:
            self._sealed = []  # never acknowledged: the entries stay pending and are read again
        self._open = {}

    def recover(self, handles: list, checkpoint_id: int) -> None:
        # the reader, opened at the checkpoint's position, acknowledged what it covers
        self.abort()
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)

    def finished(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def committed_after(self, checkpoint_id: int) -> list[str]:
        return []

    def roll_back(self, checkpoint_id: int) -> list[str]:
        return []
