"""Alarms and dashboard of the reference pool endpoint, and their validation."""

from __future__ import annotations

import importlib.util
import json

import pytest
from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3
from botocore.credentials import Credentials

from cdk_llm_serving import (
    AsyncInference,
    ConfigurationError,
    ContainerImage,
    InstancePool,
    InstancePoolEndpoint,
    InstanceType,
    ModelData,
    PoolEndpointAlarms,
    PoolEndpointDashboard,
    VllmConfig,
    VllmPoolEndpoint,
)
from cdk_llm_serving.core.promql_charts import CHART_CODE
from tests.support.builders import IMAGE, new_stack, pool_endpoint, sized_pools, template_of
from tests.support.linting import lint_template
from tests.support.metric_math import evaluate_queries
from tests.support.template_helpers import (
    actions_of,
    flatten,
    only_resource,
    policy_statements,
    resources_of_type,
)


def alarm(template: dict, prefix: str) -> dict:
    (found,) = [
        r["Properties"]
        for k, r in resources_of_type(template, "AWS::CloudWatch::Alarm").items()
        if k.startswith(prefix)
    ]
    return found


def pool_types(template: dict) -> list[str]:
    config = only_resource(template, "AWS::SageMaker::EndpointConfig")[1]["Properties"]
    (variant,) = config["ProductionVariants"]
    return [pool["InstanceType"] for pool in variant["InstancePools"]]


def per_pool_stats(metrics: list[dict], metric_name: str) -> dict[str, dict]:
    """InstanceType -> MetricStat of ``metric_name`` among an alarm's queries."""
    found = {}
    for query in metrics:
        stat = query.get("MetricStat")
        if stat and stat["Metric"]["MetricName"] == metric_name:
            dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
            found[dims.get("InstanceType")] = stat
    return found


def test_error_rate_and_latency_alarms_read_the_pools_series(pool_template):
    """With pools AWS documents the per-InstanceType series; the two-dimension one is
    UNCONFIRMED, so the variant's totals are metric math over the pools'."""
    types = pool_types(pool_template)
    error_rate = alarm(pool_template, "AlarmsErrorRate")
    assert error_rate["Threshold"] == 0.05 and error_rate["DatapointsToAlarm"] == 3
    final = [m for m in error_rate["Metrics"] if m.get("ReturnData", True) and "Expression" in m]
    assert final[0]["Expression"] == (
        "IF(FILL(invocations, 0) > 0, FILL(errors, 0) / invocations, 0)"
    )
    for metric_name in ("Invocations", "Invocation5XXErrors"):
        stats = per_pool_stats(error_rate["Metrics"], metric_name)
        assert set(stats) == set(types) and {s["Stat"] for s in stats.values()} == {"Sum"}
    # 3 of 40 requests failed on the primary, 1 of 10 on a fallback; a third pool is empty.
    values = {}
    for query in error_rate["Metrics"]:
        stat = query.get("MetricStat")
        if stat:
            dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
            per_type = {
                "Invocations": {types[0]: 40.0, types[1]: 10.0},
                "Invocation5XXErrors": {types[0]: 3.0, types[1]: 1.0},
            }[stat["Metric"]["MetricName"]]
            values[query["Id"]] = per_type.get(dims["InstanceType"])
    assert evaluate_queries(error_rate["Metrics"], values) == pytest.approx(4 / 50)
    latency = alarm(pool_template, "AlarmsLatencyP99")
    assert latency["Threshold"] == 60_000_000
    (worst,) = [m for m in latency["Metrics"] if "Expression" in m]
    assert worst["Expression"].startswith("MAX([")
    stats = per_pool_stats(latency["Metrics"], "ModelLatency")
    assert set(stats) == set(types) and {s["Stat"] for s in stats.values()} == {"p99"}


def test_rollback_alarms_read_the_pools_series(pool_template):
    types = pool_types(pool_template)
    alarms = resources_of_type(pool_template, "AWS::CloudWatch::Alarm")
    for prefix, metric_name in (
        ("RollbackOnErrors", "Invocation5XXErrors"),
        ("RollbackOnLatency", "ModelLatency"),
    ):
        (found,) = [a["Properties"] for k, a in alarms.items() if prefix in k]
        assert set(per_pool_stats(found["Metrics"], metric_name)) == set(types)


def test_fallback_alarms_watch_each_non_primary_pool_for_an_hour(pool_template):
    for priority, instance_type in ((2, "ml.g6.12xlarge"), (3, "ml.g6e.2xlarge")):
        fallback = alarm(pool_template, f"AlarmsRunningOnFallback{priority}")
        assert fallback["EvaluationPeriods"] == 12 and fallback["Threshold"] == 0
        stats = [m["MetricStat"] for m in fallback["Metrics"] if "MetricStat" in m]
        assert {s["Period"] for s in stats} == {300}
        assert all(
            {"Name": "InstanceType", "Value": instance_type} in s["Metric"]["Dimensions"]
            for s in stats
        )
        assert instance_type in fallback["AlarmDescription"] and "$" in fallback["AlarmDescription"]


def test_scaling_metric_missing_alarm_reads_the_series_the_policy_reads(pool_template):
    missing = alarm(pool_template, "AlarmsScalingMetricMissing")
    assert missing["TreatMissingData"] == "breaching"
    (policy,) = [
        p["Properties"]
        for p in resources_of_type(
            pool_template, "AWS::ApplicationAutoScaling::ScalingPolicy"
        ).values()
        if p["Properties"]["PolicyType"] == "TargetTrackingScaling"
    ]
    policy_metrics = policy["TargetTrackingScalingPolicyConfiguration"][
        "CustomizedMetricSpecification"
    ]["Metrics"]

    def series(stat: dict) -> tuple:
        metric = stat["Metric"]
        dims = tuple(sorted((d["Name"], d["Value"]) for d in metric["Dimensions"]))
        return (metric["Namespace"], metric["MetricName"], dims, stat["Stat"])

    read = {series(m["MetricStat"]) for m in policy_metrics if "MetricStat" in m}
    watched = {series(m["MetricStat"]) for m in missing["Metrics"] if "MetricStat" in m}
    assert watched and watched <= read
    assert all(stat == "SampleCount" and ("InstanceType" in dict(d)) for *_, d, stat in watched)
    # An outage (no samples) breaches; one idle instance does not.
    ids = [m["Id"] for m in missing["Metrics"] if "MetricStat" in m]
    assert evaluate_queries(missing["Metrics"], dict.fromkeys(ids)) in (None, 0)
    one = {ids[0]: 6.0} | dict.fromkeys(ids[1:])
    assert evaluate_queries(missing["Metrics"], one) == pytest.approx(6.0)


def test_fallback_alarms_count_idle_instances(pool_template):
    fallback = alarm(pool_template, "AlarmsRunningOnFallback3")
    (stat,) = [m["MetricStat"] for m in fallback["Metrics"] if "MetricStat" in m]
    assert (stat["Metric"]["MetricName"], stat["Stat"]) == (
        "ConcurrentRequestsPerModel",
        "SampleCount",
    )
    # Three instances, idle or not, each sampled once per publication: with enhanced metrics
    # (the default) at MetricPublishFrequencyInSeconds (60 s), over the alarm's 300 s period.
    (sample_id,) = [m["Id"] for m in fallback["Metrics"] if "MetricStat" in m]
    assert evaluate_queries(fallback["Metrics"], {sample_id: 3 * 300 / 60}) == pytest.approx(3)
    assert evaluate_queries(fallback["Metrics"], {sample_id: None}) == 0


@pytest.mark.parametrize(
    ("options", "interval"),
    [
        ({"enhanced_metrics": True, "metric_publish_frequency": 10}, 10),
        ({"enhanced_metrics": False}, 10),  # AWS's 10-second high-resolution metric
        ({"enhanced_metrics": True, "metric_publish_frequency": 120}, 120),
    ],
)
def test_pool_counts_follow_the_configured_publication_interval(options, interval):
    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        pools=sized_pools(),
        **options,
    )
    PoolEndpointAlarms(stack, "Alarms", endpoint=endpoint)
    fallback = alarm(template_of(stack), "AlarmsRunningOnFallback2")
    (sample_id,) = [m["Id"] for m in fallback["Metrics"] if "MetricStat" in m]
    observed = {sample_id: 2 * 300 / interval}
    assert evaluate_queries(fallback["Metrics"], observed) == pytest.approx(2)


def test_token_latency_alarms_are_promql_per_pool(pool_template):
    alarms = [
        r["Properties"]
        for k, r in resources_of_type(pool_template, "AWS::CloudWatch::Alarm").items()
        if k.startswith(("AlarmsTtftP99", "AlarmsInterTokenP99"))
    ]
    assert len(alarms) == 2
    queries = sorted(a["EvaluationCriteria"]["PromQLCriteria"]["Query"] for a in alarms)
    # The names AWS stores (token_metrics.STORED_NAMES): vLLM's histograms whole, as native
    # histograms (AWS's example: histogram_quantile(0.99, rate(vllm:time_to_first_token_seconds
    # {...}[5m]))), so no "_bucket" and no "le".
    assert queries[0].startswith('histogram_quantile(0.99, sum by ("@resource.host.type")')
    assert '{"vllm:inter_token_latency_seconds", "aws.sagemaker.endpoint.name"=' in queries[0]
    assert queries[0].endswith(") > 0.2") and queries[1].endswith(") > 2")
    assert '{"vllm:time_to_first_token_seconds", ' in queries[1]
    assert not any("_bucket" in q or "le," in q for q in queries)
    assert all(a["EvaluationCriteria"]["PromQLCriteria"]["PendingPeriod"] == 300 for a in alarms)


def test_alarms_and_charts_query_the_one_table_of_stored_names(pool_template):
    from cdk_llm_serving.core.token_metrics import STORED_NAMES

    body = json.dumps(pool_template)
    for metric in STORED_NAMES.values():
        assert metric.stored in body
        for exposed in metric.exposed:
            if exposed != metric.stored:
                assert exposed not in body, f"{exposed}: vLLM's exposition name, not AWS's"


def test_dashboard_shows_pools_side_by_side_token_latency_and_the_alarms(pool_template):
    _, dashboard = only_resource(pool_template, "AWS::CloudWatch::Dashboard")
    body = flatten(dashboard["Properties"]["DashboardBody"], "<token>")
    for title in (
        "Instances per pool",
        "Model latency p99 (µs) per pool",
        "GPU utilization (%) per pool",
        "Fleet utilization vs target",
        "Time to first token p50/p99 per pool",
        "Inter-token latency p50/p99 per pool",
        "Generated tokens/s per pool",
        '"type":"alarm"',
    ):
        assert title in body, title
    for label in ("1: ml.g6e.12xlarge", "2: ml.g6.12xlarge", "3: ml.g6e.2xlarge"):
        assert label in body
    assert '"value":0.7' in body  # the target line
    assert '\\"quantile\\", \\"p99\\"' in body or '"quantile", "p99"' in body


def alarm_problems(**props) -> list[str]:
    endpoint = pool_endpoint()
    with pytest.raises(ConfigurationError) as caught:
        PoolEndpointAlarms(endpoint.node.scope, "Alarms", endpoint=endpoint, **props)
    return [p.property for p in caught.value.problems]


def test_alarm_validation():
    assert alarm_problems(error_rate_threshold=2, fallback_after=Duration.minutes(1)) == [
        "error_rate_threshold",
        "fallback_after",
    ]
    # Every problem in one error, the token thresholds included.
    assert alarm_problems(
        error_rate_threshold=2,
        ttft_p99_threshold=Duration.seconds(0),
        inter_token_p99_threshold=Duration.millis(0),
    ) == ["error_rate_threshold", "ttft_p99_threshold", "inter_token_p99_threshold"]


def test_optional_alarms_can_be_turned_off():
    endpoint = pool_endpoint()
    alarms = PoolEndpointAlarms(
        endpoint.node.scope,
        "Alarms",
        endpoint=endpoint,
        error_rate_threshold=None,
        latency_p99_threshold=None,
        fallback_after=None,
        ttft_p99_threshold=None,
        inter_token_p99_threshold=None,
    )
    assert alarms.alarms == []


def test_async_autoscaling_alarms_and_dashboard_pass_cfn_lint():
    stack = new_stack("AsyncScaled")
    endpoint = pool_endpoint(
        stack,
        pools=[InstancePool("ml.g6e.12xlarge", max_concurrency=8)],
        async_inference=AsyncInference(output_bucket=s3.Bucket(stack, "Out")),
    )
    endpoint.auto_scale(min_capacity=0, max_capacity=3)
    alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=endpoint)
    PoolEndpointDashboard(stack, "Dashboard", endpoint=endpoint, alarms=alarms.alarms)
    template = template_of(stack)
    matches = lint_template(template)
    assert not matches, "\n".join(map(str, matches))
    assert json.dumps(template).count("HasBacklogWithoutCapacity") == 1


def test_token_charts_query_cloudwatch_promql_with_read_only_metrics_access(pool_template):
    functions = resources_of_type(pool_template, "AWS::Lambda::Function")
    (chart_id, chart) = next(
        (k, f) for k, f in functions.items() if k.startswith("CdkLlmServingPromQLCharts")
    )
    env = chart["Properties"]["Environment"]["Variables"]
    assert env["SIGV4_SERVICE"] == "monitoring"
    assert flatten(env["PROMETHEUS_ENDPOINT"], "<token>") == "https://monitoring.us-west-2.<token>"
    role_id = chart["Properties"]["Role"]["Fn::GetAtt"][0]
    actions = {a for s in policy_statements(pool_template, role_id) for a in actions_of(s)}
    # AWS's PromQL endpoint: "Required permissions | cloudwatch:QueryMetrics,
    # cloudwatch:GetMetricData, cloudwatch:ListMetrics" (monitoring-detailed-observability-promql).
    assert actions == {
        "cloudwatch:QueryMetrics",
        "cloudwatch:GetMetricData",
        "cloudwatch:ListMetrics",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    }
    # The chart code signs for the service it is told (CloudWatch's QueryMetrics: "monitoring").
    spec = importlib.util.spec_from_file_location("promql_chart", CHART_CODE / "index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    request = module.signed_query_request(
        "https://monitoring.us-west-2.amazonaws.com",
        "us-west-2",
        '{"vllm:generation_tokens_total"}',
        1700000000,
        1700003600,
        60,
        credentials=Credentials("AKIAEXAMPLEEXAMPLE00", "example"),
        service="monitoring",
    )
    assert request.full_url.startswith(
        "https://monitoring.us-west-2.amazonaws.com/api/v1/query_range?"
    )
    assert "/us-west-2/monitoring/aws4_request" in request.get_header("Authorization")


def test_the_dashboard_is_a_cloudwatch_dashboard_users_add_charts_to():
    stack = new_stack("NamedDashboard")
    endpoint = pool_endpoint(stack)
    dashboard = PoolEndpointDashboard(
        stack, "Dashboard", endpoint=endpoint, dashboard_name="llm-pool_1"
    )
    assert isinstance(dashboard.dashboard, cloudwatch.Dashboard)
    assert dashboard.node.default_child is dashboard.dashboard
    # A sixth chart of the user's own, on the construct or on its dashboard.
    dashboard.add_widgets(
        cloudwatch.GraphWidget(title="Mine", left=[endpoint.metric_gpu_memory_utilization()])
    )
    dashboard.dashboard.add_widgets(cloudwatch.TextWidget(markdown="# runbook", width=24))
    logical_id, body = only_resource(template_of(stack), "AWS::CloudWatch::Dashboard")
    assert logical_id.startswith("Dashboard")  # "Resource" ids stay out of logical IDs
    assert body["Properties"]["DashboardName"] == "llm-pool_1"
    widgets = json.loads(flatten(body["Properties"]["DashboardBody"], "<token>"))["widgets"]
    assert [w["properties"].get("title") for w in widgets[-2:]] == ["Mine", None]
    assert stack.resolve(dashboard.dashboard_name) == {"Ref": logical_id}
    arn = json.dumps(stack.resolve(dashboard.dashboard_arn))
    assert ":cloudwatch::" in arn and ":dashboard/llm-pool_1" in arn


def test_a_dashboard_name_aws_would_refuse_is_a_configuration_error():
    stack = new_stack("BadDashboardName")
    endpoint = pool_endpoint(stack)
    with pytest.raises(ConfigurationError, match="dashboard_name"):
        PoolEndpointDashboard(stack, "Dashboard", endpoint=endpoint, dashboard_name="llm pool")


def test_an_imported_endpoint_is_watched_per_pool_it_states():
    stack = new_stack()
    imported = InstancePoolEndpoint.from_endpoint_name(
        stack,
        "Imported",
        "prod-chat",
        instance_types=[InstanceType.ML_G6E_12XLARGE, "ml.g6e.2xlarge"],
        detailed_observability=True,
    )
    alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=imported)
    PoolEndpointDashboard(stack, "Dashboard", endpoint=imported)
    assert list(alarms.running_on_fallback) == ["ml.g6e.2xlarge"]
    assert set(alarms.token_latency) == {"TtftP99", "InterTokenP99"}
    assert alarms.scaling_metric_missing is None
    template = template_of(stack)
    fallback = alarm(template, "AlarmsRunningOnFallback2")
    assert "instead of ml.g6e.12xlarge" in fallback["AlarmDescription"]
    assert "$" in fallback["AlarmDescription"]  # the default catalog's prices
    _, dashboard = only_resource(template, "AWS::CloudWatch::Dashboard")
    body = flatten(dashboard["Properties"]["DashboardBody"], "<token>")
    assert "1: ml.g6e.12xlarge" in body and "2: ml.g6e.2xlarge" in body
    assert "Time to first token p50/p99 per pool" in body


def test_an_import_without_pools_gets_the_variant_alarms_only():
    stack = new_stack()
    imported = InstancePoolEndpoint.from_endpoint_arn(
        stack, "Imported", "arn:aws:sagemaker:us-east-1:123456789012:endpoint/prod-chat"
    )
    alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=imported)
    assert alarms.running_on_fallback == {} and alarms.token_latency == {}
    assert alarms.error_rate is not None and alarms.latency_p99 is not None


def test_an_import_names_a_misspelled_pool_type():
    with pytest.raises(ConfigurationError) as caught:
        InstancePoolEndpoint.from_endpoint_name(
            new_stack(), "Imported", "prod-chat", instance_types=["ml.g6e.12xlarg"]
        )
    (problem,) = caught.value.problems
    assert problem.property == "instance_types[0]" and "closest: ml.g6e.12xlarge" in problem.allowed


def test_a_vllm_pool_endpoint_is_watched_directly_as_its_endpoint_would_be():
    def watched(direct: bool) -> dict:
        stack = new_stack()
        serving = VllmPoolEndpoint(
            stack,
            "Serving",
            image=ContainerImage.from_ecr_uri(IMAGE),
            model="gpt-oss-20b",
            config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=32768),
            weights={
                "bf16": ModelData.from_s3_uri("s3://weights-bucket/bf16/"),
                "int4": ModelData.from_s3_uri("s3://weights-bucket/int4/"),
            },
            pools=["ml.g6e.12xlarge", "ml.g6e.2xlarge"],
        )
        serving.auto_scale(max_capacity=4)
        endpoint = serving if direct else serving.endpoint
        alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=endpoint)
        PoolEndpointDashboard(stack, "Dashboard", endpoint=endpoint, alarms=alarms.alarms)
        assert alarms.scaling_metric_missing is not None
        return template_of(stack)

    direct = watched(True)
    assert direct == watched(False)
    fallback = alarm(direct, "AlarmsRunningOnFallback2")
    assert "serving gpt-oss-20b-int4-tp1" in fallback["AlarmDescription"]


def test_the_dashboard_shows_the_alarms_made_for_its_endpoint_without_being_passed():
    stack = new_stack()
    endpoint = pool_endpoint(
        stack,
        pools=sized_pools(),
    )
    endpoint.auto_scale(max_capacity=4)
    alarms = PoolEndpointAlarms(stack, "Alarms", endpoint=endpoint)
    PoolEndpointDashboard(stack, "Dashboard", endpoint=endpoint)
    template = template_of(stack)
    (_, dashboard) = only_resource(template, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    shown = {
        logical_id
        for logical_id in resources_of_type(template, "AWS::CloudWatch::Alarm")
        if logical_id in body
    }
    made = {k for k in resources_of_type(template, "AWS::CloudWatch::Alarm") if "Alarms" in k}
    assert made and made <= shown, f"missing on the dashboard: {sorted(made - shown)}"
    assert len(alarms.alarms) >= len(made)
