"""InferenceEndpointAlarms: an alarm per path of an operator endpoint (colocated workers;
prefill pods, decode pods and the KV transfer under P/D; the tiered KV cache), on the series the
pinned vLLM registers, each checked and unit-tested by promtool."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from aws_cdk import aws_aps as aps
from aws_cdk.assertions import Template

from cdk_llm_serving.errors import ConfigurationError
from cdk_llm_serving.hyperpod import InferenceEndpointAlarms
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.inference_features import InferenceKvCache, InferencePrefillDecode
from tests.support.builders import new_stack
from tests.support.hyperpod import (
    gpt_oss_120b_endpoint,
    pinned_vllm_metrics_source,
    single_node_groups,
)

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="no promtool on PATH (make promtool: Debian's prometheus package)",
)
PD = InferencePrefillDecode(
    prefill_instance_type="ml.p5.48xlarge", decode_instance_type="ml.p5en.48xlarge"
)


def _alarms(**props) -> InferenceEndpointAlarms:
    stack = new_stack()
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=single_node_groups()
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    endpoint = gpt_oss_120b_endpoint(stack, addons, **props)
    workspace = aps.CfnWorkspace(stack, "Workspace")
    return InferenceEndpointAlarms(
        stack, "Alarms", endpoint=endpoint, prometheus_workspace=workspace
    )


def _by_name(alarms: InferenceEndpointAlarms) -> dict[str, dict]:
    return {rule["alert"]: rule for rule in alarms.alarm_rules()}


def test_each_path_has_its_alarm():
    colocated = _by_name(_alarms(kv_cache=False))
    assert set(colocated) == {"InferenceQueueDepthHigh"}
    cached = _by_name(_alarms())  # the default KV cache brings its tier's alarm
    assert set(cached) == {"InferenceQueueDepthHigh", "InferenceKvCacheTierNoHits"}
    pd = _by_name(_alarms(prefill_decode=PD, kv_cache=InferenceKvCache.l1_only()))
    assert {name: rule["labels"]["path"] for name, rule in pd.items()} == {
        "InferencePrefillQueueDepthHigh": "prefill",
        "InferenceDecodeQueueDepthHigh": "decode",
        "InferenceDecodeKvCacheSaturated": "decode",
        "InferenceKvTransferFailing": "kv-transfer",
        "InferenceKvCacheTierNoHits": "kv-cache",
    }
    assert all(rule["labels"]["severity"] == "page" for rule in pd.values())


def test_every_series_is_one_the_pinned_vllm_registers():
    alarms = _alarms(prefill_decode=PD, kv_cache=InferenceKvCache.l1_only())
    source = pinned_vllm_metrics_source()
    names = {
        re.sub(r"_(total|sum|count|bucket)$", "", name)
        for rule in alarms.alarm_rules()
        for name in re.findall(r"vllm:[a-z_]+", rule["expr"])
    }
    assert "vllm:nixl_num_failed_transfers" in names and "vllm:kv_cache_usage_perc" in names
    for name in names:
        assert f'name="{name}"' in source, name


def test_the_rule_group_lands_in_the_workspace():
    alarms = _alarms(prefill_decode=PD)
    template = Template.from_stack(alarms.node.scope)  # type: ignore[arg-type]
    (namespace,) = template.find_resources("AWS::APS::RuleGroupsNamespace").values()
    assert namespace["Properties"]["Name"].endswith("-alerts")
    assert "InferenceKvTransferFailing" in namespace["Properties"]["Data"]


def test_bad_thresholds_are_refused_at_once():
    with pytest.raises(ConfigurationError) as raised:
        stack = new_stack()
        cluster = HyperPodEksCluster(
            stack, "HyperPod", kubernetes_version="1.33", instance_groups=single_node_groups()
        )
        addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
        InferenceEndpointAlarms(
            stack,
            "Alarms",
            endpoint=gpt_oss_120b_endpoint(stack, addons),
            prometheus_workspace=aps.CfnWorkspace(stack, "Workspace"),
            max_waiting_requests=0,
            kv_cache_saturation=1.5,
        )
    message = str(raised.value)
    assert "max_waiting_requests" in message and "kv_cache_saturation" in message


@needs_promtool
def test_promtool_fires_each_pd_alarm_on_its_path_only(tmp_path: Path):
    """40 requests waiting on the decode pod, 2 on the prefill pod; a decode pod's KV cache at
    97 %; 3 failed transfers a minute: the decode, KV-cache and transfer alarms fire, the
    prefill one does not; with lookups but no hits the tier alert fires after 30 minutes."""
    alarms = _alarms(prefill_decode=PD, kv_cache=InferenceKvCache.l1_only())
    name = alarms.endpoint.name
    (tmp_path / "rules.yaml").write_text(alarms.rule_groups())
    checked = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "rules.yaml")],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    labels = f'namespace="{alarms.endpoint.namespace}"'
    prefill, decode = f'pod="{name}-prefill-0",{labels}', f'pod="{name}-decode-0",{labels}'

    def firing(alert: str, path: str) -> dict:
        return {
            "exp_labels": {"severity": "page", "endpoint": name, "path": path},
            "exp_annotations": {"summary": _by_name(alarms)[alert]["annotations"]["summary"]},
        }

    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"vllm:num_requests_waiting{{{prefill}}}", "values": "2x60"},
                    {"series": f"vllm:num_requests_waiting{{{decode}}}", "values": "40x60"},
                    {"series": f"vllm:kv_cache_usage_perc{{{decode}}}", "values": "0.97x60"},
                    {
                        "series": f"vllm:nixl_num_failed_transfers_total{{{decode}}}",
                        "values": "0+3x60",
                    },
                    {
                        "series": f"vllm:external_prefix_cache_queries_total{{{decode}}}",
                        "values": "0+100x60",
                    },
                    {
                        "series": f"vllm:external_prefix_cache_hits_total{{{decode}}}",
                        "values": "0x60",
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "InferencePrefillQueueDepthHigh",
                        "exp_alerts": [],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "InferenceDecodeQueueDepthHigh",
                        "exp_alerts": [firing("InferenceDecodeQueueDepthHigh", "decode")],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "InferenceDecodeKvCacheSaturated",
                        "exp_alerts": [firing("InferenceDecodeKvCacheSaturated", "decode")],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "InferenceKvTransferFailing",
                        "exp_alerts": [firing("InferenceKvTransferFailing", "kv-transfer")],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "InferenceKvCacheTierNoHits",
                        "exp_alerts": [],
                    },
                    {
                        "eval_time": "50m",
                        "alertname": "InferenceKvCacheTierNoHits",
                        "exp_alerts": [firing("InferenceKvCacheTierNoHits", "kv-cache")],
                    },
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
