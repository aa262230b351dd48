"""``HyperPodNodesReady``: a custom resource that completes once every instance group's
nodes are Running, so charts and manifests that need nodes are applied after them (under
``NodeProvisioningMode: Continuous`` the cluster resource completes before any node exists).

How long to wait (``wait_budget``) is derived per group, the slowest group setting it: ``_BASE``
for launch, lifecycle script and join, each on-start deep health check the group runs, and
``_PER_NODE`` per node. ASSUMED: AWS publishes no durations for any of these; the figures are
our estimates, long on purpose, as the wait fails at once on a node in ``Failure`` or a failed
group (``assets/node_wait/index.py``). A custom resource must answer within an hour, so a
longer wait is chained stages of at most ``_STAGE``, the last failing at its deadline.
Sources and the reasoning: docs/design/hyperpod-cluster.md, "Waiting for the nodes".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import CfnResource, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import Construct

from .._cdk.function_role import acknowledge_lambda_hipaa, role_with_own_logs
from .._cdk.nag import acknowledge, acknowledge_cdk_internals
from .._cdk.service_trust import condition_service_trust
from ..errors import Problems, checked_props
from .instance_group import HyperPodInstanceGroup

NODE_WAIT_CODE = Path(__file__).parent / "assets" / "node_wait"

#: Launch, lifecycle script and kubelet join of a node (ASSUMED, see the module doc).
_BASE = Duration.minutes(30)
#: Each on-start deep health check (ASSUMED): InstanceStress runs DCGM level 4 (longer than
#: level 3's ~15 minutes) and EFA benchmarks; InstanceConnectivity runs NCCL tests.
_DEEP_HEALTH_CHECK_TIME: dict[str, Duration] = {
    "InstanceStress": Duration.minutes(60),
    "InstanceConnectivity": Duration.minutes(20),
}
#: Per node of a group: Continuous provisioning adds nodes as capacity allows (ASSUMED).
_PER_NODE = Duration.minutes(1)
#: One stage, within the one-hour custom-resource limit with room for the last poll.
_STAGE = Duration.minutes(50)
_QUERY_INTERVAL = Duration.minutes(1)


def group_budget(group: HyperPodInstanceGroup) -> Duration:
    """How long ``group``'s nodes may take: base, its deep health checks, per node."""
    minutes = _BASE.to_minutes() + _PER_NODE.to_minutes() * group.count
    for check in group.effective_health_checks:
        minutes += _DEEP_HEALTH_CHECK_TIME.get(check, Duration.minutes(60)).to_minutes()
    return Duration.minutes(minutes)


def wait_budget(groups: Sequence[HyperPodInstanceGroup]) -> Duration:
    """How long to wait for ``groups``' nodes: the slowest group's ``group_budget``
    (groups provision in parallel). E.g. two p5en nodes with both checks: 30 + 60 + 20 + 2 =
    112 minutes; without deep health checks: 32."""
    return Duration.minutes(
        max((group_budget(group).to_minutes() for group in groups), default=_BASE.to_minutes())
    )


class HyperPodNodesReady(Construct):
    """Completes once each group of ``cluster_arn`` has ``count`` nodes Running.

    :param cluster_arn: the HyperPod cluster (its ARN; ``ListClusterNodes`` takes name or ARN).
    :param instance_groups: the groups to wait for, with their node counts.
    :param timeout: how long to wait in all. Default: ``wait_budget(instance_groups)``.

    ``ready`` is the construct to depend on (the last stage).
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_arn: str,
        instance_groups: Sequence[HyperPodInstanceGroup],
        timeout: Duration | None = None,
    ) -> None:
        super().__init__(scope, id)
        self._timeout_given = timeout is not None
        self.timeout = timeout or wait_budget(instance_groups)
        if self.timeout.to_seconds() < _QUERY_INTERVAL.to_seconds():
            problems = Problems(f"HyperPodNodesReady '{self.node.path}'")
            problems.add("timeout", self.timeout.to_human_string(), "must be at least 1 minute")
            problems.raise_if_any()
        provider = self._provider(cluster_arn)
        stages = max(1, math.ceil(self.timeout.to_seconds() / _STAGE.to_seconds()))
        per_stage = math.ceil(self.timeout.to_seconds() / stages)
        groups = {group.name: str(group.count) for group in instance_groups}
        self.stages: list[CustomResource] = []
        for index in range(stages):
            stage = CustomResource(
                self,
                f"Stage{index + 1}",
                service_token=provider.service_token,
                resource_type="Custom::HyperPodNodesReady",
                service_timeout=Duration.hours(1),
                properties={
                    "ClusterName": cluster_arn,
                    "InstanceGroups": groups,
                    "DeadlineSeconds": str(per_stage),
                    "Final": "true" if index == stages - 1 else "false",
                },
            )
            if self.stages:
                stage.node.add_dependency(self.stages[-1])
            self.stages.append(stage)

    @property
    def ready(self) -> CustomResource:
        return self.stages[-1]

    def rebudget(self, instance_groups: Sequence[HyperPodInstanceGroup]) -> None:
        """Derive the budget again for changed groups (deep health checks turned off), over
        the same number of stages; a ``timeout`` that was given stays as given."""
        if self._timeout_given:
            return
        self.timeout = wait_budget(instance_groups)
        per_stage = math.ceil(self.timeout.to_seconds() / len(self.stages))
        for stage in self.stages:
            cfn = stage.node.default_child
            assert isinstance(cfn, CfnResource)
            cfn.add_property_override("DeadlineSeconds", str(per_stage))

    def _provider(self, cluster_arn: str) -> cr.Provider:
        """The handlers (list this cluster's nodes only) under the provider framework."""
        role, log_group = role_with_own_logs(
            self,
            role_id="HandlerRole",
            logs_id="Logs",
            description="Waits for HyperPod nodes: reads one cluster's status and nodes",
            statements=[
                iam.PolicyStatement(
                    actions=["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"],
                    resources=[cluster_arn],
                )
            ],
            logs_removal=RemovalPolicy.DESTROY,
        )
        handlers = [
            lambda_.Function(
                self,
                name,
                runtime=lambda_.Runtime.PYTHON_3_14,
                handler=f"index.{entry}",
                code=lambda_.Code.from_asset(str(NODE_WAIT_CODE), exclude=["__pycache__", "*.pyc"]),
                role=role,
                log_group=log_group,
                timeout=Duration.minutes(1),
                memory_size=256,
                description="Waits until the HyperPod cluster's nodes are Running",
            )
            for name, entry in (("OnEvent", "on_event"), ("IsComplete", "is_complete"))
        ]
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=handlers[0],
            is_complete_handler=handlers[1],
            query_interval=_QUERY_INTERVAL,
            # Past the stage's own deadline: CloudFormation shows our message, not a timeout.
            total_timeout=_STAGE.plus(Duration.minutes(5)),
        )
        self._acknowledge(provider)
        # The waiter state machine's role: Step Functions assumes it only for this account's
        # state machines (docs.aws.amazon.com/step-functions/latest/dg/procedure-create-iam-role.html,
        # "Prevent cross-service confused deputy issue").
        waiter = provider.node.find_child("waiter-state-machine").node.find_child("Role")
        assert isinstance(waiter, iam.Role), waiter.node.path
        stack = Stack.of(self)
        condition_service_trust(
            waiter,
            "states.amazonaws.com",
            f"arn:{stack.partition}:states:{stack.region}:{stack.account}:stateMachine:*",
        )
        for handler in handlers:
            acknowledge_lambda_hipaa(
                handler,
                concurrency="Invoked by CloudFormation's provider framework, once per poll.",
                dead_letter="Invoked synchronously by the provider framework, which reports failures to CloudFormation.",
                outside_vpc="Calls only SageMaker's public, SigV4-signed ListClusterNodes API.",
            )
        return provider

    def _acknowledge(self, provider: cr.Provider) -> None:
        acknowledge_cdk_internals(
            provider,
            "aws-cdk-lib's custom-resource provider framework (its functions, roles and waiter state machine) around our node-wait handlers.",
        )
        acknowledge(
            provider,
            "AwsSolutions-SF1",
            "The provider framework's waiter only retries our is_complete handler; its outcome is in the handlers' log group and CloudFormation events.",
        )
        acknowledge(
            provider,
            "AwsSolutions-SF2",
            "The provider framework's waiter state machine offers no X-Ray option; it only retries one Lambda function.",
        )
