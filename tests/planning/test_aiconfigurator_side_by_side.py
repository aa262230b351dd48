"""The planner beside NVIDIA's AIConfigurator (bench/aiconfigurator_side_by_side.py).

The comparison runs on AIConfigurator's recorded results (bench/aiconfigurator_cases.json), so
it needs no AIConfigurator install; the recording itself is regenerated and compared when
``.venv/aiconfigurator`` exists (``make compare-aiconfigurator``: one case, or every case with
``AIC_ALL=1``, which that target sets).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from cdk_llm_serving.planning.catalog import default_catalog
from cdk_llm_serving.planning.models import preset, weight_format

BENCH = Path(__file__).resolve().parents[2] / "bench" / "aiconfigurator_side_by_side.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("aiconfigurator_side_by_side", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _bench()
RECORDED = bench.recorded()
CASES = {case.id: case for case in bench.CASES}


def test_every_case_is_recorded_with_its_command_and_layout():
    assert RECORDED["aiconfigurator_version"] == "0.12.0"
    recorded = {entry["aiconfigurator"]["id"]: entry for entry in RECORDED["cases"]}
    assert set(recorded) == set(CASES)
    for case_id, entry in recorded.items():
        case, aic = CASES[case_id], entry["aiconfigurator"]
        assert entry["case"] == json.loads(json.dumps(asdict(case)))  # the case as run
        assert (
            "--backend vllm" in aic["command"] and f"--system {case.aic_system}" in aic["command"]
        )
        gpus = aic["tensor_parallel"] * aic["pipeline_parallel"] * aic["data_parallel"]
        assert gpus * aic["replicas_per_node"] == case.gpus
        assert aic["tokens_per_second_per_gpu"] > 0 and aic["batch"] >= 1
        assert aic["ttft_ms"] <= case.ttft_s * 1000 and aic["tpot_ms"] <= case.tpot_ms


def test_cases_name_presets_and_instances_the_planner_knows():
    catalog = default_catalog()
    for case in CASES.values():
        preset(case.model)
        weight_format(case.weight_format)
        instance = catalog.get(case.instance_type)
        assert instance.gpus == case.gpus


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_the_planner_lands_within_1_5x_of_aiconfigurator(case_id):
    entry = next(e for e in RECORDED["cases"] if e["aiconfigurator"]["id"] == case_id)
    ours = bench.planner_side(CASES[case_id])
    theirs = entry["aiconfigurator"]["tokens_per_second_per_gpu"]
    ratio = ours["tokens_per_second_per_gpu"] / theirs
    within = 1 / bench.TARGET_RATIO <= ratio <= bench.TARGET_RATIO
    if entry.get("note"):  # a recorded, explained gap: must still be outside (a strict xfail)
        assert not within, (
            f"{case_id} is within {bench.TARGET_RATIO}x now ({ratio:.2f}): drop its note"
        )
        pytest.xfail(f"ratio {ratio:.2f}: {entry['note']}")
    assert within, f"{case_id}: planner {ours} vs AIConfigurator {entry['aiconfigurator']}"


@pytest.mark.skipif(
    not bench.aic_available(),
    reason="AIConfigurator is not installed in .venv/aiconfigurator (make compare-aiconfigurator)",
)
def test_aiconfigurator_reproduces_the_recorded_cases():
    assert bench.aic_version() == RECORDED["aiconfigurator_version"]
    ids = sorted(CASES) if os.environ.get("AIC_ALL") else ["llama-3.1-405b-fp8-h200"]
    recorded = {e["aiconfigurator"]["id"]: e["aiconfigurator"] for e in RECORDED["cases"]}
    for case_id in ids:
        assert bench.run_aiconfigurator(CASES[case_id]) == recorded[case_id], case_id
