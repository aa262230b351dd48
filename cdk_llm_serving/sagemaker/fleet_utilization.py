"""The fleet's true utilization across instance pools, as CloudWatch metric math.

    utilization = sum_i(n_i * c_i) / sum_i(n_i * cap_i)

with, for pool i (``AWS/SageMaker`` ``ConcurrentRequestsPerModel`` with dimensions
EndpointName, VariantName, InstanceType), n_i its instances, c_i the concurrent requests per
instance and cap_i what one instance of that type sustains (``InstancePool.max_concurrency``).

Each instance reports its concurrency, 0 included, once per publish interval whether or not
requests arrive, so over one period the pool's series holds k * n_i samples (k = period /
interval, the same for every pool) and their Sum is k * n_i * c_i. Hence

    utilization = sum_i(Sum_i) / sum_i(SampleCount_i * cap_i)

in which k cancels: instance counts without any traffic dependence, two metrics per pool,
and five pools (the API's maximum) within CloudWatch's 10 metrics per alarm (and per
target-tracking customized metric). Sources: ``InstanceType`` on the pool's invocation
metrics (realtime-endpoints-heterogeneous.html; FACTS: ConcurrentRequestsPerModel among them);
interval: ``ConcurrentRequestsPerModel`` is a high-resolution metric that "emit[s] data every
10 seconds" while standard metrics publish once a minute
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-add-code-define.html,
"Specify a high-resolution predefined metric"), whatever ``MetricsConfig``'s
``MetricPublishFrequencyInSeconds`` says for utilization metrics: ``CONCURRENCY_SAMPLE_SECONDS``.
The scaling expression does not depend on it (k cancels); only the displayed pool counts do
(``EndpointMetrics.metric_pool_instances``). UNCONFIRMED by AWS text: that an idle instance still reports 0 (the
gauge's nature) and that the per-type series keeps every instance's sample (not an
agent-side average). If an idle instance reported nothing, its pool would count 0
instances: utilization would read high and scaling would err toward more capacity, as the
earlier ``Invocations / InvocationsPerInstance`` derivation always did for idle pools.

A pool with no instances publishes nothing; every series is wrapped in ``FILL(…, 0)`` and
``IF(capacity > 0, …, 0)`` makes an empty fleet read 0 (scale in) rather than 0/0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

NAMESPACE = "AWS/SageMaker"
#: The per-instance gauge whose samples count instances and whose sum is the pool's load.
CONCURRENCY_METRIC = "ConcurrentRequestsPerModel"
#: Seconds between two ``ConcurrentRequestsPerModel`` samples of one instance (see above).
CONCURRENCY_SAMPLE_SECONDS = 10
#: CloudWatch's hard limit of metrics in one metric-math alarm ("Alarms based on metric math
#: expressions can reference a maximum of 10 metrics. This is a hard limit":
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-limits.html).
MAX_ALARM_METRICS = 10
METRICS_PER_POOL = 2
MAX_WEIGHTED_POOLS = MAX_ALARM_METRICS // METRICS_PER_POOL


@dataclass(frozen=True)
class MetricQuery:
    """One entry of a metric-math query list: a metric to fetch or an expression."""

    id: str
    metric_name: str | None = None
    statistic: str | None = None
    dimensions: tuple[tuple[str, str], ...] = ()
    expression: str | None = None
    label: str | None = None
    return_data: bool = False


@dataclass(frozen=True)
class PoolCapacity:
    instance_type: str
    max_concurrency: float


def _number(value: float) -> str:
    """A capacity as a short literal: 20 -> ``20``, 7.5 -> ``7.5``."""
    return f"{value:.6g}"


def instance_count_expression(samples_id: str, publish_seconds: int, period_seconds: int) -> str:
    """``n_i``: one sample per instance per publish interval (see the module docstring)."""
    return f"FILL({samples_id},0)*{_number(publish_seconds / period_seconds)}"


def fleet_utilization_queries(
    endpoint_name: str, variant_name: str, pools: Sequence[PoolCapacity]
) -> list[MetricQuery]:
    """The query list: per pool the concurrency's Sum and SampleCount, then the utilization."""
    queries: list[MetricQuery] = []
    load_terms, capacity_terms = [], []
    for index, pool in enumerate(pools, start=1):
        dims = (
            ("EndpointName", endpoint_name),
            ("VariantName", variant_name),
            ("InstanceType", pool.instance_type),
        )
        queries += [
            MetricQuery(f"load{index}", CONCURRENCY_METRIC, "Sum", dims),
            MetricQuery(f"samples{index}", CONCURRENCY_METRIC, "SampleCount", dims),
        ]
        load_terms.append(f"FILL(load{index},0)")
        capacity_terms.append(f"FILL(samples{index},0)*{_number(pool.max_concurrency)}")
    # Written without spaces: the expression is in the template twice (policy, dashboard).
    load, capacity = "+".join(load_terms), "+".join(capacity_terms)
    queries.append(
        MetricQuery(
            "utilization",
            expression=f"IF(({capacity})>0,({load})/({capacity}),0)",
            label="Fleet utilization (concurrent requests / capacity)",
            return_data=True,
        )
    )
    return queries


def as_math_expression(
    queries: Sequence[MetricQuery],
    final_id: str = "utilization",
    period: Duration = Duration.minutes(1),
) -> cloudwatch.MathExpression:
    """The same queries as a CDK ``MathExpression`` (for alarms and dashboards).

    CDK nests expressions, so the intermediate ``n_i`` expressions become nested
    ``MathExpression`` objects under their ids.
    """
    by_id = {query.id: query for query in queries}

    def build(query: MetricQuery) -> cloudwatch.IMetric:
        if query.expression is None:
            return cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=query.metric_name or "",
                dimensions_map=dict(query.dimensions),
                statistic=query.statistic,
                period=period,
            )
        used = {
            ref: build(by_id[ref])
            for ref in by_id
            if ref != query.id and _references(query.expression, ref)
        }
        return cloudwatch.MathExpression(
            expression=query.expression, using_metrics=used, label=query.label, period=period
        )

    return build(by_id[final_id])  # type: ignore[return-value]


def _references(expression: str, identifier: str) -> bool:
    return re.search(rf"\b{re.escape(identifier)}\b", expression) is not None
