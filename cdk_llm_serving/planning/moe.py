"""How many routed experts a decode step touches, and how many bytes of weights it reads.

With ``E`` experts and top-``k`` routing, ``B`` tokens touch ``E · (1 - (1 - k/E)^B)`` distinct
experts per layer on average under uniform routing: ``k`` at ``B = 1``, approaching ``E``.
Skewed routing touches fewer, so this is the pessimistic side (derivation:
docs/design/planner.md, "Routed experts a step touches").
"""

from __future__ import annotations

from .models import ModelSpec, WeightFormat


def expected_distinct_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected experts (of ``experts``) hit by ``tokens`` tokens routed top-``top_k`` uniformly."""
    if experts <= 0 or top_k <= 0 or tokens <= 0:
        return 0.0
    miss: float = (1 - min(top_k, experts) / experts) ** tokens
    return experts * (1 - miss)


def touched_expert_share(spec: ModelSpec, tokens: float) -> float:
    """Share of the routed-expert parameters one step of ``tokens`` tokens reads (0 for dense)."""
    if spec.routed_experts_b <= 0:
        return 0.0
    return expected_distinct_experts(spec.experts, spec.experts_per_token, tokens) / spec.experts


def dense_params_b(spec: ModelSpec) -> float:
    """Active parameters that every token reads: the active ones less its routed experts."""
    routed = spec.routed_experts_b
    if routed <= 0:
        return spec.active_params_b
    return spec.active_params_b - routed * spec.experts_per_token / spec.experts


def dense_weight_bytes(spec: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes of the always-read weights; the high-precision part counted at BF16."""
    return fmt.stored_bytes(dense_params_b(spec), spec.high_precision_params_b)


def routed_expert_bytes(spec: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes of all routed experts (stored in the weight format; 0 for a dense model)."""
    return spec.routed_experts_b * 1e9 * fmt.bytes_per_param


def expert_weight_bytes(spec: ModelSpec, fmt: WeightFormat, tokens: float) -> float:
    """Bytes of routed-expert weights a step of ``tokens`` tokens reads (expected value)."""
    return routed_expert_bytes(spec, fmt) * touched_expert_share(spec, tokens)
