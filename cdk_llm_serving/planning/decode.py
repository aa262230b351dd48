"""Decode speed of one replica: what a step reads, computes and sends, and how long it takes.

Per decode step of a batch of ``B`` sequences, each with ``C`` tokens of context:

- **memory**: the dense weights once, the routed experts the batch touches
  (``moe.expected_distinct_experts``), and every sequence's KV cache. MLA's latent cache is
  replicated on every tensor-parallel rank (each rank reads all of it); GQA's is split by KV
  head. Pipeline stages run one after another for a given batch, so a step streams the
  replica's bytes through the bandwidth of **one stage's** GPUs (``tensor_parallel`` GPUs),
  not all the replica's GPUs at once::

      memory_s = (dense + touched experts + B·C·kv_bytes·kv_replication)
                 / (tensor_parallel · GPU bandwidth · BANDWIDTH_EFFICIENCY)

- **compute**: ``2 · active params · B`` FLOPs at the weight format's tensor-core peak (FP4 /
  FP8 when native, else BF16) times ``COMPUTE_EFFICIENCY``, again one stage at a time.
- **all-to-all** (expert parallelism): each token's hidden state goes to its ``k`` experts
  and back (``2 · k · hidden · 2 bytes`` per MoE layer), ``(ep-1)/ep`` of it off the GPU, over
  NVLink (``Gpu.link_gb_per_s``) within a node or EFA (the instance's network bandwidth)
  across nodes.

With data parallelism and expert parallelism (``ep = tensor_parallel x data_parallel``; a
MoE across nodes, or a node split into engines) the ranks step together through the MoE
layers: the experts touched are those of all ``data_parallel x B`` tokens, sharded over all
``ep`` GPUs, so a rank's GPUs read ``1/data_parallel`` of them (``DecodeStep.expert_bytes``
is that share), and the all-to-all carries every rank's tokens.

``step = max(memory, compute, all-to-all)``; inter-token latency (ITL) is the step.
Prefill is a compute bound: ``2 · active params · input tokens`` per request. With
continuous batching a replica holding ``B`` requests of ``I`` input and ``O`` output tokens
emits ``B·O`` tokens in ``O·step + B·prefill``.

Not modelled: attention FLOPs over long contexts, sliding-window layers (KV read counted in
full), CUDA-graph/launch overheads, routing skew, overlap of pipeline micro-batches. The two
efficiencies are calibrated against published measurements (``calibration.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import Problems
from .catalog import Catalog, InstanceSpec
from .models import ModelSpec, WeightFormat
from .moe import dense_weight_bytes, expert_weight_bytes
from .sizing import Plan

#: Share of peak HBM bandwidth decode kernels reach. ASSUMED (no single published figure):
#: chosen with ``COMPUTE_EFFICIENCY`` so the planner lands within ``measurements.json``'s
#: factor of every recorded measurement (``tests/planning/test_planner_calibration.py``).
BANDWIDTH_EFFICIENCY = 0.5
#: Share of dense tensor-core peak that batched decode and prefill GEMMs reach. ASSUMED,
#: calibrated as ``BANDWIDTH_EFFICIENCY`` is.
COMPUTE_EFFICIENCY = 0.4
#: Bytes per activation value sent in the expert-parallel all-to-all (BF16).
ACTIVATION_BYTES = 2
#: Most sequences one engine runs at once: vLLM's default ``--max-num-seqs`` on GPUs with at
#: least 70 GiB other than A100 (``EngineArgs`` batch defaults in vllm/engine/arg_utils.py,
#: https://github.com/vllm-project/vllm); smaller GPUs and A100 default to 256.
MAX_BATCH = 1024
#: Default inter-token-latency target for picking a batch: 50 ms = 20 tokens/s per user.
DEFAULT_ITL_TARGET_MS = 50.0


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
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.add(name, value, "an integer of at least 1")
        if self.concurrency is not None and (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or self.concurrency < 1
        ):
            problems.add("concurrency", self.concurrency, "an integer of at least 1, or None")
        if self.request_rate is not None and (
            isinstance(self.request_rate, bool)
            or not isinstance(self.request_rate, int | float)
            or not math.isfinite(self.request_rate)
            or self.request_rate <= 0
        ):
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
    """One decode step of one replica at ``batch`` sequences of ``context`` tokens."""

    batch: int
    context: int
    dense_bytes: float
    expert_bytes: float
    kv_bytes: float
    stage_bandwidth: float
    memory_s: float
    compute_s: float
    all_to_all_s: float

    @property
    def bytes_read(self) -> float:
        return self.dense_bytes + self.expert_bytes + self.kv_bytes

    @property
    def step_s(self) -> float:
        return max(self.memory_s, self.compute_s, self.all_to_all_s)

    @property
    def bound(self) -> str:
        named = {
            "memory": self.memory_s,
            "compute": self.compute_s,
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
    """Per-GPU bandwidth of the all-to-all: NVLink within a node, EFA shared across nodes."""
    if ep <= instance.gpus:
        return instance.gpu.link_gb_per_s * 1e9
    return instance.network_gbps / 8 * 1e9 / instance.gpus


def expert_ranks(plan: Plan) -> int:
    """Data-parallel ranks sharing the experts: all of them with expert parallelism, else 1."""
    return plan.data_parallel if plan.expert_parallel else 1


def all_to_all_seconds(plan: Plan, spec: ModelSpec, instance: InstanceSpec, tokens: int) -> float:
    """Time of the expert-parallel dispatch + combine of ``tokens`` tokens over all MoE layers."""
    ranks = expert_ranks(plan)
    ep = plan.tensor_parallel * ranks
    if not plan.expert_parallel or ep <= 1 or spec.hidden_size <= 0:
        return 0.0
    moe_layers = spec.moe_layers or spec.layers
    per_token = 2 * spec.experts_per_token * spec.hidden_size * ACTIVATION_BYTES * moe_layers
    off_gpu = tokens * ranks * per_token * (ep - 1) / ep
    return off_gpu / (ep * _link_bytes_per_s(instance, ep))


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
    stage_bw = plan.tensor_parallel * instance.gpu.bandwidth_tbps * 1e12 * BANDWIDTH_EFFICIENCY
    kv = batch * context * plan.kv_bytes_per_token * spec.kv_replication(plan.tensor_parallel)
    ranks = expert_ranks(plan)
    dense = dense_weight_bytes(spec, fmt)
    experts = expert_weight_bytes(spec, fmt, tokens * ranks) / ranks
    flops = instance.gpu.peak_flops(compute_precision(fmt, instance)) * COMPUTE_EFFICIENCY
    compute = 2 * spec.active_params_b * 1e9 * tokens / (plan.tensor_parallel * flops)
    return DecodeStep(
        batch=batch,
        context=context,
        dense_bytes=dense,
        expert_bytes=experts,
        kv_bytes=kv,
        stage_bandwidth=stage_bw,
        memory_s=(dense + experts + kv) / stage_bw,
        compute_s=compute,
        all_to_all_s=all_to_all_seconds(plan, spec, instance, tokens),
    )


def prefill_seconds(plan: Plan, input_tokens: int, catalog: Catalog | None = None) -> float:
    """Compute-bound prefill of one request on one replica (stages one after another)."""
    instance = catalog.get(plan.instance_type) if catalog else plan.instance_spec
    spec, fmt = plan.model_spec, plan.format_spec
    flops = instance.gpu.peak_flops(compute_precision(fmt, instance)) * COMPUTE_EFFICIENCY
    return 2 * spec.active_params_b * 1e9 * input_tokens / (plan.tensor_parallel * flops)
