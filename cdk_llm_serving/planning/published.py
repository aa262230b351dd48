"""What AWS publishes about the inference operator's tiered KV cache, intelligent routing and
disaggregated prefill/decode, beside a plan (``plan`` CLI, ``--json``): published figures and
what they assume, never the planner's model (docs/design/planner.md, "What AWS publishes").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .prefill import DISAGGREGATION_SOURCE

if TYPE_CHECKING:
    from .sizing import Plan

__all__ = ["PublishedEffect", "published_effects"]

CACHE_ROUTING_FIGURES_SOURCE = "https://aws.amazon.com/blogs/machine-learning/managed-tiered-kv-cache-and-intelligent-routing-for-amazon-sagemaker-hyperpod/"
#: What every published effect is, as the report labels it.
KIND = "published by AWS, not the planner's model"
#: AWS's figures for the tiered KV cache with intelligent routing (upper bounds).
TTFT_REDUCTION_UP_TO = 0.40
COST_REDUCTION_UP_TO = 0.25


@dataclass(frozen=True)
class PublishedEffect:
    """One feature's published effect: the figures, what they assume, what the feature costs,
    the source, and, where the planner has a rule for it, whether it pays for the workload."""

    feature: str
    published: str
    assumes: str
    costs: str
    source: str
    #: ``plan.disaggregation.pays`` for P/D; ``None`` where the planner has no rule.
    pays_for_workload: bool | None = None
    ttft_reduction_up_to: float | None = None
    cost_reduction_up_to: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "feature": self.feature,
            "kind": KIND,
            "published": self.published,
            "ttft_reduction_up_to": self.ttft_reduction_up_to,
            "cost_reduction_up_to": self.cost_reduction_up_to,
            "assumes": self.assumes,
            "costs": self.costs,
            "pays_for_workload": self.pays_for_workload,
            "source": self.source,
        }

    def text(self) -> str:
        """One line of the table: the figures, then what they assume, then the source."""
        verdict = ""
        if self.pays_for_workload is not None:
            verdict = (
                "pays for this workload (planner's rule); "
                if self.pays_for_workload
                else ("does not pay for this workload (planner's rule); ")
            )
        return (
            f"{verdict}{KIND}: {self.published}; assumes {self.assumes}; costs {self.costs} "
            f"({self.source})"
        )


def published_effects(plan: Plan) -> list[PublishedEffect]:
    """The tiered KV cache with routing, and P/D, for ``plan``'s workload."""
    workload = plan.workload
    prompt = (
        f"{workload.input_tokens:,}-token prompts declared; how often their prefixes repeat is "
        "not in the workload"
        if workload is not None
        else "no workload declared"
    )
    effects = [
        PublishedEffect(
            feature="tiered_kv_cache_and_intelligent_routing",
            published="time to first token up to 40 % lower, compute cost up to 25 % lower, "
            "throughput higher",
            assumes="long-context prompts and multi-turn chat whose prefixes repeat across "
            f"requests, measured with AWS's internal tools ({prompt})",
            costs="the L2 tier's share of every node's memory (TieredStorage, default 5 %) and "
            "the L1 tier's CPU memory on the worker's node (size unpublished)",
            source=CACHE_ROUTING_FIGURES_SOURCE,
            ttft_reduction_up_to=TTFT_REDUCTION_UP_TO,
            cost_reduction_up_to=COST_REDUCTION_UP_TO,
        )
    ]
    verdict = plan.disaggregation
    effects.append(
        PublishedEffect(
            feature="prefill_decode_disaggregation",
            published="no figure: more predictable latency under mixed traffic, each phase "
            "scaled on its own, an inter-token latency gain that grows with input length",
            assumes="a dense 70B+ model, 4,000+ input tokens, 2+ requests/s sustained, 256+ "
            "output tokens"
            + (f" (for this workload: {verdict.reason})" if verdict is not None else ""),
            costs="a node per role at least (two where colocated serving needs one) and the KV "
            "transfer over EFA",
            source=DISAGGREGATION_SOURCE,
            pays_for_workload=verdict.pays if verdict is not None else None,
        )
    )
    return effects
