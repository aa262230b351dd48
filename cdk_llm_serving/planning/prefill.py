"""Prefill: its compute-bound time, the time to first token at a batch, and whether
disaggregating prefill from decode would pay for a workload.

Prefill is ``2 · active params · I`` FLOPs over one stage's GPUs plus its all-reduces. TTFT at
a batch: own prefill, M/D/1 queueing behind the others' prefills (ASSUMED Poisson arrivals),
and the decode steps its chunked-prefill chunks share. Disaggregation: AWS's "When DPD helps"
conditions (``DISAGGREGATION_SOURCE``). Sources and derivations: docs/design/planner.md,
"Prefill and time to first token".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .decode import Workload, all_reduce_seconds, gemm_flops_per_second
from .moe import dense_params_b

if TYPE_CHECKING:
    from .catalog import Catalog, InstanceSpec
    from .models import ModelSpec
    from .sizing import Plan

#: AWS's page on HyperPod Disaggregated Prefill and Decode, "When DPD helps".
DISAGGREGATION_SOURCE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html"
)
DISAGGREGATION_MIN_PARAMS_B = 70.0
DISAGGREGATION_MIN_INPUT_TOKENS = 4000
DISAGGREGATION_MIN_REQUESTS_PER_SECOND = 2.0
DISAGGREGATION_MIN_OUTPUT_TOKENS = 256


def prefill_seconds(plan: Plan, input_tokens: int, catalog: Catalog | None = None) -> float:
    """Prefill of one request on one engine (pipeline stages one after another): the dense
    GEMMs at ``decode.COMPUTE_EFFICIENCY``, the routed experts' grouped GEMM at the GPU's
    measured share (``decode.gemm_flops_per_second``), and the tensor-parallel all-reduces of
    the ``input_tokens`` (``decode.all_reduce_seconds``)."""
    instance = catalog.get(plan.instance_type) if catalog else plan.instance_spec
    spec, fmt = plan.model_spec, plan.format_spec
    dense_flops, grouped_flops = gemm_flops_per_second(fmt, instance)
    dense_params = dense_params_b(spec) * 1e9
    routed_params = spec.active_params_b * 1e9 - dense_params
    compute = 2 * input_tokens * (dense_params / dense_flops + routed_params / grouped_flops)
    return compute / plan.tensor_parallel + all_reduce_seconds(plan, spec, instance, input_tokens)


def max_num_batched_tokens(instance: InstanceSpec) -> int:
    """vLLM's default token budget per step for the OpenAI server (``Gpu.large_batch_defaults``)."""
    return 8192 if instance.gpu.large_batch_defaults else 2048


def time_to_first_token(
    prefill_s: float, step_s: float, batch: int, cycle_s: float, input_tokens: int, budget: int
) -> float:
    """TTFT at ``batch`` sequences per engine: own prefill, M/D/1 queueing behind the others'
    prefills, and the decode steps its prefill chunks share."""
    rho = min(0.99, batch * prefill_s / cycle_s) if cycle_s > 0 else 0.0
    wait = rho * prefill_s / (2 * (1 - rho))
    chunks = math.ceil(input_tokens / max(1, budget - batch))
    return prefill_s + wait + chunks * step_s


@dataclass(frozen=True)
class Disaggregation:
    """Whether prefill/decode disaggregation would pay for the workload, why, and the source."""

    pays: bool
    reason: str
    source: str = DISAGGREGATION_SOURCE

    def as_dict(self) -> dict[str, object]:
        return {"pays": self.pays, "reason": self.reason, "source": self.source}


def disaggregation_for(spec: ModelSpec, workload: Workload, performance: Any) -> Disaggregation:
    """AWS's rule (``DISAGGREGATION_SOURCE``). The request rate is the workload's, or, without one, what
    the plan serves at its chosen batch (a steadily loaded deployment)."""
    rate = workload.request_rate
    if rate is None and performance is not None:
        rate = performance.output_tokens_per_second / workload.output_tokens
    failing = []
    if spec.is_moe:
        failing.append(f"{spec.name} is a MoE model; AWS's guidance is for large dense models")
    elif spec.total_params_b < DISAGGREGATION_MIN_PARAMS_B:
        failing.append(f"{spec.total_params_b:g}B parameters < 70B")
    if workload.input_tokens < DISAGGREGATION_MIN_INPUT_TOKENS:
        failing.append(f"{workload.input_tokens} input tokens < 4,000")
    if rate is None or rate < DISAGGREGATION_MIN_REQUESTS_PER_SECOND:
        shown = "unknown" if rate is None else f"{rate:.2f}"
        failing.append(f"request rate {shown}/s < 2/s")
    if workload.output_tokens < DISAGGREGATION_MIN_OUTPUT_TOKENS:
        failing.append(f"{workload.output_tokens} output tokens < 256")
    if failing:
        return Disaggregation(
            False, "colocated is simpler and performs well: " + "; ".join(failing)
        )
    return Disaggregation(
        True,
        f"dense {spec.total_params_b:g}B model, {workload.input_tokens} input and "
        f"{workload.output_tokens} output tokens at {rate:.1f} requests/s: AWS's conditions "
        "for disaggregated prefill and decode all hold",
    )
