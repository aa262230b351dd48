"""The plan report shows, for the declared workload, whether P/D pays and the published
effect of the operator's tiered KV cache with routing and of P/D, labelled as AWS's figures
(with what they assume and their source), not the planner's model."""

from __future__ import annotations

import json

from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.planning.decode import Workload
from cdk_llm_serving.planning.published import (
    CACHE_ROUTING_FIGURES_SOURCE,
    KIND,
    published_effects,
)
from cdk_llm_serving.planning.sizing import plan

#: AWS's own DPD example model at a workload where every DPD condition holds.
LONG_DOCUMENTS = [
    "plan",
    "--model",
    "llama-3.3-70b",
    "--weight-format",
    "bf16",
    "--instance-type",
    "ml.p4de.24xlarge",
    "--input-tokens",
    "8192",
    "--output-tokens",
    "512",
    "--request-rate",
    "4",
]


def _effects(data: dict) -> dict[str, dict]:
    return {effect["feature"]: effect for effect in data["published_effects"]}


def test_json_shows_the_published_figures_their_assumptions_and_whether_pd_pays(capsys):
    assert main([*LONG_DOCUMENTS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    effects = _effects(data)
    cache = effects["tiered_kv_cache_and_intelligent_routing"]
    assert (cache["ttft_reduction_up_to"], cache["cost_reduction_up_to"]) == (0.40, 0.25)
    assert cache["source"] == CACHE_ROUTING_FIGURES_SOURCE
    assert "multi-turn" in cache["assumes"] and "8,192-token prompts" in cache["assumes"]
    assert cache["pays_for_workload"] is None  # the planner has no rule for prefix reuse
    pd = effects["prefill_decode_disaggregation"]
    assert pd["pays_for_workload"] is True
    assert pd["pays_for_workload"] == data["layout_choice"]["disaggregation"]["pays"]
    assert pd["source"].endswith("sagemaker-hyperpod-model-deployment-dpd.html")
    assert all(effect["kind"] == KIND for effect in effects.values())
    assert "not the planner's model" in KIND


def test_short_prompts_say_pd_does_not_pay_and_the_reason(capsys):
    short = [*LONG_DOCUMENTS]
    short[short.index("--input-tokens") + 1] = "1024"
    assert main([*short, "--json"]) == 0
    pd = _effects(json.loads(capsys.readouterr().out))["prefill_decode_disaggregation"]
    assert pd["pays_for_workload"] is False
    assert "1024 input tokens < 4,000" in pd["assumes"]


def test_the_table_labels_each_effect_as_published(capsys):
    assert main(LONG_DOCUMENTS) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[0]: line for line in out.splitlines() if "  " in line}
    cache, pd = rows["cache+routing"], rows["P/D effect"]
    assert "published by AWS, not the planner's model" in cache
    assert "up to 40 %" in cache and "up to 25 %" in cache and CACHE_ROUTING_FIGURES_SOURCE in cache
    assert pd.startswith("P/D effect") and "pays for this workload (planner's rule)" in pd


def test_the_effects_follow_the_plans_own_verdict():
    moe = plan(
        "gpt-oss-120b",
        "mxfp4",
        "ml.p5en.48xlarge",
        workload=Workload(input_tokens=8192, output_tokens=512, request_rate=4.0),
    )
    (_, pd) = published_effects(moe)
    assert pd.pays_for_workload is False and "MoE" in pd.assumes
