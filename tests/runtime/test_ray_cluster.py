"""executor="ray" on a Ray cluster of two nodes on this machine
(``ray.cluster_utils.Cluster``): tasks run on both, and killing every worker
process of one node mid-run (SIGKILL) ends with the output of a run without
failures."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import fastops as fo
from fastops import agg

ray = pytest.importorskip("ray")
from ray._private.state import actors as actor_table  # noqa: E402  (Ray's GCS actor table)
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                      "object_store_memory": 150 * 1024 * 1024})
    worker = c.add_node(num_cpus=1, object_store_memory=150 * 1024 * 1024)
    ray.init(address=c.address, configure_logging=False, log_to_driver=False)
    yield c, worker.node_id
    ray.shutdown()
    c.shutdown()


def batches() -> list[pa.RecordBatch]:
    rng = np.random.default_rng(4)
    n = 60_000
    table = pa.table({"t": np.sort(rng.integers(0, 8_000, n)), "k": rng.integers(0, 30, n),
                      "x": rng.uniform(0, 1, n)})
    return table.to_batches(1000)


def job(env: fo.StreamEnvironment, out: str) -> None:
    data = batches()
    (env.from_generator(lambda: iter(data), rate=15_000, deterministic=True).with_watermark("t").key_by("k")
     .window(fo.Tumbling(100)).aggregate(n=agg.count(), s=agg.sum("x")).sink_to_parquet(out))


def canonical(table: pa.Table) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in table.column_names])


def test_a_job_spreads_over_two_nodes_and_survives_losing_one_nodes_workers(cluster, tmp_path):
    _, worker_node = cluster
    expected_env = fo.StreamEnvironment(parallelism=2, executor="threads")
    job(expected_env, str(tmp_path / "expected"))
    expected_env.execute()

    env = fo.StreamEnvironment(parallelism=2, executor="ray", checkpoint_dir=str(tmp_path / "cp"),
                               checkpoint_interval="200ms", restart_attempts=2)
    job(env, str(tmp_path / "ray"))
    client = env.execute_async()
    placed: list[set] = []

    def kill_the_worker_node() -> None:
        while client.metrics()["job"]["rows_in"] == 0:
            time.sleep(0.05)
        placed.append({t["location"] for t in client.metrics()["tasks"]})
        time.sleep(1.5)
        for v in actor_table().values():  # every actor process on the worker node
            if v["State"] == "ALIVE" and v["Address"]["NodeID"] == worker_node:
                os.kill(v["Pid"], signal.SIGKILL)

    killer = threading.Thread(target=kill_the_worker_node, daemon=True)
    killer.start()
    result = client.wait()
    killer.join()
    assert len(placed[0]) == 2  # the tasks ran on both nodes
    assert result.restarts == 1
    got = ds.dataset(str(tmp_path / "ray")).to_table()
    assert canonical(got).equals(canonical(ds.dataset(str(tmp_path / "expected")).to_table()))
    deadline = time.time() + 10  # killing is asynchronous: give the actor table a moment
    while any(v["State"] == "ALIVE" for v in actor_table().values()) and time.time() < deadline:
        time.sleep(0.1)
    assert [k for k, v in actor_table().items() if v["State"] == "ALIVE"] == []
