"""Custom-resource handlers: wait until every HyperPod instance group has its nodes Running.

Used by ``HyperPodNodesReady`` through aws-cdk-lib's provider framework. Fails fast, each poll,
with SageMaker's reason (the cluster or a group failed, a node in ``Failure``), and at the last
stage's deadline, naming each group's running/expected count (docs/design/hyperpod-cluster.md,
"Waiting for the nodes"). Properties (strings): ``ClusterName``, ``InstanceGroups`` (group name
-> node count), ``DeadlineSeconds`` (this stage's wait) and ``Final`` (``"true"``: fail at the
deadline; otherwise complete, and let the next stage wait on)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import boto3

RUNNING = "Running"
#: The node status that fails the wait at once (``ClusterInstanceStatus``).
FAILED_NODE = "Failure"
#: Group statuses that fail the wait at once (``InstanceGroupStatus``).
FAILED_GROUP = ("Failed",)
#: Cluster statuses that fail the wait at once (``ClusterStatus``).
FAILED_CLUSTER = ("Failed", "RollingBack")

_KEEP_CAPACITY = (
    "The deployment fails and CloudFormation rolls back, deleting a cluster it created with "
    "this deployment. To keep the cluster and its capacity instead, deploy with rollback "
    "disabled (cdk deploy --no-rollback) and retry or deploy again to resume the wait; or give "
    "HyperPodEksCluster a longer nodes_ready_timeout."
)


def shortfall(expected: Mapping[str, int], running: Mapping[str, int]) -> dict[str, str]:
    """Groups still short of nodes, as ``"<running>/<expected>"``."""
    return {
        name: f"{running.get(name, 0)}/{count}"
        for name, count in sorted(expected.items())
        if running.get(name, 0) < count
    }


def statuses(
    summaries: Iterable[Mapping[str, Any]], groups: Iterable[str]
) -> dict[str, dict[str, int]]:
    """Per group of ``groups``: how many nodes are in each status (for the log and errors)."""
    wanted = set(groups)
    found: dict[str, dict[str, int]] = {}
    for node in summaries:
        name = node["InstanceGroupName"]
        if name in wanted:
            status = node.get("InstanceStatus", {}).get("Status", "unknown")
            by_status = found.setdefault(name, {})
            by_status[status] = by_status.get(status, 0) + 1
    return {name: dict(sorted(found[name].items())) for name in sorted(found)}


def failures(
    cluster: Mapping[str, Any], summaries: Iterable[Mapping[str, Any]], groups: Iterable[str]
) -> list[str]:
    """Why the wait cannot succeed: the cluster, a group or a node failed (empty: it may)."""
    wanted = set(groups)
    reason = cluster.get("FailureMessage")
    found: list[str] = []
    status = cluster.get("ClusterStatus")
    if status in FAILED_CLUSTER:
        found.append(f"the cluster is {status}: {reason or 'no failure message'}")
    for group in cluster.get("InstanceGroups", []):
        name = group.get("InstanceGroupName")
        if name in wanted and group.get("Status") in FAILED_GROUP:
            found.append(
                f"instance group {name!r} is {group['Status']}: {reason or 'no failure message'}"
            )
    for node in summaries:
        details = node.get("InstanceStatus", {})
        if node["InstanceGroupName"] in wanted and details.get("Status") == FAILED_NODE:
            found.append(
                f"node {node['InstanceId']} of group {node['InstanceGroupName']!r} is "
                f"{FAILED_NODE}: {details.get('Message') or 'no message'}"
            )
    return found


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
    """Complete when every group has its nodes Running; fail on a failure or, if final, at
    the deadline."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    name = props["ClusterName"]
    expected = {group: int(count) for group, count in props["InstanceGroups"].items()}
    client = client or _client()
    cluster = client.describe_cluster(ClusterName=name)
    failed = (
        failures(cluster, [], expected) if cluster.get("ClusterStatus") in FAILED_CLUSTER else []
    )
    nodes = [] if failed else list_nodes(client, name)
    failed = failed or failures(cluster, nodes, expected)
    if failed:
        raise RuntimeError(
            f"HyperPod cluster {name}: its nodes will not all be Running: "
            + "; ".join(failed)
            + ". "
            + _KEEP_CAPACITY
        )
    by_status = statuses(nodes, expected)
    running = {group: counts.get(RUNNING, 0) for group, counts in by_status.items()}
    missing = shortfall(expected, running)
    # With node autoscaling, the HyperpodNodeClass CRD the later manifests use exists once
    # DescribeCluster's AutoScaling.Status is InService (as AWS's autoscaling guide waits).
    autoscaling = cluster.get("AutoScaling") or {}
    if autoscaling.get("Mode") == "Enable" and autoscaling.get("Status") != "InService":
        if autoscaling.get("Status") == "Failed":
            raise RuntimeError(
                f"HyperPod cluster {name}: node autoscaling failed: "
                f"{autoscaling.get('FailureMessage', 'no message')}. " + _KEEP_CAPACITY
            )
        missing["autoscaling"] = str(autoscaling.get("Status", "not reported"))
    if not missing:
        return {"IsComplete": True, "Data": {"Ready": "true"}}
    started = float(event.get("Data", {}).get("StartedAt", now or time.time()))
    elapsed = (now or time.time()) - started
    doing = {group: counts for group, counts in by_status.items() if group in missing}
    if elapsed < float(props["DeadlineSeconds"]):
        print(f"waiting for Running nodes (running/expected): {missing}; nodes by status: {doing}")
        return {"IsComplete": False}
    if str(props.get("Final", "false")).lower() == "true":
        raise RuntimeError(
            f"HyperPod cluster {name}: nodes not Running after {int(elapsed)} s "
            f"(running/expected per group): {missing}; nodes by status: {doing}. " + _KEEP_CAPACITY
        )
    return {"IsComplete": True, "Data": {"Ready": "false"}}
