"""The planner's data: instance catalog, GPU facts, model presets, weight formats."""

from __future__ import annotations

import dataclasses

import pytest

from cdk_llm_serving._cdk.service_limits import (
    hyperpod_instance_types,
    production_variant_instance_types,
)
from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning.catalog import default_catalog
from cdk_llm_serving.planning.models import preset, presets, weight_format

REQUIRED_FAMILIES = {
    "g5",
    "g6",
    "g6e",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "p6-b300",
    "p6e-gb200",
}


def test_catalog_covers_every_required_family():
    assert REQUIRED_FAMILIES <= {spec.family for spec in default_catalog()}


def test_every_catalog_type_exists_in_botocores_sagemaker_enums():
    known = set(production_variant_instance_types()) | set(hyperpod_instance_types())
    missing = [spec.instance_type for spec in default_catalog() if spec.instance_type not in known]
    assert not missing


def test_catalog_entries_are_plausible():
    for spec in default_catalog():
        assert spec.gpus in (1, 2, 4, 8), spec
        assert (
            spec.price_per_hour > 0 and spec.gpu.memory_gib > 0 and spec.gpu.bandwidth_tbps > 0
        ), spec
        assert spec.architecture in ("x86_64", "arm64"), spec
    assert default_catalog().get("ml.p6e-gb200.36xlarge").architecture == "arm64"


def test_only_blackwell_runs_nvfp4_natively_and_fp8_needs_ada_or_later():
    catalog = default_catalog()
    nvfp4, fp8 = weight_format("nvfp4"), weight_format("fp8")
    assert nvfp4.runs_natively_on(catalog.get("ml.p6-b200.48xlarge").gpu)
    assert not nvfp4.runs_natively_on(catalog.get("ml.p5en.48xlarge").gpu)
    assert fp8.runs_natively_on(catalog.get("ml.g6e.12xlarge").gpu)
    assert not fp8.runs_natively_on(catalog.get("ml.p4d.24xlarge").gpu)
    assert "weight-only" in nvfp4.fallback_note(catalog.get("ml.p5.48xlarge").gpu)


def test_prices_can_be_overridden_and_types_added():
    catalog = default_catalog()
    cheaper = catalog.with_prices({"ml.p5.48xlarge": 60.0}, source="our savings plan")
    assert cheaper.get("ml.p5.48xlarge").price_per_hour == 60.0
    assert catalog.get("ml.p5.48xlarge").price_per_hour != 60.0
    assert "our savings plan" in cheaper.price_source
    with pytest.raises(ConfigurationError, match="ml.nope.xlarge"):
        catalog.with_prices({"ml.nope.xlarge": 1.0})
    g7e = dataclasses.replace(catalog.get("ml.g6e.48xlarge"), instance_type="ml.g7e.48xlarge")
    assert catalog.with_instances([g7e]).get("ml.g7e.48xlarge").gpus == 8


@pytest.mark.parametrize(
    ("name", "bytes_per_param"),
    [("bf16", 2.0), ("fp8", 1.0), ("nvfp4", 0.5625), ("mxfp4", 0.53125), ("int4", 0.515625)],
)
def test_weight_formats_count_their_block_scales(name, bytes_per_param):
    assert weight_format(name).bytes_per_param == bytes_per_param


def test_presets_include_the_required_models_with_sources():
    required = {
        "gpt-oss-20b",
        "gpt-oss-120b",
        "llama-3.1-405b",
        "deepseek-v3",
        "deepseek-r1",
        "kimi-k2",
        "qwen3-235b-a22b",
        "reference-2.4t-a95b",
    }
    assert required <= set(presets())
    for spec in presets().values():
        assert spec.source, spec.name
    reference = preset("reference-2.4t-a95b")
    assert (reference.total_params_b, reference.active_params_b) == (2400.0, 95.0)
    assert "ASSUMED" in reference.assumptions


def test_kv_cache_per_token_follows_the_published_formulas():
    llama = preset("llama-3.1-405b")  # GQA: 2 * layers * kv_heads * head_dim
    assert llama.kv_values_per_token() == 2 * 126 * 8 * 128
    deepseek = preset("deepseek-v3")  # MLA: (kv_lora_rank + rope dim) * layers
    assert deepseek.kv_values_per_token() == (512 + 64) * 61
    assert (
        deepseek.kv_replication(8) == 8
        and llama.kv_replication(8) == 1
        and llama.kv_replication(16) == 2
    )


def test_price_refusals_are_configuration_errors_naming_the_input(tmp_path):
    catalog = default_catalog()
    with pytest.raises(ConfigurationError) as caught:
        catalog.for_region("eu-west-3")
    (problem,) = caught.value.problems
    assert problem.property == "region" and "no recorded prices for region" in problem.allowed
    shapeless = tmp_path / "prices.json"
    shapeless.write_text('{"region": "eu-west-3", "prices": {"ml.p5.48xlarge": "cheap"}}')
    with pytest.raises(ConfigurationError) as caught:
        catalog.with_price_file(str(shapeless))
    assert [p.property for p in caught.value.problems] == ["prices"]
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    for path in (broken, tmp_path / "missing.json"):
        with pytest.raises(ConfigurationError) as caught:
            catalog.with_price_file(str(path))
        assert [p.property for p in caught.value.problems] == ["file"]
