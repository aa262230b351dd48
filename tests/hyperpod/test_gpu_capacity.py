"""the GPU nodes all consumers on a group need fit the group."""

from __future__ import annotations

import pytest
from aws_cdk import aws_s3 as s3

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.hyperpod.observability import VllmObservability
from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
from tests.support.builders import new_stack
from tests.support.hyperpod import deepseek_service, imported_cluster, small_cluster


def _add_two_node_services(stack, count: int, gpu_nodes: int):
    """A cluster with ``gpu_nodes`` GPU nodes, then ``count`` one-replica 2-node services."""
    cluster, addons, store = small_cluster(stack, gpu_count=gpu_nodes)
    for index in range(count):
        deepseek_service(
            stack,
            cluster,
            addons,
            store,
            id=f"Serving{index}",
            name=f"ds{index}",
            nodes_per_replica=2,
        )
    return cluster


def _two_node_services(count: int, gpu_nodes: int) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        _add_two_node_services(new_stack(), count, gpu_nodes)
    return caught.value


def test_three_two_node_services_do_not_fit_a_two_node_group():
    error = _two_node_services(3, gpu_nodes=2)
    shares = {p.property: p.value for p in error.problems}
    # The second service already overflows the group; both shares are listed.
    assert shares == {"Test/Serving0": "2 nodes", "Test/Serving1": "2 nodes"}
    assert "need 4 nodes" in str(error) and "it has 2" in str(error)


def test_the_listing_names_every_consumer_of_the_group():
    error = _two_node_services(3, gpu_nodes=4)
    assert [p.property for p in error.problems] == [
        "Test/Serving0",
        "Test/Serving1",
        "Test/Serving2",
    ]
    assert all("need 6 nodes" in str(p) and "it has 4" in str(p) for p in error.problems)


def test_services_that_fit_together_synthesize():
    cluster = _add_two_node_services(new_stack(), 2, gpu_nodes=4)
    assert cluster.gpu_node_ledger.reserved("gpu") == 4


def test_other_consumers_reserve_on_the_cluster_and_an_imported_one():
    stack = new_stack()
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    deepseek_service(stack, cluster, addons, store, nodes_per_replica=2)
    with pytest.raises(ConfigurationError) as caught:
        cluster.reserve_gpu_nodes(stack, "gpu", 1)
    assert {p.property for p in caught.value.problems} == {"Test/Serving", "Test"}
    with pytest.raises(ConfigurationError) as caught:
        cluster.reserve_gpu_nodes(stack, "no-such-group", 1)
    assert [p.property for p in caught.value.problems] == ["group_name"]

    imported_stack = new_stack("Imported")
    imported = imported_cluster(imported_stack, gpu_count=2)
    imported.reserve_gpu_nodes(imported_stack, "gpu", 2)
    imported_addons = HyperPodServingAddons(
        imported_stack, "Addons", cluster=imported, load_balancer_controller=False
    )
    imported_store = FsxModelStore(
        imported_stack,
        "Store",
        cluster=imported,
        weights_bucket=s3.Bucket.from_bucket_name(imported_stack, "W", "weights-bucket"),
        weights_prefix="models/ds3",
    )
    with pytest.raises(ConfigurationError):
        deepseek_service(imported_stack, imported, imported_addons, imported_store)


def test_a_consumer_reserving_again_replaces_its_share():
    stack = new_stack()
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    cluster.reserve_gpu_nodes(stack, "gpu", 2)
    cluster.reserve_gpu_nodes(stack, "gpu", 1)
    assert cluster.gpu_node_ledger.reserved("gpu") == 1


def _autoscaled_pair(gpu_nodes: int, first_max: int | None = None):
    """Two one-node services on one group, each with autoscaling (``first_max`` on the first)."""
    stack = new_stack("Scaled")
    cluster, addons, store = small_cluster(stack, gpu_count=gpu_nodes)
    services = [
        deepseek_service(stack, cluster, addons, store, id=f"Serving{i}", name=f"ds{i}")
        for i in range(2)
    ]
    scalings = [
        VllmReplicaAutoScaling(
            stack,
            f"Scale{i}",
            service=service,
            observability=VllmObservability(stack, f"Obs{i}", service=service),
            max_replicas=first_max if i == 0 else None,
        )
        for i, service in enumerate(services)
    ]
    return cluster, scalings


def test_two_autoscaled_services_with_default_maxima_share_the_group():
    """The default maximum is what the group still has free: the first takes what the
    second service leaves, the second keeps its one replica."""
    cluster, (first, second) = _autoscaled_pair(gpu_nodes=4)
    assert (first.max_replicas, second.max_replicas) == (3, 1)
    assert cluster.gpu_node_ledger.reserved("gpu") == 4
    assert cluster.free_gpu_nodes("gpu") == 0
    assert cluster.free_gpu_nodes("gpu", first.service) == 3  # its own share counts as free


def test_an_explicit_maximum_beyond_the_free_nodes_is_refused_with_every_share():
    with pytest.raises(ConfigurationError) as caught:
        _autoscaled_pair(gpu_nodes=4, first_max=4)
    shares = {p.property: p.value for p in caught.value.problems}
    assert shares == {"Scaled/Serving0": "4 nodes", "Scaled/Serving1": "1 nodes"}
