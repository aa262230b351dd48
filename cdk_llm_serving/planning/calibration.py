"""Published throughput measurements and what the planner predicts for each (``data/measurements.json``).

Prediction / measurement stays within the data file's ``factor`` either way, for the measured
layout (``predict``) and for the planner's own (``predict_own_layout``; docs/design/planner.md).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from .catalog import Catalog, default_catalog, load_data
from .decode import Workload
from .sizing import Plan, plan
from .throughput import saturated_tokens_per_second


@dataclass(frozen=True)
class Measurement:
    id: str
    model: str
    weight_format: str
    kv_cache_dtype: str
    instance_type: str
    gpu: str
    layout: str
    tensor_parallel: int
    concurrency: int | None
    input_tokens: int
    output_tokens: int
    tokens_per_second: float
    per: str
    engine: str
    source: str
    date: str

    @property
    def workload(self) -> Workload:
        return Workload(self.input_tokens, self.output_tokens)


@functools.cache
def _data() -> dict[str, Any]:
    return load_data("measurements.json")


def measurements() -> tuple[Measurement, ...]:
    return tuple(Measurement(**row) for row in _data()["measurements"])


def calibration_factor() -> float:
    """Most the planner may be off, either way, from any recorded measurement."""
    return float(_data()["factor"])


def predict(measurement: Measurement, catalog: Catalog | None = None) -> float:
    """The planner's replica tokens/s for the measured layout, batch and token lengths."""
    laid_out = plan(
        measurement.model,
        measurement.weight_format,
        measurement.instance_type,
        max_context=measurement.input_tokens + measurement.output_tokens,
        kv_cache_dtype=measurement.kv_cache_dtype,
        tensor_parallel=measurement.tensor_parallel,
        max_nodes=1,
        catalog=catalog,
    )
    return saturated_tokens_per_second(
        laid_out, measurement.workload, catalog, batch=measurement.concurrency
    )


def ratios(catalog: Catalog | None = None) -> dict[str, float]:
    """Prediction / measurement for every recorded measurement, by id."""
    return {m.id: predict(m, catalog) / m.tokens_per_second for m in measurements()}


def node_workload(measurement: Measurement, catalog: Catalog | None = None) -> Workload:
    """The measured workload for a whole node: a measured concurrency per replica scaled to
    the node's GPUs (``None`` = a maximum-load run, no concurrency cap)."""
    concurrency = None
    if measurement.concurrency is not None:
        gpus = (catalog or default_catalog()).get(measurement.instance_type).gpus
        concurrency = measurement.concurrency * gpus // measurement.tensor_parallel
    return Workload(measurement.input_tokens, measurement.output_tokens, concurrency=concurrency)


def predict_own_layout(measurement: Measurement, catalog: Catalog | None = None) -> Plan:
    """The planner choosing its own layout (objective tokens per dollar, one node, no latency
    target: the measurements are maximum-throughput runs) at the measured workload and KV dtype."""
    return plan(
        measurement.model,
        measurement.weight_format,
        measurement.instance_type,
        kv_cache_dtype=measurement.kv_cache_dtype,
        workload=node_workload(measurement, catalog),
        max_nodes=1,
        catalog=catalog,
    )


def own_layout_ratios(catalog: Catalog | None = None) -> dict[str, float]:
    """Per GPU: the planner's tokens/s with its own layout / the measured tokens/s, by id."""
    found = {}
    for m in measurements():
        chosen = predict_own_layout(m, catalog)
        assert chosen.performance is not None
        measured_per_gpu = m.tokens_per_second / m.tensor_parallel
        found[m.id] = chosen.performance.output_tokens_per_second_per_gpu / measured_per_gpu
    return found
