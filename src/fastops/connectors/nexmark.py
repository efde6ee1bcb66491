"""The Nexmark benchmark's event generator as a source (``'connector' = 'nexmark'``).

Nexmark models an online auction: people register, open auctions, and bid
on them. This source yields the ``datagen`` table of nexmark's
``ddl_gen.sql`` as Arrow batches::

    event_type INT                      0 person, 1 auction, 2 bid
    person   ROW<id, name, emailAddress, creditCard, city, state, dateTime, extra>
    auction  ROW<id, itemName, description, initialBid, reserve, dateTime,
                 expires, seller, category, extra>
    bid      ROW<auction, bidder, price, channel, url, dateTime, extra>
    dateTime TIMESTAMP(3)               the event's time (the DDL's computed column)

The struct of the other two kinds is null in each row.

Events
    Events are numbered ``0 .. events - 1`` (``events = 0``: no end). Event
    ``n`` is a person when ``n % total < person_proportion``, an auction when
    below ``person + auction`` proportions, else a bid (1:3:46 by default: in
    every 50 consecutive events exactly 1 person, 3 auctions, 46 bids). Its
    time is ``base_time + floor(n * 1e6 / first_event_rate) // 1000`` ms
    (nexmark's ``GeneratorConfig.timestampForEvent``); when
    ``next_event_rate`` differs, the rate alternates between the two in
    steps over ``rate_period_s`` (``rate_shape`` ``square``: two steps,
    ``sine``: ten), as Beam's Nexmark generator does.

    The fields follow nexmark's ``PersonGenerator``, ``AuctionGenerator``
    and ``BidGenerator``: person and auction ids count up from 1000 with
    the events (so an auction's seller and a bid's auction and bidder refer
    to people and auctions that exist, or a few ahead), hot sellers, bidders
    and auctions by the ``hot_*`` ratios, prices ``round(10 ** (6u) * 100)``,
    auction lengths up to twice the time until ``num_in_flight_auctions``
    further auctions, four hot channels with their urls or one of 10 000
    others (90 % of whose urls carry ``&channel_id=``), random names, emails
    and credit cards, and an ``extra`` padding string that brings the event
    to ``avg_*_size`` bytes on average (the sum of its fields' lengths, as
    nexmark counts them; an estimate of the bytes on the wire, not of
    Arrow's memory). As in nexmark, a bid's bidder id has 1000 added twice
    (bidders are 2000 and up).

Differences from nexmark's Flink connector (deliberate, for reproducible runs)
    Every random draw is a hash of ``(seed, event number, draw)``, so the
    events depend only on the seed and their number: not on the batch size,
    the parallelism or where a restore started. Nexmark draws from an
    unseeded ``SplittableRandom``, starts the event numbers at 1 (its first
    event is an auction) and gives each parallel generator its own timeline
    at ``rate / parallelism``; here one timeline is split: source task ``i``
    of ``p`` reads the blocks of ``batch_size`` events ``i, i + p, ...``.
    ``base_time`` is fixed (nexmark uses the wall clock at start).

Pacing
    By default events come as fast as they are generated (nexmark's
    ``max-emit-speed = true``). With ``max_emit_speed=False`` an event is not
    read before its time: ``t0 + (dateTime - base_time)`` of wall-clock time
    from the reader's first read, so the rates pace the source.

Positions
    A reader's position is a dict: explicit blocks still to read (with the
    events already read of each), then the blocks ``base + index + k *
    parallelism`` for ``k >= next``. ``rescale_positions`` deals the blocks
    nobody read over a new number of readers.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.connectors.base import END, Reader, Source, check_batch_size

__all__ = [
    "AUCTION",
    "AUCTION_TYPE",
    "BID",
    "BID_TYPE",
    "PERSON",
    "PERSON_TYPE",
    "SCHEMA",
    "NexmarkConfig",
    "NexmarkSource",
    "generate",
    "generate_range",
    "nexmark_source",
]

PERSON, AUCTION, BID = 0, 1, 2
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
BASE_TIME_MS = 1_704_067_200_000  # 2024-01-01 00:00:00 UTC

_TS = pa.timestamp("ms")
PERSON_TYPE = pa.struct([
    ("id", pa.int64()), ("name", pa.string()), ("emailAddress", pa.string()),
    ("creditCard", pa.string()), ("city", pa.string()), ("state", pa.string()),
    ("dateTime", _TS), ("extra", pa.string())])
AUCTION_TYPE = pa.struct([
    ("id", pa.int64()), ("itemName", pa.string()), ("description", pa.string()),
    ("initialBid", pa.int64()), ("reserve", pa.int64()), ("dateTime", _TS), ("expires", _TS),
    ("seller", pa.int64()), ("category", pa.int64()), ("extra", pa.string())])
BID_TYPE = pa.struct([
    ("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
    ("channel", pa.string()), ("url", pa.string()), ("dateTime", _TS), ("extra", pa.string())])
SCHEMA = pa.schema([("event_type", pa.int32()), ("person", PERSON_TYPE), ("auction", AUCTION_TYPE),
                    ("bid", BID_TYPE), ("dateTime", _TS)])

# nexmark's constants (PersonGenerator, AuctionGenerator, BidGenerator)
_US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
_US_CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
              "Seattle", "Kent", "Cheyenne"]
_FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
_LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
_NAMES = pa.array([f"{a} {b}" for a in _FIRST_NAMES for b in _LAST_NAMES])
_CITIES = pa.array(_US_CITIES)
_STATES = pa.array(_US_STATES)
_HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
_NUM_CATEGORIES = 5
_PERSON_ID_LEAD = 10
_AUCTION_ID_LEAD = 10
_HOT_SELLER_RATIO = 100
_HOT_AUCTION_RATIO = 100
_HOT_BIDDER_RATIO = 100
_CHANNELS_NUMBER = 10_000
_EXTRA_POOL = 1 << 20  # nexmark's REUSABLE_EXTRA_STRING: one random MiB, padding is cut from it
_SINE_STEPS = 10
_RUN = 1024  # events whose bids' padding is one slice of the pool (see _bid_extra)


# ---------------------------------------------------------------- configuration

def _size_bytes(value: Any, what: str) -> int:
    """Flink's memory size ("200b", "1kb", "2 mb") or an int of bytes."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    m = re.fullmatch(r"\s*(\d+)\s*(b|bytes?|k|kb|kib|m|mb|mib)?\s*", str(value), re.IGNORECASE)
    if m is None:
        raise ValueError(f"{what} must be a size in bytes such as '200b' or '1kb', got {value!r}")
    unit = (m.group(2) or "b").lower()[:1]
    return int(m.group(1)) * {"b": 1, "k": 1024, "m": 1024 * 1024}[unit]


def _seconds(value: Any, what: str) -> int:
    """Flink's duration ("600 s", "10 min", "600") in whole seconds."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|sec|second|seconds|min|minute|minutes|h|hour|hours)?\s*",
                     str(value), re.IGNORECASE)
    if m is None:
        raise ValueError(f"{what} must be a duration such as '600 s' or '10 min', got {value!r}")
    n, unit = int(m.group(1)), (m.group(2) or "s").lower()
    return n // 1000 if unit == "ms" else n * (60 if unit.startswith("min") else 3600 if unit.startswith("h") else 1)


def _bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "false"):
        return str(value).strip().lower() == "true"
    raise ValueError(f"{what} must be 'true' or 'false', got {value!r}")


@dataclass(frozen=True)
class NexmarkConfig:
    """The generator's parameters: nexmark's ``NexmarkConfiguration`` (its
    defaults), a ``seed`` and the ``batch_size`` of the blocks read.
    ``from_options`` reads the ``WITH`` options of nexmark's Flink connector."""

    events: int = 0  # 0: no end
    first_event_rate: int = 10_000  # events per second of event time
    next_event_rate: int = 10_000
    rate_shape: str = "square"
    rate_period_s: int = 600
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    avg_person_size: int = 200
    avg_auction_size: int = 500
    avg_bid_size: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    max_emit_speed: bool = True  # False: paced to the event times
    keep_alive: bool = False  # at the end, stay idle instead of finishing
    seed: int = 0
    base_time: int = BASE_TIME_MS
    batch_size: int = 65_536

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("rate_shape", "max_emit_speed", "keep_alive"):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"nexmark option {f.name} must be an int, got {v!r}")
        for name in ("events", "seed", "person_proportion", "auction_proportion", "bid_proportion",
                     "avg_person_size", "avg_auction_size", "avg_bid_size", "base_time"):
            if getattr(self, name) < 0:
                raise ValueError(f"nexmark option {name} must be >= 0, got {getattr(self, name)}")
        for name in ("first_event_rate", "next_event_rate", "rate_period_s", "hot_auction_ratio",
                     "hot_sellers_ratio", "hot_bidders_ratio", "num_in_flight_auctions", "num_active_people"):
            if getattr(self, name) < 1:
                raise ValueError(f"nexmark option {name} must be >= 1, got {getattr(self, name)}")
        if self.rate_shape not in ("square", "sine"):
            raise ValueError(f"nexmark option rate_shape must be 'square' or 'sine', got {self.rate_shape!r}")
        if max(self.avg_person_size, self.avg_auction_size, self.avg_bid_size) > _EXTRA_POOL // 4:
            raise ValueError(f"nexmark average event sizes must be at most {_EXTRA_POOL // 4} bytes")
        if self.total_proportion < 1:
            raise ValueError("nexmark proportions must not all be 0")
        check_batch_size(self.batch_size)

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    # the WITH options of nexmark's connector (NexmarkSourceOptions), and fastops' own
    OPTIONS: ClassVar[dict[str, tuple[str | None, Callable[..., Any]]]] = {
        "first-event.rate": ("first_event_rate", int), "next-event.rate": ("next_event_rate", int),
        "rate.shape": ("rate_shape", str), "rate.period": ("rate_period_s", _seconds),
        "rate.limited": (None, _bool), "events.num": ("events", int),
        "person.proportion": ("person_proportion", int), "auction.proportion": ("auction_proportion", int),
        "bid.proportion": ("bid_proportion", int), "person.avg-size": ("avg_person_size", _size_bytes),
        "auction.avg-size": ("avg_auction_size", _size_bytes), "bid.avg-size": ("avg_bid_size", _size_bytes),
        "bid.hot-ratio.auctions": ("hot_auction_ratio", int), "bid.hot-ratio.bidders": ("hot_bidders_ratio", int),
        "auction.hot-ratio.sellers": ("hot_sellers_ratio", int), "keep-alive": ("keep_alive", _bool),
        "stop-at": (None, int), "max-emit-speed": ("max_emit_speed", _bool),
        "seed": ("seed", int), "base-time": ("base_time", int), "batch-size": ("batch_size", int),
    }

    @classmethod
    def from_options(cls, options: dict) -> NexmarkConfig:
        """The config of a ``CREATE TABLE ... WITH ('connector' = 'nexmark', ...)``
        (its other keys); ValueError naming an unknown key or a bad value."""
        kwargs: dict[str, Any] = {}
        stop_at = -1
        for key, value in options.items():
            k = str(key).lower()
            if k == "connector":
                continue
            if k not in cls.OPTIONS:
                raise ValueError(f"unknown option {key!r} of the nexmark connector (known: "
                                 f"{', '.join(sorted(cls.OPTIONS))})")
            field_name, conv = cls.OPTIONS[k]
            try:
                v = conv(value, key) if conv in (_seconds, _size_bytes, _bool) else conv(str(value).strip())
            except (TypeError, ValueError) as exc:
                raise ValueError(f"nexmark option {key!r}: bad value {value!r} ({exc})") from None
            if k == "rate.shape":
                v = str(v).lower()
            if k == "stop-at":
                stop_at = int(v)
            elif field_name is not None:
                kwargs[field_name] = v
        cfg = cls(**kwargs)
        if stop_at >= 0 and (cfg.events == 0 or stop_at < cfg.events):
            cfg = replace(cfg, events=stop_at)
        return cfg


# ---------------------------------------------------------------- randomness and event times

_U64 = np.uint64


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective 64-bit hash (uint64 arrays wrap)."""
    x = x + _U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


class _Draws:
    """Uniform draws for events ``n``: draw ``slot`` (0..255) of event ``n`` is
    a hash of ``(seed, n, slot)``, whatever else is drawn or generated."""

    def __init__(self, seed: int, n: np.ndarray):
        self.key = _mix(np.array([seed], dtype=np.uint64))[0]
        self.base = n.astype(np.uint64) << _U64(8)

    def u(self, slot: int, width: int | None = None) -> np.ndarray:
        """Floats in [0, 1): one per event, or ``width`` per event (slots ``slot ..``)."""
        if width is None:
            x = (self.base | _U64(slot)) ^ self.key
        else:
            x = (self.base[:, None] | (np.arange(slot, slot + width, dtype=np.uint64)[None, :])) ^ self.key
        return (_mix(x) >> _U64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def below(self, slot: int, bound: Any) -> np.ndarray:
        """Ints in ``[0, bound)`` (``bound`` a number or an array >= 1), as nextInt."""
        return (self.u(slot) * bound).astype(np.int64)


def _delays_us(cfg: NexmarkConfig) -> list[int]:
    """Beam's RateShape.interEventDelayUs for first != next rate (one generator)."""
    def period(rate: float) -> int:
        r = round(rate)
        return (1_000_000 + r // 2) // r

    if cfg.rate_shape == "square":
        return [period(cfg.first_event_rate), period(cfg.next_event_rate)]
    mid = (cfg.first_event_rate + cfg.next_event_rate) / 2.0
    amp = (cfg.first_event_rate - cfg.next_event_rate) / 2.0
    return [period(math.floor(mid + amp * math.cos(2.0 * math.pi * i / _SINE_STEPS) + 0.5))
            for i in range(_SINE_STEPS)]


def event_times(cfg: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    """The event time (ms since the epoch) of events ``n`` (int64)."""
    n = np.asarray(n, dtype=np.int64)
    if cfg.first_event_rate == cfg.next_event_rate:
        delay = 1_000_000.0 / cfg.first_event_rate
        return cfg.base_time + (n * delay).astype(np.int64) // 1000
    delays = _delays_us(cfg)
    steps = len(delays)
    step_s = (cfg.rate_period_s + steps - 1) // steps
    per_cycle = [step_s * 1_000_000 // d for d in delays]
    events_per_epoch = sum(per_cycle)
    epoch_ms = sum(c * d // 1000 for c, d in zip(per_cycle, delays))
    epoch, k = np.divmod(n, events_per_epoch)
    out = np.zeros(len(n), dtype=np.int64)
    done = np.zeros(len(n), dtype=bool)
    offset_ms = 0
    for c, d in zip(per_cycle, delays):
        here = ~done & (k < c)
        out[here] = cfg.base_time + epoch[here] * epoch_ms + offset_ms + (k[here] * d + 500) // 1000
        done |= here
        k = k - c
        offset_ms += c * d // 1000
    return out


# ---------------------------------------------------------------- strings, vectorised

def _strings(values: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A string array from the concatenated UTF-8 bytes and each string's length."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets),
                                       pa.py_buffer(np.ascontiguousarray(values, dtype=np.uint8)))


def _pack(parts: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """Each row's bytes ``chars[mask]`` of each part, in order, as one string."""
    chars = np.hstack([c for c, _ in parts])
    mask = np.hstack([m for _, m in parts])
    return _strings(chars[mask], mask.sum(axis=1))


def _random_string(d: _Draws, slot: int, max_length: int, special: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """nexmark's nextString: 3 .. max_length - 1 characters, each ``special``
    with probability 1/13 else a letter, trimmed of spaces. (chars, mask)."""
    width = max_length - 1
    length = 3 + d.below(slot, max_length - 3)
    v = (d.u(slot + 1, width) * (13 * 26)).astype(np.int64)
    chars = np.where(v < 26, special, ord("a") + v % 26).astype(np.uint8)
    j = np.arange(width)[None, :]
    mask = j < length[:, None]
    if special == 32:  # String.trim()
        solid = mask & (chars != 32)
        first = solid.argmax(axis=1)
        last = width - 1 - solid[:, ::-1].argmax(axis=1)
        mask = (j >= first[:, None]) & (j <= last[:, None]) & solid.any(axis=1)[:, None]
    return chars, mask


def _const(text: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
    b = np.frombuffer(text.encode(), dtype=np.uint8)
    return np.broadcast_to(b, (rows, len(b))), np.ones((rows, len(b)), dtype=bool)


def _string_lengths(a: pa.Array) -> np.ndarray:
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int32, count=len(a) + 1, offset=a.offset * 4)
    return np.diff(offsets)


class _World:
    """Per-seed constants: the padding pool, the hot urls and the channel cache."""

    _cache: dict[int, _World] = {}

    def __init__(self, seed: int):
        rng = np.random.default_rng([seed, 0x4E45584D])
        self.pool = (ord("a") + rng.integers(0, 26, _EXTRA_POOL)).astype(np.uint8)
        urls = self._base_urls(seed, _CHANNELS_NUMBER + len(_HOT_CHANNELS))
        hot, cached = urls[:len(_HOT_CHANNELS)], urls[len(_HOT_CHANNELS):]
        i = np.arange(_CHANNELS_NUMBER, dtype=np.int64)
        with_id = rng.integers(0, 10, _CHANNELS_NUMBER) > 0  # random.nextInt(10) > 0
        rev = np.array([abs(_reverse32(int(k))) for k in i], dtype=np.int64)  # once per seed
        ids = pa.array([f"&channel_id={r}" for r in rev])
        suffix = pa.array(np.where(with_id, ids.to_numpy(zero_copy_only=False), ""))
        self.channel_urls = pc.binary_join_element_wise(cached, suffix, "")
        self.channel_names = pa.array([f"channel-{k}" for k in range(_CHANNELS_NUMBER)])
        # the four hot channels first, then the 10 000 others: a bid takes one of these
        self.channels = pa.concat_arrays([pa.array(_HOT_CHANNELS), self.channel_names])
        self.urls = pa.concat_arrays([hot, self.channel_urls.cast(pa.string())])

    @staticmethod
    def _base_urls(seed: int, count: int) -> pa.Array:
        """getBaseUrl: https://www.nexmark.com/<s>/<s>/<s>/item.htm?query=1, s of 3-4 chars ('_' specials)."""
        d = _Draws(seed ^ 0x55524C, np.arange(count, dtype=np.int64))
        parts = [_const("https://www.nexmark.com/", count)]
        for k in range(3):
            parts.append(_random_string(d, 10 * k, 5, special=ord("_")))
            parts.append(_const("/", count))
        parts.append(_const("item.htm?query=1", count))
        return _pack(parts)

    @classmethod
    def get(cls, seed: int) -> _World:
        w = cls._cache.get(seed)
        if w is None:
            w = cls._cache[seed] = _World(seed)
        return w


def _reverse32(i: int) -> int:
    """Java's Integer.reverse: the 32 bits in reverse order, as a signed int."""
    r = int(f"{i & 0xFFFFFFFF:032b}"[::-1], 2)
    return r - (1 << 32) if r >= 1 << 31 else r


def _extra(d: _Draws, slot: int, world: _World, current: np.ndarray, average: int) -> pa.Array:
    """nexmark's nextExtra: padding so that ``current + len`` is ``average`` on
    average (none when ``current`` exceeds it), cut from the padding pool."""
    size = _extra_sizes(d, slot, current, average)
    width = int(size.max()) if len(size) else 0
    if width == 0:
        return _strings(np.zeros(0, np.uint8), size)
    start = d.below(slot + 1, _EXTRA_POOL - _max_extra(average))  # a bound of the config, not the batch
    rows = np.lib.stride_tricks.sliding_window_view(world.pool, width)[start]  # (k, width), row copies
    return _strings(rows[np.arange(width)[None, :] < size[:, None]], size)


def _extra_sizes(d: _Draws, slot: int, current: Any, average: int) -> np.ndarray:
    """nexmark's nextExtra lengths: ``average - current`` give or take 20 %."""
    desired = np.maximum(average - np.asarray(current), 0)
    delta = np.floor(desired * 0.2 + 0.5).astype(np.int64)  # Math.round
    size = desired - delta + np.where(delta > 0, d.below(slot, np.maximum(2 * delta, 1)), 0)
    return np.where(np.asarray(current) > average, 0, size).astype(np.int64)


def _bid_extra(cfg: NexmarkConfig, n: np.ndarray, world: _World) -> pa.Array:
    """The bids' padding (their other fields count 32 bytes, so its lengths are
    known without generating them): the bids of each run of ``_RUN`` events
    take consecutive bytes of the pool from a point drawn per run, so a
    batch's padding is one slice of the pool per run it touches. The bytes of
    a bid depend on its run, not on the batch."""
    if len(n) == 0 or _RUN * _max_extra(cfg.avg_bid_size) * 2 > _EXTRA_POOL:
        return _extra(_Draws(cfg.seed, n), 8, world, np.full(len(n), 32), cfg.avg_bid_size)
    first_run, last_run = int(n[0]) // _RUN, int(n[-1]) // _RUN
    m = np.arange(first_run * _RUN, (last_run + 1) * _RUN, dtype=np.int64)
    m = m[m % cfg.total_proportion >= cfg.person_proportion + cfg.auction_proportion]  # the runs' bids
    size = _extra_sizes(_Draws(cfg.seed, m), 8, 32, cfg.avg_bid_size)
    run = m // _RUN - first_run
    starts = np.cumsum(size) - size
    in_run = starts - starts[np.searchsorted(run, run)]  # bytes before it in its run
    base = _Draws(cfg.seed ^ 0x45585452, np.arange(first_run, last_run + 1, dtype=np.int64)).below(
        0, _EXTRA_POOL - _RUN * _max_extra(cfg.avg_bid_size))
    a = int(np.searchsorted(m, n[0]))
    pos, size, run = base[run[a:a + len(n)]] + in_run[a:a + len(n)], size[a:a + len(n)], run[a:a + len(n)]
    cuts = [0, *(np.flatnonzero(np.diff(run)) + 1).tolist(), len(n)]
    pieces = [world.pool[pos[i]:pos[j - 1] + size[j - 1]] for i, j in zip(cuts, cuts[1:])]  # one per run
    return _strings(np.concatenate(pieces), size)


def _max_extra(average: int) -> int:
    """The longest padding for an average size (desired + delta, delta = 20 %)."""
    return average + (average + 4) // 5 + 1


def _price(d: _Draws, slot: int) -> np.ndarray:
    return np.floor(np.power(10.0, d.u(slot) * 6.0) * 100.0 + 0.5).astype(np.int64)


# ---------------------------------------------------------------- ids (nexmark's formulas, base 0)

def _last_person(cfg: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    epoch, offset = np.divmod(n, cfg.total_proportion)
    return epoch * cfg.person_proportion + np.minimum(offset, cfg.person_proportion - 1)


def _last_auction(cfg: NexmarkConfig, n: np.ndarray) -> np.ndarray:
    epoch, offset = np.divmod(n, cfg.total_proportion)
    pp, ap = cfg.person_proportion, cfg.auction_proportion
    before = offset < pp  # a person: the last auction of the previous epoch
    after = offset >= pp + ap  # a bid: the last auction of this epoch
    epoch = np.where(before, epoch - 1, epoch)
    offset = np.where(before | after, ap - 1, offset - pp)
    return epoch * ap + offset


def _next_person(cfg: NexmarkConfig, n: np.ndarray, d: _Draws, slot: int) -> np.ndarray:
    people = _last_person(cfg, n) + 1
    active = np.minimum(people, cfg.num_active_people)
    return people - active + d.below(slot, active + _PERSON_ID_LEAD)


def _next_auction(cfg: NexmarkConfig, n: np.ndarray, d: _Draws, slot: int) -> np.ndarray:
    last = _last_auction(cfg, n)
    low = np.maximum(last - cfg.num_in_flight_auctions, 0)
    return low + d.below(slot, last - low + 1 + _AUCTION_ID_LEAD)


# ---------------------------------------------------------------- the three kinds of events

def _persons(cfg: NexmarkConfig, n: np.ndarray, ts: np.ndarray, world: _World) -> pa.StructArray:
    k = len(n)
    d = _Draws(cfg.seed, n)
    name = _NAMES.take(pa.array(d.below(0, len(_NAMES))))
    email = _pack([_random_string(d, 1, 7), _const("@", k), _random_string(d, 10, 5), _const(".com", k)])
    digits = (d.u(20, 16) * 10).astype(np.uint8) + ord("0")
    card = np.insert(digits, [4, 8, 12], ord(" "), axis=1)
    credit = _strings(card.ravel(), np.full(k, 19))
    city = _CITIES.take(pa.array(d.below(40, len(_CITIES))))
    state = _STATES.take(pa.array(d.below(41, len(_STATES))))
    current = 8 + _string_lengths(name) + _string_lengths(email) + 19 + _string_lengths(city) + \
        _string_lengths(state)
    extra = _extra(d, 42, world, current, cfg.avg_person_size)
    ids = _last_person(cfg, n) + FIRST_PERSON_ID
    return pa.StructArray.from_arrays(
        [pa.array(ids), name, email, credit, city, state, pa.array(ts, _TS), extra], fields=list(PERSON_TYPE))


def _auctions(cfg: NexmarkConfig, n: np.ndarray, ts: np.ndarray, world: _World) -> pa.StructArray:
    d = _Draws(cfg.seed, n)
    ids = _last_auction(cfg, n) + FIRST_AUCTION_ID
    hot = d.below(0, cfg.hot_sellers_ratio) > 0
    seller = np.where(hot, (_last_person(cfg, n) // _HOT_SELLER_RATIO) * _HOT_SELLER_RATIO,
                      _next_person(cfg, n, d, 1)) + FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + d.below(2, _NUM_CATEGORIES)
    initial = _price(d, 3)
    # the length: up to twice the time until num_in_flight_auctions more auctions
    ahead = cfg.num_in_flight_auctions * cfg.total_proportion // max(cfg.auction_proportion, 1)
    horizon = event_times(cfg, n + ahead) - ts
    expires = ts + 1 + d.below(4, np.maximum(horizon * 2, 1))
    item = _pack([_random_string(d, 10, 20)])
    desc = _pack([_random_string(d, 40, 100)])
    reserve = initial + _price(d, 5)
    current = 8 + _string_lengths(item) + _string_lengths(desc) + 40
    extra = _extra(d, 6, world, current, cfg.avg_auction_size)
    return pa.StructArray.from_arrays(
        [pa.array(ids), item, desc, pa.array(initial), pa.array(reserve), pa.array(ts, _TS),
         pa.array(expires, _TS), pa.array(seller), pa.array(category), extra], fields=list(AUCTION_TYPE))


def _bids(cfg: NexmarkConfig, n: np.ndarray, ts: np.ndarray, world: _World) -> pa.StructArray:
    d = _Draws(cfg.seed, n)
    hot_auction = d.below(0, cfg.hot_auction_ratio) > 0
    auction = np.where(hot_auction, (_last_auction(cfg, n) // _HOT_AUCTION_RATIO) * _HOT_AUCTION_RATIO,
                       _next_auction(cfg, n, d, 1)) + FIRST_AUCTION_ID
    hot_bidder = d.below(2, cfg.hot_bidders_ratio) > 0
    bidder = np.where(hot_bidder, (_last_person(cfg, n) // _HOT_BIDDER_RATIO) * _HOT_BIDDER_RATIO + 1,
                      _next_person(cfg, n, d, 3)) + 2 * FIRST_PERSON_ID  # added twice, as nexmark does
    price = _price(d, 4)
    hot = d.below(5, 2) > 0
    pick = np.where(hot, d.below(6, len(_HOT_CHANNELS)), d.below(7, _CHANNELS_NUMBER) + len(_HOT_CHANNELS))
    idx = pa.array(pick)
    extra = _bid_extra(cfg, n, world)
    return pa.StructArray.from_arrays(
        [pa.array(auction), pa.array(bidder), pa.array(price), world.channels.take(idx), world.urls.take(idx),
         pa.array(ts, _TS), extra], fields=list(BID_TYPE))


def _spread(compact: pa.StructArray, rows: np.ndarray, total: int) -> pa.Array:
    """``compact``'s rows at positions ``rows`` (ascending) of ``total``, null
    elsewhere: fixed-width fields scattered, strings keep their bytes (empty
    where null), the struct's validity marks the rows."""
    valid = np.zeros(total, dtype=bool)
    valid[rows] = True
    children = []
    for i, f in enumerate(compact.type):
        child = compact.field(i)
        if pa.types.is_string(f.type):
            lengths = np.zeros(total, dtype=np.int32)
            lengths[rows] = _string_lengths(child)
            offsets = np.zeros(total + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            start = int(np.frombuffer(child.buffers()[1], np.int32, 1, child.offset * 4)[0])
            data = child.buffers()[2]
            children.append(pa.StringArray.from_buffers(
                total, pa.py_buffer(offsets), data.slice(start) if start else data))
        else:
            values = child.to_numpy(zero_copy_only=False)
            full = np.zeros(total, dtype=values.dtype)
            full[rows] = values
            children.append(pa.array(full, f.type))
    return pa.StructArray.from_arrays(children, fields=list(compact.type),
                                      mask=pa.array(~valid))


def generate_range(cfg: NexmarkConfig, lo: int, hi: int) -> pa.RecordBatch:
    """Events ``lo .. hi - 1`` as one batch of ``SCHEMA`` (vectorised)."""
    n = np.arange(lo, hi, dtype=np.int64)
    ts = event_times(cfg, n)
    rem = n % cfg.total_proportion
    kind = np.where(rem < cfg.person_proportion, PERSON,
                    np.where(rem < cfg.person_proportion + cfg.auction_proportion, AUCTION, BID)).astype(np.int32)
    world = _World.get(cfg.seed)
    cols = [pa.array(kind)]
    for code, make in ((PERSON, _persons), (AUCTION, _auctions), (BID, _bids)):
        rows = np.flatnonzero(kind == code)
        cols.append(_spread(make(cfg, n[rows], ts[rows], world), rows, len(n)))
    cols.append(pa.array(ts, _TS))
    return pa.RecordBatch.from_arrays(cols, schema=SCHEMA)


def generate(cfg: NexmarkConfig) -> pa.Table:
    """All ``cfg.events`` events (a bounded config) as one table, for references and tests."""
    if cfg.events <= 0:
        raise ValueError("generate needs a bounded stream (events > 0)")
    b = cfg.batch_size
    return pa.Table.from_batches([generate_range(cfg, lo, min(lo + b, cfg.events))
                                  for lo in range(0, cfg.events, b)], schema=SCHEMA)


# ---------------------------------------------------------------- the source

def _bad(name: str, position: Any, why: str) -> ValueError:
    return ValueError(f"source {name!r}: bad position {position!r}: {why}")


def _read_position(name: str, position: Any) -> tuple[list[list[int]], int, int]:
    """(explicit [block, events read] pairs, base, next) of a position (None: the start)."""
    if position is None:
        return [], 0, 0
    if not isinstance(position, dict) or set(position) - {"blocks", "base", "next", "wall"}:
        raise _bad(name, position, "expected {'blocks': [[block, read], ...], 'base': b, 'next': k}")
    blocks = position.get("blocks", [])
    base, nxt = position.get("base", 0), position.get("next", 0)
    ok = isinstance(blocks, list) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) and v >= 0 for v in p)
        for p in blocks)
    if not ok or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (base, nxt)):
        raise _bad(name, position, "blocks must be [block, read] pairs and base, next ints >= 0")
    return [[int(b), int(r)] for b, r in blocks], int(base), int(nxt)


class _NexmarkReader(Reader):
    def __init__(self, source: NexmarkSource, index: int, parallelism: int, position: Any):
        self.cfg = source.cfg
        self.columns = source.columns
        self.index, self.parallelism = index, parallelism
        self.blocks, self.base, self.next = _read_position(source.name, position)
        self.wall: float | None = position.get("wall") if isinstance(position, dict) else None
        self.arrived: float | None = None

    def _block_end(self, block: int) -> int:
        end = (block + 1) * self.cfg.batch_size
        return end if self.cfg.events <= 0 else min(end, self.cfg.events)

    def _current(self) -> list[int] | None:
        """The [block, read] being read (a tail block moves to the explicit list)."""
        while self.blocks:
            block, read = self.blocks[0]
            if block * self.cfg.batch_size + read < self._block_end(block):
                return self.blocks[0]
            self.blocks.pop(0)
        block = self.base + self.index + self.next * self.parallelism
        if self.cfg.events > 0 and block * self.cfg.batch_size >= self.cfg.events:
            return None
        self.next += 1
        self.blocks.append([block, 0])
        return self.blocks[0]

    def read(self) -> Any:
        cur = self._current()
        if cur is None:
            return None if self.cfg.keep_alive else END
        block, read = cur
        lo, hi = block * self.cfg.batch_size + read, self._block_end(block)
        if not self.cfg.max_emit_speed:
            now = time.time()
            if self.wall is None:
                self.wall = now
            times = event_times(self.cfg, np.arange(lo, hi, dtype=np.int64)) - self.cfg.base_time
            due = int(np.searchsorted(times, (now - self.wall) * 1000.0, side="right"))
            if due == 0:
                time.sleep(min(max(self.wall + times[0] / 1000.0 - now, 0.0), 0.05))
                return None
            hi = lo + due
            self.arrived = self.wall + times[0] / 1000.0
        batch = generate_range(self.cfg, lo, hi)
        cur[1] += hi - lo
        if self.columns is not None:
            batch = batch.select(self.columns)
        return batch

    def position(self) -> Any:
        pos: dict[str, Any] = {"blocks": [list(p) for p in self.blocks], "base": self.base, "next": self.next}
        if self.wall is not None:
            pos["wall"] = self.wall
        return pos

    def backlog(self) -> int | None:
        """Paced: the events of the current block that are due and not read."""
        if self.cfg.max_emit_speed or self.wall is None or not self.blocks:
            return None
        block, read = self.blocks[0]
        lo, hi = block * self.cfg.batch_size + read, self._block_end(block)
        times = event_times(self.cfg, np.arange(lo, hi, dtype=np.int64)) - self.cfg.base_time
        return int(np.searchsorted(times, (time.time() - self.wall) * 1000.0, side="right"))

    def arrival_time(self) -> float | None:
        return self.arrived


class NexmarkSource(Source):
    """Nexmark's events (see the module docs), splittable and replayable.

    >>> from fastops.connectors.nexmark import NexmarkConfig, NexmarkSource
    >>> src = NexmarkSource(NexmarkConfig(events=100, batch_size=50))
    >>> src.open(0, 1).read().num_rows
    50

    ``columns`` picks the columns read (default all of ``SCHEMA``).
    """

    replayable = True

    def __init__(self, cfg: NexmarkConfig | None = None, columns: list[str] | None = None,
                 name: str = "nexmark", **options: Any):
        if cfg is None:
            cfg = NexmarkConfig(**options)
        elif options:
            cfg = replace(cfg, **options)
        self.cfg = cfg
        if columns is not None:
            unknown = [c for c in columns if c not in SCHEMA.names]
            if unknown:
                raise ValueError(f"nexmark has no column(s) {unknown} (columns: {SCHEMA.names})")
        self.columns = columns
        self.name = name

    def splits(self) -> int:
        if self.cfg.events <= 0:
            return 1 << 30
        return max(1, -(-self.cfg.events // self.cfg.batch_size))

    def schema(self) -> pa.Schema:
        return SCHEMA if self.columns is None else pa.schema([SCHEMA.field(c) for c in self.columns])

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _NexmarkReader(self, index, parallelism, position)

    def rescale_positions(self, positions: list, parallelism: int) -> list:
        """Deal the blocks the old readers had not read over ``parallelism`` new
        readers: blocks read in part first, then untouched ones below the old
        readers' furthest tail block, round robin; all later blocks go to the
        new readers' tails (see ``Source.rescale_positions``)."""
        if not isinstance(positions, (list, tuple)) or not positions:
            raise ValueError(f"source {self.name!r}: positions must be a non-empty list, one per reader")
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"source {self.name!r}: parallelism must be an int >= 1, got {parallelism!r}")
        old = len(positions)
        read = [_read_position(self.name, p) for p in positions]
        bases = {base for _, base, _ in read}
        if len(bases) != 1:
            raise ValueError(f"source {self.name!r}: the positions come from different rescales ({positions!r})")
        base = bases.pop()
        top = max(nxt for _, _, nxt in read)
        left: list[list[int]] = []
        for i, (blocks, _, nxt) in enumerate(read):
            left.extend(blocks)
            left.extend([base + i + k * old, 0] for k in range(nxt, top))
        if self.cfg.events > 0:
            left = [p for p in left if p[0] * self.cfg.batch_size + p[1] < self.cfg.events]
        order = sorted(p for p in left if p[1]) + sorted(p for p in left if not p[1])
        walls = [float(p["wall"]) for p in positions if isinstance(p, dict) and p.get("wall") is not None]
        out: list[dict] = [{"blocks": [], "base": base + top * old, "next": 0} for _ in range(parallelism)]
        for j, p in enumerate(order):
            out[j % parallelism]["blocks"].append(p)
        if walls:
            for pos in out:
                pos["wall"] = min(walls)
        return out


def nexmark_source(table: str, options: dict, schema: pa.Schema) -> NexmarkSource:
    """The source of ``CREATE TABLE table (...) WITH ('connector' = 'nexmark', ...)``:
    ``options`` are the WITH options, ``schema`` the declared physical columns,
    each one of ``SCHEMA``'s with its type (ROW types field for field);
    ValueError naming the table otherwise."""
    for f in schema:
        if f.name not in SCHEMA.names:
            raise ValueError(f"table {table!r}: the nexmark connector has no column {f.name!r} "
                             f"(its columns: {', '.join(SCHEMA.names)})")
        want = SCHEMA.field(f.name).type
        if f.type != want:
            raise ValueError(f"table {table!r}: column {f.name!r} of the nexmark connector is {want}, "
                             f"declared {f.type}")
    try:
        cfg = NexmarkConfig.from_options(options)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"table {table!r}: {exc}") from None
    return NexmarkSource(cfg, columns=schema.names, name=table)
