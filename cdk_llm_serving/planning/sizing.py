"""Will a model fit, on how many nodes, with which parallelism: the memory arithmetic.

Per GPU, ``memory x gpu_memory_utilization`` less a runtime reserve and the weights' shard holds
the KV cache; a layout fits when it holds ``concurrency`` sequences of ``max_context`` tokens.
The layouts tried: docs/design/planner.md, "Sizing".
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigurationError, Problem
from .catalog import GIB, Catalog, InstanceSpec, default_catalog
from .instance_types import InstanceType
from .models import ModelSpec, WeightFormat, preset, presets, weight_format, weight_formats
from .moe import routed_expert_bytes


class Objective(enum.Enum):
    """What ``plan()`` optimises among the layouts that fit (``objective.py`` searches)."""

    #: The most output tokens per dollar meeting the latency targets (default).
    TOKENS_PER_DOLLAR = "tokens-per-dollar"
    #: The smallest layout that fits.
    MIN_GPUS = "min-gpus"

    def __str__(self) -> str:
        return self.value


def objective_of(value: Objective | str) -> Objective:
    """An ``Objective`` from itself or its value (``"min-gpus"``); else a ConfigurationError."""
    if isinstance(value, Objective):
        return value
    for objective in Objective:
        if value == objective.value:
            return objective
    raise ConfigurationError(
        "plan",
        [Problem("objective", value, f"one of {', '.join(o.value for o in Objective)}")],
    )


#: The objective search, set when ``objective`` loads (it builds on this module).
_CHOOSE: Callable[..., Plan] | None = None
#: GiB per GPU kept out of the KV cache for the CUDA context, activations and CUDA graphs.
RUNTIME_RESERVE_GIB = 2.0
#: Most nodes a plan may span.
MAX_NODES = 16
KV_CACHE_DTYPE_BYTES = {"auto": 2, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Alternative:
    """A layout that would fit: machine-readable, and as text through ``str()``."""

    instance_type: str
    nodes: int
    tensor_parallel: int
    pipeline_parallel: int
    weight_format: str
    reason: str
    data_parallel: int = 1

    def __str__(self) -> str:
        if self.reason == "more nodes" and self.data_parallel > 1:
            return f"{self.nodes} x {self.instance_type} (tensor {self.tensor_parallel} x data {self.data_parallel}, experts over all GPUs)"
        if self.reason == "more nodes":
            return f"{self.nodes} x {self.instance_type} (tensor {self.tensor_parallel} x pipeline {self.pipeline_parallel})"
        if self.reason == "smaller format":
            return f"{self.weight_format} weights on {self.nodes} x {self.instance_type}"
        return f"{self.nodes} x {self.instance_type}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "nodes": self.nodes,
            "tensor_parallel_size": self.tensor_parallel,
            "pipeline_parallel_size": self.pipeline_parallel,
            "data_parallel_size": self.data_parallel,
            "weight_format": self.weight_format,
            "reason": self.reason,
        }


class PlanningError(ConfigurationError):
    """A deployment that cannot work, with what it needs, what is there, and what would fit.

    A ``ConfigurationError`` (one channel for every bad input), whose one ``Problem`` is the
    plan's message; ``str()`` is the message and, when some layout would fit, the alternatives.
    """

    def __init__(
        self,
        message: str,
        *,
        needed_bytes: float | None = None,
        available_bytes: float | None = None,
        alternatives: tuple[Alternative, ...] = (),
        prop: str = "plan",
        value: Any = None,
    ) -> None:
        self.message = message
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.alternatives = alternatives
        self.suggestions = tuple(str(alternative) for alternative in alternatives)
        text = message
        if self.suggestions:
            text += "\nWould fit: " + "; ".join(self.suggestions)
        super().__init__("plan", [Problem(prop, value, text)])
        self.args = (text,)


@dataclass(frozen=True)
class Plan:
    """One workable layout of a model on an instance type (figures per GPU unless named otherwise)."""

    model: str
    weight_format: str
    instance_type: str
    max_context: int
    concurrency: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    weight_bytes: float
    kv_bytes_per_token: float
    nodes: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    expert_parallel: bool
    weight_bytes_per_gpu: float
    kv_cache_bytes_per_gpu: float
    kv_tokens_per_replica: int
    warnings: tuple[str, ...] = field(default_factory=tuple)
    spec: ModelSpec | None = field(default=None, repr=False, compare=False)
    fmt: WeightFormat | None = field(default=None, repr=False, compare=False)
    instance: InstanceSpec | None = field(default=None, repr=False, compare=False)
    #: What the layout serves for ``workload`` at its chosen batch (``objective.Performance``);
    #: ``None`` for objective ``MIN_GPUS`` without a workload.
    performance: Any = field(default=None, compare=False)
    #: The next best layouts, each with its performance and why it loses.
    candidates: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    #: Whether prefill/decode disaggregation would pay (``prefill.Disaggregation``).
    disaggregation: Any = field(default=None, repr=False, compare=False)
    workload: Any = field(default=None, repr=False, compare=False)
    targets: Any = field(default=None, repr=False, compare=False)
    objective: Objective | None = field(default=None, repr=False, compare=False)
    #: When no layout meets the targets: which were missed and what would meet them.
    unmet: str | None = field(default=None, repr=False, compare=False)

    @property
    def model_spec(self) -> ModelSpec:
        """The spec planned with, or (for a plan built without one) the preset of that name."""
        return self.spec or preset(self.model)

    @property
    def instance_spec(self) -> InstanceSpec:
        """The instance planned on (from the catalog the plan used), or the default catalog's."""
        return self.instance or default_catalog().get(self.instance_type)

    @property
    def format_spec(self) -> WeightFormat:
        """The weight format planned with, or the known format of that name."""
        return self.fmt or weight_format(self.weight_format)

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def layout(self) -> Layout:
        """The parallelism planned: what a server of this plan is configured with."""
        return Layout(
            self.nodes,
            self.tensor_parallel,
            self.pipeline_parallel,
            self.data_parallel,
            self.expert_parallel,
        )

    @property
    def sequences_at_max_context(self) -> int:
        """Concurrent full-length sequences the whole deployment (all replicas) can hold."""
        return (self.kv_tokens_per_replica // self.max_context) * self.data_parallel


@dataclass(frozen=True, init=False)
class ModelSizing:
    """What a deployment promises about a model, so constructs can check it fits.

    The model and the weight format are checked when it is made (the closest names on a typo)
    and kept as typed values: ``ModelSizing("gpt-oss-20b", "bf16")``.

    :param model: a ``ModelSpec`` or the name of a preset.
    :param weight_format: the weight format the server loads: a ``WeightFormat`` or its name
        (``bf16``, ``fp8``, ``nvfp4``, ``mxfp4``, ``int4``).
    :param max_context: tokens per sequence. Default: the model's maximum.
    :param concurrency: full-length sequences that must fit at once. Default: 1.
    :param gpu_memory_utilization: vLLM's share of GPU memory. Default: 0.9.
    :param kv_cache_dtype: ``auto`` (BF16) or ``fp8``. Default: ``auto``.
    :param tensor_parallel_size: the tensor-parallel size the server is configured with, so the
        plan describes that layout. Default: the smallest that fits.
    """

    #: The spec (a preset name given is converted).
    model: ModelSpec
    #: The format (a name given is converted).
    weight_format: WeightFormat
    max_context: int | None
    concurrency: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    tensor_parallel_size: int | None

    # The one place of the defaults (``dataclasses.replace`` goes through here too).
    def __init__(
        self,
        model: ModelSpec | str,
        weight_format: WeightFormat | str,
        max_context: int | None = None,
        concurrency: int = 1,
        gpu_memory_utilization: float = 0.9,
        kv_cache_dtype: str = "auto",
        tensor_parallel_size: int | None = None,
    ) -> None:
        values = {
            "model": ModelSpec.of(model),
            "weight_format": WeightFormat.of(weight_format),
            "max_context": max_context,
            "concurrency": concurrency,
            "gpu_memory_utilization": gpu_memory_utilization,
            "kv_cache_dtype": kv_cache_dtype,
            "tensor_parallel_size": tensor_parallel_size,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        """Presets and known formats by name (``ModelSizing(model='gpt-oss-20b', ...)``)."""
        shown = []
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, ModelSpec) and presets().get(value.name) is value:
                value = value.name
            elif isinstance(value, WeightFormat) and weight_formats().get(value.name) is value:
                value = value.name
            shown.append(f"{name}={value!r}")
        return f"ModelSizing({', '.join(shown)})"

    def plan_on(
        self,
        instance_type: InstanceType | str,
        *,
        max_nodes: int = MAX_NODES,
        catalog: Catalog | None = None,
        single_instance: bool | None = None,
    ) -> Plan:
        """The smallest layout on ``instance_type`` (objective ``MIN_GPUS``: a sizing promises
        the model fits; its users count GPUs). ``single_instance`` defaults to
        ``max_nodes == 1`` (an endpoint instance hosts a whole copy)."""
        return plan(
            self.model,
            self.weight_format,
            instance_type,
            max_context=self.max_context,
            concurrency=self.concurrency,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_nodes=max_nodes,
            catalog=catalog,
            tensor_parallel=self.tensor_parallel_size,
            single_instance=max_nodes == 1 if single_instance is None else single_instance,
            objective="min-gpus",
        )


def weight_bytes(model: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes of the weights in ``fmt``, the high-precision part counted at BF16."""
    return fmt.stored_bytes(model.total_params_b, model.high_precision_params_b)


def tensor_parallel_options(model: ModelSpec, gpus: int) -> list[int]:
    """Tensor-parallel sizes vLLM accepts on ``gpus`` GPUs: powers of two dividing the heads."""
    options, size = [], 1
    while size <= gpus:
        if model.attention_heads % size == 0:
            options.append(size)
        size *= 2
    return options


@dataclass(frozen=True)
class Layout:
    """How a deployment spreads a model: nodes, and tensor x pipeline x data parallelism."""

    nodes: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    expert_parallel: bool

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one engine (one data-parallel rank)."""
        return self.tensor_parallel * self.pipeline_parallel


def layout_within_node(model: ModelSpec, instance: InstanceSpec, tensor_parallel: int) -> Layout:
    """One node: ``tensor_parallel`` GPUs per engine, the node's other GPUs data-parallel ranks."""
    data = instance.gpus // tensor_parallel
    return Layout(1, tensor_parallel, 1, data, model.is_moe and tensor_parallel * data > 1)


def layout_across_nodes(model: ModelSpec, tensor_parallel: int, nodes: int) -> Layout:
    """``nodes`` nodes, each ``tensor_parallel`` wide: a MoE model data-parallel with one rank
    per node and expert parallelism over all GPUs; a dense model pipeline-parallel."""
    if nodes <= 1:
        return Layout(1, tensor_parallel, 1, 1, model.is_moe and tensor_parallel > 1)
    if model.is_moe:
        return Layout(nodes, tensor_parallel, 1, nodes, True)
    return Layout(nodes, tensor_parallel, nodes, 1, False)


def weight_bytes_per_gpu(model: ModelSpec, fmt: WeightFormat, layout: Layout) -> float:
    """One GPU's share of the weights: across nodes, the routed experts over every GPU of an
    expert-parallel layout and the rest over one replica's GPUs. Within one node each engine
    counts all the experts over its own GPUs (conservative: docs/design/planner.md, "Sizing")."""
    total = weight_bytes(model, fmt)
    if not layout.expert_parallel:
        return total / layout.gpus_per_replica
    experts = routed_expert_bytes(model, fmt)
    expert_gpus = layout.gpus_per_replica * (layout.data_parallel if layout.nodes > 1 else 1)
    return (total - experts) / layout.gpus_per_replica + experts / expert_gpus


@dataclass(frozen=True)
class _Request:
    """What must fit, and which layouts are allowed."""

    context: int
    concurrency: int
    utilization: float
    kv_dtype: str
    max_nodes: int
    tensor_parallel: int | None = None
    single_instance: bool = False
    require_efa: bool = True

    def node_limit(self, instance: InstanceSpec) -> int:
        """Nodes a layout on ``instance`` may span: one without EFA unless EFA is waived."""
        if self.single_instance or (self.require_efa and not instance.efa_devices):
            return 1
        return self.max_nodes


def _candidate_layouts(model: ModelSpec, instance: InstanceSpec, request: _Request) -> list[Layout]:
    options = tensor_parallel_options(model, instance.gpus)
    if request.tensor_parallel is not None:
        options = [tp for tp in options if tp == request.tensor_parallel]
        if not options:
            return []
    layouts = [layout_within_node(model, instance, tp) for tp in options]
    widest = options[-1]
    limit = request.node_limit(instance)
    layouts += [layout_across_nodes(model, widest, n) for n in range(2, limit + 1)]
    return layouts


def plan(
    model: ModelSpec | str,
    weight_format: WeightFormat | str,
    instance_type: InstanceType | str,
    *,
    max_context: int | None = None,
    concurrency: int = 1,
    gpu_memory_utilization: float = 0.9,
    kv_cache_dtype: str | None = None,
    max_nodes: int = MAX_NODES,
    catalog: Catalog | None = None,
    tensor_parallel: int | None = None,
    single_instance: bool = False,
    require_efa: bool = True,
    workload: Any = None,
    targets: Any = None,
    objective: Objective | str | None = None,
) -> Plan:
    """The layout of ``model`` in ``weight_format`` on ``instance_type`` the objective picks;
    a ``PlanningError`` (what is needed, what is there, what would fit) when nothing fits.

    :param model: a ``ModelSpec`` or a preset's name; ``weight_format`` and ``instance_type``
        likewise (an ``InstanceType`` is looked up in ``catalog``).
    :param max_context: tokens per sequence. Default: the workload's peak, else the model's.
    :param concurrency: sequences of ``max_context`` that must fit at once. Default: 1.
    :param gpu_memory_utilization: vLLM's share of GPU memory. Default: 0.9.
    :param kv_cache_dtype: ``auto`` or ``fp8``. Default: searched with a workload, else ``auto``.
    :param max_nodes: most nodes a layout spans. Default: ``MAX_NODES``.
    :param catalog: instance facts and prices. Default: ``default_catalog()``.
    :param tensor_parallel: a divisor of the heads, at most the node's GPUs. Default: searched.
    :param single_instance: one copy per instance (a SageMaker endpoint). Default: False.
    :param require_efa: layouts across nodes only with EFA. Default: True.
    :param workload: the requests served (``Workload``). Default: ``Workload()``, fewest nodes.
    :param targets: the ``LatencyTargets`` to meet. Default: none.
    :param objective: ``TOKENS_PER_DOLLAR`` (default) or ``MIN_GPUS`` (the smallest layout
        that fits); how each searches: ``objective.py``, docs/design/planner.md.
    """
    chosen = Objective.TOKENS_PER_DOLLAR if objective is None else objective_of(objective)
    spec, fmt = ModelSpec.of(model), WeightFormat.of(weight_format)
    catalog = catalog or default_catalog()
    instance = catalog.get(str(instance_type))
    if max_context is None:
        whole = spec.max_context
        max_context = whole if workload is None else min(whole, workload.peak_context)
    request = _Request(
        max_context,
        concurrency,
        gpu_memory_utilization,
        "auto" if kv_cache_dtype is None else kv_cache_dtype,
        max_nodes,
        tensor_parallel,
        single_instance,
        require_efa,
    )
    smallest = _smallest_fit(spec, fmt, instance, request, catalog)
    assert _CHOOSE is not None, "planning.objective sets the search when it loads"
    return _CHOOSE(smallest, request, workload, targets, chosen, kv_cache_dtype is None, catalog)


def _smallest_fit(
    spec: ModelSpec, fmt: WeightFormat, instance: InstanceSpec, request: _Request, catalog: Catalog
) -> Plan:
    """The smallest layout that fits; ``PlanningError`` for bad input or when none fits."""
    _check_request(spec, instance, request)
    found = _fit(spec, fmt, instance, request)
    if found is None:
        raise _no_fit_error(spec, fmt, instance, request, catalog)
    return found


def _check_request(spec: ModelSpec, instance: InstanceSpec, request: _Request) -> None:
    """One ``PlanningError`` for the first input out of range."""
    context, kv_dtype = request.context, request.kv_dtype
    if context < 1 or context > spec.max_context:
        raise PlanningError(
            f"max_context={context} is outside 1..{spec.max_context}, the longest context {spec.name} supports (vLLM refuses a longer --max-model-len)",
            prop="max_context",
            value=context,
        )
    if request.concurrency < 1:
        raise PlanningError(
            f"concurrency={request.concurrency} must be at least 1",
            prop="concurrency",
            value=request.concurrency,
        )
    if not 0 < request.utilization <= 1:
        raise PlanningError(
            f"gpu_memory_utilization={request.utilization} must be in (0, 1]",
            prop="gpu_memory_utilization",
            value=request.utilization,
        )
    if kv_dtype not in KV_CACHE_DTYPE_BYTES:
        raise PlanningError(
            f"kv_cache_dtype={kv_dtype!r} must be one of {', '.join(KV_CACHE_DTYPE_BYTES)}",
            prop="kv_cache_dtype",
            value=kv_dtype,
        )
    if request.max_nodes < 1:
        raise PlanningError(
            f"max_nodes={request.max_nodes} must be at least 1",
            prop="max_nodes",
            value=request.max_nodes,
        )
    options = tensor_parallel_options(spec, instance.gpus)
    if request.tensor_parallel is not None and request.tensor_parallel not in options:
        raise PlanningError(
            f"tensor_parallel={request.tensor_parallel} must be one of {options} for {spec.name} on {instance.instance_type}",
            prop="tensor_parallel",
            value=request.tensor_parallel,
        )


def _usable_bytes(instance: InstanceSpec, utilization: float) -> float:
    return instance.gpu.memory_bytes * utilization - RUNTIME_RESERVE_GIB * GIB


def _fit(
    spec: ModelSpec, fmt: WeightFormat, instance: InstanceSpec, request: _Request
) -> Plan | None:
    for layout in _candidate_layouts(spec, instance, request):
        found = _fit_layout(spec, fmt, instance, request, layout)
        if found is not None:
            return found
    return None


def _fit_layout(
    spec: ModelSpec, fmt: WeightFormat, instance: InstanceSpec, request: _Request, layout: Layout
) -> Plan | None:
    """``layout`` as a plan when it fits the request, else ``None``."""
    total_weights = weight_bytes(spec, fmt)
    kv_per_token = spec.kv_values_per_token() * KV_CACHE_DTYPE_BYTES[request.kv_dtype]
    usable = _usable_bytes(instance, request.utilization)
    per_gpu = weight_bytes_per_gpu(spec, fmt, layout)
    kv_space = usable - per_gpu
    if kv_space <= 0:
        return None
    tokens = int(
        kv_space
        * layout.gpus_per_replica
        // (kv_per_token * spec.kv_replication(layout.tensor_parallel))
    )
    sequences = tokens // request.context * layout.data_parallel
    if tokens < request.context or sequences < request.concurrency:
        return None
    note = fmt.fallback_note(instance.gpu)
    return Plan(
        model=spec.name,
        weight_format=fmt.name,
        instance_type=instance.instance_type,
        max_context=request.context,
        concurrency=request.concurrency,
        gpu_memory_utilization=request.utilization,
        kv_cache_dtype=request.kv_dtype,
        weight_bytes=total_weights,
        kv_bytes_per_token=kv_per_token,
        nodes=layout.nodes,
        tensor_parallel=layout.tensor_parallel,
        pipeline_parallel=layout.pipeline_parallel,
        data_parallel=layout.data_parallel,
        expert_parallel=layout.expert_parallel,
        weight_bytes_per_gpu=per_gpu,
        kv_cache_bytes_per_gpu=kv_space,
        kv_tokens_per_replica=tokens,
        warnings=(note,) if note else (),
        spec=spec,
        fmt=fmt,
        instance=instance,
    )


def _alternatives(
    spec: ModelSpec, fmt: WeightFormat, instance: InstanceSpec, request: _Request, catalog: Catalog
) -> list[Alternative]:
    """What would fit: more nodes of this type, other types, smaller formats (cheapest first)."""
    found: list[Alternative] = []
    free = replace(request, tensor_parallel=None)
    if request.max_nodes < MAX_NODES and not request.single_instance:
        wider = _fit(spec, fmt, instance, replace(free, max_nodes=MAX_NODES))
        if wider is not None and wider.nodes > 1:
            found.append(_alternative(wider, "more nodes"))
    others = []
    for other in catalog:
        if other.instance_type != instance.instance_type:
            fitted = _fit(spec, fmt, other, free)
            if fitted is not None:
                others.append((other.price_per_hour * fitted.nodes, fitted))
    found += [
        _alternative(fitted, "other instance type")
        for _, fitted in sorted(others, key=lambda item: item[0])[:3]
    ]
    for smaller in weight_formats().values():
        if smaller.bytes_per_param < fmt.bytes_per_param:
            fitted = _fit(spec, smaller, instance, free)
            if fitted is not None:
                found.append(_alternative(fitted, "smaller format"))
    return found


def _alternative(fitted: Plan, reason: str) -> Alternative:
    return Alternative(
        fitted.instance_type,
        fitted.nodes,
        fitted.tensor_parallel,
        fitted.pipeline_parallel,
        fitted.weight_format,
        reason,
        fitted.data_parallel,
    )


def _no_fit_error(
    spec: ModelSpec, fmt: WeightFormat, instance: InstanceSpec, request: _Request, catalog: Catalog
) -> PlanningError:
    total_weights = weight_bytes(spec, fmt)
    kv_needed = (
        request.concurrency
        * request.context
        * spec.kv_values_per_token()
        * KV_CACHE_DTYPE_BYTES[request.kv_dtype]
    )
    per_gpu_usable = _usable_bytes(instance, request.utilization)
    usable_node = per_gpu_usable * instance.gpus
    limit = request.node_limit(instance)
    nodes = "one node" if limit == 1 else f"up to {limit} nodes"
    if limit < request.max_nodes and not request.single_instance:
        nodes += f" (layouts across nodes need EFA, which {instance.instance_type} lacks)"
    pinned = ""
    if request.tensor_parallel is not None:
        pinned = (
            f"; with tensor_parallel={request.tensor_parallel} each GPU holds {total_weights / request.tensor_parallel / GIB:,.1f} GiB of weights "
            f"and has {per_gpu_usable / GIB:,.1f} GiB for weights and KV cache"
        )
    return PlanningError(
        f"{spec.name} in {fmt.name} does not fit {nodes} of {instance.instance_type} "
        f"({instance.gpus} x {instance.gpu.name} {instance.gpu.memory_gib:g} GiB): needs {(total_weights + kv_needed) / GIB:,.0f} GiB "
        f"({total_weights / GIB:,.0f} GiB weights + {kv_needed / GIB:,.1f} GiB KV cache for {request.concurrency} x {request.context:,} tokens), "
        f"one node offers {usable_node / GIB:,.0f} GiB at gpu_memory_utilization {request.utilization} "
        f"less {RUNTIME_RESERVE_GIB:g} GiB runtime reserve per GPU{pinned}",
        needed_bytes=total_weights + kv_needed,
        available_bytes=usable_node * limit,
        alternatives=tuple(_alternatives(spec, fmt, instance, request, catalog)),
    )
