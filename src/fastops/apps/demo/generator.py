"""The demo's input: a seeded, vectorised generator of player events, and
the replayable source that feeds it to a job.

Events (one row per player action)
    ``player_id`` int64, ``event_type`` string (dictionary-encoded:
    ``pop`` / ``level_up`` / ``purchase``), ``ts`` int64 event time in ms,
    ``level`` int32, ``value`` float64 (the price of a purchase, null for
    other events).

    Event time advances at ``events_per_s`` events per second from
    ``START_MS`` (a minute boundary). Arrival order is not event-time
    order: most events reach the engine a few hundred ms after they
    happened, some (slow networks) up to 8 s after, and a few (players who
    were offline) minutes after; those come after the watermark passed
    their windows and are reported as late.

The generator is deterministic: batch ``b`` depends only on ``(seed, b)``,
so the source is replayable and the job can be checkpointed, killed and
resumed (``--checkpoint-dir``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops.connectors.base import END, Reader, Source
from fastops.connectors.pacing import Pace, Rate, RateSchedule
from fastops.core.durations import parse_positive_duration

__all__ = [
    "DEFAULT_EVENTS",
    "EVENT_TYPES",
    "SCHEMA",
    "START_MS",
    "DemoConfig",
    "PlayerEventSource",
    "generate_batch",
    "generate_events",
]

DEFAULT_EVENTS = 50_000_000
START_MS = 1_700_000_040_000  # 2023-11-14 22:14:00 UTC, a minute boundary
EVENT_TYPES = ("pop", "level_up", "purchase")
POP, LEVEL_UP, PURCHASE = 0, 1, 2
_PRICES = np.array([0.99, 1.99, 4.99, 9.99, 19.99, 49.99])
_PRICE_P = np.array([0.40, 0.25, 0.17, 0.10, 0.06, 0.02])
_TABLE_BITS = 18  # player lookup table: 2**18 entries drawn by activity weight

SCHEMA = pa.schema([
    ("player_id", pa.int64()),
    ("event_type", pa.dictionary(pa.int8(), pa.string())),
    ("ts", pa.int64()),
    ("level", pa.int32()),
    ("value", pa.float64()),
])


@dataclass(frozen=True)
class DemoConfig:
    """Parameters of the generator and the job (all validated).

    ``events_per_s`` is event-time density (events per second of event
    time), not a wall-clock rate; ``rate`` (rows per wall-clock second, or
    steps over time: ``[(0, 250_000), (8, 500_000)]``) paces the source like
    a live feed, ``None`` runs as fast as possible. ``autoscale``: DS2
    sizes the job as it runs (``fastops demo --autoscale``). ``qos``: a
    latency bound kept by shedding load (``fastops demo --qos 200ms``).
    """

    events: int = 20_000_000
    seed: int = 7
    players: int = 50_000
    events_per_s: int = 20_000
    batch_size: int = 131_072
    rate: Rate | None = None
    parallelism: int = 1
    threshold: int = 500
    top_n: int = 5
    out_of_orderness_ms: int = 5_000
    slow_fraction: float = 0.005   # delayed by up to 8 s
    offline_fraction: float = 0.00005  # delayed by 2-6 min: late
    checkpoint_dir: str | None = None
    checkpoint_interval: Any = "2s"
    output: str | None = None
    threads: bool = True  # one thread per task (operators overlap), also at parallelism 1
    autoscale: bool = False
    ui: Any = None  # serve the job's page and metrics (a port; see fastops.monitoring)
    ui_keep: bool = False
    qos: Any = None  # a p99 latency bound: shed events (pops first, never purchases) to keep it
    source: str | None = None  # read the events from this Redis stream (redis://...), see demo/streams.py

    def __post_init__(self) -> None:
        for name in ("events", "players", "events_per_s", "batch_size", "parallelism",
                     "threshold", "top_n"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.rate is not None:
            RateSchedule(self.rate)  # a ValueError here for a bad rate
        if self.qos is not None:
            parse_positive_duration(self.qos, "the latency bound (--qos)")
        for name in ("slow_fraction", "offline_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")

    @property
    def num_batches(self) -> int:
        return -(-self.events // self.batch_size)


class _World:
    """Per-seed constants: who plays how much, and at which level."""

    _cache: dict = {}

    def __init__(self, seed: int, players: int):
        rng = np.random.default_rng([seed, 0xC0FFEE])
        # activity: lognormal weights (a few very active players), drawn into a
        # lookup table so a batch picks players with one gather
        weights = rng.lognormal(0.0, 1.6, players)
        cdf = np.cumsum(weights)
        cdf /= cdf[-1]
        u = (np.arange(1 << _TABLE_BITS) + 0.5) / (1 << _TABLE_BITS)
        self.table = (np.searchsorted(cdf, u) + 1).astype(np.int32)  # player ids 1..players
        self.level = rng.integers(1, 120, players + 1).astype(np.int32)

    @classmethod
    def get(cls, seed: int, players: int) -> _World:
        key = (seed, players)
        w = cls._cache.get(key)
        if w is None:
            w = cls._cache[key] = _World(seed, players)
        return w


_DICT = pa.array(EVENT_TYPES, pa.string())


def generate_batch(cfg: DemoConfig, b: int) -> pa.RecordBatch:
    """Batch ``b`` of the event stream (rows ``b * batch_size`` onwards).

    Vectorised: a handful of NumPy calls per batch, nothing per row.
    """
    if not 0 <= b < cfg.num_batches:
        raise IndexError(f"batch {b} out of range (the stream has {cfg.num_batches})")
    lo = b * cfg.batch_size
    n = min(cfg.batch_size, cfg.events - lo)
    world = _World.get(cfg.seed, cfg.players)
    rng = np.random.default_rng([cfg.seed, b])
    ts = START_MS + np.arange(lo, lo + n, dtype=np.int64) * 1000 // cfg.events_per_s
    delay = rng.standard_exponential(n)
    delay *= 200.0
    u = rng.random(n, dtype=np.float32)
    slow = u < cfg.slow_fraction
    delay[slow] = rng.uniform(0.0, 8000.0, int(slow.sum()))
    offline = u > 1.0 - cfg.offline_fraction
    delay[offline] = rng.uniform(120_000.0, 360_000.0, int(offline.sum()))
    # nothing happens before the stream starts
    ts -= np.minimum(delay.astype(np.int64), ts - START_MS)
    player = world.table[rng.integers(0, len(world.table), n, dtype=np.int32)]
    v = rng.random(n, dtype=np.float32)
    codes = (v >= 0.88).view(np.int8) + (v >= 0.985).view(np.int8)  # pop 88 %, level_up, purchase 1.5 %
    is_purchase = codes == PURCHASE
    value = np.zeros(n)
    k = int(is_purchase.sum())
    value[is_purchase] = rng.choice(_PRICES, k, p=_PRICE_P)
    valid = pa.py_buffer(np.packbits(is_purchase, bitorder="little"))
    cols = [
        pa.array(player.astype(np.int64)),
        pa.DictionaryArray.from_arrays(pa.array(codes), _DICT),
        pa.array(ts),
        pa.array(world.level[player]),
        pa.Array.from_buffers(pa.float64(), n, [valid, pa.py_buffer(value)], null_count=n - k),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=SCHEMA)


def generate_events(cfg: DemoConfig) -> pa.Table:
    """The whole stream as one table, in arrival order (for tests and reference runs)."""
    return pa.Table.from_batches([generate_batch(cfg, b) for b in range(cfg.num_batches)], schema=SCHEMA)


class _EventReader(Reader):
    def __init__(self, cfg: DemoConfig, index: int, parallelism: int, position: int,
                 on_batch: Callable[[int, pa.RecordBatch], None] | None = None):
        self.cfg = cfg
        self.on_batch = on_batch
        self.index = index
        self.parallelism = parallelism
        self.done = int(position or 0)  # batches this split has produced
        self.rows = 0
        self.pace: Pace | None = None
        self.arrived: float | None = None

    def read(self) -> Any:
        if self.pace is not None:  # ahead of the schedule: wait (the task counts it idle), then read
            ahead = self.pace.wait(self.rows, time.perf_counter())
            if ahead > 0:
                time.sleep(min(ahead, 0.05))
                return None
            self.arrived = time.time() + ahead  # when the schedule offered the batch's first row
        b = self.index + self.done * self.parallelism
        if b >= self.cfg.num_batches:
            return END
        batch = generate_batch(self.cfg, b)
        self.done += 1
        if self.on_batch is not None:
            self.on_batch(self.index, batch)
        self.rows += batch.num_rows
        return batch

    def position(self) -> Any:
        return self.done

    def backlog(self) -> int | None:
        return None if self.pace is None else self.pace.backlog(self.rows, time.perf_counter())

    def arrival_time(self) -> float | None:
        """When the schedule offered the batch last read (None: unpaced)."""
        return self.arrived


class PlayerEventSource(Source):
    """The generator as a replayable, splittable source: split ``i`` of ``p``
    produces batches ``i, i + p, ...``; its position is how many it produced.
    ``on_batch(split, batch)`` is called with every batch read (optional)."""

    name = "player_events"
    replayable = True

    def __init__(self, cfg: DemoConfig, on_batch: Callable[[int, pa.RecordBatch], None] | None = None):
        self.cfg = cfg
        self.on_batch = on_batch
        self._paces: dict[tuple[int, int], Pace] = {}  # by (split, parallelism): kept across restores

    def splits(self) -> int:
        return max(1, self.cfg.num_batches)

    def schema(self) -> pa.Schema:
        return SCHEMA

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        reader = _EventReader(self.cfg, index, parallelism, position or 0, self.on_batch)
        if self.cfg.rate is not None:  # each split paces its share; a restore keeps the schedule
            pace = self._paces.get((index, parallelism))
            if position is None or pace is None:
                pace = Pace(RateSchedule(self.cfg.rate).scaled(1 / parallelism),
                            self.rows_at(index, parallelism, position))
                self._paces[(index, parallelism)] = pace
            reader.pace = pace
            reader.rows = self.rows_at(index, parallelism, position)
        return reader

    def total_rows(self) -> int:
        """Rows in all (for progress bars)."""
        return self.cfg.events

    def rows_at(self, index: int, parallelism: int, position: Any) -> int:
        """Rows split ``index`` of ``parallelism`` had produced at ``position``
        (batches ``index, index + parallelism, ...``: all full but the last)."""
        done = int(position or 0)
        if not done:
            return 0
        last = index + (done - 1) * parallelism  # the last batch it produced
        return (done - 1) * self.cfg.batch_size + min(self.cfg.batch_size, self.cfg.events - last * self.cfg.batch_size)
