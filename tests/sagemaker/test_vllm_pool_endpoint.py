"""VllmPoolEndpoint: per-pool derivation from one declaration."""

from __future__ import annotations

import re

import pytest

from cdk_llm_serving import (
    ConfigurationError,
    InstanceType,
    VllmPool,
    WeightFormat,
)
from cdk_llm_serving.planning.sizing import PlanningError
from cdk_llm_serving.vllm import Eagle3Speculation, MtpSpeculation, VllmConfig
from cdk_llm_serving.vllm.pool_strategy import derive_pool_config
from tests.support.builders import BASE, WEIGHTS, endpoint, new_stack, template_of


@pytest.mark.parametrize(
    ("instance_type", "fmt", "tp", "dp"),
    [
        ("ml.g6e.12xlarge", "bf16", 4, None),
        ("ml.g6e.48xlarge", "bf16", 8, None),
        ("ml.g6e.2xlarge", "int4", 1, None),
        ("ml.p5.48xlarge", "bf16", 8, None),
    ],
)
def test_derivation_per_instance_type(instance_type, fmt, tp, dp):
    planned = derive_pool_config(BASE, "gpt-oss-20b", instance_type, ["bf16", "int4"])
    assert (
        planned.weight_format,
        planned.config.tensor_parallel_size,
        planned.config.data_parallel_size,
    ) == (fmt, tp, dp)
    assert planned.config.served_model_name == f"gpt-oss-20b-{fmt}-tp{tp}"
    assert planned.config.enable_expert_parallel is (tp > 1)  # gpt-oss is MoE


def test_heads_limit_tensor_parallelism_and_leave_data_parallel_engines():
    from cdk_llm_serving.planning.models import ModelSpec

    odd = ModelSpec(
        name="odd",
        total_params_b=8,
        active_params_b=8,
        layers=32,
        attention_heads=12,
        kv_heads=4,
        head_dim=128,
        max_context=32768,
    )
    planned = derive_pool_config(
        VllmConfig(model="m", max_model_len=8192), odd, "ml.g6e.48xlarge", ["bf16"]
    )
    assert (planned.config.tensor_parallel_size, planned.config.data_parallel_size) == (4, 2)


def test_throughput_goal_picks_mtp_when_the_model_has_it_else_the_base_method():
    mtp = derive_pool_config(
        VllmConfig(model="m", max_model_len=32768),
        "deepseek-v3",
        "ml.p5en.48xlarge",
        ["fp8"],
        goal="throughput",
    )
    assert isinstance(
        mtp.config.speculative, MtpSpeculation
    ) and mtp.config.served_model_name.endswith("-mtp")
    eagle_base = BASE.with_changes(speculative=Eagle3Speculation(draft_model="/opt/ml/model/draft"))
    eagle = derive_pool_config(
        eagle_base, "gpt-oss-20b", "ml.g6e.12xlarge", ["bf16"], goal="throughput"
    )
    assert isinstance(eagle.config.speculative, Eagle3Speculation)
    assert (
        derive_pool_config(
            eagle_base, "gpt-oss-20b", "ml.g6e.12xlarge", ["bf16"]
        ).config.speculative
        is None
    )


def test_a_pool_that_fits_no_allowed_format():
    with pytest.raises(
        PlanningError, match="no allowed weight format of gpt-oss-20b fits one ml.g6.xlarge"
    ):
        derive_pool_config(BASE, "gpt-oss-20b", "ml.g6.xlarge", ["bf16"])


def test_identical_configurations_share_one_model():
    stack = new_stack()
    serving = endpoint(stack, ["ml.g6e.12xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge"])
    assert sorted(model.served_model_name for model in serving.models.values()) == [
        "gpt-oss-20b-bf16-tp4",
        "gpt-oss-20b-int4-tp1",
    ]
    pools = serving.endpoint.pools
    assert (
        pools[1].model is None and pools[2].model is not None
    )  # g6.12xlarge reuses the primary's config


def test_a_pool_with_its_own_config():
    stack = new_stack()
    own = VllmConfig(
        model="x",
        served_model_name="custom",
        tensor_parallel_size=2,
        data_parallel_size=4,
        max_model_len=8192,
    )
    serving = endpoint(
        stack,
        [
            "ml.g6e.12xlarge",
            VllmPool("ml.g6e.48xlarge", config=own, weight_format="bf16", max_concurrency=9),
        ],
    )
    assert serving.endpoint.pools[1].max_concurrency == 9
    env = stack.resolve(serving.endpoint.pools[1].model.cfn_model.primary_container)["environment"]
    assert (
        env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
        and env["SM_VLLM_DATA_PARALLEL_SIZE"] == "4"
        # the copy's name, then the owning construct's hash (served_names.config_file_name)
        and re.search(r"/served-names-custom-[0-9a-f]{8}\.yaml$", env["SM_VLLM_CONFIG"])
        and "SM_VLLM_SERVED_MODEL_NAME" not in env
    )


def test_every_problem_at_once():
    stack = new_stack()
    bad_own = VllmPool("ml.g6e.12xlarge", config=VllmConfig(model="x", tensor_parallel_size=3))
    with pytest.raises(ConfigurationError) as caught:
        endpoint(
            stack,
            ["ml.g6.xlarge", bad_own],
            weights={"bf16": WEIGHTS["bf16"]},
            config=BASE.with_changes(extra_flags={"enable-reasoning": True}),
        )
    problems = caught.value.problems
    assert [p.property for p in problems] == [
        "config.extra_flags['enable-reasoning']",
        "pools[0]",
        "pools[1]",
    ]
    assert "no allowed weight format of gpt-oss-20b fits one ml.g6.xlarge" in problems[1].allowed
    assert "tensor_parallel=3 must be one of [1, 2, 4]" in problems[2].allowed


def test_a_pinned_layout_that_does_not_fit_says_so_per_gpu():
    stack = new_stack()
    own = VllmConfig(model="x", tensor_parallel_size=2, data_parallel_size=2, max_model_len=8192)
    with pytest.raises(ConfigurationError) as caught:
        endpoint(stack, ["ml.g6e.12xlarge", VllmPool("ml.g6.12xlarge", config=own)])
    (problem,) = caught.value.problems
    assert (
        problem.property == "pools[1]"
        and "with tensor_parallel=2 each GPU holds 19.5 GiB of weights" in problem.allowed
    )


def test_config_is_required():
    with pytest.raises(ConfigurationError) as caught:
        endpoint(new_stack(), ["ml.g6e.12xlarge"], config=None)
    assert [p.property for p in caught.value.problems] == ["config"]


def test_weights_and_pools_take_typed_values():
    by_name = new_stack()
    endpoint(by_name, ["ml.g6e.12xlarge", VllmPool("ml.g6e.2xlarge")])
    typed = new_stack()
    endpoint(
        typed,
        [InstanceType.ML_G6E_12XLARGE, VllmPool(InstanceType.ML_G6E_2XLARGE)],
        weights={WeightFormat.BF16: WEIGHTS["bf16"], WeightFormat.INT4: WEIGHTS["int4"]},
    )
    assert template_of(typed) == template_of(by_name)


def test_a_misspelled_pool_type_is_named_with_the_closest():
    with pytest.raises(ConfigurationError) as caught:
        endpoint(new_stack(), ["ml.g6e.12xlarg"])
    (problem,) = caught.value.problems
    assert problem.property == "pools[0].instance_type" and "closest: ml.g6e.12xlarge" in (
        problem.allowed
    )


def test_the_catalog_among_the_endpoint_props_plans_the_pools():
    """The ``catalog`` prop is the one the pools are planned with and the endpoint's."""
    from cdk_llm_serving.planning import default_catalog

    priced = default_catalog().with_prices({"ml.g6e.12xlarge": 1.0})
    serving = endpoint(new_stack(), ["ml.g6e.12xlarge"], catalog=priced)
    assert serving.catalog is priced and serving.endpoint.catalog is priced
