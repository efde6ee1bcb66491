"""The demo's events through a Redis stream: ``fastops demo --produce URL``
writes the generated events into a stream, ``fastops demo --source URL``
reads them back as the job's input (exactly once with ``--checkpoint-dir``).

``URL`` is ``redis://host:port/db``, optionally with ``?stream=NAME`` (default
``game_events``). An entry holds one event: ``player_id``, ``event_type``,
``ts``, ``level`` and ``value`` (empty for events without one).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pyarrow as pa

from fastops.apps.demo.generator import SCHEMA, DemoConfig, generate_batch
from fastops.connectors.redis import connect

__all__ = ["DEFAULT_STREAM", "produce", "redis_events", "split_url", "stream_length"]

DEFAULT_STREAM = "game_events"
_CHUNK = 10_000  # entries per pipeline round trip


def split_url(url: str) -> tuple[str, str]:
    """``(redis url, stream)`` of ``redis://host:port/db?stream=NAME``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    stream = next((v for k, v in query if k == "stream"), DEFAULT_STREAM)
    rest = urlencode([(k, v) for k, v in query if k != "stream"])
    return urlunsplit(parts._replace(query=rest)), stream


def stream_length(url: str) -> int:
    """Entries in the stream ``url`` names (ValueError if Redis cannot be reached)."""
    redis_url, stream = split_url(url)
    client = connect(redis_url)
    try:
        return int(client.xlen(stream))
    finally:
        client.close()


def produce(cfg: DemoConfig, url: str, progress: Any = None) -> int:
    """Append the ``cfg.events`` generated events to the stream; returns how many."""
    redis_url, stream = split_url(url)
    client = connect(redis_url)
    written = 0
    try:
        for b in range(cfg.num_batches):
            batch = generate_batch(cfg, b)
            cols = [batch.column(n) for n in SCHEMA.names]
            kinds = cols[1].cast(pa.string()).to_pylist()
            players, ts, levels = (c.to_numpy() for c in (cols[0], cols[2], cols[3]))
            values = cols[4].to_pylist()
            for lo in range(0, batch.num_rows, _CHUNK):
                pipe = client.pipeline(transaction=False)
                for k in range(lo, min(batch.num_rows, lo + _CHUNK)):
                    pipe.xadd(stream, {"player_id": int(players[k]), "event_type": kinds[k], "ts": int(ts[k]),
                                       "level": int(levels[k]), "value": "" if values[k] is None else values[k]})
                pipe.execute()
            written += batch.num_rows
            if progress is not None:
                progress(written)
    finally:
        client.close()
    return written


def redis_events(env: Any, cfg: DemoConfig, url: str) -> Any:
    """The events of the stream as the job's source (it ends at the stream's end)."""
    redis_url, stream = split_url(url)
    return env.from_redis_stream(redis_url, stream, SCHEMA, bounded=True, metadata=False,
                                 batch_size=min(cfg.batch_size, 50_000), parallelism=cfg.parallelism)
