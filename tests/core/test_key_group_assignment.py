"""Key-group assignments (``assign_key_groups``) and routing rows by an owner table
(``partition(..., owners=)``).

``"fewest_moves"`` is checked against an independent optimum: among balanced
assignments (every task ``N // P'`` or ``ceil(N / P')`` groups) a task ``i <
min(P, P')`` can keep at most ``min(held_i, N // P')`` of its groups, one more
for each of the ``N % P'`` larger shares it gets while holding more; the fewest
moves are ``N`` minus the most that can be kept that way. The bound it
guarantees from any balanced assignment is ``moved_bound``:
``|P' - P| * ceil(N / max(P, P'))``, and ``floor(N * (P' - P) / P')`` going up.
"""
from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.core.hashing import hash_columns
from fastops.core.partitioning import (
    assign_key_groups,
    key_group_range,
    moved_bound,
    partition,
    partition_ids,
)

SIZES = [16, 128, 1000, 4096]


def fewest_possible_moves(before: np.ndarray, tasks: int) -> int:
    """The fewest key groups that change owner to reach a balanced assignment."""
    n = len(before)
    base, extra = divmod(n, tasks)
    held = np.bincount(before, minlength=tasks)[:tasks]
    kept = int(np.minimum(held, base).sum()) + min(extra, int((held > base).sum()))
    return n - kept


def check_step(before: np.ndarray, tasks: int) -> np.ndarray:
    """One rescale to ``tasks``: balanced, fewest moves, within the bound, deterministic."""
    n = len(before)
    old_tasks = int(before.max()) + 1
    after = assign_key_groups(tasks, n, before, how="fewest_moves")
    assert after.dtype == np.int32 and after.shape == (n,) and not after.flags.writeable
    counts = np.bincount(after, minlength=tasks)
    assert len(counts) == tasks and counts.min() == n // tasks and counts.max() == -(-n // tasks)
    moved = int((after != before).sum())
    assert moved == fewest_possible_moves(before, tasks)
    assert moved <= moved_bound(old_tasks, tasks, n)
    assert np.array_equal(assign_key_groups(tasks, n, before.copy(), how="fewest_moves"), after)
    return after


def test_moved_bound_is_the_ideal_plus_less_than_one_group_per_task_changed():
    for p, q, n in itertools.product(range(1, 17), range(1, 17), SIZES):
        ideal = n * abs(q - p) / max(p, q)
        if p == q:
            assert moved_bound(p, q, n) == 0
        else:
            assert ideal - 1 < moved_bound(p, q, n) < ideal + abs(q - p)


@pytest.mark.parametrize(("p", "q"), list(itertools.product(range(1, 17), repeat=2)))
def test_fewest_moves_from_contiguous_all_pairs(p, q):
    for n in SIZES:
        before = assign_key_groups(p, n)
        after = check_step(before, q)
        moved = int((after != before).sum())
        # from Flink's ranges it even stays within the ideal share, rounded up
        assert moved <= -(-n * abs(q - p) // max(p, q))
        if q > p:  # going up: no key group moves between two old tasks
            assert set(after[after != before].tolist()) <= set(range(p, q))
        if q < p:  # going down: only the removed tasks' groups move
            assert (before[after != before] >= q).all()


def test_fewest_moves_worked_example():
    before = assign_key_groups(2, 16)  # task 0: 0..7, task 1: 8..15
    # shares 6, 5, 5 (the extra one to task 0: holding the most, lower index);
    # left over, in key-group order: 6, 7 (task 0's surplus) and 13, 14, 15 (task 1's)
    after = assign_key_groups(3, 16, before, how="fewest_moves")
    assert after.tolist() == [0] * 6 + [2, 2] + [1] * 5 + [2, 2, 2]
    back = assign_key_groups(2, 16, after, how="fewest_moves")
    # task 2's groups 6, 7, 13, 14, 15 fill the short tasks in task order: 0 needs 2, 1 needs 3
    assert back.tolist() == [0] * 8 + [1] * 8


def test_same_parallelism_moves_nothing():
    for p, n in [(1, 16), (3, 128), (7, 1000), (16, 4096)]:
        before = assign_key_groups(p, n)
        assert np.array_equal(assign_key_groups(p, n, before, how="fewest_moves"), before)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SIZES), st.lists(st.integers(1, 16), min_size=2, max_size=7))
def test_fewest_moves_chains_from_contiguous(n, parallelisms):
    owners = assign_key_groups(parallelisms[0], n)
    for q in parallelisms[1:]:
        owners = check_step(owners, q)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SIZES), st.integers(1, 16), st.integers(1, 16), st.randoms(use_true_random=False))
def test_fewest_moves_from_any_balanced_assignment(n, p, q, rnd):
    base, extra = divmod(n, p)
    counts = [base + 1] * extra + [base] * (p - extra)
    rnd.shuffle(counts)
    before = np.repeat(np.arange(p), counts)
    rnd.shuffle(before)
    check_step(before, q)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([16, 100, 128]), st.integers(1, 16), st.data())
def test_fewest_moves_from_an_unbalanced_assignment_balances_with_fewest_moves(n, q, data):
    before = np.array(data.draw(st.lists(st.integers(0, 15), min_size=n, max_size=n)))
    after = assign_key_groups(q, n, before, how="fewest_moves")
    counts = np.bincount(after, minlength=q)
    assert counts.min() == n // q and counts.max() == -(-n // q)
    assert int((after != before).sum()) == fewest_possible_moves(before, q)


@pytest.mark.parametrize("n", [1, 7, 128, 1000, 32768])
def test_contiguous_is_flinks_key_group_range(n):
    for p in sorted({1, 2, 3, 7, 16, n // 3 or 1, n} & set(range(1, n + 1))):
        owners = assign_key_groups(p, n)
        assert owners.dtype == np.int32 and not owners.flags.writeable
        for i in range(p):
            assert np.flatnonzero(owners == i).tolist() == list(key_group_range(i, p, n))
        # "contiguous" ignores what came before; "fewest_moves" without it is contiguous
        assert np.array_equal(assign_key_groups(p, n, np.zeros(n, np.int64), how="contiguous"), owners)
        assert np.array_equal(assign_key_groups(p, n, None, how="fewest_moves"), owners)


def test_assignment_errors():
    with pytest.raises(ValueError, match="unknown key-group assignment 'fewest'"):
        assign_key_groups(2, 16, how="fewest")
    with pytest.raises(ValueError, match="max_parallelism"):
        assign_key_groups(17, 16)
    with pytest.raises(ValueError, match="num_partitions"):
        assign_key_groups(0, 16)
    good = assign_key_groups(2, 16)
    bad = {
        "16 entries": good[:-1],
        "shape": np.zeros((4, 4), np.int32),
        "dtype float64": good.astype(np.float64),
        "dtype bool": np.zeros(16, bool),
        r"in \[0, 16\), got values in \[-1, 1\]": np.where(good == 0, -1, good),
        r"got values in \[0, 16\]": np.where(good == 1, 16, good),
    }
    for message, previous in bad.items():
        for how in ("fewest_moves", "contiguous"):
            with pytest.raises(ValueError, match=f"previous.*{message}"):
                assign_key_groups(3, 16, previous, how=how)
    # a list of Python ints is fine
    assert assign_key_groups(3, 16, good.tolist(), how="fewest_moves").tolist() == \
        assign_key_groups(3, 16, good, how="fewest_moves").tolist()


# ---------------------------------------------------------------- routing by an owner table

def key_columns(draw, kind: str, n: int) -> dict:
    nulls = draw(st.booleans())
    if kind == "int":
        vals = draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n))
        return {"a": pa.array([None if nulls and i % 3 == 0 else v for i, v in enumerate(vals)], pa.int64())}
    if kind == "int32":
        vals = draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n))
        return {"a": pa.array(vals, pa.int32())}
    if kind == "float":
        vals = draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n))
        return {"a": pa.array([None if nulls and i % 4 == 1 else v for i, v in enumerate(vals)], pa.float64())}
    if kind == "string":
        vals = draw(st.lists(st.text(max_size=6), min_size=n, max_size=n))
        return {"a": pa.array([None if nulls and i % 5 == 2 else v for i, v in enumerate(vals)], pa.utf8())}
    ints = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    texts = draw(st.lists(st.sampled_from(["x", "y", "zz", ""]), min_size=n, max_size=n))
    return {"a": pa.array(ints, pa.int64()), "b": pa.array(texts, pa.utf8())}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["int", "int32", "float", "string", "two columns"]), st.integers(1, 300),
       st.integers(0, 80), st.data())
def test_partition_ids_follow_an_owner_table(kind, maxp, n, data):
    p = data.draw(st.integers(1, min(maxp, 20)))
    owners = np.array(data.draw(st.lists(st.integers(0, p - 1), min_size=maxp, max_size=maxp)), np.int32)
    cols = key_columns(data.draw, kind, n)
    batch = pa.record_batch({**cols, "row": pa.array(np.arange(n))})
    by = list(cols)
    expected = owners[(hash_columns([batch.column(c) for c in by]) % np.uint64(maxp)).astype(np.int64)]
    ids = partition_ids(batch, by, p, scheme="key_group", max_parallelism=maxp, owners=owners)
    assert ids.dtype == np.int32 and ids.tolist() == expected.tolist()
    parts = partition(batch, by, p, scheme="key_group", max_parallelism=maxp, owners=owners)
    assert len(parts) == p
    for i, part in enumerate(parts):
        assert part.schema == batch.schema
        assert part.column("row").to_pylist() == np.flatnonzero(expected == i).tolist()  # input order kept


def test_owner_table_of_the_contiguous_assignment_routes_as_without_one():
    rng = np.random.default_rng(5)
    batch = pa.record_batch({"k": rng.integers(0, 1 << 40, 5000), "s": rng.integers(0, 99, 5000).astype(str)})
    for by in ("k", "s", ["k", "s"]):
        for p, n in [(1, 2), (3, 128), (5, 1000)]:
            plain = partition_ids(batch, by, p, scheme="key_group", max_parallelism=n)
            table = assign_key_groups(p, n)
            assert np.array_equal(partition_ids(batch, by, p, scheme="key_group", max_parallelism=n,
                                                owners=table), plain)
            moved = assign_key_groups(p + 1, n, table, how="fewest_moves")
            ids = partition_ids(batch, by, p + 1, scheme="key_group", max_parallelism=n, owners=moved)
            assert np.array_equal(ids, moved[key_groups_of(batch, by, n)])


def key_groups_of(batch, by, n):
    names = [by] if isinstance(by, str) else by
    return (hash_columns([batch.column(c) for c in names]) % np.uint64(n)).astype(np.int64)


def test_owner_table_errors():
    batch = pa.record_batch({"k": [1, 2, 3]})
    good = assign_key_groups(2, 16)
    cases = {
        "16 entries": good[:8],
        "dtype float64": good.astype(float),
        r"\[0, 2\), got values in \[0, 2\]": np.where(good == 1, 2, good),
        r"got values in \[-1, 1\]": np.where(good == 0, -1, good),
    }
    for message, owners in cases.items():
        for fn in (partition_ids, partition):
            with pytest.raises(ValueError, match=f"owners.*{message}"):
                fn(batch, "k", 2, scheme="key_group", max_parallelism=16, owners=owners)
    for scheme in ("hash", "consistent"):
        with pytest.raises(ValueError, match="owners=.*scheme='key_group'"):
            partition_ids(batch, "k", 2, scheme=scheme, owners=good)
