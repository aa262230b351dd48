"""InferenceEndpointDashboard's KV-cache, routing and P/D row: its series are the ones the
pinned vLLM registers (read from the real package in ``.venv/vllm``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from aws_cdk import aws_aps as aps
from aws_cdk.assertions import Template

from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.inference_dashboard import (
    InferenceEndpointDashboard,
    cache_panels,
)
from cdk_llm_serving.hyperpod.inference_features import InferenceKvCache, InferencePrefillDecode
from tests.support.builders import new_stack
from tests.support.hyperpod import (
    gpt_oss_120b_endpoint,
    pinned_vllm_metrics_source,
    single_node_groups,
)

ROOT = Path(__file__).resolve().parents[2]


def _endpoint(stack, **props):
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=single_node_groups()
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    return gpt_oss_120b_endpoint(stack, addons, **props)


def _pd() -> InferencePrefillDecode:
    return InferencePrefillDecode(
        prefill_instance_type="ml.p5en.48xlarge", decode_instance_type="ml.p5.48xlarge"
    )


def test_every_series_is_one_the_pinned_vllm_registers():
    stack = new_stack()
    panels = cache_panels(
        _endpoint(stack, prefill_decode=_pd(), kv_cache=InferenceKvCache.l1_only())
    )
    source = pinned_vllm_metrics_source()
    names = {
        re.sub(r"_(total|sum|count|bucket)$", "", name)
        for panel in panels
        for name in re.findall(r"vllm:[a-z_]+", panel.query)
    }
    assert names == {
        "vllm:prefix_cache_hits",
        "vllm:prefix_cache_queries",
        "vllm:external_prefix_cache_hits",
        "vllm:external_prefix_cache_queries",
        "vllm:num_requests_waiting",
        "vllm:nixl_bytes_transferred",
        "vllm:nixl_num_failed_transfers",
        "vllm:nixl_xfer_time_seconds",
        "vllm:prompt_tokens_cached_by_source",
        "vllm:prompt_tokens_by_source",
    }
    for name in names:
        assert f'name="{name}"' in source, name
    assert 'name="vllm:no_such_series"' not in source  # the check can fail


def test_the_row_draws_from_the_workspace_only_when_given():
    stack = new_stack()
    endpoint = _endpoint(stack)
    InferenceEndpointDashboard(stack, "Plain", endpoint=endpoint)
    workspace = aps.CfnWorkspace(stack, "Workspace")
    InferenceEndpointDashboard(
        stack, "WithCache", endpoint=endpoint, prometheus_workspace=workspace
    )
    template = Template.from_stack(stack)
    bodies = {
        logical: json.dumps(stack.resolve(resource["Properties"]["DashboardBody"]))
        for logical, resource in template.find_resources("AWS::CloudWatch::Dashboard").items()
    }
    (plain,) = [b for k, b in bodies.items() if k.startswith("Plain")]
    (cached,) = [b for k, b in bodies.items() if k.startswith("WithCache")]
    assert "prefix_cache_hits" not in plain
    assert "Tiered KV-cache hit rate" in cached and "external_prefix_cache_hits" in cached
    assert "nixl" not in cached  # no P/D, no transfer chart
    functions = template.find_resources("AWS::Lambda::Function")
    assert sum("WithCache" in logical for logical in functions) == 1
    assert not any(logical.startswith("Plain") for logical in functions)


def test_under_prefill_decode_each_role_has_its_own_queue_chart():
    stack = new_stack()
    panels = {p.title: p.query for p in cache_panels(_endpoint(stack, prefill_decode=_pd()))}
    prefill = panels["Requests waiting on the prefill pods"]
    decode = panels["Requests waiting on the decode pods"]
    assert 'pod=~".*prefill.*"' in prefill and 'pod=~".*decode.*"' in decode
    assert "external_kv_transfer" not in decode  # the source is a label, summed by
    assert "by (source)" in panels["Decode pods' prompt tokens: from prefill vs recomputed"]
    colocated = {p.title for p in cache_panels(_endpoint(new_stack()))}
    assert not any("prefill pods" in title or "NIXL" in title for title in colocated)
