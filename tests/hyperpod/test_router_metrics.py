"""The prefix-aware router's metrics: scraped from the routers' port, recorded in
Amazon Managed Prometheus (checked and evaluated by promtool), drawn on the dashboard; none of
it without a router."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_llm_serving.hyperpod import VllmDashboard, VllmObservability
from cdk_llm_serving.hyperpod.observability import (
    ROUTER_HEALTHY_RULE,
    ROUTER_PREFIX_HIT_RULE,
    ROUTER_REQUESTS_RULE,
)
from cdk_llm_serving.hyperpod.prefix_routing import ROUTER_METRICS_PORT
from tests.support.builders import new_stack
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.template_helpers import flatten, only_resource, resources_of_type

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="no promtool on PATH (make promtool: Debian's prometheus package)",
)
RULES = (ROUTER_REQUESTS_RULE, ROUTER_PREFIX_HIT_RULE, ROUTER_HEALTHY_RULE)


def _template(routing: bool) -> dict:
    stack = new_stack("RouterMetrics")
    cluster, addons, store = small_cluster(stack, gpu_count=3)
    service = deepseek_service(stack, cluster, addons, store, replicas=2, routing=routing)
    observability = VllmObservability(stack, "Observability", service=service)
    VllmDashboard(stack, "Dashboard", observability=observability)
    return Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def routed() -> dict:
    return _template(True)


def _rules_text(template: dict) -> str:
    _, rules = only_resource(template, "AWS::APS::RuleGroupsNamespace")
    return str(rules["Properties"]["Data"])


def _scrape_jobs(template: dict) -> list[dict]:
    _, scraper = only_resource(template, "AWS::APS::Scraper")
    import base64

    blob = scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"]
    return yaml.safe_load(base64.b64decode(blob))["scrape_configs"]


def test_the_routers_port_is_scraped(routed):
    jobs = {job["job_name"]: job for job in _scrape_jobs(routed)}
    router = jobs["vllm-router"]
    kept = {
        tuple(r["source_labels"]): r.get("regex")
        for r in router["relabel_configs"]
        if r.get("action") == "keep"
    }
    assert kept[("__meta_kubernetes_pod_container_port_number",)] == str(ROUTER_METRICS_PORT)
    assert kept[("__meta_kubernetes_pod_label_app_kubernetes_io_name",)].endswith("-router")


def test_without_a_router_nothing_changes():
    template = _template(False)
    assert [job["job_name"] for job in _scrape_jobs(template)] == ["vllm", "kubelet"]
    assert not any(rule in _rules_text(template) for rule in RULES)


@needs_promtool
def test_promtool_computes_the_router_series(routed, tmp_path: Path):
    """Two routers over 10 minutes: 60 and 30 requests a minute to leaders 0 and 1; of 90
    cache-aware decisions a minute, 54 found the prefix; leader 2 does not exist (health 0)."""
    (tmp_path / "rules.yaml").write_text(_rules_text(routed))
    checked = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    workers = [f"https://ds-{i}.ds.inference.svc:8000" for i in range(3)]
    series = []
    for pod in ("router-a", "router-b"):
        for worker, per_minute in zip(workers, (30, 15, 0), strict=True):
            labels = f'pod="{pod}",worker="{worker}"'
            series.append(
                {
                    "series": f"vllm_router_processed_requests_total{{{labels}}}",
                    "values": f"0+{per_minute}x10",
                }
            )
            health = "0x10" if per_minute == 0 else "1x10"
            series.append({"series": f"vllm_router_worker_health{{{labels}}}", "values": health})
        for outcome, per_minute in (("prefix_hit", 27), ("prefix_miss", 18)):
            labels = f'pod="{pod}",policy="cache_aware",stage="regular",outcome="{outcome}"'
            series.append(
                {
                    "series": f"vllm_router_prefix_routing_decisions_total{{{labels}}}",
                    "values": f"0+{per_minute}x10",
                }
            )
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": ROUTER_REQUESTS_RULE,
                        "eval_time": "10m",
                        "exp_samples": [
                            {
                                "labels": f'{ROUTER_REQUESTS_RULE}{{worker="{workers[0]}"}}',
                                "value": 1.0,
                            },
                            {
                                "labels": f'{ROUTER_REQUESTS_RULE}{{worker="{workers[1]}"}}',
                                "value": 0.5,
                            },
                            {
                                "labels": f'{ROUTER_REQUESTS_RULE}{{worker="{workers[2]}"}}',
                                "value": 0.0,
                            },
                        ],
                    },
                    {
                        "expr": ROUTER_PREFIX_HIT_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": ROUTER_PREFIX_HIT_RULE, "value": 0.6}],
                    },
                    {
                        "expr": ROUTER_HEALTHY_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": ROUTER_HEALTHY_RULE, "value": 2}],
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


def test_the_dashboard_draws_them(routed):
    dashboards = resources_of_type(routed, "AWS::CloudWatch::Dashboard")
    body = "".join(flatten(d["Properties"]["DashboardBody"]) for d in dashboards.values())
    for rule in RULES:
        assert rule in body, rule
