"""``VllmPoolEndpoint``: declare a vLLM model once; get a tuned copy per instance pool.

Each pool's configuration comes from ``vllm.pool_strategy`` (or the pool's own ``VllmConfig``),
is checked against its hardware, and becomes a ``ServingModel`` fed through the SageMaker vLLM
container's ``SM_VLLM_*`` variables; identical configurations share one model. Every copy sets
``max_num_seqs``, its pool's autoscaling weight (``engine_batch``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Unpack

from aws_cdk import Annotations, CfnOutput
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..core.endpoint_api import EndpointApi, IPoolEndpoint
from ..errors import (
    ConfigurationError,
    Problems,
    check_literal,
    checked_props,
)
from ..model_sources import ContainerImage, ModelData
from ..planning.catalog import default_catalog
from ..planning.instance_types import InstanceType
from ..planning.models import ModelSpec, WeightFormat
from ..planning.sizing import ModelSizing
from ..planning.sizing import plan as plan_layout
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware
from ..vllm.pool_strategy import Goal, PoolVllmPlan, derive_pool_config, warn_tensor_parallel_cost
from .autoscaling import AutoScalingOptions, EndpointAutoScaling
from .endpoint_options import PoolEndpointProps, with_defaults
from .engine_batch import EngineBatch, choose_batch
from .instance_pool import InstancePool, hosting_instance_type
from .pool_endpoint import InferenceComponentEndpoint, InstancePoolEndpoint
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel

#: Where SageMaker puts ModelDataSource files inside the container.
SAGEMAKER_MODEL_DIR = "/opt/ml/model"


@dataclass(frozen=True)
class VllmPool:
    """One pool of a ``VllmPoolEndpoint``.

    :param instance_type: the pool's instance type (an ``InstanceType`` or its name, converted).
    :param goal: ``throughput`` adds speculative decoding on this pool. Default: ``latency``.
    :param config: this pool's own configuration instead of a derived one (``weight_format``
        then says which weights it loads). Default: derived.
    :param weight_format: with ``config``, the key of ``weights`` it serves (a ``WeightFormat``
        or its name). Default: the first.
    :param max_concurrency: see ``InstancePool.max_concurrency``.
    """

    instance_type: InstanceType | str
    goal: Goal = "latency"
    config: VllmConfig | None = None
    weight_format: WeightFormat | str | None = None
    max_concurrency: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "instance_type", InstanceType.coerce(self.instance_type))
        if isinstance(self.weight_format, WeightFormat):
            object.__setattr__(self, "weight_format", self.weight_format.name)


class VllmPoolEndpoint(Construct, EndpointApi):
    """An ``InstancePoolEndpoint`` whose pools run vLLM configurations derived from one base.

    :param image: AWS's SageMaker vLLM container (or one that reads ``SM_VLLM_*`` the same way).
    :param model: the model's figures (a ``ModelSpec`` or preset name) for the planner.
    :param config: what every copy shares (served name, context, parsers, ...), as
        ``VllmMultiNodeService(config=...)``. ``model`` is replaced by the container's model
        directory. Its ``served_model_name`` (default: the model's name) is the name clients
        send: every copy serves it after its own copy name (``gpt-oss-20b-int4-tp1``), which
        responses report (``ServingModel.client_model_name``).
    :param weights: weight format (a ``WeightFormat`` or its name) -> the ``ModelData`` of those
        weights, in preference order: full weights first, then quantized copies a pool may fall
        back to.
    :param pools: 1-5 pools (instance types, or ``VllmPool``), most preferred first.
    :param props: the endpoint's options, as ``InstancePoolEndpoint``'s (``PoolEndpointProps``);
        its ``catalog`` is also the one the pools are planned with.

    The endpoint's API is this construct's own: ``grant_invoke``, ``openai_base_url``,
    ``auto_scale``, the ``metric*`` methods and what ``PoolEndpointAlarms`` and
    ``PoolEndpointDashboard`` read (``IPoolEndpoint``) act on the endpoint (``self.endpoint``).
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        image: ContainerImage,
        model: ModelSpec | str,
        config: VllmConfig,
        weights: Mapping[WeightFormat | str, ModelData],
        pools: Sequence[InstanceType | str | VllmPool],
        **props: Unpack[PoolEndpointProps],
    ) -> None:
        super().__init__(scope, id)
        subject = f"VllmPoolEndpoint '{self.node.path}'"
        own = ("image", "model", "config", "weights", "pools")
        self.catalog = with_defaults(subject, props, own).get("catalog") or default_catalog()
        self.spec = ModelSpec.of(model)
        _check_inputs(subject, pools, weights)
        self.config = config.with_changes(model=SAGEMAKER_MODEL_DIR)
        named_weights = {_format_name(name): data for name, data in weights.items()}
        #: The name clients send; every copy serves it after its own name.
        self.client_model_name: str = config.served_model_name or self.spec.name
        vllm_pools = [p if isinstance(p, VllmPool) else VllmPool(p) for p in pools]
        #: Each pool's batch (``max_num_seqs`` per engine, engines, where it came from).
        self.pool_batches: list[EngineBatch] = []
        #: Each pool's configuration, layout and weight format.
        self.pool_plans = self._with_batches(self._derive(vllm_pools, named_weights))
        #: One model per distinct copy, by its configuration.
        self.models: dict[str, ServingModel] = {}
        pool_models = [self._model_for(plan, image, named_weights) for plan in self.pool_plans]
        endpoint_props: PoolEndpointProps = {**props, "catalog": self.catalog}
        self.endpoint = InstancePoolEndpoint(
            self,
            "Endpoint",
            model=pool_models[0],
            pools=[
                InstancePool(
                    pool.instance_type,
                    model=None if m is pool_models[0] else m,
                    max_concurrency=pool.max_concurrency,
                )
                for pool, m in zip(vllm_pools, pool_models, strict=True)
            ],
            **endpoint_props,
        )
        self.endpoint_name = self.endpoint.endpoint_name
        self.variant_name = self.endpoint.variant_name
        # The metrics read as the endpoint's own (sample interval, pool dimension).
        self.concurrency_sample_seconds = self.endpoint.concurrency_sample_seconds
        self.per_pool_dimension = self.endpoint.per_pool_dimension
        self.endpoint_arn = self.endpoint.endpoint_arn
        self.async_inference = self.endpoint.async_inference
        self._render_outputs()

    def _render_outputs(self) -> None:
        """What ``cdk-llm-serving smoke`` needs, as the HyperPod path emits it."""
        CfnOutput(
            self,
            "EndpointName",
            value=self.endpoint_name,
            description="the SageMaker endpoint (InvokeEndpoint, CloudWatch dimensions)",
        )
        CfnOutput(
            self,
            "OpenAiBaseUrl",
            value=self.openai_base_url,
            description=f"smoke --base-url (--model {self.client_model_name} --sagemaker-region <region>)",
        )

    # -- what observability reads (``IPoolEndpoint``), from the endpoint ---------------------

    @property
    def instance_types(self) -> tuple[InstanceType | str, ...]:
        """The pools' instance types, most preferred first."""
        return self.endpoint.instance_types

    @property
    def detailed_observability(self) -> bool:
        return self.endpoint.detailed_observability

    @property
    def auto_scaling(self) -> EndpointAutoScaling | None:
        return self.endpoint.auto_scaling

    @property
    def rollback_alarms(self) -> tuple[cloudwatch.IAlarm, ...]:
        return self.endpoint.rollback_alarms

    def served_model_name_on(self, instance_type: InstanceType | str) -> str | None:
        """The copy name the pool of ``instance_type`` serves."""
        return self.endpoint.served_model_name_on(instance_type)

    def auto_scale(self, **options: Unpack[AutoScalingOptions]) -> EndpointAutoScaling:
        """``InstancePoolEndpoint.auto_scale`` of the endpoint."""
        return self.endpoint.auto_scale(**options)

    def _with_batches(self, plans: Sequence[PoolVllmPlan]) -> list[PoolVllmPlan]:
        """Each pool's configuration with its ``max_num_seqs`` set (``choose_batch``). Pools
        whose configurations are otherwise identical keep sharing one copy, at the smallest
        of their batches: the flag a copy runs with is the one its pools are weighed by."""
        shared: dict[str, int] = {}
        chosen: list[EngineBatch] = []
        for planned in plans:
            batch = choose_batch(
                planned.config.max_num_seqs,
                planned.plan,
                self.catalog.get(str(planned.instance_type)),
            )
            chosen.append(batch)
            key = self._key(planned)
            shared[key] = min(shared.get(key, batch.max_num_seqs), batch.max_num_seqs)
        result: list[PoolVllmPlan] = []
        for planned, batch in zip(plans, chosen, strict=True):
            seqs = shared[self._key(planned)]
            if seqs < batch.max_num_seqs:
                Annotations.of(self).add_warning_v2(
                    "cdk-llm-serving:sharedCopyBatch",
                    f"{planned.instance_type} shares the copy {self._served_name(planned)} with a "
                    f"pool whose batch is smaller: it runs max_num_seqs {seqs}, not "
                    f"{batch.max_num_seqs} ({batch.source}); give this pool its own "
                    "VllmPool(config=...) to run its own batch",
                )
            engines = planned.config.data_parallel_size or 1  # what the copy's flags run
            self.pool_batches.append(dataclasses.replace(batch, max_num_seqs=seqs, engines=engines))
            config = planned.config.with_changes(max_num_seqs=seqs)
            result.append(dataclasses.replace(planned, config=config))
        return result

    def _derive(
        self, pools: Sequence[VllmPool], weights: Mapping[str, ModelData]
    ) -> list[PoolVllmPlan]:
        """Every pool's configuration, or one ``ConfigurationError`` with every problem."""
        problems = Problems(f"VllmPoolEndpoint '{self.node.path}'")
        formats = list(weights)
        if not formats:
            problems.add("weights", {}, "needs at least one weight format and its S3 location")
        try:
            self.config.validate()
        except VllmConfigError as error:
            problems.absorb(error, "config")
        plans: list[PoolVllmPlan | None] = []
        for index, pool in enumerate(pools):
            plans.append(self._derive_pool(problems, f"pools[{index}]", pool, formats))
        self._check_served_names(problems, plans)
        problems.raise_if_any()
        return [planned for planned in plans if planned is not None]  # none is None

    def _derive_pool(
        self, problems: Problems, prop: str, pool: VllmPool, formats: Sequence[str]
    ) -> PoolVllmPlan | None:
        """One pool's configuration, or ``None`` with its problems added."""
        goal_known = check_literal(problems, f"{prop}.goal", pool.goal, Goal, "pool goals")
        instance_type = hosting_instance_type(problems, f"{prop}.instance_type", pool.instance_type)
        if instance_type is None or not goal_known:
            return None
        if instance_type not in self.catalog:
            problems.add(
                prop,
                str(instance_type),
                "not in the planner's catalog, whose figures derive the pool's configuration: "
                "add it (catalog=default_catalog().with_instances([...])) or choose a listed type",
            )
            return None
        fmt = _format_name(pool.weight_format) if pool.weight_format is not None else None
        if pool.config is not None and fmt is not None and fmt not in formats:
            problems.add(
                f"{prop}.weight_format",
                fmt,
                f"has no entry in weights ({', '.join(formats)})",
            )
            return None
        planned = None
        try:
            if pool.config is not None:
                planned = self._own_config(pool, instance_type, fmt or formats[0])
            elif formats:
                planned = derive_pool_config(
                    self.config,
                    self.spec,
                    instance_type,
                    formats,
                    goal=pool.goal,
                    catalog=self.catalog,
                )
        except VllmConfigError as error:
            problems.absorb(error, f"{prop}.config")
        except ConfigurationError as error:  # the planner's refusal (a PlanningError)
            problems.add(prop, str(instance_type), str(error))
        if planned is not None:
            warn_tensor_parallel_cost(self, planned)  # a costly explicit tensor-parallel size
            check = check_on_hardware(
                planned.config,
                instance_type,
                model=self.spec,
                weight_format=planned.weight_format,
                catalog=self.catalog,
            )
            problems.extend(check.problems, f"{prop}.config")
        return planned

    def _check_served_names(self, problems: Problems, plans: Sequence[PoolVllmPlan | None]) -> None:
        """Two different configurations must not share a served name (nor its construct id)."""
        seen: dict[str, tuple[str, int]] = {}
        for index, planned in enumerate(plans):
            if planned is None:
                continue
            served = self._served_name(planned)
            first = seen.setdefault(_construct_id(served), (self._key(planned), index))
            if first[0] != self._key(planned):
                problems.add(
                    f"pools[{index}].config.served_model_name",
                    served,
                    f"pools[{first[1]}] serves another configuration under this name; "
                    "give each configuration its own served_model_name",
                )

    def _served_name(self, planned: PoolVllmPlan) -> str:
        return planned.config.served_model_name or f"{self.spec.name}-{planned.weight_format}"

    @staticmethod
    def _key(planned: PoolVllmPlan) -> str:
        return (
            f"{planned.weight_format}:{sorted(planned.config.to_sagemaker_environment().items())}"
        )

    def _own_config(
        self, pool: VllmPool, instance_type: InstanceType | str, fmt: str
    ) -> PoolVllmPlan:
        assert pool.config is not None
        config = pool.config.with_changes(model=SAGEMAKER_MODEL_DIR).validate()
        # The layout the config pins, planned with the planner's objective so that its batch
        # (``Plan.performance.max_num_seqs``) is known for ``choose_batch``.
        sizing = self._sizing(fmt, config)
        return PoolVllmPlan(
            instance_type,
            fmt,
            config,
            plan_layout(
                self.spec,
                fmt,
                instance_type,
                max_context=sizing.max_context,
                gpu_memory_utilization=sizing.gpu_memory_utilization,
                kv_cache_dtype="fp8"
                if (config.kv_cache_dtype or "auto").startswith("fp8")
                else "auto",
                max_nodes=1,
                catalog=self.catalog,
                tensor_parallel=config.tensor_parallel_size,
                single_instance=True,
            ),
        )

    def _sizing(self, weight_format: str, config: VllmConfig) -> ModelSizing:
        """What a copy with ``config`` promises the planner: its format, context and layout."""
        return ModelSizing(
            self.spec,
            weight_format,
            max_context=config.max_model_len,
            gpu_memory_utilization=config.gpu_memory_utilization or 0.9,
            tensor_parallel_size=config.tensor_parallel_size,
        )

    def _model_for(
        self, planned: PoolVllmPlan, image: ContainerImage, weights: Mapping[str, ModelData]
    ) -> ServingModel:
        config = planned.config
        served, key = self._served_name(planned), self._key(planned)
        if key in self.models:
            return self.models[key]
        environment = config.to_sagemaker_environment()
        environment.pop(VLLM_SERVED_MODEL_NAME_VARIABLE, None)
        model = ServingModel(
            self,
            _construct_id(served),
            image=image,
            model_data=weights[planned.weight_format],
            served_model_name=served,
            client_model_name=self.client_model_name,
            environment=environment,
            # The endpoint plans each pool from this sizing and warns there when the format
            # has no native kernels on the pool's GPU.
            sizing=self._sizing(planned.weight_format, config),
        )
        self.models[key] = model
        return model


def _construct_id(served_name: str) -> str:
    """``gpt-oss-20b-bf16-tp4`` -> ``GptOss20bBf16Tp4``: a stable, readable construct id."""
    return "".join(
        part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", served_name) if part
    )


def _format_name(value: WeightFormat | str) -> str:
    return value.name if isinstance(value, WeightFormat) else value


def _check_inputs(
    subject: str, pools: Sequence[object], weights: Mapping[WeightFormat | str, ModelData]
) -> None:
    """1-5 pools and known weight formats (their types are ``checked_props``'); raises at once,
    since deriving the pools' configurations needs them."""
    problems = Problems(subject)
    if not 1 <= len(pools) <= 5:
        problems.add("pools", pools, "must list 1 to 5 pools, most preferred first")
    for key in weights:
        name = _format_name(key)
        WeightFormat.parse(problems, f"weights[{name!r}]", name)
    problems.raise_if_any()


if TYPE_CHECKING:  # mypy checks that every endpoint kind is what observability takes

    def _observable(
        model: InstancePoolEndpoint, host: InferenceComponentEndpoint, vllm: VllmPoolEndpoint
    ) -> list[IPoolEndpoint]:
        return [model, host, vllm]
