"""``InferenceComponentOnPools``: an inference component with a specification per instance pool.

Per pool type, which model it runs and what it needs, so a fallback pool can run a quantized
copy on fewer GPUs (docs/design/pool-endpoints.md, "Inference components").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from aws_cdk import Annotations, Duration, Names
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .._cdk.role_grants import endpoint_log_group, inference_component_log_group
from .._cdk.service_limits import limits
from .._cdk.validation import check_at_least, check_name, check_range, seconds_of
from ..core.endpoint_metrics import INVOCATION_NAMESPACE, MetricOptions, build_metric
from ..errors import Problems, checked_props
from ..planning.catalog import Catalog
from ..planning.instance_types import InstanceType
from ._instance_facts import instance_spec
from .pool_endpoint import InferenceComponentEndpoint
from .pool_sizing import plan_one_instance
from .serving_model import ServingModel, add_artifact_statements


@dataclass(frozen=True, eq=False)
class ComponentSpecification:
    """What the component runs on one pool's instance type.

    :param instance_type: one of the endpoint's pool types (an ``InstanceType`` or its name).
    :param model: the model it runs there.
    :param accelerators: GPUs one copy needs (at most the type's GPUs).
    :param min_memory_mb: host memory one copy needs, in MiB (at least 128).
    :param cpu_cores: CPU cores one copy needs. Default: SageMaker's.
    """

    instance_type: InstanceType | str
    model: ServingModel
    accelerators: int
    min_memory_mb: int
    cpu_cores: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "instance_type", InstanceType.coerce(self.instance_type))

    def validate(self, problems: Problems, prop: str, catalog: Catalog | None = None) -> None:
        """botocore's minimums; with a ``catalog``, the type's GPUs and the planner's fit."""
        shape = "InferenceComponentComputeResourceRequirements"
        least_gpus = limits(shape, "NumberOfAcceleratorDevicesRequired").minimum or 1
        check_at_least(problems, f"{prop}.accelerators", self.accelerators, least_gpus)
        spec = instance_spec(self.instance_type, catalog) if catalog is not None else None
        if spec is not None:
            gpus = spec.gpus
            if self.accelerators > gpus:
                problems.add(
                    f"{prop}.accelerators",
                    self.accelerators,
                    f"{self.instance_type} has {gpus} GPUs",
                )
        least_memory = limits(shape, "MinMemoryRequiredInMb").minimum or 128
        check_at_least(problems, f"{prop}.min_memory_mb", self.min_memory_mb, least_memory)
        if spec is not None and self.min_memory_mb > spec.host_memory_gib * 1024:
            problems.add(
                f"{prop}.min_memory_mb",
                self.min_memory_mb,
                f"{self.instance_type} has {spec.host_memory_gib:g} GiB of host memory "
                f"({spec.host_memory_gib * 1024:.0f} MiB): no instance can place one copy",
            )
        least_cores = limits(shape, "NumberOfCpuCoresRequired").minimum or 0.25
        if self.cpu_cores is not None and self.cpu_cores < least_cores:
            problems.add(f"{prop}.cpu_cores", self.cpu_cores, f"must be at least {least_cores}")
        if catalog is not None and self.instance_type in catalog and self.model.sizing is not None:
            self._check_fit(problems, prop, catalog)

    def _check_fit(self, problems: Problems, prop: str, catalog: Catalog) -> None:
        plan, refusal = plan_one_instance(self.model, self.instance_type, catalog)
        if plan is None:
            problems.add(
                f"{prop}.instance_type", str(self.instance_type), refusal or "cannot hold the model"
            )
        elif plan.gpus_per_replica > self.accelerators:
            problems.add(
                f"{prop}.accelerators",
                self.accelerators,
                f"{self.model.node.id} needs {plan.gpus_per_replica} GPUs of {self.instance_type} (planner)",
            )

    def copies_per_instance(self, catalog: Catalog) -> int | None:
        """Copies one instance of the type places: its GPUs and its host memory shared out
        (``None`` when the catalog does not know the type)."""
        spec = instance_spec(self.instance_type, catalog)
        if spec is None or self.accelerators < 1 or self.min_memory_mb < 1:
            return None
        return min(
            spec.gpus // self.accelerators, int(spec.host_memory_gib * 1024) // self.min_memory_mb
        )

    def _render_requirements(
        self,
    ) -> sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty:
        return (
            sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                number_of_accelerator_devices_required=self.accelerators,
                min_memory_required_in_mb=self.min_memory_mb,
                number_of_cpu_cores_required=self.cpu_cores,
            )
        )


def _render_startup(
    startup: Duration | None, download: Duration | None
) -> sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty | None:
    if startup is None and download is None:
        return None
    return sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
        container_startup_health_check_timeout_in_seconds=seconds_of(startup),
        model_data_download_timeout_in_seconds=seconds_of(download),
    )


class InferenceComponentOnPools(Construct):
    """An inference component on an ``InferenceComponentEndpoint``.

    :param endpoint: the endpoint that hosts it.
    :param specifications: one per pool type, at most one per type, 1-5.
    :param copy_count: copies at creation. Default: 1.
    :param component_name: Default: derived from the construct path (stable, unique per stack).
    :param container_startup_timeout: health-check budget per copy (60-3600 s). Default: SageMaker's.
    :param model_data_download_timeout: download budget per copy (60-3600 s). Default: SageMaker's.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint: InferenceComponentEndpoint,
        specifications: Sequence[ComponentSpecification],
        copy_count: int = 1,
        component_name: str | None = None,
        container_startup_timeout: Duration | None = None,
        model_data_download_timeout: Duration | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.endpoint = endpoint
        self.specifications = tuple(specifications)
        self.component_name: str = component_name or Names.unique_resource_name(
            self, max_length=63, separator="-"
        )
        self._validate(copy_count, container_startup_timeout, model_data_download_timeout)

        grants = endpoint.execution_role_grants
        # Its own log group, which the endpoint's role and its models may write (which one
        # SageMaker uses is not documented).
        log_group = inference_component_log_group(self.component_name)
        if grants is not None:
            for spec in self.specifications:
                add_artifact_statements(spec.model, grants)
            grants.write_logs(log_group)
            grants.acknowledge()
        for spec in self.specifications:
            spec.model.write_logs_for(log_group, endpoint_log_group(endpoint.endpoint_name))

        startup = _render_startup(container_startup_timeout, model_data_download_timeout)
        self.cfn_inference_component = self._render(copy_count, startup)
        self.copy_scaling: appscaling.CfnScalingPolicy | None = None

    def _render(
        self,
        copy_count: int,
        startup: sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty | None,
    ) -> sagemaker.CfnInferenceComponent:
        """The singular ``Specification`` for one pool, ``Specifications`` for 2-5."""
        specs = self.specifications
        single = len(specs) == 1
        return sagemaker.CfnInferenceComponent(
            self,
            "Resource",
            endpoint_name=self.endpoint.cfn_endpoint.attr_endpoint_name,
            variant_name=self.endpoint.variant_name,
            inference_component_name=self.component_name,
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=copy_count
            ),
            specification=(
                sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                    model_name=specs[0].model.model_name,
                    compute_resource_requirements=specs[0]._render_requirements(),
                    startup_parameters=startup,
                )
                if single
                else None
            ),
            specifications=(
                None
                if single
                else [
                    sagemaker.CfnInferenceComponent.InferenceComponentSpecificationForInstanceTypeProperty(
                        instance_type=spec.instance_type,
                        model_name=spec.model.model_name,
                        compute_resource_requirements=spec._render_requirements(),
                        startup_parameters=startup,
                    )
                    for spec in specs
                ]
            ),
        )

    def auto_scale_copies(
        self,
        *,
        min_copies: int = 1,
        max_copies: int,
        target_concurrent_requests_per_copy: float,
        scale_out_cooldown: Duration = Duration.minutes(1),
        scale_in_cooldown: Duration = Duration.minutes(10),
    ) -> appscaling.CfnScalingPolicy:
        """Track concurrent requests per copy; SageMaker's managed instance scaling follows."""
        problems = Problems(f"InferenceComponentOnPools '{self.node.path}'")
        if min_copies < 0:
            problems.add("min_copies", min_copies, "must be at least 0")
        if max_copies < max(1, min_copies):
            problems.add(
                "max_copies",
                max_copies,
                f"must be at least 1 and at least min_copies ({min_copies})",
            )
        self._check_placeable(problems, "max_copies", max_copies)
        if not target_concurrent_requests_per_copy > 0:
            problems.add(
                "target_concurrent_requests_per_copy",
                target_concurrent_requests_per_copy,
                "must be positive",
            )
        problems.raise_if_any()
        target = appscaling.CfnScalableTarget(
            self,
            "CopyTarget",
            service_namespace="sagemaker",
            resource_id=f"inference-component/{self.component_name}",
            scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=min_copies,
            max_capacity=max_copies,
        )
        target.node.add_dependency(self.cfn_inference_component)
        self.copy_scaling = appscaling.CfnScalingPolicy(
            self,
            "CopyScaling",
            policy_name=f"{self.component_name}-concurrency-per-copy",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=target_concurrent_requests_per_copy,
                scale_out_cooldown=seconds_of(scale_out_cooldown),
                scale_in_cooldown=seconds_of(scale_in_cooldown),
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
                ),
            ),
        )
        return self.copy_scaling

    def metric(
        self,
        metric_name: str,
        *,
        instance_type: InstanceType | str | None = None,
        **options: Unpack[MetricOptions],
    ) -> cloudwatch.Metric:
        """A metric of this component; with ``instance_type``, of its copies on that pool."""
        dimensions = {"InferenceComponentName": self.component_name}
        return build_metric(INVOCATION_NAMESPACE, metric_name, dimensions, instance_type, options)

    def _validate_specifications(self, problems: Problems) -> None:
        """Each one valid, on one of the endpoint's pool types, once; every pool covered."""
        pool_types = [str(pool.instance_type) for pool in self.endpoint.pools]
        seen: dict[str, int] = {}
        for index, spec in enumerate(self.specifications):
            prop = f"specifications[{index}]"
            if spec.instance_type not in pool_types:
                problems.add(
                    f"{prop}.instance_type",
                    str(spec.instance_type),
                    f"must be one of the endpoint's pool types: {', '.join(pool_types)}",
                )
            first = seen.setdefault(spec.instance_type, index)
            if first != index:
                problems.add(
                    f"{prop}.instance_type",
                    str(spec.instance_type),
                    f"already specified by specifications[{first}]",
                )
            spec.validate(problems, prop, self.endpoint.catalog)
            if spec.model.sizing is not None and spec.instance_type not in self.endpoint.catalog:
                # The one policy for a hosting type the catalog does not record, as on the
                # endpoint's pools: accepted, its fit unchecked, and said so.
                Annotations.of(self).add_warning_v2(
                    "cdk-llm-serving:poolNotInCatalog",
                    f"{prop} {spec.instance_type} is not in the planner's catalog: whether it holds {spec.model.node.id} is unchecked",
                )
        uncovered = [t for t in pool_types if t not in seen]
        if uncovered:
            problems.add(
                "specifications",
                [str(s.instance_type) for s in self.specifications],
                f"every pool needs a specification; missing: {', '.join(uncovered)}",
            )

    def placeable_copies(self) -> int | None:
        """The most copies the endpoint's instances can hold: its managed maximum of instances,
        each of the pool type that places the most (SageMaker places copies on any pool;
        managed instance scaling adds instances up to ``managed_instance_count``'s maximum).
        ``None`` without a managed maximum or when a pool's type is unknown."""
        managed = self.endpoint.managed_instance_count
        per_type = [spec.copies_per_instance(self.endpoint.catalog) for spec in self.specifications]
        if managed is None or not per_type or None in per_type:
            return None
        most = max(n for n in per_type if n is not None)
        return managed[1] * most if most > 0 else None  # 0: a specification's own problem

    def _check_placeable(self, problems: Problems, prop: str, copies: int) -> None:
        placeable = self.placeable_copies()
        managed = self.endpoint.managed_instance_count
        if placeable is not None and managed is not None and copies > placeable:
            problems.add(
                prop,
                copies,
                f"at most {placeable}: the endpoint's managed_instance_count allows "
                f"{managed[1]} instance(s), and the "
                "specifications' GPUs and memory fit no more copies on them",
            )

    def _validate(
        self, copy_count: int, startup: Duration | None, download: Duration | None
    ) -> None:
        problems = Problems(f"InferenceComponentOnPools '{self.node.path}'")
        check_name(
            problems,
            "component_name",
            self.component_name,
            limits("CreateInferenceComponentInput", "InferenceComponentName"),
            "an inference component name",
        )
        count_limits = limits("CreateInferenceComponentInput", "Specifications")
        low, high = count_limits.minimum or 1, count_limits.maximum or 5
        if not low <= len(self.specifications) <= high:
            problems.add(
                "specifications",
                len(self.specifications),
                f"must list {low} to {high} specifications, one per pool type",
            )
        self._validate_specifications(problems)
        check_at_least(
            problems,
            "copy_count",
            copy_count,
            limits("InferenceComponentRuntimeConfig", "CopyCount").minimum or 0,
        )
        self._check_placeable(problems, "copy_count", copy_count)
        for name, value, member in (
            ("container_startup_timeout", startup, "ContainerStartupHealthCheckTimeoutInSeconds"),
            ("model_data_download_timeout", download, "ModelDataDownloadTimeoutInSeconds"),
        ):
            bounds = limits("InferenceComponentStartupParameters", member)
            check_range(problems, name, seconds_of(value), bounds, "seconds")
        problems.raise_if_any()
