"""Fuzz every sketch's ``from_bytes`` in subprocesses under a memory cap.

``tests/support/sketch_fuzz_worker.py`` decodes random bytes, truncations, bit flips
and edited fields of valid serialisations (``FASTOPS_FUZZ_CASES`` per sketch,
10,000 by default; ``FASTOPS_FUZZ_SEED`` picks another stream of cases) and
uses every sketch that ``from_bytes`` accepts: update, merge both ways,
queries, to_bytes round trip. Two workers run side by side, each capped at
1 GiB of address space above its warmed-up size, so an over-allocation is a
MemoryError failure and a crash is a signal, each reported with the case.
"""
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent.parent / "support" / "sketch_fuzz_worker.py"
NAMES = ["HyperLogLog", "CountMinSketch", "KLL", "SpaceSaving", "BloomFilter", "Reservoir"]
# two workers of about equal work (HyperLogLog's estimator is the slowest query)
GROUPS = [["HyperLogLog", "BloomFilter", "SpaceSaving"], ["CountMinSketch", "KLL", "Reservoir"]]
CASES = int(os.environ.get("FASTOPS_FUZZ_CASES", "10000"))
SEED = int(os.environ.get("FASTOPS_FUZZ_SEED", "33"))


def _start(names, progress, cases, *extra):
    env = dict(os.environ, MALLOC_ARENA_MAX="2", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(WORKER), *names, "--cases", str(cases), "--seed", str(SEED),
           "--progress", str(progress), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _finish(proc, progress):
    """The worker's JSON results, or AssertionError naming a crash and its case."""
    try:
        out, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"fuzz worker timed out{_where(progress)}") from None
    if proc.returncode != 0:
        code = proc.returncode
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with status {code}")
        raise AssertionError(f"fuzz worker {how}{_where(progress)}\n{err[-4000:]}")
    return [json.loads(line) for line in out.splitlines()]


def _where(progress):
    try:
        idx, case = struct.unpack("<qq", Path(progress).read_bytes()[:16])
    except (OSError, struct.error):
        return " before the first case"
    return (f" in {NAMES[idx]} case {case}; replay it with: python tests/support/{WORKER.name} "
            f"{NAMES[idx]} --case {case} --seed {SEED}")


def _report(res):
    head = (f"{res['sketch']}: {len(res['failures'])} failures in {res['cases']} cases "
            f"(seed {res['seed']}); replay with: python tests/support/{WORKER.name} {res['sketch']} "
            f"--seed {res['seed']} --case N")
    lines = [head]
    for f in res["failures"]:
        lines.append(f"  case {f['case']} ({f['kind']}): {f['error']}\n    bytes {f['hex']}")
    return "\n".join(lines)


@pytest.mark.slow
def test_from_bytes_fuzz(tmp_path):
    procs = [(_start(g, tmp_path / f"progress{i}", CASES), tmp_path / f"progress{i}")
             for i, g in enumerate(GROUPS)]
    results = []
    errors = []
    for proc, progress in procs:
        try:
            results += _finish(proc, progress)
        except AssertionError as exc:
            errors.append(str(exc))
    assert not errors, "\n".join(errors)
    assert sorted(r["sketch"] for r in results) == sorted(NAMES)
    bad = [_report(r) for r in results if r["failures"]]
    assert not bad, "\n".join(bad)
    for r in results:
        assert r["cases"] == CASES
        # the exercise must run often: damaged bytes that still decode
        assert r["accepted"] >= 0.03 * CASES, r


def test_worker_crash_is_reported(tmp_path):
    proc = _start(["HyperLogLog"], tmp_path / "p", 10, "--crash-at", "4")
    with pytest.raises(AssertionError, match="killed by SIGSEGV in HyperLogLog case 4; replay"):
        _finish(proc, tmp_path / "p")


def test_worker_memory_cap(tmp_path):
    # a 4 GiB allocation fails under the cap: reported as the case's failure
    (res,) = _finish(_start(["Reservoir"], tmp_path / "p", 5, "--hog-at", "2"), tmp_path / "p")
    assert [f["case"] for f in res["failures"]] == [2]
    assert res["failures"][0]["error"].startswith("MemoryError")
    assert res["cases"] == 5
