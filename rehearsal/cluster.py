"""HyperPod's nodes, from the ``AWS::SageMaker::Cluster`` instance groups.

* labels and taints: the group's ``KubernetesConfig`` plus what HyperPod sets (``rehearsal.scheduling``
  cites them); while on-start deep health checks run, a node carries
  ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`` and that label value
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html);
  they are done once the node is ``Running`` (botocore's sagemaker model, enum
  ``ClusterInstanceStatus``: ``DeepHealthCheckInProgress`` precedes ``Running``), which is what
  the stack's node wait (``Custom::HyperPodNodesReady``) waits for;
* allocatable CPU: the vCPUs the kubelet sees, half the instance type's with ``ThreadsPerCore: 1``
  ("ThreadsPerCore: 1 disables multithreading", CloudFormation ``AWS::SageMaker::Cluster``
  ClusterInstanceGroup; ../shared/FACTS.md "Deploy-time rules"), minus kube-reserved as the EKS
  AMI computes it from that count (awslabs/amazon-eks-ami ``get_cpu_millicores_to_reserve``),
  memory from the catalog minus the kubelet's reservation and eviction threshold.
  ASSUMED: HyperPod's AMI reserves as the EKS AMI does (AWS publishes no figure of its own).
* ``nvidia.com/gpu`` / ``vpc.amazonaws.com/efa``: allocatable only once the device plugin's
  DaemonSet pod runs on the node (``rehearsal.controllers.workloads``).

Subnets: a group's ``OverrideVpcConfig.Subnets``, else the cluster's ``VpcConfig.Subnets``;
ASSUMED: instance ``i`` of a group lands in subnet ``i mod n`` (HyperPod documents no spread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdk_llm_serving.planning.catalog import Catalog
from rehearsal.scheduling import HEALTH, INSTANCE_TYPE, Node, allocatable

HEALTH_TAINT = {"key": HEALTH, "value": "Unschedulable", "effect": "NoSchedule"}


@dataclass(frozen=True)
class InstanceGroup:
    name: str
    instance_type: str
    count: int
    threads_per_core: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    deep_health_checks: tuple[str, ...]
    subnets: tuple[str, ...]


def instance_groups(cluster_properties: dict[str, Any]) -> list[InstanceGroup]:
    """The resolved properties' instance groups."""
    default_subnets = tuple((cluster_properties.get("VpcConfig") or {}).get("Subnets") or ())
    groups = []
    for group in cluster_properties["InstanceGroups"]:
        config = group.get("KubernetesConfig") or {}
        override = (group.get("OverrideVpcConfig") or {}).get("Subnets")
        groups.append(
            InstanceGroup(
                name=group["InstanceGroupName"],
                instance_type=group["InstanceType"],
                count=int(group["InstanceCount"]),
                # CloudFormation: "ThreadsPerCore ... 1 to disable, 2 to enable"; absent = 2 on
                # instance types that support multithreading. ASSUMED: absent means 2 (the schema states no default).
                threads_per_core=int(group.get("ThreadsPerCore", 2)),
                labels=dict(config.get("Labels") or {}),
                taints=[
                    {k.lower(): str(v) for k, v in t.items()} for t in config.get("Taints") or []
                ],
                deep_health_checks=tuple(group.get("OnStartDeepHealthChecks") or ()),
                subnets=tuple(override or default_subnets),
            )
        )
    return groups


def nodes(
    groups: list[InstanceGroup], catalog: Catalog | None = None
) -> tuple[list[Node], dict[str, str]]:
    """One node per instance, as it joins (health-check tainted where deep checks run); and
    each node's subnet."""
    found, subnets = [], {}
    for group in groups:
        checking = bool(group.deep_health_checks)
        for index in range(group.count):
            name = f"{group.name}-{index}"
            labels = {
                **group.labels,
                INSTANCE_TYPE: group.instance_type,
                HEALTH: "Unschedulable" if checking else "Schedulable",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "sagemaker.amazonaws.com/instance-group-name": group.name,
            }
            taints = [dict(t) for t in group.taints] + ([dict(HEALTH_TAINT)] if checking else [])
            found.append(
                Node(
                    name=name,
                    group=group.name,
                    instance_type=group.instance_type,
                    labels=labels,
                    taints=taints,
                    capacity=allocatable(group.instance_type, group.threads_per_core, catalog),
                )
            )
            if group.subnets:
                subnets[name] = group.subnets[index % len(group.subnets)]
    return found, subnets


def health_checks_passed(node: Node) -> None:
    """Deep health checks done: HyperPod marks the node Schedulable and lifts the taint."""
    node.labels[HEALTH] = "Schedulable"
    node.taints[:] = [t for t in node.taints if t.get("key") != HEALTH]
