"""Speculative decoding (MTP, EAGLE-3, n-gram) as a speed-up over plain decoding, shown separately.

A verification step of ``k`` drafted tokens at acceptance rate ``α`` yields
``τ = (1 - α^(k+1)) / (1 - α)`` tokens per sequence (Leviathan et al., ICML 2023,
https://arxiv.org/abs/2211.17192, eq. 1); speed-up = ``τ · plain step / (verify step + draft)``.
Each default acceptance rate's source: docs/design/planner.md, "Speculative decoding".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Problems, check_choice
from .catalog import Catalog
from .decode import decode_step
from .sizing import Plan


@dataclass(frozen=True)
class SpeculationMethod:
    name: str
    draft_tokens: int
    acceptance_rate: float
    drafter_layers: float
    source: str


DEFAULTS: dict[str, SpeculationMethod] = {
    "mtp": SpeculationMethod("mtp", 1, 0.85, 1.0, "DeepSeek-V3 report §5.4.3: 85-90 % acceptance"),
    "eagle3": SpeculationMethod(
        "eagle3", 3, 0.63, 1.0, "RedHatAI gpt-oss-20b EAGLE-3: tau 2.63 at k=7"
    ),
    # ASSUMED: no single published figure; it depends on how much the output repeats the prompt.
    "ngram": SpeculationMethod("ngram", 3, 0.35, 0.0, "ASSUMED: workload-dependent"),
}


@dataclass(frozen=True)
class SpeculationEstimate:
    method: SpeculationMethod
    batch: int
    tokens_per_step: float
    plain_step_s: float
    speculative_step_s: float

    @property
    def speedup(self) -> float:
        """Tokens/s with speculation over tokens/s without, at the same batch."""
        return self.tokens_per_step * self.plain_step_s / self.speculative_step_s

    @property
    def itl_ms(self) -> float:
        """Time between a user's tokens with speculation."""
        return self.speculative_step_s / self.tokens_per_step * 1e3


def accepted_tokens_per_step(acceptance_rate: float, draft_tokens: int) -> float:
    """Expected tokens per verification step: ``(1 - α^(k+1)) / (1 - α)``."""
    if not 0 <= acceptance_rate < 1:
        problems = Problems("speculation")
        problems.add("acceptance_rate", acceptance_rate, "must be in [0, 1)")
        problems.raise_if_any()
    return (1 - acceptance_rate ** (draft_tokens + 1)) / (1 - acceptance_rate)


def method(
    name: str, acceptance_rate: float | None = None, draft_tokens: int | None = None
) -> SpeculationMethod:
    """A default method, optionally with your measured acceptance rate or draft length."""
    if name not in DEFAULTS:
        problems = Problems("speculation")
        check_choice(problems, "name", name, list(DEFAULTS), "speculation methods")
        problems.raise_if_any()
    base = DEFAULTS[name]
    return SpeculationMethod(
        name,
        draft_tokens if draft_tokens is not None else base.draft_tokens,
        acceptance_rate if acceptance_rate is not None else base.acceptance_rate,
        base.drafter_layers,
        base.source if acceptance_rate is None else "given",
    )


def estimate_speculation(
    plan: Plan,
    spec_method: SpeculationMethod,
    *,
    batch: int,
    context: int,
    catalog: Catalog | None = None,
) -> SpeculationEstimate:
    """Speed-up of ``spec_method`` on ``plan`` at ``batch`` sequences of ``context`` tokens."""
    plain = decode_step(plan, batch, context, catalog=catalog).step_s
    k = spec_method.draft_tokens
    verify = decode_step(plan, batch, context, tokens_per_sequence=k + 1, catalog=catalog).step_s
    layers = plan.model_spec.layers
    draft = k * spec_method.drafter_layers * plain / layers
    tau = accepted_tokens_per_step(spec_method.acceptance_rate, k)
    return SpeculationEstimate(spec_method, batch, tau, plain, verify + draft)
