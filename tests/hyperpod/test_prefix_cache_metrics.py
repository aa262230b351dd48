"""Prefix-cache hit rate and host-memory KV offload traffic: recorded in Amazon
Managed Prometheus from vLLM 0.32's counters, checked by promtool, drawn on the dashboard."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cdk_llm_serving.hyperpod.observability import (
    OFFLOAD_HIT_RATE_RULE,
    OFFLOAD_LOAD_RATE_RULE,
    OFFLOAD_STORE_RATE_RULE,
    PREFIX_CACHE_HIT_RATE_RULE,
)
from tests.support.template_helpers import flatten, only_resource, resources_of_type

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="no promtool on PATH (make promtool: Debian's prometheus package)",
)


@pytest.fixture(scope="module")
def rules_text(reference_templates) -> str:
    _, rules = only_resource(
        reference_templates["ReferenceMoeHyperPod"], "AWS::APS::RuleGroupsNamespace"
    )
    return str(rules["Properties"]["Data"])


def test_the_new_series_are_recorded_from_vllms_counters(rules_text):
    (recording, _) = yaml.safe_load(rules_text)["groups"]
    recorded = {r["record"]: r["expr"] for r in recording["rules"]}
    assert recorded[PREFIX_CACHE_HIT_RATE_RULE] == (
        "sum(rate(vllm:prefix_cache_hits_total[5m])) / sum(rate(vllm:prefix_cache_queries_total[5m]))"
    )
    assert "vllm:external_prefix_cache_hits_total" in recorded[OFFLOAD_HIT_RATE_RULE]
    assert recorded[OFFLOAD_LOAD_RATE_RULE] == "sum(rate(vllm:kv_offload_load_bytes_total[5m]))"
    assert recorded[OFFLOAD_STORE_RATE_RULE] == "sum(rate(vllm:kv_offload_store_bytes_total[5m]))"


@needs_promtool
def test_promtool_computes_the_hit_rate_and_offload_traffic_from_two_leaders(
    rules_text, tmp_path: Path
):
    """Two leaders' counters over 10 minutes: 300 of 1000 prompt tokens per minute hit the GPU
    prefix cache on each, 200 of 400 the host-memory offload, 6 MB/min loaded, 12 MB/min stored."""
    (tmp_path / "rules.yaml").write_text(rules_text)
    checked = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "rules.yaml")],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    def series(name: str, per_minute: int) -> list[dict[str, str]]:
        return [
            {"series": f'{name}{{pod="leader-{i}"}}', "values": f"0+{per_minute}x10"}
            for i in (0, 1)
        ]

    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    *series("vllm:prefix_cache_queries_total", 1000),
                    *series("vllm:prefix_cache_hits_total", 300),
                    *series("vllm:external_prefix_cache_queries_total", 400),
                    *series("vllm:external_prefix_cache_hits_total", 200),
                    *series("vllm:kv_offload_load_bytes_total", 6_000_000),
                    *series("vllm:kv_offload_store_bytes_total", 12_000_000),
                ],
                "promql_expr_test": [
                    {
                        "expr": PREFIX_CACHE_HIT_RATE_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": PREFIX_CACHE_HIT_RATE_RULE, "value": 0.3}],
                    },
                    {
                        "expr": OFFLOAD_HIT_RATE_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": OFFLOAD_HIT_RATE_RULE, "value": 0.5}],
                    },
                    {
                        "expr": OFFLOAD_LOAD_RATE_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": OFFLOAD_LOAD_RATE_RULE, "value": 200000}],
                    },
                    {
                        "expr": OFFLOAD_STORE_RATE_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": OFFLOAD_STORE_RATE_RULE, "value": 400000}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_draws_them(reference_templates):
    dashboards = resources_of_type(
        reference_templates["ReferenceMoeHyperPod"], "AWS::CloudWatch::Dashboard"
    )
    body = "".join(flatten(d["Properties"]["DashboardBody"]) for d in dashboards.values())
    for rule in (
        PREFIX_CACHE_HIT_RATE_RULE,
        OFFLOAD_HIT_RATE_RULE,
        OFFLOAD_LOAD_RATE_RULE,
        OFFLOAD_STORE_RATE_RULE,
    ):
        assert rule in body, rule
