"""The vLLM dashboard: CloudWatch custom widgets drawing PromQL from Amazon Managed Prometheus."""

from __future__ import annotations

import importlib.util
import json
import urllib.parse
import xml.etree.ElementTree as ET

import pytest
from botocore.credentials import Credentials

from cdk_llm_serving.core.promql_charts import CHART_CODE
from cdk_llm_serving.hyperpod.dashboard import PANELS
from tests.support.template_helpers import actions_of, flatten, policy_statements


def widget_module():
    spec = importlib.util.spec_from_file_location("amp_widget", CHART_CODE / "index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "vllm:ttft_seconds:p99"},
                "values": [[1700000000, "0.8"], [1700000060, "1.4"], [1700000120, "2.6"]],
            }
        ],
    },
}


def test_render_draws_the_series_and_the_alert_threshold():
    svg = widget_module().render_svg(
        MATRIX, title="Time to first token p99", unit=" s", threshold=2.0, width=500, height=250
    )
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.attrib["width"] == "500"
    (polyline,) = root.iter(f"{ns}polyline")
    assert len(polyline.attrib["points"].split()) == 3
    dashed = [line for line in root.iter(f"{ns}line") if line.attrib.get("stroke-dasharray")]
    assert len(dashed) == 1
    assert "Time to first token p99" in "".join(root.itertext())


def test_render_without_data_says_so():
    svg = widget_module().render_svg({"data": {"result": []}}, title="KV-cache usage")
    assert "no data in this time range" in svg
    ET.fromstring(svg)


def test_query_is_a_sigv4_signed_prometheus_range_query():
    request = widget_module().signed_query_request(
        "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-123/",
        "us-west-2",
        "vllm:requests_waiting",
        1700000000,
        1700003600,
        60,
        credentials=Credentials("AKIAEXAMPLEEXAMPLE00", "example"),
    )
    parsed = urllib.parse.urlparse(request.full_url)
    assert parsed.path == "/workspaces/ws-123/api/v1/query_range"
    assert urllib.parse.parse_qs(parsed.query) == {
        "query": ["vllm:requests_waiting"],
        "start": ["1700000000.000"],
        "end": ["1700003600.000"],
        "step": ["60"],
    }
    authorization = request.get_header("Authorization")
    assert (
        authorization.startswith("AWS4-HMAC-SHA256")
        and "/us-west-2/aps/aws4_request" in authorization
    )


def test_handler_describes_itself():
    assert "PromQL" in widget_module().handler({"describe": True})


@pytest.fixture(scope="session")
def hyperpod(reference_templates) -> dict:
    return reference_templates["ReferenceMoeHyperPod"]


def test_dashboard_has_a_custom_widget_per_slo_series_with_alert_thresholds(hyperpod):
    (dashboard,) = [
        v
        for k, v in hyperpod["Resources"].items()
        if v["Type"] == "AWS::CloudWatch::Dashboard" and k.startswith("Dashboard")
    ]
    body = json.loads(flatten(dashboard["Properties"]["DashboardBody"]))
    custom = [w["properties"] for w in body["widgets"] if w["type"] == "custom"]
    assert [w["params"]["query"] for w in custom] == [query for _, query, _, _ in PANELS]
    thresholds = {w["params"]["query"]: w["params"].get("threshold") for w in custom}
    assert (
        thresholds["vllm:ttft_seconds:p99"] == 2
        and thresholds["vllm:requests_waiting"] == 32
        and thresholds["vllm:kv_cache_usage"] == 0.95
    )


def test_widget_function_may_only_query_its_workspace(hyperpod):
    (fn,) = [
        v
        for k, v in hyperpod["Resources"].items()
        if v["Type"] == "AWS::Lambda::Function" and k.startswith("DashboardWidget")
    ]
    assert fn["Properties"]["Runtime"] == "python3.14"
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = policy_statements(hyperpod, role_id)
    assert {a for s in statements for a in actions_of(s)} == {
        "aps:QueryMetrics",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    }
    assert "ManagedPolicyArns" not in hyperpod["Resources"][role_id]["Properties"]
