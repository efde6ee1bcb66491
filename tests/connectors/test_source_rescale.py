"""Sources at another parallelism: ``Source.rescale_positions`` deals the input
the old readers had not read over the new readers.

The reference is the row ids themselves: the rows the old readers read up to
their positions plus the rows the new readers read from the rescaled positions
must be every row of the input exactly once (a multiset of an ``id`` column).
Positions pass through JSON as in a checkpoint (a top-level list comes back as
a tuple, as the runtime's ``_from_json`` does), and the sources' ``rows_at``
must count the rows read before and after a rescale alike.
"""
from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastops.connectors.base import END, Source
from fastops.connectors.collections import TableSource
from fastops.connectors.files import FileSource
from fastops.connectors.generators import GeneratorSource, IteratorSource


def via_json(position):
    """A position as a checkpoint gives it back."""
    pos = json.loads(json.dumps(position))
    return tuple(pos) if isinstance(pos, list) else pos


def ids(batch) -> list[int]:
    return batch.column("id").to_pylist()


def read(reader, batches: int | None = None) -> list[int]:
    """The row ids of up to ``batches`` batches (None: all)."""
    rows: list[int] = []
    for _ in itertools.count() if batches is None else range(batches):
        b = reader.read()
        if b is END:
            break
        rows += ids(b)
    return rows


def run_rescale(source, counts: list[list[int]], final: int) -> Counter:
    """Readers at parallelism ``len(counts[0])`` read ``counts[0][i]`` batches
    each, the positions are rescaled to ``len(counts[1])`` readers, which read
    ``counts[1][j]`` each, ... and the last positions to ``final`` readers,
    which read to the end. Checks ``rows_at`` and JSON on the way; returns
    the multiset of the row ids read."""
    seen: Counter = Counter()
    positions: list = [None] * len(counts[0])
    for step, reads in enumerate(counts + [None]):
        p = len(positions)
        read_before = sum(source.rows_at(i, p, pos) for i, pos in enumerate(positions))
        assert read_before == sum(seen.values())
        readers = [source.open(i, p, pos) for i, pos in enumerate(positions)]
        for i, r in enumerate(readers):
            seen.update(read(r, None if reads is None else reads[i]))
        positions = [via_json(r.position()) for r in readers]
        assert sum(source.rows_at(i, p, pos) for i, pos in enumerate(positions)) == sum(seen.values())
        if reads is None:
            break
        new_p = len(counts[step + 1]) if step + 1 < len(counts) else final
        positions = [via_json(pos) for pos in source.rescale_positions(positions, new_p)]
        assert len(positions) == new_p and all(isinstance(pos, dict) for pos in positions)
    return seen


def table(n: int) -> pa.Table:
    return pa.table({"id": np.arange(n, dtype=np.int64), "v": np.arange(n) * 0.5})


parallelism = st.integers(1, 6)
reads = st.integers(0, 12)


@st.composite
def rescale_plans(draw, steps=(1, 3)):
    """Parallelisms and how many batches each reader reads before each rescale."""
    plans = [draw(st.lists(reads, min_size=1, max_size=6)) for _ in range(draw(st.integers(*steps)))]
    return plans, draw(parallelism)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 300), st.integers(1, 40), rescale_plans())
def test_table_source_reads_every_row_once_across_rescales(n, batch_size, plan):
    counts, final = plan
    source = TableSource(table(n), batch_size)
    assert run_rescale(source, counts, final) == Counter(range(n))


@pytest.fixture
def files_dir(tmp_path):
    made = itertools.count()

    def new_dir():
        d = tmp_path / f"d{next(made)}"
        d.mkdir()
        return d
    return new_dir


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 120), min_size=1, max_size=4), st.integers(1, 50), st.integers(1, 25),
       st.sampled_from(["parquet", "csv"]), rescale_plans())
def test_file_source_reads_every_row_once_across_rescales(files_dir, sizes, row_group, batch_size, fmt, plan):
    d = files_dir()
    start = 0
    for k, size in enumerate(sizes):
        t = pa.table({"id": np.arange(start, start + size, dtype=np.int64), "s": [f"r{i}" for i in range(size)]})
        if fmt == "parquet":
            pq.write_table(t, d / f"part{k}.parquet", row_group_size=row_group)
        elif size:  # a CSV file of no rows has no header to read a schema from
            pacsv.write_csv(t, d / f"part{k}.csv")
        start += size
    if start == 0 and fmt == "csv":
        return
    source = FileSource(str(d), fmt, batch_size=batch_size)
    counts, final = plan
    assert run_rescale(source, counts, final) == Counter(range(start))


def test_a_partly_read_fragment_keeps_its_offset_also_when_readers_are_fewer(tmp_path):
    # four readers each inside a row group; one new reader gets all four partly read
    pq.write_table(table(400), tmp_path / "t.parquet", row_group_size=100)
    source = FileSource(str(tmp_path / "t.parquet"), "parquet", batch_size=30)
    readers = [source.open(i, 4) for i in range(4)]
    first = [read(r, 1 + i % 2) for i, r in enumerate(readers)]
    positions = [via_json(r.position()) for r in readers]
    assert positions == [(0, 30), (0, 60), (0, 30), (0, 60)]
    (one,) = source.rescale_positions(positions, 1)
    assert one == {"units": [0, 1, 2, 3], "rows": 30, "partial": [[1, 60], [2, 30], [3, 60]], "done": []}
    assert source.rows_at(0, 1, one) == 180
    rest = read(source.open(0, 1, via_json(one)))
    assert sorted([i for rows in first for i in rows] + rest) == list(range(400))


def test_position_of_a_rescaled_reader_drops_what_it_finished():
    source = TableSource(table(100), 10)  # 10 batches
    positions = [3, 1, None]  # split 0 of 3 read batches 0, 3, 6; split 1 read batch 1
    new = source.rescale_positions(positions, 2)
    assert new == [{"units": [2, 5, 8], "rows": 0, "done": [0, 3, 6]},
                   {"units": [4, 7, 9], "rows": 0, "done": [1]}]
    reader = source.open(1, 2, new[1])
    assert read(reader, 1) == list(range(40, 50))
    assert reader.position() == {"units": [7, 9], "rows": 0, "done": [1, 4]}
    assert read(reader) == list(range(70, 80)) + list(range(90, 100))
    assert reader.position() == {"units": [], "rows": 0, "done": [1, 4, 7, 9]}
    # a dict position says which batches to read, whatever the index
    assert read(source.open(0, 5, new[1])) == list(range(40, 50)) + list(range(70, 80)) + list(range(90, 100))
    # a hand-made dict: rows already read of the first batch
    assert read(source.open(0, 1, {"units": [9, 0], "rows": 7})) == [97, 98, 99] + list(range(10))


def test_rescale_of_a_rescaled_position():
    source = TableSource(table(60), 5)  # 12 batches
    first = source.rescale_positions([2, 1], 3)
    readers = [source.open(i, 3, via_json(p)) for i, p in enumerate(first)]
    got = [read(r, 1) for r in readers]
    again = source.rescale_positions([via_json(r.position()) for r in readers], 2)
    rest = [read(source.open(i, 2, via_json(p))) for i, p in enumerate(again)]
    before = list(range(0, 5)) + list(range(10, 15)) + list(range(5, 10))  # split 0: batches 0, 2; split 1: 1
    assert Counter(before + [i for rows in got + rest for i in rows]) == Counter(range(60))


@pytest.mark.parametrize("make", [lambda: GeneratorSource(lambda: iter([]), name="ticks"),
                                  lambda: IteratorSource(iter([]), name="ticks")])
def test_generator_sources_cannot_change_their_parallelism(make):
    source = make()
    with pytest.raises(ValueError, match="source 'ticks' cannot change its parallelism"):
        source.rescale_positions([4, 2], 3)
    assert source.rescale_positions([4, None], 2) == [4, None]  # the same readers keep their positions


def test_a_source_without_rescale_positions_is_still_a_source():
    class Duck:
        name, replayable = "duck", True

        def splits(self):
            return 1

        def schema(self):
            return None

        def open(self, index, parallelism, position=None):
            return None

    assert isinstance(Duck(), Source)
    assert not isinstance(object(), Source)
    assert isinstance(TableSource(table(3)), Source)


def test_bad_positions_and_parallelism(tmp_path):
    source = TableSource(table(100), 10, name="t")
    with pytest.raises(ValueError, match=r"source 't'.*bad position 11 of split 0 of 2"):
        source.rescale_positions([11, 0], 3)
    with pytest.raises(ValueError, match="source 't'.*unit 3 is in two readers"):
        source.rescale_positions([{"units": [3]}, {"units": [3, 4]}], 1)
    with pytest.raises(ValueError, match=r"source 't'.*'units' must be a list of unit ids in \[0, 10\)"):
        source.open(0, 1, {"units": [10]})
    with pytest.raises(ValueError, match="listed twice"):
        source.open(0, 1, {"units": [1, 2], "done": [2]})
    with pytest.raises(ValueError, match="unknown keys"):
        source.open(0, 1, {"units": [1], "row": 3})
    with pytest.raises(ValueError, match="'partial'"):
        source.open(0, 1, {"units": [1, 2], "partial": [[1, 3]]})
    with pytest.raises(ValueError, match="parallelism must be an int >= 1"):
        source.rescale_positions([0], 0)
    with pytest.raises(ValueError, match="non-empty list"):
        source.rescale_positions([], 2)
    pq.write_table(table(10), tmp_path / "t.parquet")
    files = FileSource(str(tmp_path / "t.parquet"), "parquet")
    with pytest.raises(ValueError, match=r"source 'from_parquet'.*bad position \(2, 0\)"):
        files.rescale_positions([(2, 0)], 1)
    with pytest.raises(ValueError, match=r"bad position \[0\]"):
        files.open(0, 1, [0])
