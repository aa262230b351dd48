"""``VllmConfig``'s KV-cache offload fields against vLLM 0.32's own parser and config rules."""

from __future__ import annotations

import pytest

from cdk_llm_serving.vllm import VllmConfig, VllmConfigError


def test_offload_renders_vllms_flags_in_both_renderings():
    config = VllmConfig(model="m", kv_offloading_size=1059, kv_offloading_backend="native")
    args = config.to_args()
    assert args[args.index("--kv-offloading-size") + 1] == "1059"
    assert args[args.index("--kv-offloading-backend") + 1] == "native"
    env = config.to_sagemaker_environment()
    assert env["SM_VLLM_KV_OFFLOADING_SIZE"] == "1059"


def test_no_offload_renders_nothing():
    assert not any("offloading" in arg for arg in VllmConfig(model="m").to_args())


@pytest.mark.parametrize(
    ("changes", "prop", "fragment"),
    [
        ({"kv_offloading_size": 0}, "kv_offloading_size", "above 0"),
        ({"kv_offloading_size": float("inf")}, "kv_offloading_size", "finite"),
        (
            {"kv_offloading_size": 8, "kv_offloading_backend": "mooncake"},
            "kv_offloading_backend",
            "native, lmcache",
        ),
        ({"kv_offloading_backend": "native"}, "kv_offloading_backend", "needs kv_offloading_size"),
    ],
)
def test_offload_values_vllm_refuses_or_ignores_are_problems(changes, prop, fragment):
    with pytest.raises(VllmConfigError) as caught:
        VllmConfig(model="m", **changes).validate()
    (problem,) = caught.value.problems
    assert problem.property == prop and fragment in problem.allowed
