"""The decode model against published measurements (``planning/data/measurements.json``).

Every recorded measurement (model, weight format, GPU, layout, concurrency, input/output
tokens, measured output tokens/s, source URL and date) must be matched by the planner
within the data file's factor, 2 either way. Why 2 is honest: the planner models a generic
engine at 50 % of peak HBM bandwidth and 40 % of tensor-core peak, while the measurements
come from NVIDIA-tuned TensorRT-LLM runs across engine versions; 2x separates "right
order" from "wrong arithmetic" (the bug this replaced was 6x optimistic for the 2.4T MoE).
The worst ratio at the time of writing is about 0.51 (Llama 3.3 70B FP8 on 2 x H100; 0.54
before the tensor-parallel all-reduce was modelled and the step's parts summed).
"""

from __future__ import annotations

import pytest

from cdk_llm_serving.planning.calibration import (
    calibration_factor,
    measurements,
    node_workload,
    own_layout_ratios,
    predict,
    predict_own_layout,
    ratios,
)
from cdk_llm_serving.planning.catalog import default_catalog
from cdk_llm_serving.planning.models import preset


@pytest.mark.parametrize("measurement", measurements(), ids=lambda m: m.id)
def test_planner_lands_within_the_stated_factor(measurement):
    ratio = predict(measurement) / measurement.tokens_per_second
    factor = calibration_factor()
    assert 1 / factor <= ratio <= factor, f"{measurement.id}: planner/measured = {ratio:.2f}"


def test_measurements_cover_dense_moe_and_three_gpu_generations():
    rows = measurements()
    assert len(rows) >= 8
    kinds = {preset(m.model).is_moe for m in rows}
    assert kinds == {True, False}
    generations = {default_catalog().get(m.instance_type).gpu.compute_capability[0] for m in rows}
    assert len(generations) >= 3  # Ampere/Ada (8.x), Hopper (9.0), Blackwell (10.0)
    for m in rows:
        assert m.source.startswith("https://") and m.date and m.tokens_per_second > 0


def test_worst_ratio_is_reported_honestly():
    """The worst ratio is the one this docstring and measurements.json's factor_reason state."""
    by_id = ratios()
    worst = min(by_id, key=lambda key: min(by_id[key], 1 / by_id[key]))
    assert worst == "llama-3.3-70b-h100-fp8"
    assert by_id[worst] == pytest.approx(0.51, abs=0.005)


# The same measurements with the planner choosing its own layout (objective tokens
# per dollar, one node, no latency target) at the measured workload, compared per GPU. The file
# is iterated, so measurements "hfcfg" adds are checked too. Targets: at least 80 % within 2x,
# none beyond 3x.
OWN_LAYOUT_WITHIN_2X = 0.8
OWN_LAYOUT_LIMIT = 3.0


@pytest.mark.parametrize("measurement", measurements(), ids=lambda m: m.id)
def test_own_layout_lands_within_3x(measurement):
    chosen = predict_own_layout(measurement)
    assert chosen.performance is not None
    ratio = own_layout_ratios()[measurement.id]
    assert 1 / OWN_LAYOUT_LIMIT <= ratio <= OWN_LAYOUT_LIMIT, (
        f"{measurement.id}: planner's own layout TP{chosen.tensor_parallel} x DP{chosen.data_parallel} "
        f"batch {chosen.performance.max_num_seqs}: planner/measured per GPU = {ratio:.2f}"
    )


def test_own_layout_at_least_80_percent_within_2x():
    by_id = own_layout_ratios()
    assert len(by_id) == len(measurements())
    within = [key for key, ratio in by_id.items() if 0.5 <= ratio <= 2.0]
    shown = ", ".join(f"{key} {ratio:.2f}" for key, ratio in sorted(by_id.items()))
    assert len(within) >= OWN_LAYOUT_WITHIN_2X * len(by_id), shown


def test_own_layout_uses_the_measured_workload():
    m = next(row for row in measurements() if row.concurrency is not None)
    workload = node_workload(m)
    gpus = default_catalog().get(m.instance_type).gpus
    assert workload.input_tokens == m.input_tokens and workload.output_tokens == m.output_tokens
    assert workload.concurrency == m.concurrency * gpus // m.tensor_parallel
    chosen = predict_own_layout(m)
    assert chosen.performance is not None
    assert chosen.performance.max_num_seqs * chosen.data_parallel <= workload.concurrency
