"""vLLM metrics to Amazon Managed Prometheus: scraper, recording and alerting rules, alarms to SNS."""

from __future__ import annotations

import base64

import pytest
import yaml
from aws_cdk import Duration

from cdk_llm_serving import ConfigurationError
from tests.support.kubernetes_schemas import validate_core
from tests.support.template_helpers import flatten, only_resource, resources_of_type

FACTS_METRICS = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:generation_tokens_total",
)


@pytest.fixture(scope="session")
def hyperpod(reference_templates) -> dict:
    return reference_templates["ReferenceMoeHyperPod"]


def test_rules_record_the_slo_series_and_alarm_on_them(hyperpod):
    _, rules = only_resource(hyperpod, "AWS::APS::RuleGroupsNamespace")
    groups = yaml.safe_load(rules["Properties"]["Data"])["groups"]
    recorded = {r["record"]: r["expr"] for r in groups[0]["rules"]}
    assert (
        recorded["vllm:ttft_seconds:p99"]
        == "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
    )
    text = yaml.safe_dump(groups)
    for metric in FACTS_METRICS:
        assert metric in text, metric
    alerts = {r["alert"]: r for r in groups[1]["rules"]}
    assert alerts["VllmTtftP99High"]["expr"] == "vllm:ttft_seconds:p99 > 2"
    assert alerts["VllmQueueDepthHigh"]["expr"] == "vllm:requests_waiting > 32"
    assert (
        alerts["VllmKvCacheSaturated"]["expr"] == "vllm:kv_cache_usage > 0.95"
        and alerts["VllmKvCacheSaturated"]["for"] == "10m"
    )


def test_alarms_go_to_an_encrypted_topic(hyperpod):
    _, workspace = only_resource(hyperpod, "AWS::APS::Workspace")
    config = yaml.safe_load(
        yaml.safe_load(flatten(workspace["Properties"]["AlertManagerDefinition"]))[
            "alertmanager_config"
        ]
    )
    assert (
        config["route"]["receiver"] == "sns"
        and config["receivers"][0]["sns_configs"][0]["topic_arn"] == "TOKEN"
    )
    _, topic = only_resource(hyperpod, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    (policy,) = resources_of_type(hyperpod, "AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(s.get("Principal") == {"Service": "aps.amazonaws.com"} for s in statements)
    assert any(
        s["Effect"] == "Deny"
        and s.get("Condition", {}).get("Bool") == {"aws:SecureTransport": "false"}
        for s in statements
    )


def test_scraper_reads_only_the_leaders(hyperpod):
    _, scraper = only_resource(hyperpod, "AWS::APS::Scraper")
    config = yaml.safe_load(
        base64.b64decode(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"])
    )
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "vllm"]
    keep = {
        tuple(r["source_labels"]): r["regex"]
        for r in job["relabel_configs"]
        if r.get("action") == "keep"
    }
    assert keep[("__meta_kubernetes_pod_label_cdk_llm_serving_role",)] == "leader"
    assert keep[("__meta_kubernetes_pod_container_port_number",)] == "8000"
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["inference"]}}]
    eks_source = scraper["Properties"]["Source"]["EksConfiguration"]
    assert len(eks_source["SubnetIds"]) == 2 and len(eks_source["SecurityGroupIds"]) == 1


def test_scraper_gets_a_kubernetes_user_with_read_only_rights(hyperpod):
    entries = [
        v["Properties"]
        for v in resources_of_type(hyperpod, "AWS::EKS::AccessEntry").values()
        if v["Properties"].get("Username") == "aps-collector-user"
    ]
    assert len(entries) == 1 and "Fn::Join" in entries[0]["PrincipalArn"]
    import json

    (rbac,) = [
        v
        for k, v in resources_of_type(hyperpod, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if "ScraperRbac" in k
    ]
    objects = json.loads(flatten(rbac["Properties"]["Manifest"]))
    for obj in objects:
        validate_core(obj)
        for rule in obj.get("rules", []):
            assert set(rule["verbs"]) <= {"describe", "get", "list", "watch"}


def test_validation():
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("Obs")
    cluster, addons, store = small_cluster(stack)
    service = deepseek_service(stack, cluster, addons, store)
    with pytest.raises(ConfigurationError) as caught:
        VllmObservability(
            stack,
            "Obs",
            service=service,
            ttft_p99_threshold=Duration.seconds(0),
            max_waiting_requests=0,
            kv_cache_saturation=1.5,
            scrape_interval=Duration.seconds(5),
        )
    assert [p.property for p in caught.value.problems] == [
        "ttft_p99_threshold",
        "max_waiting_requests",
        "kv_cache_saturation",
        "scrape_interval",
    ]
