"""``HyperPodInstanceGroup``: one instance group of a HyperPod cluster (a plain value)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..errors import Problems
from ..planning.catalog import Catalog, default_catalog
from ..service_model import hyperpod_instance_types, limits
from ..validation import check_name, check_one_of, check_range

GroupRole = Literal["system", "gpu"]

#: Taint on GPU groups by default, so only pods that tolerate it (the serving pods) land there.
GPU_TAINT_KEY = "nvidia.com/gpu"


@dataclass(frozen=True)
class KubernetesTaint:
    key: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    value: str | None = None


@dataclass(frozen=True)
class HyperPodInstanceGroup:
    """A group of identical HyperPod nodes.

    :param name: group name (1-63 characters, letters, digits and hyphens; unique in the cluster).
    :param instance_type: a HyperPod instance type, e.g. ``ml.p6-b200.48xlarge``.
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
    """

    name: str
    instance_type: str
    count: int
    role: GroupRole = "gpu"
    threads_per_core: int = 1
    ebs_volume_gb: int = 500
    deep_health_checks: tuple[str, ...] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[KubernetesTaint, ...] | None = None
    training_plan_arn: str | None = None

    @classmethod
    def system(cls, name: str = "system", instance_type: str = "ml.m5.2xlarge", count: int = 2, **kwargs: object) -> "HyperPodInstanceGroup":
        return cls(name=name, instance_type=instance_type, count=count, role="system", threads_per_core=kwargs.pop("threads_per_core", 2), **kwargs)  # type: ignore[arg-type]

    @classmethod
    def gpu(cls, name: str, instance_type: str, count: int, **kwargs: object) -> "HyperPodInstanceGroup":
        return cls(name=name, instance_type=instance_type, count=count, role="gpu", **kwargs)  # type: ignore[arg-type]

    @property
    def effective_health_checks(self) -> tuple[str, ...]:
        if self.deep_health_checks is not None:
            return self.deep_health_checks
        return ("InstanceStress", "InstanceConnectivity") if self.role == "gpu" else ()

    @property
    def effective_taints(self) -> tuple[KubernetesTaint, ...]:
        if self.taints is not None:
            return self.taints
        return (KubernetesTaint(GPU_TAINT_KEY, "NoSchedule", "present"),) if self.role == "gpu" else ()

    @property
    def effective_labels(self) -> dict[str, str]:
        return {"cdk-llm-serving/group": self.name, "cdk-llm-serving/role": self.role, **self.labels}

    def validate(self, problems: Problems, prop: str, catalog: Catalog | None = None) -> None:
        spec = "ClusterInstanceGroupSpecification"
        check_name(problems, f"{prop}.name", self.name, limits(spec, "InstanceGroupName"), "an instance group name")
        check_one_of(problems, f"{prop}.instance_type", self.instance_type, hyperpod_instance_types(), "HyperPod cluster instance types")
        check_range(problems, f"{prop}.count", self.count, limits(spec, "InstanceCount"))
        if self.count < 1:
            problems.add(f"{prop}.count", self.count, "must be at least 1 (a group of 0 serves nothing)")
        check_range(problems, f"{prop}.threads_per_core", self.threads_per_core, limits(spec, "ThreadsPerCore"))
        check_range(problems, f"{prop}.ebs_volume_gb", self.ebs_volume_gb, limits("ClusterEbsVolumeConfig", "VolumeSizeInGB"), "GB")
        allowed_checks = limits("DeepHealthCheckType").enum
        for check in self.effective_health_checks:
            check_one_of(problems, f"{prop}.deep_health_checks", check, allowed_checks, "deep health checks")
        self._validate_kubernetes(problems, prop)
        if self.role == "gpu" and self.instance_type in hyperpod_instance_types() and self.instance_type not in (catalog or default_catalog()):
            problems.add(f"{prop}.instance_type", self.instance_type, "a GPU group needs a GPU instance type from the planner's catalog")

    def _validate_kubernetes(self, problems: Problems, prop: str) -> None:
        label_limits = limits("ClusterKubernetesConfig", "Labels")
        taint_limits = limits("ClusterKubernetesConfig", "Taints")
        labels, taints = self.effective_labels, self.effective_taints
        if len(labels) > (label_limits.maximum or 50):
            problems.add(f"{prop}.labels", f"{len(labels)} labels", f"at most {label_limits.maximum} (including our 2)")
        if len(taints) > (taint_limits.maximum or 50):
            problems.add(f"{prop}.taints", f"{len(taints)} taints", f"at most {taint_limits.maximum}")
        key_rule, value_rule = limits("ClusterKubernetesLabelKey"), limits("ClusterKubernetesLabelValue")
        for key, value in self.labels.items():  # ours are valid whenever the group name is
            if not re.fullmatch(key_rule.pattern or ".*", key) or len(key) > (key_rule.maximum or 317):
                problems.add(f"{prop}.labels", key, f"label keys must match {key_rule.pattern!r}")
            if not re.fullmatch(value_rule.pattern or ".*", value) or not (1 <= len(value) <= (value_rule.maximum or 63)):
                problems.add(f"{prop}.labels[{key!r}]", value, f"label values must be 1-{value_rule.maximum} characters matching {value_rule.pattern!r}")
        effects = limits("ClusterKubernetesTaint", "Effect").enum
        taint_key = limits("ClusterKubernetesTaintKey")
        for taint in taints:
            check_one_of(problems, f"{prop}.taints[{taint.key!r}].effect", taint.effect, effects, "taint effects")
            if not re.fullmatch(taint_key.pattern or ".*", taint.key):
                problems.add(f"{prop}.taints", taint.key, f"taint keys must match {taint_key.pattern!r}")

