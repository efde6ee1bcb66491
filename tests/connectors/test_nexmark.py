"""The Nexmark source against nexmark's documented generator behaviour.

References are written out from nexmark's generator classes (GeneratorConfig,
PersonGenerator, AuctionGenerator, BidGenerator) in plain Python integers:
the kind of event ``n`` by ``n % 50``, the ids counting up from 1000, the
event time ``base + int(n * 1e6 / rate) // 1000``. At 1000 events per second
every event has its own millisecond, so ``dateTime - base`` is the event
number, which identifies the events read by several readers.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.connectors.base import END
from fastops.connectors.nexmark import (
    BASE_TIME_MS,
    SCHEMA,
    NexmarkConfig,
    NexmarkSource,
    event_times,
    generate,
    generate_range,
)
from fastops.datastream import StreamEnvironment


def numbers(batch: pa.RecordBatch | pa.Table) -> list[int]:
    """Event numbers of a batch at 1000 events/s (one per millisecond)."""
    ms = batch.column("dateTime").cast(pa.int64()).to_pylist()
    return [t - BASE_TIME_MS for t in ms]


def read_all(reader, limit: int | None = None) -> list[pa.RecordBatch]:
    out = []
    while limit is None or len(out) < limit:
        b = reader.read()
        if b is END:
            break
        if b is not None:
            out.append(b)
    return out


def test_schema_is_nexmarks_datagen_table():
    t = generate(NexmarkConfig(events=100))
    assert t.schema == SCHEMA
    assert SCHEMA.field("person").type.names == ["id", "name", "emailAddress", "creditCard", "city", "state",
                                                 "dateTime", "extra"]
    assert SCHEMA.field("auction").type.names == ["id", "itemName", "description", "initialBid", "reserve",
                                                  "dateTime", "expires", "seller", "category", "extra"]
    assert SCHEMA.field("bid").type.names == ["auction", "bidder", "price", "channel", "url", "dateTime", "extra"]
    kinds = t.column("event_type").to_pylist()
    for k, name in enumerate(("person", "auction", "bid")):  # the struct of the event's kind, null otherwise
        valid = t.column(name).is_valid().to_pylist()
        assert valid == [x == k for x in kinds]


@pytest.mark.parametrize("props", [(1, 3, 46), (2, 5, 3), (0, 1, 9)])
def test_proportions_are_exact_per_cycle(props):
    p, a, b = props
    cfg = NexmarkConfig(events=20 * (p + a + b) + 7, person_proportion=p, auction_proportion=a,
                        bid_proportion=b, batch_size=250)
    kinds = generate(cfg).column("event_type").to_pylist()
    total = p + a + b
    expected = [0 if n % total < p else 1 if n % total < p + a else 2 for n in range(cfg.events)]
    assert kinds == expected
    for lo in range(0, 20 * total, total):
        assert Counter(kinds[lo:lo + total]) == Counter({0: p, 1: a, 2: b} if p else {1: a, 2: b})


def test_ids_follow_the_events():
    cfg = NexmarkConfig(events=5000, batch_size=700)
    t = generate(cfg).to_pylist()
    people = [r["person"]["id"] for r in t if r["event_type"] == 0]
    auctions = [r["auction"]["id"] for r in t if r["event_type"] == 1]
    assert people == list(range(1000, 1000 + len(people)))
    assert auctions == list(range(1000, 1000 + len(auctions)))
    for n, r in enumerate(t):
        last_person = n // 50  # base-0 ids of the last person and auction generated so far
        last_auction = (n // 50) * 3 + min(max(n % 50 - 1, 0), 2) - (1 if n % 50 == 0 else 0)
        if r["event_type"] == 1:
            a = r["auction"]
            assert 1000 <= a["seller"] <= 1000 + last_person + 10
            assert 10 <= a["category"] < 15
            assert a["reserve"] > a["initialBid"] >= 100
            assert a["expires"] > a["dateTime"]
        elif r["event_type"] == 2:
            b = r["bid"]
            assert 1000 <= b["auction"] <= 1000 + last_auction + 10
            assert 2000 <= b["bidder"] <= 2000 + last_person + 10  # nexmark adds the 1000 twice
            assert 100 <= b["price"] <= 100_000_000
            if b["channel"] in ("Google", "Facebook", "Baidu", "Apple"):
                assert b["url"].startswith("https://www.nexmark.com/")
            else:
                k = int(b["channel"].removeprefix("channel-"))
                assert 0 <= k < 10_000
                assert "&channel_id=" not in b["url"] or b["url"].endswith(f"&channel_id={_reverse(k)}")


def _reverse(i: int) -> int:
    r = int(f"{i:032b}"[::-1], 2)
    return abs(r - (1 << 32) if r >= 1 << 31 else r)


def test_hot_ratios():
    t = generate(NexmarkConfig(events=20_000))
    bids = pa.table({"b": t.column("bid")}).filter(t.column("event_type").to_numpy() == 2).column("b")
    channels = Counter(bids.combine_chunks().field("channel").to_pylist())
    hot = sum(channels[c] for c in ("Google", "Facebook", "Baidu", "Apple"))
    assert 0.45 < hot / len(bids) < 0.55  # half of the bids on the four hot channels
    auction = np.array(bids.combine_chunks().field("auction").to_pylist())
    assert 0.45 < np.mean((auction - 1000) % 100 == 0) < 0.6  # hot auctions: the first of each hundred


@pytest.mark.parametrize("rate", [1000, 10_000, 7, 333_333])
def test_event_times_follow_the_rate(rate):
    cfg = NexmarkConfig(events=3000, first_event_rate=rate, next_event_rate=rate, batch_size=512)
    t = generate(cfg)
    expected = [BASE_TIME_MS + int(n * (1_000_000.0 / rate)) // 1000 for n in range(cfg.events)]
    assert t.column("dateTime").cast(pa.int64()).to_pylist() == expected
    for name in ("person", "auction", "bid"):  # each struct's dateTime is the event's
        col = t.column(name).combine_chunks()
        inner = col.field("dateTime").cast(pa.int64()).to_pylist()
        valid = col.is_valid().to_pylist()
        assert [x for x, v in zip(inner, valid) if v] == [x for x, v in zip(expected, valid) if v]


def test_square_rate_shape_alternates_the_rates():
    # Beam's generator: 1000/s for period/2 seconds, then 100/s, and again
    cfg = NexmarkConfig(events=10, first_event_rate=1000, next_event_rate=100, rate_period_s=2)
    n = np.array([0, 1, 999, 1000, 1001, 1099, 1100, 1101])
    assert (event_times(cfg, n) - BASE_TIME_MS).tolist() == [0, 1, 999, 1000, 1010, 1990, 2000, 2001]


def test_deterministic_given_the_seed_whatever_the_batches():
    a = generate(NexmarkConfig(events=1500, seed=5, batch_size=1000))
    b = generate(NexmarkConfig(events=1500, seed=5, batch_size=177))
    c = generate(NexmarkConfig(events=1500, seed=6, batch_size=1000))
    assert a.equals(b)
    assert not a.equals(c)
    assert generate_range(NexmarkConfig(seed=5), 1234, 1300).equals(
        a.slice(1234, 66).combine_chunks().to_batches()[0])


def test_extra_pads_to_the_average_size():
    cfg = NexmarkConfig(events=10_000, avg_bid_size=300)
    t = generate(cfg)
    bids = t.column("bid").combine_chunks().filter(pc.equal(t.column("event_type").combine_chunks(), 2))
    sizes = np.array([len(x) for x in bids.field("extra").to_pylist()])
    assert abs(sizes.mean() + 32 - 300) < 3  # nexmark counts 32 bytes of a bid's other fields


def _config(**kw):
    return NexmarkConfig(**{"events": 4000, "first_event_rate": 1000, "next_event_rate": 1000,
                            "batch_size": 300, **kw})


@pytest.mark.parametrize("p", [2, 3, 5])
def test_parallel_split_reads_the_same_events(p):
    cfg = _config()
    src = NexmarkSource(cfg)
    one = generate(cfg)
    got = []
    for i in range(p):
        got += read_all(src.open(i, p))
    rows = pa.Table.from_batches(got).sort_by([("dateTime", "ascending")])
    assert rows.equals(one.combine_chunks())


def test_restore_mid_way_gives_the_same_events():
    cfg = _config()
    src = NexmarkSource(cfg)
    whole = read_all(src.open(1, 2))
    r = src.open(1, 2)
    first = read_all(r, 3)
    pos = json.loads(json.dumps(r.position()))  # as a checkpoint stores it
    rest = read_all(src.open(1, 2, pos))
    assert pa.Table.from_batches(first + rest).equals(pa.Table.from_batches(whole))
    # a block read in part (a paced reader stops anywhere)
    part = read_all(src.open(0, 1, {"blocks": [[2, 120]], "base": 0, "next": 0}), 1)[0]
    assert numbers(part) == list(range(720, 900))


@settings(max_examples=8, deadline=None)
@given(old=st.integers(1, 4), new=st.integers(1, 4), reads=st.lists(st.integers(0, 5), min_size=4, max_size=4),
       again=st.integers(1, 3))
def test_rescale_reads_every_event_once(old, new, reads, again):
    src = NexmarkSource(_config(events=1500, batch_size=100))
    seen: Counter = Counter()
    positions = []
    for i in range(old):
        r = src.open(i, old)
        for b in read_all(r, reads[i]):
            seen.update(numbers(b))
        positions.append(json.loads(json.dumps(r.position())))
    positions = src.rescale_positions(positions, new)
    later = []
    for j in range(new):  # read a little, rescale once more, then read to the end
        r = src.open(j, new, positions[j])
        for b in read_all(r, reads[j % 4] // 2):
            seen.update(numbers(b))
        later.append(json.loads(json.dumps(r.position())))
    for j, pos in enumerate(src.rescale_positions(later, again)):
        for b in read_all(src.open(j, again, pos)):
            seen.update(numbers(b))
    assert seen == Counter(range(1500))


def test_job_at_parallelism_two_reads_every_event():
    cfg = _config()
    env = StreamEnvironment(parallelism=2)
    out = env.from_source(NexmarkSource(cfg)).collect()
    assert sorted(numbers(out)) == list(range(4000))


def test_paced_source_follows_the_event_times():
    cfg = _config(events=600, first_event_rate=2000, next_event_rate=2000, max_emit_speed=False)
    r = NexmarkSource(cfg).open(0, 1)
    t0 = time.perf_counter()
    got = read_all(r)
    took = time.perf_counter() - t0
    assert sum(b.num_rows for b in got) == 600
    assert took >= 0.25  # 600 events at 2000/s: the last one is due after 0.2995 s
    assert len(got) > 2  # read as they fell due, not in one batch


def test_options_of_nexmarks_connector():
    cfg = NexmarkConfig.from_options({
        "connector": "nexmark", "first-event.rate": "5000", "next-event.rate": "5000", "events.num": "100",
        "person.proportion": "2", "auction.proportion": "3", "bid.proportion": "45",
        "bid.avg-size": "1kb", "rate.period": "10 min", "max-emit-speed": "false"})
    assert (cfg.first_event_rate, cfg.events, cfg.person_proportion, cfg.avg_bid_size, cfg.rate_period_s,
            cfg.max_emit_speed) == (5000, 100, 2, 1024, 600, False)
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        NexmarkConfig.from_options({"bogus": "1"})
    with pytest.raises(ValueError, match="first-event.rate"):
        NexmarkConfig.from_options({"first-event.rate": "fast"})
    assert NexmarkConfig.from_options({"events.num": "100", "stop-at": "40"}).events == 40


class _Gate:
    """A pass-through map that signals once ``at`` batches passed, then slows
    down (the job is still running when the test stops it)."""

    def __init__(self, at: int):
        self.at, self.seen = at, 0
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        with self.lock:
            self.seen += 1
            if self.seen >= self.at:
                self.reached.set()
        if self.seen >= self.at:
            time.sleep(0.01)
        return pa.RecordBatch.from_arrays([batch.column("event_type"), batch.column("dateTime").cast(pa.int64())],
                                          names=["kind", "ms"])


@pytest.mark.parametrize("before,after", [(2, 3), (3, 1)])
def test_savepoint_resumed_at_another_parallelism_reads_every_event_once(tmp_path, before, after):
    cfg = _config(events=3000, batch_size=100)
    out, sp = str(tmp_path / "out"), str(tmp_path / "sp")
    env = StreamEnvironment(parallelism=before)
    gate = _Gate(8)
    env.from_source(NexmarkSource(cfg)).map(gate).sink_to_parquet(out)
    client = env.execute_async()
    assert gate.reached.wait(60)
    client.stop_with_savepoint(sp)
    first = client.wait()
    assert first.rows_in < 3000
    env = StreamEnvironment(parallelism=after)
    env.from_source(NexmarkSource(cfg)).map(_Gate(10**9)).sink_to_parquet(out)
    second = env.execute(restore=sp)
    assert first.rows_in + second.rows_in == 3000  # nothing read twice, nothing skipped
    got = pq.read_table(out).column("ms").to_pylist()
    assert Counter(t - BASE_TIME_MS for t in got) == Counter(range(3000))
