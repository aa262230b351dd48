"""vllm.pool_strategy: one ``Goal`` type shared with the planner, and what each goal derives."""

from __future__ import annotations

import typing

import pytest

from cdk_llm_serving.planning import goals, pool_file
from cdk_llm_serving.vllm import VllmConfig, pool_strategy
from cdk_llm_serving.vllm.pool_strategy import derive_pool_config

BASE = VllmConfig(model="ignored", served_model_name="gpt-oss-20b", max_model_len=32768)


def test_one_goal_type_for_the_pool_file_and_the_pool_strategy():
    assert pool_strategy.Goal is goals.Goal is pool_file.Goal
    assert typing.get_args(goals.Goal) == goals.GOALS == ("cost", "latency", "throughput")


@pytest.mark.parametrize(
    ("instance_type", "formats", "chosen"),
    [
        # L40S runs int4 natively: the most compact copy that fits.
        ("ml.g6e.12xlarge", ["bf16", "fp8", "int4"], "int4"),
        # H100 has no native MXFP4 kernels: FP8 (native) before MXFP4 (emulated).
        ("ml.p5.48xlarge", ["bf16", "mxfp4", "fp8"], "fp8"),
        # B200 runs MXFP4 natively.
        ("ml.p6-b200.48xlarge", ["bf16", "fp8", "mxfp4"], "mxfp4"),
    ],
)
def test_cost_tries_the_most_compact_format_native_kernels_first(instance_type, formats, chosen):
    cost = derive_pool_config(BASE, "gpt-oss-20b", instance_type, formats, goal="cost")
    assert cost.weight_format == chosen and cost.config.speculative is None
    latency = derive_pool_config(BASE, "gpt-oss-20b", instance_type, formats, goal="latency")
    assert latency.weight_format == formats[0]


def test_cost_takes_an_emulated_format_only_when_no_native_one_fits():
    formats = ["mxfp4", "bf16"]
    # Eight H100s hold BF16 weights: native kernels win over the more compact MXFP4.
    on_h100 = derive_pool_config(BASE, "gpt-oss-20b", "ml.p5.48xlarge", formats, goal="cost")
    assert on_h100.weight_format == "bf16"
    # One L4 (22 GiB) does not hold gpt-oss-20b in BF16: MXFP4, emulated, is what fits.
    on_l4 = derive_pool_config(BASE, "gpt-oss-20b", "ml.g6.xlarge", formats, goal="cost")
    assert on_l4.weight_format == "mxfp4"
