"""A copy's /metrics as detailed observability stores it, and PromQL on it through promtool."""

from __future__ import annotations

import pytest

from rehearsal.sagemaker.native import bucket_index, from_classic, prometheus_path
from rehearsal.sagemaker.observability import (
    Instance,
    escape_name,
    escape_query,
    evaluate,
    promtool_path,
    stored_series,
    without_threshold,
)
from rehearsal.sagemaker.queries import promql_queries

SCRAPE_0 = """# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m-a"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m-a"} 0.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m-a"} 0.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m-a"} 0.0
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.5",model_name="m-a"} 0.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m-a"} 0.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m-a"} 0.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m-a"} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m-a"} 0.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m-a"} 0.0
"""
SCRAPE_1 = SCRAPE_0.replace("} 0.0", "} 12.0").replace(
    'le="0.5",model_name="m-a"} 12.0', 'le="0.5",model_name="m-a"} 10.0'
)
INSTANCE = Instance("ep", "AllTraffic", "ml.g6e.2xlarge")
needs_promtool = pytest.mark.skipif(
    promtool_path() is None or prometheus_path() is None,
    reason="no promtool/prometheus on PATH (make promtool: Debian's prometheus package)",
)


def test_a_histogram_is_stored_as_one_native_series_under_its_family_name():
    series = stored_series([SCRAPE_0, SCRAPE_1], INSTANCE)
    names = {(s.name, s.kind) for s in series}
    assert ("vllm:time_to_first_token_seconds", "histogram") in names
    assert not any(s.name.endswith(("_bucket", "_sum", "_count")) for s in series)
    assert ("vllm:generation_tokens_total", "counter") in names
    assert ("vllm:num_requests_running", "gauge") in names
    tokens = next(s for s in series if s.name == "vllm:generation_tokens_total")
    assert tokens.values == [0.0, 12.0]
    # The resource labels of inference-monitoring's table, the scraped ones kept.
    assert tokens.labels["aws.sagemaker.endpoint.name"] == "ep"
    assert tokens.labels["aws.sagemaker.variant.name"] == "AllTraffic"
    assert tokens.labels["@resource.host.type"] == "ml.g6e.2xlarge"
    assert tokens.labels["model_name"] == "m-a"


def test_utf8_names_escape_as_prometheus_3_escapes_them_for_legacy_consumers():
    assert escape_name("aws.sagemaker.endpoint.name", metric=False) == (
        "U__aws_2e_sagemaker_2e_endpoint_2e_name"
    )
    assert escape_name("@resource.host.type", metric=False) == "U___40_resource_2e_host_2e_type"
    assert (
        escape_name("vllm:generation_tokens_total", metric=True) == "vllm:generation_tokens_total"
    )
    assert escape_name("le", metric=False) == "le"


def test_a_query_escapes_names_but_not_values_or_string_arguments():
    query = (
        'label_replace(sum by (le, "@resource.host.type") (rate({"vllm:x_bucket", '
        '"aws.sagemaker.endpoint.name"="a.b"}[5m])), "quantile", "p50", "", "") > 2'
    )
    assert escape_query(without_threshold(query)) == (
        "label_replace(sum by (le, U___40_resource_2e_host_2e_type) (rate(vllm:x_bucket"
        '{U__aws_2e_sagemaker_2e_endpoint_2e_name="a.b"}[5m])), "quantile", "p50", "", "")'
    )


@needs_promtool
def test_promtool_finds_data_where_the_stored_name_is_queried_and_none_for_bucket_series():
    """Classic series through ``promtool test rules``, the native histogram through a real
    Prometheus server fed by remote write and ``promtool query instant``."""
    series = stored_series([SCRAPE_0, SCRAPE_1, SCRAPE_1], INSTANCE)
    results = evaluate(
        [
            (
                "tokens",
                'sum by ("@resource.host.type") (rate({"vllm:generation_tokens_total", '
                '"aws.sagemaker.endpoint.name"="ep", "aws.sagemaker.variant.name"="AllTraffic"}[5m]))',
            ),
            (
                "ttft from classic buckets",
                'histogram_quantile(0.99, sum by (le, "@resource.host.type") (rate('
                '{"vllm:time_to_first_token_seconds_bucket", "aws.sagemaker.endpoint.name"="ep"}[5m]))) > 2',
            ),
            (
                "ttft native",
                'histogram_quantile(0.99, sum by ("@resource.host.type") (rate('
                '{"vllm:time_to_first_token_seconds", "aws.sagemaker.endpoint.name"="ep"}[5m])))',
            ),
            (
                "wrong endpoint",
                'rate({"vllm:generation_tokens_total", "aws.sagemaker.endpoint.name"="other"}[5m])',
            ),
        ],
        series,
    )
    outcomes = {r.label: r.outcome for r in results}
    assert outcomes == {
        "tokens": "data",
        "ttft from classic buckets": "empty",
        "ttft native": "data",
        "wrong endpoint": "empty",
    }, results
    assert "ml.g6e.2xlarge" in results[0].detail
    # 12 observations: 10 at or below 0.5 s, 2 above: p99 of the native histogram lies above
    # 0.5 s, within the bucket holding the +Inf observations (schema 3: up to 1.0 s).
    p99 = float(results[2].detail.split("=>")[1].split("@")[0])
    assert 0.5 < p99 <= 1.0, results[2]


@needs_promtool
def test_every_promql_query_of_the_reference_pool_endpoint_finds_its_series(pool_template):
    queries = promql_queries(pool_template)
    assert len(queries) >= 5
    series = stored_series([SCRAPE_0, SCRAPE_1, SCRAPE_1], INSTANCE)
    for s in series:
        s.labels["aws.sagemaker.endpoint.name"] = _endpoint_name(pool_template)
    results = evaluate(queries, series)
    assert [r for r in results if r.outcome in ("empty", "error")] == []


def _endpoint_name(template):
    return next(
        r["Properties"]["EndpointName"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::Endpoint"
    )


@needs_promtool
def test_on_the_names_as_vllm_exposes_them_the_bucket_query_has_data():
    from rehearsal.sagemaker.observability import StorageRule

    series = stored_series(
        [SCRAPE_0, SCRAPE_1, SCRAPE_1], INSTANCE, StorageRule(histogram_as_native=False)
    )
    assert any(s.name == "vllm:time_to_first_token_seconds_bucket" for s in series)
    (result,) = evaluate(
        [
            (
                "ttft",
                'histogram_quantile(0.99, sum by (le, "@resource.host.type") (rate('
                '{"vllm:time_to_first_token_seconds_bucket", "aws.sagemaker.endpoint.name"="ep"}[5m])))',
            )
        ],
        series,
    )
    assert result.outcome == "data", result


def test_classic_buckets_become_exponential_ones_keeping_count_and_sum():
    assert (bucket_index(1.0), bucket_index(2.0), bucket_index(0.5)) == (0, 8, -8)
    native = from_classic({0.5: 10.0, 1.0: 10.0, float("inf"): 12.0}, total_sum=7.5)
    assert native.count == 12 and native.sum == 7.5
    # Above the last finite bound (1.0 s), the +Inf observations go to the bucket of 2.0 s.
    assert native.buckets == {bucket_index(0.5): 10, bucket_index(2.0): 2}
