"""``NodeAutoScaling``: GPU nodes follow the serving pods (HyperPod's managed Karpenter).

With ``HyperPodEksCluster(node_autoscaling=NodeAutoScaling())`` the HyperPod cluster gets
``AutoScaling: {Mode: Enable, AutoScalerType: Karpenter}`` and a ``ClusterRole`` HyperPod
assumes to add and remove nodes (CloudFormation's ``AWS::SageMaker::Cluster`` schema as
cfn-lint ships it; botocore's SageMaker model: the role "must have permissions for
``sagemaker:BatchAddClusterNodes`` and ``sagemaker:BatchDeleteClusterNodes``"). HyperPod
installs and runs Karpenter itself; it ships no node class or node pool ("Autoscaling on
SageMaker HyperPod EKS",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html),
so each autoscaled GPU group (``HyperPodInstanceGroup(max_count=...)``) gets:

* a ``HyperpodNodeClass`` (``karpenter.sagemaker.amazonaws.com/v1``) whose
  ``spec.instanceGroups`` names the group (at most 10 groups per node class; "Create a
  NodeClass", .../sagemaker-hyperpod-eks-autoscaling-nodeclass.html);
* a Karpenter ``NodePool`` (``karpenter.sh/v1``) referencing it (``nodeClassRef`` group
  ``karpenter.sagemaker.amazonaws.com``, kind ``HyperpodNodeClass``; "Create a NodePool",
  .../sagemaker-hyperpod-eks-autoscaling-nodepool.html), whose template carries the group's
  labels and taints: Karpenter launches a node for a pending pod only when the pool's
  template labels, requirements and taints admit the pod's node selector, affinity and
  tolerations (Karpenter docs, "NodePools",
  https://karpenter.sh/docs/concepts/nodepools/), and our serving pods select
  ``cdk-llm-serving/group`` and require HyperPod's node-health label ``Schedulable``
  (UNCONFIRMED whether HyperPod's provider declares that label itself: it is a template label
  of the pool so that Karpenter's simulation admits the pods, not a requirement, as HyperPod's
  provider supports "a limited set of well-known Kubernetes and Karpenter requirements";
  HyperPod's health agent owns the label on the node afterwards). The pool's ``limits`` cap it at the group's ``max_count``
  whole nodes' GPUs (``nvidia.com/gpu``; Karpenter stops launching once a pool's nodes
  reach its limits, same page). Each pod of a replica requests all of a node's GPUs and EFA
  devices, so a LeaderWorkerSet replica of N pods that KEDA adds pends as N pods, and
  Karpenter launches N whole nodes for it.

Scale-in is drain-safe: the pool consolidates ``WhenEmpty`` only, after
``consolidate_after``: Karpenter never evicts a serving pod to pack nodes
(``WhenEmptyOrUnderutilized`` would, Karpenter docs "Disruption",
https://karpenter.sh/docs/concepts/disruption/#consolidation), and nodes never expire
(``expireAfter: Never``, as AWS's sample pool). A node leaves once KEDA removed its replica
and LeaderWorkerSet deleted the replica's pods (each after its preStop and grace period,
``multi_node_manifests``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from .._cdk.durations import Span
from ..errors import Problems
from .constants import GPU_RESOURCE, INSTANCE_TYPE_LABEL, NODE_HEALTH_LABEL, NODE_HEALTHY
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
#: Instance groups one HyperpodNodeClass may name (AWS docs, "Create a NodeClass").
MAX_GROUPS_PER_NODE_CLASS = 10
#: The principal HyperPod's autoscaler assumes the cluster role as (AWS docs, "Create an IAM
#: role for HyperPod autoscaling with Karpenter",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html).
AUTOSCALER_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
#: What the cluster role may do: add and remove this account's cluster nodes (same page).
AUTOSCALER_ACTIONS = ("sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes")


#: ``consolidate_after``'s default: 10 minutes.
_CONSOLIDATE_AFTER = Span.of_seconds(600)


@dataclass(frozen=True)
class NodeAutoScaling:
    """Cluster node autoscaling with HyperPod's managed Karpenter (see the module doc).

    :param consolidate_after: how long a node stays empty (no serving pod) before Karpenter
        removes it. Longer keeps a node warm for the next scale-out (a node costs its hourly
        price while it waits); shorter saves that cost and pays a cold start (node, image,
        weights, engine) on the next scale-out. Default: 10 minutes.
    """

    consolidate_after: Duration = _CONSOLIDATE_AFTER.duration

    def validate(self, problems: Problems, prop: str) -> None:
        """``consolidate_after`` in whole seconds, at least 0 (Karpenter's duration pattern)."""
        span = _CONSOLIDATE_AFTER.given(self.consolidate_after, integral=False)
        if span.seconds < 0 or span.seconds != int(span.seconds):
            problems.add(
                f"{prop}.consolidate_after", span.human(), "must be whole seconds, 0 or more"
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
        gpus = group.capacity * _gpus(group)
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
                        "requirements": [
                            {
                                "key": INSTANCE_TYPE_LABEL,
                                "operator": "In",
                                "values": [str(group.instance_type)],
                            },
                        ],
                        **({"taints": taints} if taints else {}),
                        "expireAfter": "Never",
                    },
                },
                "disruption": {
                    "consolidationPolicy": "WhenEmpty",
                    "consolidateAfter": f"{int(_CONSOLIDATE_AFTER.given(self.consolidate_after).seconds)}s",
                },
                "limits": {GPU_RESOURCE: str(gpus)},
            },
        }

    def autoscaler_role(self, scope: Construct, id: str) -> tuple[iam.Role, iam.ManagedPolicy]:
        """The ``ClusterRole``: trusted by HyperPod's autoscaler, allowed only to add and remove
        nodes of this account's and Region's HyperPod clusters.

        AWS's policy names ``arn:aws:sagemaker:*:*:cluster/*`` with ``aws:ResourceAccount`` =
        the caller's account; a cluster's ARN ends in an ID HyperPod assigns at creation (and
        this role must exist before), so this Region and account are as narrow as synth time
        allows. AWS's page also grants ``kms:CreateGrant``/``kms:DescribeKey`` for customer
        managed EBS keys: this construct gives its groups no KMS key, so they are left out.

        The trust has no ``aws:SourceAccount``/``aws:SourceArn`` condition: AWS's trust policy
        for this role has none, and no AWS page says HyperPod's autoscaler sends those keys
        when it assumes the role (SageMaker's confused-deputy page lists no HyperPod
        feature); a condition the service does not send would refuse every scaling action.
        """
        stack = Stack.of(scope)
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
                iam.PolicyStatement(
                    actions=list(AUTOSCALER_ACTIONS),
                    resources=[
                        stack.format_arn(service="sagemaker", resource="cluster", resource_name="*")
                    ],
                )
            ],
        )
        return role, policy


def _gpus(group: HyperPodInstanceGroup) -> int:
    instance_type = group.instance_type
    return int(getattr(instance_type, "gpus", 0) or 0)


def validate_autoscaled_groups(
    problems: Problems, groups: Sequence[HyperPodInstanceGroup], autoscaling: NodeAutoScaling | None
) -> None:
    """Autoscaled groups need cluster autoscaling, and cluster autoscaling an autoscaled group."""
    scaled = [group.name for group in groups if group.autoscaled]
    if scaled and autoscaling is None:
        problems.add(
            "node_autoscaling",
            None,
            f"instance groups {', '.join(repr(n) for n in scaled)} set max_count: give "
            "node_autoscaling=NodeAutoScaling() so HyperPod's Karpenter can grow them",
        )
    if autoscaling is not None:
        autoscaling.validate(problems, "node_autoscaling")
        if not scaled:
            problems.add(
                "node_autoscaling",
                "NodeAutoScaling(...)",
                "needs a GPU group that may grow: give one HyperPodInstanceGroup.gpu(..., max_count=N)",
            )
