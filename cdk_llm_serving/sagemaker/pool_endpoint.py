"""``InstancePoolEndpoint``: a SageMaker endpoint whose variant falls back across instance pools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Unpack

from aws_cdk import Annotations, Arn, ArnFormat, Duration, Names, Resource
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .._cdk.arns import CLOUDWATCH_ALARM, KMS_KEY, ML_RESERVATION, SNS_TOPIC, check_arn
from .._cdk.endpoint_names import claim_endpoint_name
from .._cdk.role_grants import (
    ExecutionRoleGrants,
    endpoint_log_group,
    sagemaker_inference_principal,
)
from .._cdk.service_limits import limits
from .._cdk.stacks import stack_of
from .._cdk.template_limits import check_template_limits
from .._cdk.validation import is_unresolved, seconds_of
from ..core.endpoint_api import EndpointApi, IPoolEndpoint
from ..core.fleet_utilization import (
    MetricQuery,
    PoolCapacity,
    concurrency_sample_seconds,
    fleet_utilization_queries,
)
from ..errors import ConfigurationError, Problem, Problems, checked_props, refuse_unknown_options
from ..planning.catalog import default_catalog
from ..planning.instance_types import InstanceType
from ._pool_checks import (
    check_component_mode,
    check_pools,
    check_pools_hardware,
    check_reservation,
    check_storage,
)
from .autoscaling import AutoScalingOptions, EndpointAutoScaling
from .deployment import (
    BlueGreenDeployment,
    EndpointDeployment,
    check_against_fleet,
    outside_fleet_share,
    rolling_for_scarce_gpus,
)
from .endpoint_options import PoolEndpointProps, validate, with_defaults
from .engine_batch import EngineBatch, batch_of_environment, vllm_default_max_num_seqs
from .instance_pool import InstancePool, parse_instance_types
from .pool_sizing import PoolFit, check_pools_fit
from .recommended_pools import pools_from_recommendation
from .serving_model import ServingModel
from .update_rules import DEPLOYED_TEMPLATE_CONTEXT, deployed_variant_problems

#: Timeout used when no pool's model declares its sizing, in seconds.
_FALLBACK_TIMEOUT_SECONDS = 1800

#: The only CapacityReservationPreference the API knows.
_RESERVATIONS_ONLY = "capacity-reservations-only"


#: The container start-up and weights download timeouts, in whole seconds.
_Timeouts = tuple[int, int]


class _PoolHost(Construct, EndpointApi):
    """What both kinds of pool endpoint share: the variant on pools, its checks, its resources.

    ``InstancePoolEndpoint`` hosts a model; ``InferenceComponentEndpoint`` hosts inference
    components; both take ``PoolEndpointProps``.
    """

    #: The scaling of this endpoint, once ``auto_scale`` was called (model endpoints only).
    auto_scaling: EndpointAutoScaling | None

    def _subject(self) -> str:
        return f"{type(self).__name__} '{self.node.path}'"

    def _build(
        self,
        scope: Construct,
        model: ServingModel | None,
        pools: Sequence[InstancePool],
        props: PoolEndpointProps,
    ) -> None:
        """Resolve, validate and render (``__init__`` of both kinds, after the props)."""
        self._stack = stack_of(scope)
        self.stack_region = self._stack.region
        check_template_limits(self._stack)
        self._resolve(model, pools, props)
        timeouts = self._validate(props)
        self._render(props, timeouts)
        # Not in auto_scale: see docs/design/pool-endpoints.md, "Updates of an autoscaled endpoint".
        self._check_against_deployed()

    # -- what the endpoint serves ---------------------------------------------------------

    @property
    def models(self) -> tuple[ServingModel, ...]:
        """The endpoint's model and every pool's own model, without repeats, in pool order."""
        seen: list[ServingModel] = [self.model] if self.model is not None else []
        for pool in self.pools:
            if pool.model is not None and all(pool.model is not known for known in seen):
                seen.append(pool.model)
        return tuple(seen)

    # -- what observability reads (``IPoolEndpoint``) ----------------------------------------

    @property
    def instance_types(self) -> tuple[InstanceType | str, ...]:
        """The pools' instance types, most preferred first."""
        return tuple(pool.instance_type for pool in self.pools)

    def served_model_name_on(self, instance_type: InstanceType | str) -> str | None:
        """The name the copy on ``instance_type``'s pool serves (``None``: none declared)."""
        for pool in self.pools:
            if pool.instance_type == instance_type:
                served = pool.model or self.model
                return served.served_model_name if served is not None else None
        return None

    def pool_batch(self, index: int) -> EngineBatch | None:
        """The batch the copy on ``pools[index]`` is configured with (its ``SM_VLLM_MAX_NUM_SEQS``
        and ``SM_VLLM_DATA_PARALLEL_SIZE``), ``None`` when its model sets no ``max_num_seqs``."""
        model = self.pools[index].model or self.model
        return batch_of_environment(model.environment) if model is not None else None

    # -- resolve -> validate -> render ----------------------------------------------------

    def _resolve(
        self,
        model: ServingModel | None,
        pools: Sequence[InstancePool],
        props: PoolEndpointProps,
    ) -> None:
        """Names and defaults that the checks and the resources share."""
        self.model = model
        self.pools: tuple[InstancePool, ...] = (
            tuple(pools) if isinstance(pools, list | tuple) else ()
        )
        self.variant_name = props["variant_name"]
        self.async_inference = props.get("async_inference")
        self.endpoint_name: str = props.get("endpoint_name") or Names.unique_resource_name(
            self, max_length=63, separator="-"
        )
        self.hosts_inference_components = model is None
        self.detailed_observability = props["detailed_observability"]
        #: ``(min, max)`` instances of managed instance scaling (inference components only).
        self.managed_instance_count = props.get("managed_instance_count")
        self.auto_scaling = None
        self.catalog = props.get("catalog") or default_catalog()
        instances = props["initial_instance_count"]
        self.deployment: EndpointDeployment | None = props.get("deployment")
        if self.deployment is None and not self.hosts_inference_components:
            self.deployment = self._default_deployment(instances)
        elif self.deployment is not None and (
            outside := outside_fleet_share(self.deployment, instances)
        ):
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:rollingBatchOutsideFleetShare",
                f"the deployment's {' and '.join(outside)} is outside AWS's share of the "
                f"variant's {instances} instance(s) at creation; SageMaker "
                "checks it against the count at update time",
            )
        self.concurrency_sample_seconds = concurrency_sample_seconds(
            props["enhanced_metrics"], props["metric_publish_frequency"]
        )
        # On a reservation the variant names its one InstanceType and no pools (see
        # ``_render_variant``): its series carry no InstanceType dimension.
        self.per_pool_dimension = props.get("capacity_reservation_arn") is None

    def _default_deployment(self, instances: int) -> EndpointDeployment:
        """Rolling on GPU types, else blue/green (docs/design/pool-endpoints.md, "Deployments")."""
        on_gpus = any(
            pool.instance_type in self.catalog and self.catalog.get(pool.instance_type).gpus > 0
            for pool in self.pools
        )
        if not on_gpus:
            return BlueGreenDeployment()
        rolling = rolling_for_scarce_gpus(instances)
        if rolling is not None:
            return rolling
        Annotations.of(self).add_warning_v2(
            "cdk-llm-serving:blueGreenOnOneGpuInstance",
            "one instance: updates are blue/green and provision a second GPU instance (and fall "
            "back down the pools when the primary type has none); with 2+ instances the default "
            "is a rolling update, which needs one batch of spare capacity",
        )
        return BlueGreenDeployment()

    def _validate(self, props: PoolEndpointProps) -> _Timeouts:
        """Every problem at once; the start-up timeouts sized from the planner."""
        problems = Problems(self._subject)
        check_pools(problems, self.pools)
        check_pools_hardware(problems, self.pools, self.model, self.catalog)
        check_component_mode(problems, self.pools, props, hosts=self.hosts_inference_components)
        fits = check_pools_fit(self, problems, self.pools, self.model, catalog=self.catalog)
        self.pool_plans = tuple(fits)
        timeouts = self._size_timeouts(problems, props, fits)
        validate(problems, props)
        deployment = props.get("deployment")
        if deployment is not None and not self.hosts_inference_components:
            check_against_fleet(problems, "deployment", deployment, props["initial_instance_count"])
        check_storage(problems, self.pools, props)
        check_reservation(problems, self.pools, props)
        self._check_arns(problems, props)
        claim_endpoint_name(self, problems, "endpoint_name", self.endpoint_name, self._stack)
        self._check_capacity_within_batch(problems)
        problems.raise_if_any()
        return timeouts

    def _check_arns(self, problems: Problems, props: PoolEndpointProps) -> None:
        """Resources given by ARN are of their service and type, in this stack's partition and
        region (``_cdk.arns``)."""
        reservation = props.get("capacity_reservation_arn")
        if reservation is not None and reservation.startswith("arn:"):  # else check_reservation's
            check_arn(problems, "capacity_reservation_arn", reservation, ML_RESERVATION, self)
        for index, alarm in enumerate(props.get("rollback_alarms") or ()):
            check_arn(
                problems, f"rollback_alarms[{index}]", alarm.alarm_arn, CLOUDWATCH_ALARM, self
            )
        async_inference = props.get("async_inference")
        if async_inference is not None:
            for name in ("success_topic", "error_topic"):
                topic = getattr(async_inference, name)
                if topic is not None:
                    check_arn(problems, f"async_inference.{name}", topic.topic_arn, SNS_TOPIC, self)
            key = async_inference.encryption_key
            if key is not None:
                check_arn(problems, "async_inference.encryption_key", key.key_arn, KMS_KEY, self)

    def _check_capacity_within_batch(self, problems: Problems) -> None:
        """A pool's ``max_concurrency`` (what autoscaling counts one instance for) above what
        its copy batches (``max_num_seqs`` x engines) is refused: vLLM would queue the
        difference while the weighted utilization reads it as served."""
        for index, pool in enumerate(self.pools):
            batch = self.pool_batch(index)
            if pool.max_concurrency is None or batch is None:
                continue
            if pool.max_concurrency > batch.concurrency:
                problems.add(
                    f"pools[{index}].max_concurrency",
                    pool.max_concurrency,
                    f"{pool.instance_type}: at most {batch.concurrency}, what its copy batches "
                    f"(max_num_seqs {batch.max_num_seqs} x {batch.engines} engine(s)); "
                    "autoscaling would count queued requests as served: lower max_concurrency "
                    "or raise VllmConfig.max_num_seqs",
                )

    def _render(self, props: PoolEndpointProps, timeouts: _Timeouts) -> None:
        self._render_execution_role()
        # Each model's role writes this endpoint's log group, no other.
        for model in self.models:
            model.write_logs_for(endpoint_log_group(self.endpoint_name))
        if self.async_inference is not None:
            roles = [m.role for m in self.models]
            if self.execution_role is not None:
                roles.append(self.execution_role)
            for role in roles:
                self.async_inference.grant_write_results(role)
        self.cfn_endpoint_config = self._render_config(props, timeouts)
        alarms = props.get("rollback_alarms")
        if alarms is None and self.deployment is not None:
            alarms = self._default_rollback_alarms(
                props["rollback_error_threshold"], props["rollback_latency_threshold"]
            )
        self.rollback_alarms: tuple[cloudwatch.IAlarm, ...] = tuple(alarms or ())
        alarm_names = [alarm.alarm_name for alarm in self.rollback_alarms]
        self.cfn_endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_config_name=self.cfn_endpoint_config.attr_endpoint_config_name,
            endpoint_name=self.endpoint_name,
            deployment_config=(
                self.deployment.to_cfn(alarm_names) if self.deployment is not None else None
            ),
        )
        self.endpoint_arn: str = _endpoint_arn(self._stack, self.endpoint_name)
        grants = self.execution_role_grants
        if grants is not None and grants.policy is not None:
            self.cfn_endpoint.node.add_dependency(grants.policy)

    def _render_execution_role(self) -> None:
        """Only an inference-component endpoint has a role of its own (its models bring theirs)."""
        self.execution_role: iam.IRole | None = None
        self.execution_role_grants: ExecutionRoleGrants | None = None
        if not self.hosts_inference_components:
            return
        self.execution_role = iam.Role(
            self,
            "ExecutionRole",
            # Only this account's SageMaker inference, in this Region (confused deputy).
            assumed_by=sagemaker_inference_principal(self._stack.region),
            description="Execution role of a SageMaker endpoint hosting inference components",
        )
        self.execution_role_grants = ExecutionRoleGrants(
            self, self.execution_role, stack=self._stack
        )
        self.execution_role_grants.metrics()
        self.execution_role_grants.write_logs(endpoint_log_group(self.endpoint_name))
        self.execution_role_grants.acknowledge()

    def _render_config(
        self, props: PoolEndpointProps, timeouts: _Timeouts
    ) -> sagemaker.CfnEndpointConfig:
        key = props.get("volume_kms_key")
        role = self.execution_role
        return sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[self._render_variant(props, timeouts)],
            kms_key_id=key.key_arn if key is not None else None,
            execution_role_arn=role.role_arn if role is not None else None,
            metrics_config=sagemaker.CfnEndpointConfig.MetricsConfigProperty(
                enable_enhanced_metrics=props["enhanced_metrics"],
                enable_detailed_observability=props["detailed_observability"],
                metric_publish_frequency_in_seconds=props["metric_publish_frequency"],
            ),
            async_inference_config=(
                self.async_inference.to_cfn() if self.async_inference is not None else None
            ),
        )

    def _render_variant(
        self, props: PoolEndpointProps, timeouts: _Timeouts
    ) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        hosts_model = self.model is not None
        managed = self.managed_instance_count
        reservation = props.get("capacity_reservation_arn")
        model = self.model
        # On a reservation (one pool): the variant's InstanceType and no InstancePools, the
        # documented form; with pools: UNCONFIRMED[reservation-with-pools]; updates need
        # headroom in it: UNCONFIRMED[reservation-update-headroom] (docs/design/pool-endpoints.md,
        # "Capacity reservations").
        on_reservation = reservation is not None and len(self.pools) == 1
        if on_reservation and self.pools[0].model is not None:
            model = self.pools[0].model
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=self.variant_name,
            model_name=model.model_name if model is not None else None,
            initial_instance_count=props["initial_instance_count"],
            instance_type=self.pools[0].instance_type if on_reservation else None,
            instance_pools=None if on_reservation else self._render_pools(),
            variant_instance_provision_timeout_in_seconds=seconds_of(props["provision_timeout"]),
            container_startup_health_check_timeout_in_seconds=timeouts[0] if hosts_model else None,
            model_data_download_timeout_in_seconds=timeouts[1] if hosts_model else None,
            managed_instance_scaling=(
                sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status="ENABLED", min_instance_count=managed[0], max_instance_count=managed[1]
                )
                if managed is not None
                else None
            ),
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy=props["routing_strategy"]
            ),
            volume_size_in_gb=props.get("volume_size_gb"),
            capacity_reservation_config=(
                sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
                    capacity_reservation_preference=_RESERVATIONS_ONLY,
                    ml_reservation_arn=reservation,
                )
                if reservation is not None
                else None
            ),
        )

    def _render_pools(self) -> list[sagemaker.CfnEndpointConfig.InstancePoolProperty]:
        """Priority is list position; a pool serving another model names it as an override."""
        return [
            sagemaker.CfnEndpointConfig.InstancePoolProperty(
                instance_type=pool.instance_type,
                priority=priority,
                model_name_override=(
                    pool.model.model_name
                    if pool.model is not None and pool.model is not self.model
                    else None
                ),
            )
            for priority, pool in enumerate(self.pools, start=1)
        ]

    # -- internals ----------------------------------------------------------------------

    def _check_against_deployed(self) -> None:
        """Refuse at synth what SageMaker would refuse on update of the deployed template."""
        path = self.node.try_get_context(DEPLOYED_TEMPLATE_CONTEXT)
        if not path:
            return
        try:
            deployed = json.loads(Path(str(path)).read_text())
        except (OSError, ValueError) as error:
            self._refuse(DEPLOYED_TEMPLATE_CONTEXT, path, f"cannot read a JSON template: {error}")
        if isinstance(deployed.get("TemplateBody"), dict):
            deployed = deployed["TemplateBody"]
        types = frozenset(pool.instance_type for pool in self.pools)
        problems = deployed_variant_problems(
            deployed, self.endpoint_name, {self.variant_name: types}
        )
        if problems:
            raise ConfigurationError(self._subject(), problems)

    def _refuse(self, prop: str, value: object, allowed: str) -> None:
        raise ConfigurationError(self._subject(), [Problem(prop, value, allowed)])

    def _size_timeouts(
        self, problems: Problems, props: PoolEndpointProps, fits: list[PoolFit]
    ) -> _Timeouts:
        container = self._timeout(
            problems,
            "container_startup_timeout",
            props.get("container_startup_timeout"),
            [f.cold_start.startup_timeout_seconds for f in fits],
            [f.cold_start.load_seconds + f.cold_start.engine_start_seconds for f in fits],
            ("ProductionVariant", "ContainerStartupHealthCheckTimeoutInSeconds"),
        )
        download = self._timeout(
            problems,
            "model_data_download_timeout",
            props.get("model_data_download_timeout"),
            [f.cold_start.download_timeout_seconds for f in fits],
            [f.cold_start.download_seconds for f in fits],
            ("ProductionVariant", "ModelDataDownloadTimeoutInSeconds"),
        )
        return container, download

    def _timeout(
        self,
        problems: Problems,
        prop: str,
        given: Duration | None,
        budgets: list[int],
        estimates: list[float],
        shape: tuple[str, str],
    ) -> int:
        """The given timeout, or one sized from the planner's cold-start estimates (seconds)."""
        bounds = limits(*shape)
        low, high = bounds.minimum or 60, bounds.maximum or 3600
        slowest = max(estimates, default=0.0)
        if slowest > high:
            problems.add(
                prop,
                f"estimated {slowest:.0f} s",
                f"the planner's cold-start estimate exceeds the service maximum of {high} s; serve smaller weights or a faster-loading copy",
            )
        given_seconds = seconds_of(given)
        if given_seconds is not None:
            if estimates and given_seconds < slowest:
                Annotations.of(self).add_warning_v2(
                    f"cdk-llm-serving:{prop}BelowEstimate",
                    f"{prop} {given_seconds} s is below the planner's estimate of {slowest:.0f} s",
                )
            return given_seconds
        if not budgets:
            return _FALLBACK_TIMEOUT_SECONDS
        return int(min(high, max(low, max(budgets))))

    def _default_rollback_alarms(
        self, error_threshold: int, latency_threshold: Duration
    ) -> list[cloudwatch.IAlarm]:
        latency_seconds = seconds_of(latency_threshold) or 0
        # Over the pools' series, which certainly exist (``EndpointMetrics.metric_variant_total``).
        types = self.instance_types
        errors = cloudwatch.Alarm(
            self,
            "RollbackOnErrors",
            metric=self.metric_variant_total("Invocation5XXErrors", types, label="5xx errors"),
            threshold=error_threshold,
            evaluation_periods=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{error_threshold}+ 5xx errors a minute, two minutes running: rolls an endpoint update back",
        )
        latency = cloudwatch.Alarm(
            self,
            "RollbackOnLatency",
            metric=self.metric_variant_worst(
                "ModelLatency", types, statistic="p99", label="ModelLatency p99"
            ),
            threshold=latency_seconds * 1_000_000,
            evaluation_periods=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"p99 model latency above {latency_threshold.to_human_string()} for three minutes: rolls an endpoint update back",
        )
        return [errors, latency]


class InstancePoolEndpoint(_PoolHost):
    """A real-time (or asynchronous) SageMaker endpoint on an ordered list of instance pools.

    SageMaker provisions the first pool's type and falls back down the list when a type has no
    capacity; scale-in removes the lowest-priority instances first. A pool may serve another
    model (``InstancePool(model=...)``), e.g. a quantized copy on a smaller GPU. Changing pools,
    models or counts updates the endpoint in place through ``deployment``, never a new one.
    Decisions where AWS's documentation is silent: docs/design/pool-endpoints.md, "Decisions".

    :param model: the model every pool serves unless the pool names its own.
    :param pools: 1-5 instance pools, most preferred first.
    :param props: the endpoint's options (``endpoint_name``, ``deployment``, ...), each
        documented with its default on ``PoolEndpointProps``.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        model: ServingModel,
        pools: Sequence[InstancePool],
        **props: Unpack[PoolEndpointProps],
    ) -> None:
        super().__init__(scope, id)
        self._build(scope, model, pools, with_defaults(self._subject, props, ("model", "pools")))

    # -- imports and builders -----------------------------------------------------------

    @classmethod
    def from_endpoint_name(
        cls,
        scope: Construct,
        id: str,
        endpoint_name: str,
        *,
        variant_name: str = "AllTraffic",
        instance_types: Sequence[InstanceType | str] = (),
        detailed_observability: bool = False,
    ) -> IPoolEndpoint:
        """An existing endpoint in this stack's account and region, to grant and watch.

        :param endpoint_name: the endpoint's name.
        :param variant_name: its production variant. Default: ``AllTraffic``.
        :param instance_types: its pools' instance types, most preferred first, for the
            per-pool alarms and charts of ``PoolEndpointAlarms`` and ``PoolEndpointDashboard``.
            Default: none (those show the whole variant only).
        :param detailed_observability: whether the endpoint publishes detailed observability
            (the token-latency alarms and charts need it). Default: ``False``.
        """
        return _ImportedPoolEndpoint(
            scope, id, endpoint_name, variant_name, None, instance_types, detailed_observability
        )

    @classmethod
    def from_endpoint_arn(
        cls,
        scope: Construct,
        id: str,
        endpoint_arn: str,
        *,
        variant_name: str = "AllTraffic",
        instance_types: Sequence[InstanceType | str] = (),
        detailed_observability: bool = False,
    ) -> IPoolEndpoint:
        """An existing endpoint by ARN (``arn:aws:sagemaker:REGION:ACCOUNT:endpoint/NAME``);
        the other parameters as ``from_endpoint_name``'s."""
        name = Arn.split(endpoint_arn, ArnFormat.SLASH_RESOURCE_NAME).resource_name or ""
        return _ImportedPoolEndpoint(
            scope, id, name, variant_name, endpoint_arn, instance_types, detailed_observability
        )

    @classmethod
    def build_from_recommendation(
        cls,
        scope: Construct,
        id: str,
        path: str | Path,
        *,
        client_model_name: str | None = None,
        **props: Unpack[PoolEndpointProps],
    ) -> InstancePoolEndpoint:
        """A new endpoint whose pools come from a ``recommend to-pools`` file.

        Builds (it does not import): the endpoint sits under an intermediate construct
        ``id`` that also holds the models (``<id>/Endpoint``, ``<id>/Model1``, ...). See
        ``planning.pool_file`` for the file. Clients send ``client_model_name`` (default: the
        recommendation job's name); responses name the deployment that answered
        (``<client name>-<instance type>``).

        :param props: the endpoint's options, as ``InstancePoolEndpoint``'s (``PoolEndpointProps``).
        """
        subject = f"InstancePoolEndpoint.build_from_recommendation '{scope.node.path}/{id}'"
        with_defaults(subject, props, ("client_model_name",))  # before the file is read
        holder = Construct(scope, id)
        model, pools = pools_from_recommendation(holder, path, client_model_name)
        return cls(holder, "Endpoint", model=model, pools=pools, **props)

    # -- scaling ------------------------------------------------------------------------

    def pool_capacities(self) -> list[float | None]:
        """Concurrent requests one instance of each pool sustains, in pool order.

        ``InstancePool.max_concurrency`` when given; else what the copy's ``SM_VLLM_MAX_NUM_SEQS``
        lets the instance run (``engine_batch``); else, for a model that declares ``sizing``, the
        planner's full-length sequences capped at vLLM's default batch; else ``None``
        (docs/design/pool-endpoints.md, "Engine batch").
        """
        planned = {fit.pool_index: fit.plan for fit in self.pool_plans}
        capacities: list[float | None] = []
        for index, pool in enumerate(self.pools):
            batch = self.pool_batch(index)
            if pool.max_concurrency is not None:
                capacities.append(float(pool.max_concurrency))
            elif batch is not None:
                capacities.append(float(batch.concurrency))
            elif index in planned:
                plan = planned[index]
                engines = vllm_default_max_num_seqs(plan.instance_spec) * plan.data_parallel
                capacities.append(float(min(plan.sequences_at_max_context, engines)))
            else:
                capacities.append(None)
        return capacities

    def auto_scale(self, **options: Unpack[AutoScalingOptions]) -> EndpointAutoScaling:
        """Scale the variant's instance count on the fleet's weighted utilization.

        Takes ``EndpointAutoScaling``'s options (``max_capacity`` required; documented there);
        asynchronous endpoints scale on their backlog and may set ``min_capacity=0``. Deploys
        keep the current instance count (``RetainAllVariantProperties``). A change of the pools'
        types then takes two deploys; given the deployed template as context
        ``cdk-llm-serving:deployed-template``, synth refuses it (``update_rules``).
        """
        if self.auto_scaling is not None:
            self._refuse("auto_scale", "called twice", "configure autoscaling once per endpoint")
        refuse_unknown_options(
            lambda: f"InstancePoolEndpoint '{self.node.path}'",
            "auto_scale",
            options,
            AutoScalingOptions,
        )
        self.auto_scaling = EndpointAutoScaling(self, "AutoScaling", endpoint=self, **options)
        self._warn_rolling_batch_over_scaling_range(
            options.get("min_capacity", 1), options["max_capacity"]
        )
        # Updates keep the count autoscaling owns (``update_rules``).
        self.cfn_endpoint.retain_all_variant_properties = True
        return self.auto_scaling

    def _warn_rolling_batch_over_scaling_range(self, low: int, high: int) -> None:
        """SageMaker checks a rolling batch of a count of instances against the variant's count
        at update time (5-50 %, botocore ``RollingUpdatePolicy.MaximumBatchSize``); with
        autoscaling that count is anywhere from ``low`` to ``high``."""
        if self.deployment is None:
            return
        outside = [n for n in (max(low, 1), high) if outside_fleet_share(self.deployment, n)]
        if outside:
            steps = outside_fleet_share(self.deployment, outside[0])
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:rollingBatchOutsideScalingRange",
                f"the deployment's {' and '.join(steps)} is outside AWS's share of the "
                f"variant at {' and '.join(map(str, outside))} instance(s), within autoscaling's "
                f"{low}-{high}: an update started at such a count is refused. Give a "
                "RollingDeployment whose batch fits the whole range, or keep the fleet's "
                "minimum where the batch fits.",
            )

    def fleet_utilization_queries(self) -> list[MetricQuery]:
        """The metric-math queries of the weighted utilization (see ``fleet_utilization``)."""
        pools: list[PoolCapacity] = []
        missing: list[str] = []
        for pool, capacity in zip(self.pools, self.pool_capacities(), strict=True):
            if capacity is None:
                missing.append(str(pool.instance_type))
            else:
                pools.append(PoolCapacity(pool.instance_type, capacity))
        if missing:
            self._refuse(
                "pools.max_concurrency", missing, "fleet utilization needs every pool's capacity"
            )
        return fleet_utilization_queries(
            self.endpoint_name,
            self.variant_name,
            pools,
            per_pool_dimension=self.per_pool_dimension,
        )


class InferenceComponentEndpoint(_PoolHost):
    """An endpoint on instance pools that hosts inference components, not a model of its own.

    ``InferenceComponentOnPools`` puts components on it. It has an execution role of its own, no
    deployment policy or rollback alarms unless given, and no ``auto_scale``: its instances
    follow the components' copies (docs/design/pool-endpoints.md, "Inference components").

    :param pools: 1-5 instance pools, most preferred first; a pool names no model.
    :param props: the endpoint's options, each documented with its default on
        ``PoolEndpointProps``: ``managed_instance_count`` is this endpoint's;
        ``container_startup_timeout`` and ``model_data_download_timeout`` are each component's.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        pools: Sequence[InstancePool],
        **props: Unpack[PoolEndpointProps],
    ) -> None:
        super().__init__(scope, id)
        self._build(scope, None, pools, with_defaults(self._subject, props, ("pools",)))


class _ImportedPoolEndpoint(Resource, EndpointApi):
    """An endpoint created elsewhere: grants, metrics, and the pools it was told of."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        endpoint_name: str,
        variant_name: str,
        endpoint_arn: str | None,
        instance_types: Sequence[InstanceType | str],
        detailed_observability: bool,
    ) -> None:
        super().__init__(scope, id)
        problems = Problems(lambda: f"InstancePoolEndpoint import '{self.node.path}'")
        self.instance_types = parse_instance_types(problems, "instance_types", instance_types)
        problems.raise_if_any()
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.async_inference = None
        self.detailed_observability = detailed_observability
        self.auto_scaling: EndpointAutoScaling | None = None
        self.rollback_alarms: tuple[cloudwatch.IAlarm, ...] = ()
        self.catalog = default_catalog()
        self.endpoint_arn = endpoint_arn or _endpoint_arn(self, endpoint_name)

    def served_model_name_on(self, instance_type: InstanceType | str) -> str | None:
        """Unknown for an imported endpoint."""
        return None


def _endpoint_arn(scope: Construct, endpoint_name: str) -> str:
    """The endpoint's ARN, its name lower-cased as in the ARNs SageMaker returns
    (UNCONFIRMED[endpoint-arn-case]); a token name is left as it is."""
    name = endpoint_name.lower()
    if name != endpoint_name and is_unresolved(endpoint_name):  # only when lowering changes it
        name = endpoint_name
    return stack_of(scope).format_arn(service="sagemaker", resource="endpoint", resource_name=name)
