"""Recovery when checkpoints are damaged or do not belong to the job: falling
back more than one checkpoint, a changed job, an altered manifest, skipped
checkpoints reported, checkpoint storage that fails (a full disk)."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Tumbling
from support.events import CHECKPOINT_JOB, output_rows, write_events


def checkpoints(ck: str) -> list[str]:
    return sorted(os.path.join(ck, d) for d in os.listdir(ck)
                  if d.startswith("chk-") and os.path.exists(os.path.join(ck, d, "_manifest.json")))


def manifest(chk: str) -> dict:
    with open(os.path.join(chk, "_manifest.json")) as f:
        return json.load(f)


def edit_manifest(chk: str) -> None:
    """Move the source positions inside the manifest (or, in a final checkpoint,
    which has none, clear its "finished" flag); the JSON stays valid."""
    path = os.path.join(chk, "_manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    if manifest["finished"]:
        manifest["finished"] = False
    for task in manifest["tasks"].values():
        if task["position"] is not None:
            task["position"] = [0, 0] if isinstance(task["position"], list) else 0
    with open(path, "w") as f:
        json.dump(manifest, f)


def damage_state(chk: str) -> None:
    """Flip a byte of a state file, or of the manifest when there is none."""
    files = [f for f in os.listdir(chk) if f.endswith(".state")] or ["_manifest.json"]
    path = os.path.join(chk, files[0])
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x20]))


# ---------------------------------------------------------------- in process

ONE_SECOND = Tumbling("1s")


def window_job(env: fo.StreamEnvironment, table: pa.Table, out: str, window=ONE_SECOND,
               overwrite: bool = False) -> None:
    (env.from_arrow(table, batch_size=500).map(lambda b: b)
     .with_watermark("ts", max_out_of_orderness="500ms")
     .key_by("user").window(window).aggregate(n=agg.count(), total=agg.sum("value"))
     .sink_to_parquet(out, overwrite=overwrite))


def reference_rows(tmp_path, table: pa.Table) -> Counter:
    out = str(tmp_path / "reference")
    env = fo.StreamEnvironment(parallelism=2)
    window_job(env, table, out)
    env.execute()
    return output_rows(out)


def test_falling_back_two_checkpoints_rolls_later_output_back(tmp_path, caplog):
    table = write_events(str(tmp_path / "e.parquet"), 20_000, seed=11)
    reference = reference_rows(tmp_path, table)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    env = fo.StreamEnvironment(parallelism=2, threads=False, checkpoint_dir=ck, checkpoint_interval="1ms",
                               checkpoints_retained=4)
    window_job(env, table, out)
    env.execute()
    assert output_rows(out) == reference
    chks = checkpoints(ck)
    assert len(chks) >= 3
    edit_manifest(chks[-1])  # the final checkpoint, its manifest edited
    damage_state(chks[-2])
    env = fo.StreamEnvironment(parallelism=2, threads=False, checkpoint_dir=ck, checkpoint_interval="1ms",
                               checkpoints_retained=4)
    window_job(env, table, out)
    with caplog.at_level(logging.WARNING, logger="fastops"):
        result = env.execute()
    restored = int(os.path.basename(chks[-3])[4:])
    assert result.restored_from == restored
    assert output_rows(out) == reference  # row by row: nothing doubled, nothing lost
    # each skipped checkpoint is named with its reason, in the log and in the result
    assert [s.path for s in result.skipped_checkpoints] == [chks[-1], chks[-2]]
    assert "checksum" in result.skipped_checkpoints[0].reason
    assert "corrupt" in result.skipped_checkpoints[1].reason
    logged = [r.getMessage() for r in caplog.records if r.name == "fastops"]
    assert any(chks[-1] in m and "checksum" in m for m in logged)
    assert any(chks[-2] in m for m in logged)
    # the later epochs' files were moved aside, and the warning names them
    aside = os.path.join(out, f"_rolled_back_after_chk-{restored:06d}")
    moved = sorted(os.listdir(aside))
    assert moved and all(int(n.split("-")[2].split(".")[0]) > restored for n in moved)
    assert all(any(n in m for m in logged) for n in moved)
    assert len(result.rolled_back) == len(moved)


def test_start_without_a_usable_checkpoint_over_committed_output_is_refused(tmp_path):
    table = write_events(str(tmp_path / "e.parquet"), 6_000, seed=11)
    reference = reference_rows(tmp_path, table)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    env = fo.StreamEnvironment(checkpoint_dir=ck, checkpoint_interval="2ms")
    window_job(env, table, out)
    env.execute()
    damaged = checkpoints(ck)
    for chk in damaged:
        damage_state(chk)
    before = sorted(os.listdir(out))
    env = fo.StreamEnvironment(checkpoint_dir=ck, checkpoint_interval="2ms")
    window_job(env, table, out)
    with pytest.raises(ValueError, match=r"already holds \d+ committed file.*overwrite=True"):
        env.execute()
    assert sorted(os.listdir(out)) == before  # nothing touched
    env = fo.StreamEnvironment(checkpoint_dir=ck, checkpoint_interval="2ms")
    window_job(env, table, out, overwrite=True)
    result = env.execute()
    assert result.restored_from is None
    assert [s.path for s in result.skipped_checkpoints] == damaged[::-1]
    assert output_rows(out) == reference


def test_running_twice_into_the_same_directory_is_refused(tmp_path):
    table = write_events(str(tmp_path / "e.parquet"), 2_000, seed=11)
    out = str(tmp_path / "out")
    env = fo.StreamEnvironment()
    window_job(env, table, out)
    env.execute()
    window_job(env, table, out)
    with pytest.raises(ValueError, match="already holds"):
        env.execute()
    window_job(env, table, out, overwrite=True)
    env.execute()
    assert output_rows(out) == reference_rows(tmp_path, table)
    assert not os.path.exists(os.path.join(out, "_pending"))  # a finished sink leaves no empty folder


def test_changed_window_is_refused_with_the_difference_named(tmp_path):
    table = write_events(str(tmp_path / "e.parquet"), 3_000, seed=11)
    ck = str(tmp_path / "ck")

    def job(window):
        env = fo.StreamEnvironment(checkpoint_dir=ck)
        (env.from_arrow(table).with_watermark("ts").key_by("user").window(window)
         .aggregate(n=agg.count()).sink_to_table())
        return env

    first = job(Tumbling("1 min")).execute()
    assert first.rows_in == table.num_rows
    with pytest.raises(ValueError, match=r"final checkpoint.*different job graph") as err:
        job(Tumbling("2 min")).execute()
    assert "Tumbling(size=60000" in str(err.value) and "Tumbling(size=120000" in str(err.value)
    # other configuration is covered too: aggregates, keys, lateness, UDFs
    env = fo.StreamEnvironment(checkpoint_dir=ck)
    (env.from_arrow(table).with_watermark("ts").key_by("user").window(Tumbling("1 min"))
     .aggregate(n=agg.sum("value")).sink_to_table())
    with pytest.raises(ValueError, match="value"):
        env.execute()
    env = fo.StreamEnvironment(checkpoint_dir=ck)
    (env.from_arrow(table).with_watermark("ts").key_by("kind").window(Tumbling("1 min"))
     .aggregate(n=agg.count()).sink_to_table())
    with pytest.raises(ValueError, match="kind"):
        env.execute()
    # the unchanged job still resumes its finished checkpoint
    again = job(Tumbling("1 min")).execute()
    assert again.restored_from is not None


def test_a_udf_swapped_for_another_is_refused(tmp_path):
    table = write_events(str(tmp_path / "e.parquet"), 1_000, seed=11)
    ck = str(tmp_path / "ck")

    def double(b):
        return b

    def halve(b):
        return b

    for fn, ok in ((double, True), (halve, False)):
        env = fo.StreamEnvironment(checkpoint_dir=ck)
        env.from_arrow(table).map(fn).sink_to_table()
        if ok:
            env.execute()
        else:
            with pytest.raises(ValueError, match="halve"):
                env.execute()


def test_an_altered_manifest_is_a_damaged_checkpoint(tmp_path):
    from fastops.runtime.checkpoint import CheckpointStorage

    table = write_events(str(tmp_path / "e.parquet"), 8_000, seed=11)
    ck = str(tmp_path / "ck")
    env = fo.StreamEnvironment(checkpoint_dir=ck, checkpoint_interval="1ms", threads=False)
    window_job(env, table, str(tmp_path / "out"))
    env.execute()
    storage = CheckpointStorage(ck)
    with_positions = [c for c in checkpoints(ck) if not storage.load(c).finished]
    victim = with_positions[-1]
    edit_manifest(victim)
    with pytest.raises(ValueError, match="checksum"):
        storage.load(victim)


# ------------------------------------------------------- SIGKILL, then damage

def run_job(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CHECKPOINT_JOB, *args], capture_output=True, text=True,
                          timeout=180)


def kill_when(args: list, ck: str, complete: int) -> None:
    """SIGKILL the job once ``complete`` checkpoints are on disk."""
    proc = subprocess.Popen([sys.executable, CHECKPOINT_JOB, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if line.startswith("batch ") and os.path.isdir(ck) and len(checkpoints(ck)) >= complete:
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    proc.wait()


@pytest.mark.slow
def test_killed_job_with_its_newest_two_checkpoints_damaged_then_none(tmp_path):
    src = str(tmp_path / "events.parquet")
    write_events(src, 80_000, seed=11)  # 40 batches per source task, 30 ms each: 3 checkpoints long before the end
    ref = str(tmp_path / "ref")
    assert run_job(src, ref, str(tmp_path / "ref-ck"), "--no-checkpoints").returncode == 0
    reference = {k: output_rows(os.path.join(ref, k)) for k in ("tumbling", "sliding")}
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    args = [src, out, ck, "--slow", "0.03"]
    kill_when(args, ck, 3)
    chks = checkpoints(ck)
    assert len(chks) == 3, chks  # the three retained ones
    assert not any(manifest(c)["finished"] for c in chks)
    assert output_rows(os.path.join(out, "tumbling"))  # committed output exists
    edit_manifest(chks[-1])
    damage_state(chks[-2])
    resumed = run_job(*args[:3], "--slow", "0.002")
    assert resumed.returncode == 0, resumed.stderr
    assert f"restored_from={int(os.path.basename(chks[0])[4:])}" in resumed.stdout
    assert chks[-1] in resumed.stderr and chks[-2] in resumed.stderr  # the warnings
    assert "_rolled_back_after_chk-" in resumed.stderr
    for k in ("tumbling", "sliding"):
        assert output_rows(os.path.join(out, k)) == reference[k]
    # now no checkpoint is usable: refused, output untouched; then overwrite
    for chk in checkpoints(ck):
        damage_state(chk)
    refused = run_job(*args[:3])
    assert refused.returncode != 0 and "overwrite=True" in refused.stderr
    for k in ("tumbling", "sliding"):
        assert output_rows(os.path.join(out, k)) == reference[k]
    again = run_job(*args[:3], "--overwrite")
    assert again.returncode == 0, again.stderr
    assert "restored_from=None" in again.stdout
    for k in ("tumbling", "sliding"):
        assert output_rows(os.path.join(out, k)) == reference[k]


# ------------------------------------------------------------- a full disk

@pytest.fixture
def tiny_disk(tmp_path):
    """A 96 KiB tmpfs (root only); else the test's files are capped by RLIMIT_FSIZE."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_while_checkpointing_names_the_storage_and_leaves_no_partial(tmp_path, tiny_disk):
    rng = np.random.default_rng(3)
    n = 60_000
    table = pa.table({"user": rng.integers(0, 40_000, n), "ts": np.arange(n, dtype=np.int64),
                      "value": rng.normal(0, 1, n)})
    ck = os.path.join(tiny_disk, "ck")
    for restarts in (0, 2):
        env = fo.StreamEnvironment(checkpoint_dir=ck, checkpoint_interval="1ms", threads=False,
                                   restart_attempts=restarts)
        (env.from_arrow(table, batch_size=2000).with_watermark("ts").key_by("user")
         .window(Tumbling("1 h")).aggregate(n=agg.count(), total=agg.sum("value")).sink_to_table())
        with pytest.raises(fo.CheckpointStorageError) as err:  # a JobFailed
            env.execute()
        message = str(err.value)
        assert message.startswith("checkpoint storage")
        assert "window" not in message  # not blamed on an operator
        assert ck in message and "Errno 28" in message and "ENOSPC" in message
        assert err.value.errno == 28
        partial = [d for d in os.listdir(ck) if not os.path.exists(os.path.join(ck, d, "_manifest.json"))]
        assert partial == []
