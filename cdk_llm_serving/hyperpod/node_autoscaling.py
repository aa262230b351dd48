"""``NodeAutoScaling``: GPU nodes follow the serving pods (HyperPod's managed Karpenter).

The HyperPod cluster gets Karpenter autoscaling and a ``ClusterRole``; each autoscaled GPU group
(``HyperPodInstanceGroup(max_count=...)``) a ``HyperpodNodeClass`` and a ``NodePool`` that admits
the serving pods (the group's labels and taints, and HyperPod's node-health label
``Schedulable``: UNCONFIRMED whether HyperPod's provider declares it itself), capped at
``max_count`` whole nodes' GPUs, consolidating ``WhenEmpty`` only: Karpenter never evicts a
serving pod (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html;
docs/design/hyperpod-cluster.md, "Node autoscaling")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.nag import acknowledge_wildcard_resources
from ..errors import Problems
from .constants import GPU_RESOURCE, INSTANCE_TYPE_LABEL, NODE_HEALTH_LABEL, NODE_HEALTHY
from .device_plugins import node_in
from .instance_group import HyperPodInstanceGroup

__all__ = [
    "HYPERPOD_NODE_CLASS_API_VERSION",
    "KARPENTER_NODE_POOL_API_VERSION",
    "NodeAutoScaling",
]

#: HyperPod's Karpenter node class (AWS docs, "Create a NodeClass").
HYPERPOD_NODE_CLASS_API_VERSION = "karpenter.sagemaker.amazonaws.com/v1"
HYPERPOD_NODE_CLASS_GROUP = "karpenter.sagemaker.amazonaws.com"
HYPERPOD_NODE_CLASS_KIND = "HyperpodNodeClass"
#: Karpenter's node pool; HyperPod requires v1 (AWS docs, "Autoscaling on SageMaker HyperPod
#: EKS", prerequisites).
KARPENTER_NODE_POOL_API_VERSION = "karpenter.sh/v1"
#: The principal HyperPod's autoscaler assumes the cluster role as (AWS docs, "Create an IAM
#: role for HyperPod autoscaling with Karpenter",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html).
AUTOSCALER_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
#: What the cluster role may do: add and remove this account's cluster nodes (same page).
AUTOSCALER_ACTIONS = ("sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes")


@dataclass(frozen=True)
class NodeAutoScaling:
    """Cluster node autoscaling with HyperPod's managed Karpenter (see the module doc).

    :param consolidate_after: how long a node stays empty (no serving pod) before Karpenter
        removes it. Longer keeps a node warm for the next scale-out (a node costs its hourly
        price while it waits); shorter saves that cost and pays a cold start (node, image,
        weights, engine) on the next scale-out. Default: 10 minutes.
    """

    consolidate_after: Duration = Duration.minutes(10)

    def validate(self, problems: Problems, prop: str) -> None:
        """``consolidate_after`` in whole seconds, at least 0 (Karpenter's duration pattern)."""
        seconds = self.consolidate_after.to_seconds(integral=False)
        if seconds < 0 or seconds != int(seconds):
            problems.add(
                f"{prop}.consolidate_after",
                self.consolidate_after.to_human_string(),
                "must be whole seconds, 0 or more",
            )

    def karpenter_objects(self, groups: Sequence[HyperPodInstanceGroup]) -> list[dict[str, Any]]:
        """One ``HyperpodNodeClass`` and one ``NodePool`` per autoscaled group (named after it)."""
        objects: list[dict[str, Any]] = []
        for group in groups:
            if not group.autoscaled:
                continue
            objects.append(
                {
                    "apiVersion": HYPERPOD_NODE_CLASS_API_VERSION,
                    "kind": HYPERPOD_NODE_CLASS_KIND,
                    "metadata": {"name": group.name},
                    "spec": {"instanceGroups": [group.name]},
                }
            )
            objects.append(self._node_pool(group))
        return objects

    def _node_pool(self, group: HyperPodInstanceGroup) -> dict[str, Any]:
        gpus = group.capacity * int(getattr(group.instance_type, "gpus", 0) or 0)
        taints = [
            {
                key: value
                for key, value in (("key", t.key), ("value", t.value), ("effect", t.effect))
                if value
            }
            for t in group.effective_taints
        ]
        return {
            "apiVersion": KARPENTER_NODE_POOL_API_VERSION,
            "kind": "NodePool",
            "metadata": {"name": group.name},
            "spec": {
                "template": {
                    "metadata": {
                        "labels": {**group.effective_labels, NODE_HEALTH_LABEL: NODE_HEALTHY}
                    },
                    "spec": {
                        "nodeClassRef": {
                            "group": HYPERPOD_NODE_CLASS_GROUP,
                            "kind": HYPERPOD_NODE_CLASS_KIND,
                            "name": group.name,
                        },
                        "requirements": [node_in(INSTANCE_TYPE_LABEL, [str(group.instance_type)])],
                        **({"taints": taints} if taints else {}),
                        "expireAfter": "Never",
                    },
                },
                "disruption": {
                    "consolidationPolicy": "WhenEmpty",
                    "consolidateAfter": f"{int(self.consolidate_after.to_seconds())}s",
                },
                "limits": {GPU_RESOURCE: str(gpus)},
            },
        }

    def autoscaler_role(self, scope: Construct, id: str) -> tuple[iam.Role, iam.ManagedPolicy]:
        """The ``ClusterRole``: trusted by HyperPod's autoscaler, allowed only to add and remove
        nodes of this account's and Region's HyperPod clusters (a cluster's ID exists only once
        created). No KMS actions (the groups get no KMS key) and no trust condition: AWS's role
        has none, and one the service does not send would refuse every scaling action
        (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html).
        """
        clusters = Stack.of(scope).format_arn(
            service="sagemaker", resource="cluster", resource_name="*"
        )
        role = iam.Role(
            scope,
            id,
            assumed_by=iam.ServicePrincipal(AUTOSCALER_PRINCIPAL),
            description="HyperPod autoscaling (Karpenter): adds and removes cluster nodes",
        )
        policy = iam.ManagedPolicy(
            scope,
            f"{id}Policy",
            roles=[role],
            description="HyperPod autoscaling: BatchAddClusterNodes, BatchDeleteClusterNodes",
            statements=[
                iam.PolicyStatement(actions=list(AUTOSCALER_ACTIONS), resources=[clusters])
            ],
        )
        acknowledge_wildcard_resources(
            policy,
            [clusters],
            "HyperPod assigns the cluster's ID at creation, after this role must exist: this account's and Region's clusters are as narrow as synth time allows (AWS's policy names every Region).",
            actions=AUTOSCALER_ACTIONS,
        )
        return role, policy


def validate_autoscaled_groups(
    problems: Problems,
    groups: Sequence[HyperPodInstanceGroup],
    auto_scaling: NodeAutoScaling | None,
) -> None:
    """Autoscaled groups need cluster autoscaling, and cluster autoscaling an autoscaled group."""
    scaled = [group.name for group in groups if group.autoscaled]
    if scaled and auto_scaling is None:
        problems.add(
            "node_auto_scaling",
            None,
            f"instance groups {', '.join(repr(n) for n in scaled)} set max_count: give "
            "node_auto_scaling=NodeAutoScaling() so HyperPod's Karpenter can grow them",
        )
    if auto_scaling is not None:
        auto_scaling.validate(problems, "node_auto_scaling")
        if not scaled:
            problems.add(
                "node_auto_scaling",
                "NodeAutoScaling(...)",
                "needs a GPU group that may grow: give one HyperPodInstanceGroup.gpu(..., max_count=N)",
            )
