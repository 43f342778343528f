"""Engine replicas on a real two-node Ray cluster, joined by address.

``ray.cluster_utils.Cluster`` starts two raylets on this host (a head and
a worker node, each its own node id, object store and worker pool), so this
is Ray's multi-node path on one host: ``init_ray(address)`` joins the running
cluster instead of starting one, the replicas (one CPU each, one CPU per node)
land on two different nodes, and each node's replica serves a run recorded to
the one shared store.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import RayOptions, init_ray, ray_module
from reactive_rag.engine._replicas import EngineReplicas
from reactive_rag.store import RedisRunStore
from streams import RunFinished

from .._replica_fixtures import demo_engine, demo_index
from .._store_fixtures import NEEDS_REDIS, REDIS_URL

pytestmark = [pytest.mark.slow, NEEDS_REDIS]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head and one worker node (1 CPU each); the driver joins by address.

    The nodes listen on this host's address, as ``ray start`` would: Ray maps
    a loopback address given to ``ray.init`` to that address when it joins.
    """
    if os.environ.get("REACTIVE_RAG_REQUIRE_RAY") != "1":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'reactive-rag[ray]')")
    ray = ray_module()
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True,
                    head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        nodes.add_node(num_cpus=1)
        nodes.wait_for_nodes()
        init_ray(nodes.address)  # joins: no num_cpus, no new local cluster
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()  # type: ignore[no-untyped-call]


async def test_replicas_spread_over_two_nodes_of_a_joined_cluster_and_each_serves_runs(
    cluster: Any, tmp_path: Path,
) -> None:
    ray = ray_module()
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(alive) == 2  # the driver joined the two-node cluster, it did not start its own
    root = tmp_path / "idx"  # one path both "nodes" see (the same disk here)
    demo_index(root)
    assert REDIS_URL is not None
    prefix = f"test-{uuid.uuid4().hex}:"
    stores = functools.partial(RedisRunStore, REDIS_URL, prefix=prefix)
    pool = EngineReplicas(functools.partial(demo_engine, str(root)), stores, replicas=2,
                          options=RayOptions(num_cpus=1, max_restarts=0))
    reader = RedisRunStore(REDIS_URL, prefix=prefix, read_only=True)
    async with pool:
        nodes = await pool.nodes()
        assert len(set(nodes)) == 2 and set(nodes) == alive  # one replica per node
        await reader.open()
        try:
            runs = [await pool.start_run(q, collections=["demo"])
                    for q in ("Who founded Bayer and when?", "Who isolated aspirin?")]
            assert {run.replica for run in runs} == {0, 1}  # each node's replica took one
            for run in runs:
                events = [e async for e in reader.attach(run.run_id, 0)]
                finished = events[-1]
                assert isinstance(finished, RunFinished) and finished.outcome == "answered"
        finally:
            await reader.close()
