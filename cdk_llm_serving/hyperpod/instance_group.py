"""``HyperPodInstanceGroup``: one instance group of a HyperPod cluster (a plain value).

Value objects here follow the package's value protocol: ``validate(problems, prop)`` adds
the problems of this value under property ``prop``; ``_render(...)`` returns what
CloudFormation takes for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import aws_sagemaker as sagemaker

from .._cdk.service_limits import limits
from .._cdk.validation import check_name, check_one_of, check_pattern, check_range
from ..errors import Problems, check_literal
from ..planning.catalog import Catalog, default_catalog
from ..planning.instance_types import InstanceType
from ._facts import cloudformation_enum
from .constants import (
    GPU_NODE_ROLE,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    GROUP_LABEL,
    ROLE_LABEL,
    SYSTEM_NODE_ROLE,
)

GroupRole = Literal["system", "gpu"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

__all__ = ["GroupRole", "HyperPodInstanceGroup", "KubernetesTaint"]


@dataclass(frozen=True)
class KubernetesTaint:
    """A node taint HyperPod puts on every node of a group."""

    key: str
    effect: TaintEffect
    value: str | None = None

    def validate(self, problems: Problems, prop: str) -> None:
        """Effect and key as the SageMaker API accepts them (botocore's service model)."""
        effects = limits("ClusterKubernetesTaint", "Effect").enum
        key_rule = limits("ClusterKubernetesTaintKey")
        check_one_of(
            problems, f"{prop}[{self.key!r}].effect", self.effect, effects, "taint effects"
        )
        if not re.fullmatch(key_rule.pattern or ".*", self.key):
            problems.add(prop, self.key, f"taint keys must match {key_rule.pattern!r}")

    def _render(self) -> sagemaker.CfnCluster.ClusterKubernetesTaintProperty:
        return sagemaker.CfnCluster.ClusterKubernetesTaintProperty(
            key=self.key, value=self.value, effect=self.effect
        )


@dataclass(frozen=True)
class HyperPodInstanceGroup:
    """A group of identical HyperPod nodes.

    :param name: group name (1-63 characters, letters, digits and hyphens; unique in the cluster).
    :param instance_type: a HyperPod instance type (``InstanceType`` or its name), e.g.
        ``InstanceType.ML_P6_B200_48XLARGE``; a known name is converted to ``InstanceType``, an
        unknown one is reported by ``validate`` with the closest names.
    :param count: nodes in the group.
    :param role: ``system`` (controllers, add-ons) or ``gpu`` (serving). Default: ``gpu``.
    :param threads_per_core: 1 disables hyperthreading (the HPC default for GPU nodes). Default: 1.
    :param ebs_volume_gb: extra EBS volume per node for container images and logs. Default: 500.
    :param deep_health_checks: run on start before a node joins. Default: stress and
        connectivity checks on GPU groups, none on system groups.
    :param labels: Kubernetes node labels (at most 50).
    :param taints: Kubernetes node taints (at most 50). Default: ``nvidia.com/gpu:NoSchedule``
        on GPU groups.
    :param training_plan_arn: run on reserved capacity of a SageMaker training plan.
    :param max_count: the most nodes the group may grow to under cluster node autoscaling
        (``HyperPodEksCluster(node_auto_scaling=NodeAutoScaling())``): HyperPod's managed
        Karpenter adds whole nodes for pending serving pods and removes empty ones, and
        ``count`` is what the group starts with (AWS advises 0,
        https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html).
        An autoscaled group runs no deep health checks by default, and refuses explicit ones or
        a training plan (Karpenter excludes both). Default: ``None`` (the group keeps ``count``
        nodes).
    """

    name: str
    instance_type: InstanceType | str
    count: int
    role: GroupRole = GPU_NODE_ROLE
    threads_per_core: int = 1
    ebs_volume_gb: int = 500
    deep_health_checks: tuple[str, ...] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[KubernetesTaint, ...] | None = None
    training_plan_arn: str | None = None
    max_count: int | None = None

    def __post_init__(self) -> None:
        # Known names become ``InstanceType`` (its facts); others stay for ``validate`` to report.
        object.__setattr__(self, "instance_type", InstanceType.coerce(self.instance_type))

    @classmethod
    def system(
        cls,
        name: str = "system",
        instance_type: InstanceType | str = "ml.m5.2xlarge",
        count: int = 2,
        *,
        threads_per_core: int = 2,
        ebs_volume_gb: int = 500,
        deep_health_checks: tuple[str, ...] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: tuple[KubernetesTaint, ...] | None = None,
        training_plan_arn: str | None = None,
    ) -> HyperPodInstanceGroup:
        """A group for controllers and add-ons; hyperthreading on (2 threads per core)."""
        return cls(
            name=name,
            instance_type=instance_type,
            count=count,
            role=SYSTEM_NODE_ROLE,
            threads_per_core=threads_per_core,
            ebs_volume_gb=ebs_volume_gb,
            deep_health_checks=deep_health_checks,
            labels=dict(labels or {}),
            taints=taints,
            training_plan_arn=training_plan_arn,
        )

    @classmethod
    def gpu(
        cls,
        name: str,
        instance_type: InstanceType | str,
        count: int,
        *,
        threads_per_core: int = 1,
        ebs_volume_gb: int = 500,
        deep_health_checks: tuple[str, ...] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: tuple[KubernetesTaint, ...] | None = None,
        training_plan_arn: str | None = None,
        max_count: int | None = None,
    ) -> HyperPodInstanceGroup:
        """A serving group: tainted for GPU pods only, deep health checks on start (none when
        it autoscales: ``max_count``)."""
        return cls(
            name=name,
            instance_type=instance_type,
            count=count,
            role=GPU_NODE_ROLE,
            threads_per_core=threads_per_core,
            ebs_volume_gb=ebs_volume_gb,
            deep_health_checks=deep_health_checks,
            labels=dict(labels or {}),
            taints=taints,
            training_plan_arn=training_plan_arn,
            max_count=max_count,
        )

    @property
    def autoscaled(self) -> bool:
        """Whether cluster node autoscaling may grow and shrink this group (``max_count``)."""
        return self.max_count is not None

    @property
    def capacity(self) -> int:
        """The most nodes the group can have: ``max_count`` when it autoscales, else ``count``."""
        return self.max_count if self.max_count is not None else self.count

    @property
    def effective_health_checks(self) -> tuple[str, ...]:
        if self.deep_health_checks is not None:
            return self.deep_health_checks
        if self.autoscaled:
            return ()
        return ("InstanceStress", "InstanceConnectivity") if self.role == GPU_NODE_ROLE else ()

    @property
    def effective_taints(self) -> tuple[KubernetesTaint, ...]:
        if self.taints is not None:
            return self.taints
        return (
            (KubernetesTaint(GPU_TAINT_KEY, "NoSchedule", GPU_TAINT_VALUE),)
            if self.role == GPU_NODE_ROLE
            else ()
        )

    @property
    def effective_labels(self) -> dict[str, str]:
        return {
            GROUP_LABEL: self.name,
            ROLE_LABEL: self.role,
            **self.labels,
        }

    def validate(self, problems: Problems, prop: str, catalog: Catalog | None = None) -> None:
        """What the SageMaker API would refuse, and GPU groups without a catalogued GPU type
        (in ``catalog``; default ``default_catalog()``)."""
        hyperpod = self._validate_shape(problems, prop)
        self._validate_kubernetes(problems, prop)
        if (
            self.role == GPU_NODE_ROLE
            and hyperpod
            and self.instance_type not in (catalog or default_catalog())
        ):
            problems.add(
                f"{prop}.instance_type",
                str(self.instance_type),
                "a GPU group needs a GPU instance type from the planner's catalog",
            )

    def _validate_shape(self, problems: Problems, prop: str) -> bool:
        """Name, type, counts, volume and health checks against botocore's service model;
        returns whether HyperPod takes the instance type."""
        spec = "ClusterInstanceGroupSpecification"
        check_name(
            problems,
            f"{prop}.name",
            self.name,
            limits(spec, "InstanceGroupName"),
            "an instance group name",
        )
        instance_type = InstanceType.parse(problems, f"{prop}.instance_type", self.instance_type)
        hyperpod = instance_type is not None and instance_type.check_hyperpod(
            problems, f"{prop}.instance_type"
        )
        check_range(problems, f"{prop}.count", self.count, limits(spec, "InstanceCount"))
        if self.count < 1 and not self.autoscaled:
            problems.add(
                f"{prop}.count",
                self.count,
                "must be at least 1 (a group of 0 serves nothing), or give max_count to let "
                "cluster node autoscaling grow it",
            )
        self._validate_autoscaling(problems, prop)
        check_range(
            problems,
            f"{prop}.threads_per_core",
            self.threads_per_core,
            limits(spec, "ThreadsPerCore"),
        )
        check_range(
            problems,
            f"{prop}.ebs_volume_gb",
            self.ebs_volume_gb,
            limits("ClusterEbsVolumeConfig", "VolumeSizeInGB"),
            "GB",
        )
        # CloudFormation's schema allows fewer checks than botocore (see hyperpod.json).
        allowed_checks = cloudformation_enum(
            "DeepHealthCheckType", limits("DeepHealthCheckType").enum
        )
        for check in self.effective_health_checks:
            check_one_of(
                problems, f"{prop}.deep_health_checks", check, allowed_checks, "deep health checks"
            )
        check_literal(problems, f"{prop}.role", self.role, GroupRole, "group roles")
        check_pattern(
            problems,
            f"{prop}.training_plan_arn",
            self.training_plan_arn,
            limits(spec, "TrainingPlanArn"),
            "a SageMaker training plan ARN",
        )
        return hyperpod

    def _validate_autoscaling(self, problems: Problems, prop: str) -> None:
        """``max_count``: a GPU group, at least ``count`` (and 1), within the API's instance
        count, without what HyperPod's Karpenter excludes (see ``max_count``)."""
        if self.max_count is None:
            return
        check_range(
            problems,
            f"{prop}.max_count",
            self.max_count,
            limits("ClusterInstanceGroupSpecification", "InstanceCount"),
        )
        if self.max_count < max(self.count, 1):
            problems.add(
                f"{prop}.max_count",
                self.max_count,
                f"must be at least count ({self.count}) and at least 1",
            )
        if self.role != GPU_NODE_ROLE:
            problems.add(
                f"{prop}.max_count",
                self.max_count,
                "only GPU groups autoscale: the system group holds the controllers",
            )
        if self.deep_health_checks:
            problems.add(
                f"{prop}.deep_health_checks",
                list(self.deep_health_checks),
                "must be empty on an autoscaled group (max_count): HyperPod's Karpenter does not "
                "support groups with deep health checks (60-90 minutes while pods pend)",
            )
        if self.training_plan_arn is not None:
            problems.add(
                f"{prop}.training_plan_arn",
                self.training_plan_arn,
                "must be left out on an autoscaled group (max_count): HyperPod's Karpenter "
                "supports on-demand capacity only",
            )

    def _validate_kubernetes(self, problems: Problems, prop: str) -> None:
        """Label and taint counts, label syntax, then each taint."""
        label_limits = limits("ClusterKubernetesConfig", "Labels")
        taint_limits = limits("ClusterKubernetesConfig", "Taints")
        labels, taints = self.effective_labels, self.effective_taints
        if len(labels) > (label_limits.maximum or 50):
            problems.add(
                f"{prop}.labels",
                f"{len(labels)} labels",
                f"at most {label_limits.maximum} (including our 2)",
            )
        if len(taints) > (taint_limits.maximum or 50):
            problems.add(
                f"{prop}.taints", f"{len(taints)} taints", f"at most {taint_limits.maximum}"
            )
        self._validate_labels(problems, prop)
        for taint in taints:
            taint.validate(problems, f"{prop}.taints")
        if self.role == SYSTEM_NODE_ROLE and self.taints:
            # The controllers' charts (LWS, the load balancer controller, KEDA) default to
            # ``tolerations: []``, and we set no other.
            problems.add(
                f"{prop}.taints",
                [f"{t.key}:{t.effect}" for t in self.taints],
                "the system group runs the controllers (LWS, KEDA, the load balancer "
                "controller), which tolerate none of it and would stay Pending: leave the "
                "system group untainted",
            )

    def _check_own_labels(self, problems: Problems, prop: str) -> None:
        """The group and role labels are how every pod of the library finds its nodes: a user
        label of the same key would replace them (``effective_labels``), so it is refused
        unless it says the same."""
        own = {GROUP_LABEL: self.name, ROLE_LABEL: self.role}
        for key, value in self.labels.items():
            if key in own and value != own[key]:
                problems.add(
                    f"{prop}.labels[{key!r}]",
                    value,
                    f"the library sets {key}={own[key]} on this group and its pods select "
                    "nodes by it; use another key",
                )

    def _validate_labels(self, problems: Problems, prop: str) -> None:
        """User labels only: ours are valid whenever the group name is."""
        self._check_own_labels(problems, prop)
        key_rule, value_rule = (
            limits("ClusterKubernetesLabelKey"),
            limits("ClusterKubernetesLabelValue"),
        )
        for key, value in self.labels.items():
            if not re.fullmatch(key_rule.pattern or ".*", key) or len(key) > (
                key_rule.maximum or 317
            ):
                problems.add(f"{prop}.labels", key, f"label keys must match {key_rule.pattern!r}")
            if not re.fullmatch(value_rule.pattern or ".*", value) or not (
                1 <= len(value) <= (value_rule.maximum or 63)
            ):
                problems.add(
                    f"{prop}.labels[{key!r}]",
                    value,
                    f"label values must be 1-{value_rule.maximum} characters matching {value_rule.pattern!r}",
                )

    def _render(
        self,
        *,
        execution_role_arn: str,
        lifecycle_source_uri: str,
        on_create: str,
        override_vpc_config: sagemaker.CfnCluster.VpcConfigProperty | None = None,
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        """The ``InstanceGroups`` entry of ``AWS::SageMaker::Cluster`` for this group."""
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=self.name,
            instance_type=str(self.instance_type),
            instance_count=self.count,
            execution_role=execution_role_arn,
            threads_per_core=self.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=lifecycle_source_uri, on_create=on_create
            ),
            instance_storage_configs=[
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                        volume_size_in_gb=self.ebs_volume_gb
                    )
                )
            ],
            on_start_deep_health_checks=list(self.effective_health_checks) or None,
            kubernetes_config=sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=self.effective_labels,
                taints=[taint._render() for taint in self.effective_taints] or None,
            ),
            training_plan_arn=self.training_plan_arn,
            override_vpc_config=override_vpc_config,
        )
