"""Cold-start estimates, timeouts, and cost per hour and per million tokens."""

from __future__ import annotations

import pytest

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.planning.cold_start import estimate_cold_start
from cdk_llm_serving.planning.cost import active_weight_bytes, estimate_cost
from cdk_llm_serving.planning.decode import COLLECTIVE_LATENCY_S, LINK_EFFICIENCY
from cdk_llm_serving.planning.models import preset, weight_format
from cdk_llm_serving.planning.sizing import plan


def test_download_path_copies_everything_to_every_instance():
    estimate = estimate_cold_start(100e9, "s3_download", nodes=2)
    assert estimate.download_seconds == pytest.approx(100e9 / 0.5e9)
    assert estimate.load_seconds == pytest.approx(100e9 / 2e9)
    assert estimate.total_seconds == pytest.approx(200 + 50 + 180)
    assert estimate.download_timeout_seconds == 600  # 400 s estimate, raised to the floor


def test_streaming_paths_load_only_the_node_shard():
    one, two = (
        estimate_cold_start(1000e9, "fsx_lustre", nodes=1),
        estimate_cold_start(1000e9, "fsx_lustre", nodes=2),
    )
    assert one.download_seconds == 0 and two.load_seconds == pytest.approx(one.load_seconds / 2)


def test_timeouts_have_a_floor_and_scale_with_the_safety_factor():
    small = estimate_cold_start(10e9, "s3_download")
    assert small.download_timeout_seconds == 600 and small.startup_timeout_seconds == 600
    large = estimate_cold_start(700e9, "s3_download")
    assert large.download_timeout_seconds == 2800
    assert large.startup_timeout_seconds == (350 + 180) * 2


def test_unknown_loading_path():
    with pytest.raises(
        ConfigurationError, match="path = 'ftp': loading paths must be one of s3_download"
    ):
        estimate_cold_start(1e9, "ftp")


def test_cost_uses_the_roofline_formula():
    result = plan("llama-3.1-405b", "fp8", "ml.p5.48xlarge", max_context=131072)
    cost = estimate_cost(result, batch=16, context_tokens=2048)
    bandwidth = 8 * 3.35e12 * 0.5
    memory = (
        active_weight_bytes(preset("llama-3.1-405b"), weight_format("fp8"))
        + 16 * 2048 * result.kv_bytes_per_token
    ) / bandwidth
    # plus two tensor-parallel all-reduces per layer (126) of 16 tokens x 16384 x 2 bytes, a
    # ring over TP8 moving 2 x 7/8 of it per GPU over NVLink (450 GB/s per direction)
    message = 16 * 16384 * 2
    all_reduce = 2 * 126 * (COLLECTIVE_LATENCY_S + 2 * 7 / 8 * message / (450e9 * LINK_EFFICIENCY))
    step = memory + all_reduce
    assert cost.output_tokens_per_second == pytest.approx(16 / step)
    assert cost.fleet_price_per_hour == pytest.approx(113.07)
    assert cost.price_per_million_output_tokens == pytest.approx(113.07 / (16 / step * 3600) * 1e6)


def test_cost_with_a_measured_throughput_and_replicas():
    result = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    cost = estimate_cost(result, replicas=2, output_tokens_per_second=5000)
    assert cost.fleet_price_per_hour == pytest.approx(142.0 * 2 * 2)
    assert cost.price_per_million_output_tokens == pytest.approx(568.0 / (5000 * 3600) * 1e6)
    assert cost.throughput_source == "given" and "estimated price" in cost.price_source


def test_moe_reads_only_active_parameters():
    spec, fmt = preset("deepseek-v3"), weight_format("fp8")
    assert active_weight_bytes(spec, fmt) == pytest.approx((37.0 - 1.9) * 1e9 + 1.9 * 2e9)
