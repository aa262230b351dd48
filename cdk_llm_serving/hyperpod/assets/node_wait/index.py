"""Custom-resource handlers: wait until every HyperPod instance group has its nodes Running.

Used by ``HyperPodNodesReady`` through aws-cdk-lib's provider framework (``on_event`` then
``is_complete`` every query interval). Under ``NodeProvisioningMode: Continuous`` the
``AWS::SageMaker::Cluster`` resource completes before any node exists (botocore's
``CreateCluster`` documentation: "The cluster becomes operational once cluster-level
resources are ready. Use CurrentCount and TargetCount in DescribeCluster to track
provisioning progress"), so charts and manifests that need nodes wait on this instead.

A node counts once ``ListClusterNodes`` reports ``InstanceStatus.Status == "Running"``
(enum ``ClusterInstanceStatus`` in botocore's sagemaker model: Running, Failure, Pending,
ShuttingDown, SystemUpdating, DeepHealthCheckInProgress, NotFound, DetachInProgress,
AttachInProgress). ``InstanceGroupNameContains`` matches substrings, so this handler lists
every node once and matches group names exactly.

Properties (strings, as CloudFormation passes them): ``ClusterName``, ``InstanceGroups``
(group name -> node count), ``DeadlineSeconds`` (how long this stage waits) and ``Final``
(``"true"``: fail at the deadline; otherwise complete, and let the next stage wait on).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import boto3

RUNNING = "Running"


def running_by_group(summaries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Running nodes per exact instance-group name."""
    counts: dict[str, int] = {}
    for node in summaries:
        if node.get("InstanceStatus", {}).get("Status") == RUNNING:
            name = node["InstanceGroupName"]
            counts[name] = counts.get(name, 0) + 1
    return counts


def shortfall(expected: Mapping[str, int], running: Mapping[str, int]) -> dict[str, str]:
    """Groups still short of nodes, as ``"<running>/<expected>"``."""
    return {
        name: f"{running.get(name, 0)}/{count}"
        for name, count in sorted(expected.items())
        if running.get(name, 0) < count
    }


def list_nodes(client: Any, cluster_name: str) -> list[dict[str, Any]]:
    """Every node of the cluster (all pages)."""
    nodes: list[dict[str, Any]] = []
    request: dict[str, Any] = {"ClusterName": cluster_name, "MaxResults": 100}
    while True:
        page = client.list_cluster_nodes(**request)
        nodes.extend(page.get("ClusterNodeSummaries", []))
        token = page.get("NextToken")
        if not token:
            return nodes
        request["NextToken"] = token


def _client() -> Any:
    return boto3.client("sagemaker")


def on_event(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """Start (or, on Delete, skip) the wait; remember when it started."""
    physical_id = event.get("PhysicalResourceId") or (
        f"{event['ResourceProperties']['ClusterName']}/{event.get('LogicalResourceId', 'nodes-ready')}"
    )
    return {"PhysicalResourceId": physical_id, "Data": {"StartedAt": str(int(time.time()))}}


def is_complete(
    event: Mapping[str, Any], context: Any = None, client: Any = None, now: float | None = None
) -> dict[str, Any]:
    """Complete when every group has its nodes Running; at the deadline, fail if final."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    expected = {name: int(count) for name, count in props["InstanceGroups"].items()}
    nodes = list_nodes(client or _client(), props["ClusterName"])
    missing = shortfall(expected, running_by_group(nodes))
    if not missing:
        return {"IsComplete": True, "Data": {"Ready": "true"}}
    started = float(event.get("Data", {}).get("StartedAt", now or time.time()))
    elapsed = (now or time.time()) - started
    if elapsed < float(props["DeadlineSeconds"]):
        print(f"waiting for Running nodes (running/expected): {missing}")
        return {"IsComplete": False}
    if str(props.get("Final", "false")).lower() == "true":
        raise RuntimeError(
            f"HyperPod cluster {props['ClusterName']}: nodes not Running after "
            f"{int(elapsed)} s (running/expected per group): {missing}"
        )
    return {"IsComplete": True, "Data": {"Ready": "false"}}
