"""Decode speed of one replica: what a step reads, computes and sends, and how long it takes.

The step is the sum of its parts, each its own roofline (a layer's kernels run one after
another)::

    step = KV read + max(dense weights read, dense GEMM FLOPs)
         + max(touched experts read, expert grouped-GEMM FLOPs) + all-reduce + all-to-all

Bytes stream through one pipeline stage's GPUs at a time. The model, its sources and what it
leaves out: docs/design/planner.md, "The decode step".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import Problems
from .catalog import Catalog, InstanceSpec
from .models import ModelSpec, WeightFormat
from .moe import dense_params_b, dense_weight_bytes, expert_weight_bytes
from .sizing import Plan

#: Share of peak HBM bandwidth decode kernels reach. ASSUMED: calibrated with
#: ``COMPUTE_EFFICIENCY`` against ``data/measurements.json`` (docs/design/planner.md).
BANDWIDTH_EFFICIENCY = 0.5
#: Share of dense tensor-core peak that batched decode and prefill GEMMs reach. ASSUMED,
#: calibrated as ``BANDWIDTH_EFFICIENCY`` is.
COMPUTE_EFFICIENCY = 0.4
#: Bytes per activation value sent in the all-to-all and the all-reduce (BF16).
ACTIVATION_BYTES = 2
#: Share of NVLink bandwidth that ring all-reduces and the in-node all-to-all reach. ASSUMED
#: from AIConfigurator's measured all-reduce (UNCONFIRMED unit: docs/design/planner.md).
LINK_EFFICIENCY = 0.8
#: Fixed cost of one tensor-parallel all-reduce: AIConfigurator's measured vLLM custom
#: all-reduce on H200s (docs/design/planner.md, "The constants").
COLLECTIVE_LATENCY_S = 4.5e-6
#: Most sequences one engine runs at once: vLLM's default ``--max-num-seqs`` on GPUs of at
#: least 70 GiB other than A100 (vllm/engine/arg_utils.py); 256 on the others.
MAX_BATCH = 1024
#: Default inter-token-latency target for picking a batch: 50 ms = 20 tokens/s per user.
DEFAULT_ITL_TARGET_MS = 50.0


def _count(value: object) -> bool:
    """An ``int`` of at least 1 (a ``bool`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def positive_number(value: object) -> bool:
    """A finite ``int`` or ``float`` above 0 (a ``bool`` is not one)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


@dataclass(frozen=True)
class Workload:
    """Tokens per request: ``input_tokens`` of prompt, ``output_tokens`` generated; and the
    load, at most one of ``concurrency`` (requests in flight across the deployment: caps the
    batch per engine at ``ceil(concurrency / engines)``) and ``request_rate`` (requests per
    second: sets how many copies of the plan serve it). Neither: a steadily full deployment.
    """

    input_tokens: int = 2048
    output_tokens: int = 512
    concurrency: int | None = None
    request_rate: float | None = None

    def __post_init__(self) -> None:
        problems = Problems("Workload")
        for name in ("input_tokens", "output_tokens"):
            if not _count(getattr(self, name)):
                problems.add(name, getattr(self, name), "an integer of at least 1")
        if self.concurrency is not None and not _count(self.concurrency):
            problems.add("concurrency", self.concurrency, "an integer of at least 1, or None")
        if self.request_rate is not None and not positive_number(self.request_rate):
            problems.add("request_rate", self.request_rate, "a positive number, or None")
        if self.concurrency is not None and self.request_rate is not None:
            problems.add(
                "request_rate", self.request_rate, "give concurrency or request_rate, not both"
            )
        problems.raise_if_any()

    @property
    def mean_context(self) -> int:
        """Context a decode step attends to on average: the prompt and half the output."""
        return self.input_tokens + self.output_tokens // 2

    @property
    def peak_context(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of one replica at ``batch`` sequences of ``context`` tokens: the step is
    the sum of its parts' rooflines; ``memory_s`` and ``compute_s`` are totals, for the report."""

    batch: int
    context: int
    dense_bytes: float
    expert_bytes: float
    kv_bytes: float
    stage_bandwidth: float
    memory_s: float
    compute_s: float
    all_to_all_s: float
    #: KV-cache read of the attention kernels.
    attention_s: float
    #: The dense GEMMs: ``max(dense weights read, their FLOPs)``.
    dense_s: float
    #: The routed experts: ``max(touched experts read, grouped-GEMM FLOPs)``.
    experts_s: float
    #: The tensor-parallel all-reduces of all layers.
    all_reduce_s: float
    #: Of ``dense_s + experts_s``, the part bound by FLOPs rather than weight reads.
    compute_bound_s: float

    @property
    def bytes_read(self) -> float:
        return self.dense_bytes + self.expert_bytes + self.kv_bytes

    @property
    def step_s(self) -> float:
        return (
            self.attention_s + self.dense_s + self.experts_s + self.all_reduce_s + self.all_to_all_s
        )

    @property
    def bound(self) -> str:
        """What most of the step waits on: ``memory``, ``compute``, ``all-reduce``, ``all-to-all``."""
        gemm_memory = self.dense_s + self.experts_s - self.compute_bound_s
        named = {
            "memory": self.attention_s + gemm_memory,
            "compute": self.compute_bound_s,
            "all-reduce": self.all_reduce_s,
            "all-to-all": self.all_to_all_s,
        }
        return max(named, key=lambda name: named[name])

    @property
    def tokens_per_second(self) -> float:
        """Decode-only tokens/s of the replica (no prefill)."""
        return self.batch / self.step_s


def compute_precision(fmt: WeightFormat, instance: InstanceSpec) -> str:
    """Tensor-core precision matrix multiplies run at: the format's if native, else BF16."""
    if not fmt.runs_natively_on(instance.gpu):
        return "bf16"
    return {"nvfp4": "fp4", "mxfp4": "fp4", "fp8": "fp8"}.get(fmt.name, "bf16")


def _link_bytes_per_s(instance: InstanceSpec, ep: int) -> float:
    """Per-GPU bandwidth of the all-to-all: NVLink within a node (at ``LINK_EFFICIENCY``), EFA
    shared across nodes."""
    if ep <= instance.gpus:
        return instance.gpu.link_gb_per_s * 1e9 * LINK_EFFICIENCY
    return instance.network_gbps / 8 * 1e9 / instance.gpus


def expert_ranks(plan: Plan) -> int:
    """Data-parallel ranks sharing the experts: all of them with expert parallelism, else 1."""
    return plan.data_parallel if plan.expert_parallel else 1


def all_to_all_seconds(plan: Plan, spec: ModelSpec, instance: InstanceSpec, tokens: int) -> float:
    """Time of the expert-parallel dispatch + combine of ``tokens`` tokens over all MoE layers:
    the bytes over the link, plus ``COLLECTIVE_LATENCY_S`` per dispatch and per combine."""
    ranks = expert_ranks(plan)
    ep = plan.tensor_parallel * ranks
    if not plan.expert_parallel or ep <= 1 or spec.hidden_size <= 0:
        return 0.0
    moe_layers = spec.moe_layers or spec.layers
    per_token = 2 * spec.experts_per_token * spec.hidden_size * ACTIVATION_BYTES * moe_layers
    off_gpu = tokens * ranks * per_token * (ep - 1) / ep
    return off_gpu / (ep * _link_bytes_per_s(instance, ep)) + 2 * moe_layers * COLLECTIVE_LATENCY_S


def all_reduce_seconds(plan: Plan, spec: ModelSpec, instance: InstanceSpec, tokens: int) -> float:
    """The tensor-parallel all-reduces of ``tokens`` tokens through every layer: two per layer
    (one per MoE layer with expert parallelism), each a ring over NVLink plus a fixed cost."""
    tp = plan.tensor_parallel
    if tp <= 1:
        return 0.0
    moe_layers = (spec.moe_layers or spec.layers) if spec.is_moe else 0
    per_moe_layer = 1 if plan.expert_parallel else 2
    calls = 2 * (spec.layers - moe_layers) + per_moe_layer * moe_layers
    message = tokens * max(0, spec.hidden_size) * ACTIVATION_BYTES
    link = instance.gpu.link_gb_per_s * 1e9 * LINK_EFFICIENCY
    moved = 2 * (tp - 1) / tp * message / link if link > 0 else 0.0
    return calls * (COLLECTIVE_LATENCY_S + moved)


def gemm_flops_per_second(fmt: WeightFormat, instance: InstanceSpec) -> tuple[float, float]:
    """Reached FLOP/s of one GPU for (dense GEMMs, routed experts' grouped GEMM)."""
    precision = compute_precision(fmt, instance)
    peak = instance.gpu.peak_flops(precision)
    grouped = instance.gpu.grouped_gemm_share(precision)
    return peak * COMPUTE_EFFICIENCY, peak * (COMPUTE_EFFICIENCY if grouped is None else grouped)


def decode_step(
    plan: Plan,
    batch: int,
    context: int,
    *,
    tokens_per_sequence: int = 1,
    catalog: Catalog | None = None,
) -> DecodeStep:
    """The cost of one decode step; ``tokens_per_sequence`` > 1 for speculative verification."""
    instance = catalog.get(plan.instance_type) if catalog else plan.instance_spec
    spec, fmt = plan.model_spec, plan.format_spec
    tokens = batch * tokens_per_sequence
    tp = plan.tensor_parallel
    stage_bw = tp * instance.gpu.bandwidth_tbps * 1e12 * BANDWIDTH_EFFICIENCY
    kv = batch * context * plan.kv_bytes_per_token * spec.kv_replication(tp)
    ranks = expert_ranks(plan)
    dense = dense_weight_bytes(spec, fmt)
    experts = expert_weight_bytes(spec, fmt, tokens * ranks) / ranks
    dense_flops, grouped_flops = gemm_flops_per_second(fmt, instance)
    dense_params = dense_params_b(spec) * 1e9
    routed_params = spec.active_params_b * 1e9 - dense_params
    dense_compute = 2 * dense_params * tokens / (tp * dense_flops)
    expert_compute = 2 * routed_params * tokens / (tp * grouped_flops)
    dense_s = max(dense / stage_bw, dense_compute)
    experts_s = max(experts / stage_bw, expert_compute)
    compute_bound = (dense_compute if dense_compute > dense / stage_bw else 0.0) + (
        expert_compute if expert_compute > experts / stage_bw else 0.0
    )
    return DecodeStep(
        batch=batch,
        context=context,
        dense_bytes=dense,
        expert_bytes=experts,
        kv_bytes=kv,
        stage_bandwidth=stage_bw,
        memory_s=(dense + experts + kv) / stage_bw,
        compute_s=dense_compute + expert_compute,
        all_to_all_s=all_to_all_seconds(plan, spec, instance, tokens),
        attention_s=kv / stage_bw,
        dense_s=dense_s,
        experts_s=experts_s,
        all_reduce_s=all_reduce_seconds(plan, spec, instance, tokens),
        compute_bound_s=compute_bound,
    )
