"""``VllmPoolEndpoint``: declare a vLLM model once; get a tuned copy per instance pool.

Each pool's configuration comes from ``vllm.pool_strategy`` (or the pool's own
``VllmConfig``), is checked against its hardware, and becomes a ``ServingModel`` fed
through the SageMaker vLLM container's ``SM_VLLM_*`` variables. Identical
configurations share one model; the first pool's model is the variant's, the others
become ``ModelNameOverride``s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from constructs import Construct

from ..errors import (
    Problems,
    check_choice,
    check_keywords,
    check_literal,
    check_sequence,
    checked_props,
)
from ..model_sources import ContainerImage, ModelData
from ..planning.catalog import Catalog, default_catalog
from ..planning.models import ModelSpec, preset, weight_formats
from ..planning.sizing import ModelSizing, PlanningError
from ..vllm.config import VllmConfig, VllmConfigError
from ..vllm.hardware import check_on_hardware
from ..vllm.pool_strategy import Goal, PoolVllmPlan, derive_pool_config
from .autoscaling import AutoScalingOptions, EndpointAutoScaling
from .endpoint_api import EndpointApi
from .endpoint_options import PoolEndpointOptions
from .instance_pool import InstancePool
from .pool_endpoint import InstancePoolEndpoint
from .serving_model import VLLM_SERVED_MODEL_NAME_VARIABLE, ServingModel

#: Where SageMaker puts ModelDataSource files inside the container.
SAGEMAKER_MODEL_DIR = "/opt/ml/model"


@dataclass(frozen=True)
class VllmPool:
    """One pool of a ``VllmPoolEndpoint``.

    :param instance_type: the pool's instance type.
    :param goal: ``throughput`` adds speculative decoding on this pool. Default: ``latency``.
    :param config: this pool's own configuration instead of a derived one (``weight_format``
        then says which weights it loads). Default: derived.
    :param weight_format: with ``config``, the key of ``weights`` it serves. Default: the first.
    :param max_concurrency: see ``InstancePool.max_concurrency``.
    """

    instance_type: str
    goal: Goal = "latency"
    config: VllmConfig | None = None
    weight_format: str | None = None
    max_concurrency: float | None = None


class VllmPoolEndpoint(Construct, EndpointApi):
    """An ``InstancePoolEndpoint`` whose pools run vLLM configurations derived from one base.

    :param image: AWS's SageMaker vLLM container (or one that reads ``SM_VLLM_*`` the same way).
    :param model: the model's figures (a ``ModelSpec`` or preset name) for the planner.
    :param base: what every copy shares (served name, context, parsers, ...). ``model`` is
        replaced by the container's model directory. Its ``served_model_name`` (default: the
        model's name) is the name clients send: every copy serves it after its own copy name
        (``gpt-oss-20b-int4-tp1``), which responses report (``ServingModel.client_model_name``).
    :param weights: weight format -> S3 location, in preference order: full weights first,
        then quantized copies a pool may fall back to.
    :param pools: 1-5 pools (instance type strings or ``VllmPool``), most preferred first.
    :param endpoint_options: the endpoint's other options (name, timeouts, deployment,
        ...), or the same as a dict of keywords. Default: ``PoolEndpointOptions()``.

    The endpoint's API is this construct's own: ``grant_invoke``, ``openai_base_url``,
    ``auto_scale`` and the ``metric*`` methods act on the endpoint (``self.endpoint``).
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        image: ContainerImage,
        model: ModelSpec | str,
        base: VllmConfig,
        weights: Mapping[str, ModelData],
        pools: Sequence[str | VllmPool],
        endpoint_options: PoolEndpointOptions | Mapping[str, Any] | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.catalog = catalog or default_catalog()
        self.spec = preset(model) if isinstance(model, str) else model
        self.base = base.with_changes(model=SAGEMAKER_MODEL_DIR)
        _check_inputs(f"VllmPoolEndpoint '{self.node.path}'", pools, weights, endpoint_options)
        if isinstance(endpoint_options, Mapping):  # the options as keywords, checked above
            endpoint_options = PoolEndpointOptions(**endpoint_options)
        #: The name clients send; every copy serves it after its own name.
        self.client_model_name: str = base.served_model_name or self.spec.name
        vllm_pools = [VllmPool(p) if isinstance(p, str) else p for p in pools]
        self.pool_plans: list[PoolVllmPlan | None] = self._derive(vllm_pools, weights)

        self.models: dict[str, ServingModel] = {}
        pool_models: list[ServingModel] = []
        for _pool, planned in zip(vllm_pools, self.pool_plans, strict=True):
            assert planned is not None
            pool_models.append(self._model_for(planned, image, weights))
        primary = pool_models[0]
        self.endpoint = InstancePoolEndpoint(
            self,
            "Endpoint",
            model=primary,
            pools=[
                InstancePool(
                    pool.instance_type,
                    model=None if m is primary else m,
                    max_concurrency=pool.max_concurrency,
                )
                for pool, m in zip(vllm_pools, pool_models, strict=True)
            ],
            **{**(endpoint_options or PoolEndpointOptions()).as_kwargs(), "catalog": self.catalog},
        )
        self.endpoint_name = self.endpoint.endpoint_name
        self.variant_name = self.endpoint.variant_name
        self.endpoint_arn = self.endpoint.endpoint_arn
        self.async_inference = self.endpoint.async_inference

    def auto_scale(self, **options: Unpack[AutoScalingOptions]) -> EndpointAutoScaling:
        """``InstancePoolEndpoint.auto_scale`` of the endpoint."""
        return self.endpoint.auto_scale(**options)

    def _derive(
        self, pools: Sequence[VllmPool], weights: Mapping[str, ModelData]
    ) -> list[PoolVllmPlan | None]:
        problems = Problems(f"VllmPoolEndpoint '{self.node.path}'")
        formats = list(weights)
        if not formats:
            problems.add("weights", {}, "needs at least one weight format and its S3 location")
        try:
            self.base.validate()
        except VllmConfigError as error:
            for prop, value, allowed in error.problems:
                problems.add(f"base.{prop}", value, allowed)
        plans: list[PoolVllmPlan | None] = []
        for index, pool in enumerate(pools):
            prop = f"pools[{index}]"
            planned = None
            check_literal(problems, f"{prop}.goal", pool.goal, Goal, "pool goals")
            try:
                if pool.config is not None:
                    planned = self._own_config(pool, formats)
                elif formats:
                    planned = derive_pool_config(
                        self.base,
                        self.spec,
                        pool.instance_type,
                        formats,
                        goal=pool.goal,
                        catalog=self.catalog,
                    )
            except (PlanningError, KeyError) as error:
                message = error.args[0] if isinstance(error, KeyError) else str(error)
                problems.add(prop, pool.instance_type, message)
            except VllmConfigError as error:
                problems.absorb(error, f"{prop}.config")
            if planned is not None:
                check = check_on_hardware(
                    planned.config,
                    pool.instance_type,
                    model=self.spec,
                    weight_format=planned.weight_format,
                    catalog=self.catalog,
                )
                for field_name, value, allowed in check.problems:
                    problems.add(f"{prop}.config.{field_name}", value, allowed)
            plans.append(planned)
        self._check_served_names(problems, plans)
        problems.raise_if_any()
        return plans

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

    def _own_config(self, pool: VllmPool, formats: Sequence[str]) -> PoolVllmPlan:
        assert pool.config is not None
        fmt = pool.weight_format or formats[0]
        if fmt not in formats:
            raise KeyError(f"weight_format {fmt!r} has no entry in weights ({', '.join(formats)})")
        config = pool.config.with_changes(model=SAGEMAKER_MODEL_DIR).validate()
        return PoolVllmPlan(
            pool.instance_type,
            fmt,
            config,
            self._sizing(fmt, config).plan_on(
                pool.instance_type, max_nodes=1, catalog=self.catalog
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


def _check_inputs(subject: str, pools: object, weights: object, options: object) -> None:
    """Lists and mappings of the right types, known weight formats; raises at once otherwise,
    since deriving the pools' configurations needs them."""
    problems = Problems(subject)
    if isinstance(options, Mapping):  # endpoint props as a dict: name any misspelled key
        fields = [f.name for f in dataclasses.fields(PoolEndpointOptions)]
        check_keywords(problems, "endpoint_options", options, fields)
    elif options is not None and not isinstance(options, PoolEndpointOptions):
        problems.add("endpoint_options", options, "must be a PoolEndpointOptions")
    what = "an instance type string or a VllmPool"
    if check_sequence(problems, "pools", pools, (str, VllmPool), what) and isinstance(
        pools, list | tuple
    ):
        if not 1 <= len(pools) <= 5:
            problems.add("pools", pools, "must list 1 to 5 pools, most preferred first")
    if not isinstance(weights, Mapping):
        problems.add("weights", weights, "must map weight formats to ModelData")
    else:
        for name, data in weights.items():
            check_choice(
                problems, f"weights[{name!r}]", name, list(weight_formats()), "weight formats"
            )
            if not isinstance(data, ModelData):
                problems.add(
                    f"weights[{name!r}]", data, "must be a ModelData (ModelData.from_s3_uri)"
                )
    problems.raise_if_any()
