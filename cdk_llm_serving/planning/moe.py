"""How many routed experts a decode step touches, and how many bytes of weights it reads.

A decode step of a batch of ``B`` tokens reads the dense weights (attention, shared experts,
dense layers, embeddings, head) once, and in every MoE layer the weights of each expert at
least one token was routed to. With ``E`` experts and top-``k`` routing, the expected number
of distinct experts touched per layer is::

    E · (1 - (1 - k/E)^B)

Derivation (the expected number of occupied bins): a token picks ``k`` of the ``E`` experts,
so it misses a given expert with probability ``1 - k/E``. Under uniform, independent routing
all ``B`` tokens miss it with probability ``(1 - k/E)^B``. By linearity of expectation, the
expected count of experts hit by at least one token is ``E`` times the chance that one is hit.
(Exact when each token's ``k`` experts are a uniformly random ``k``-subset; the tokens need
only be independent of each other.) At ``B = 1`` this is ``k``: the active parameters. As
``B`` grows it approaches ``E``: the whole model. Real routers are not uniform; skewed
routing touches fewer distinct experts, so this is the pessimistic (more bytes) side.
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
