"""The fleet's true utilization across instance pools, as CloudWatch metric math.

    utilization = sum_i(Sum_i) / sum_i(SampleCount_i * cap_i)

with, for pool i, ``ConcurrentRequestsPerModel`` by ``InstanceType`` (its Sum and SampleCount
over the period) and cap_i what one instance of that type sustains
(``InstancePool.max_concurrency``): each instance reports its concurrency, 0 included, once per
interval, so the interval cancels (two metrics per pool, five pools within CloudWatch's ten per
alarm). UNCONFIRMED[idle-instance-samples] by AWS text: that an idle instance still reports 0
and the per-type series keeps every instance's sample. Missing data stays missing (no false
branch in the final ``IF``), so target tracking holds rather than scales in. Derivation and
sources: docs/design/observability.md ("Fleet utilization").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from ..errors import ConfigurationError, Problem

NAMESPACE = "AWS/SageMaker"
#: The per-instance gauge whose samples count instances and whose sum is the pool's load.
CONCURRENCY_METRIC = "ConcurrentRequestsPerModel"
#: Seconds between two ``ConcurrentRequestsPerModel`` samples of one instance without enhanced
#: metrics (AWS's high-resolution interval); ``concurrency_sample_seconds`` picks.
CONCURRENCY_SAMPLE_SECONDS = 10
#: CloudWatch's hard limit of metrics in one metric-math alarm (alarm-limits.html), which binds
#: a target-tracking policy's alarms too; UNCONFIRMED[ten-metrics-per-policy] that Application
#: Auto Scaling accepts exactly as many (docs/design/observability.md).
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
    #: The metric's namespace (metrics only): ``AWS/SageMaker``, or ``/aws/sagemaker/Endpoints``
    #: for the host metrics the asynchronous backlog counts instances with.
    namespace: str = NAMESPACE


@dataclass(frozen=True)
class PoolCapacity:
    instance_type: str
    max_concurrency: float


def _number(value: float) -> str:
    """A capacity as a short literal: 20 -> ``20``, 7.5 -> ``7.5``."""
    return f"{value:.6g}"


def _check_fleet(subject: str, pools: Sequence[PoolCapacity], metrics: int, why: str) -> None:
    """A fleet to weigh: at least one pool, each sustaining some load, and at most
    ``MAX_ALARM_METRICS`` metrics in all. No pool leaves an expression of empty sums
    (``IF(()>0,()/())``, which CloudWatch refuses); a capacity of 0 divides the weights by zero."""
    problems = [
        Problem(f"pools[{index}].max_concurrency", pool.max_concurrency, "must be above 0")
        for index, pool in enumerate(pools)
        if not pool.max_concurrency > 0
    ]
    if not pools:
        problems.append(Problem("pools", [], "needs at least one pool to weigh"))
    elif metrics > MAX_ALARM_METRICS:
        problems.append(Problem("pools", [str(pool.instance_type) for pool in pools], why))
    if problems:
        raise ConfigurationError(subject, problems)


def instance_count_expression(samples_id: str, publish_seconds: int, period_seconds: int) -> str:
    """``n_i``: one sample per instance per publish interval (see the module docstring)."""
    return f"FILL({samples_id},0)*{_number(publish_seconds / period_seconds)}"


def concurrency_sample_seconds(enhanced_metrics: bool, publish_frequency: int) -> int:
    """Seconds between two concurrency samples of one instance (see the module docstring)."""
    return publish_frequency if enhanced_metrics else CONCURRENCY_SAMPLE_SECONDS


def fleet_utilization_queries(
    endpoint_name: str,
    variant_name: str,
    pools: Sequence[PoolCapacity],
    *,
    per_pool_dimension: bool = True,
) -> list[MetricQuery]:
    """The query list: per pool the concurrency's Sum and SampleCount, then the utilization.

    ``per_pool_dimension``: the variant runs on instance pools, whose series carry
    ``InstanceType``; a variant without pools (one instance type, e.g. on a capacity
    reservation) publishes the variant's series only (one pool then).
    """
    _check_fleet(
        "fleet utilization",
        pools,
        len(pools) * METRICS_PER_POOL,
        f"{METRICS_PER_POOL} metrics per pool and at most {MAX_ALARM_METRICS} in a target-tracking metric: at most {MAX_WEIGHTED_POOLS} pools",
    )
    queries: list[MetricQuery] = []
    load_terms, capacity_terms = [], []
    for index, pool in enumerate(pools, start=1):
        dims: tuple[tuple[str, str], ...] = (
            ("EndpointName", endpoint_name),
            ("VariantName", variant_name),
        )
        if per_pool_dimension:
            dims += (("InstanceType", pool.instance_type),)
        queries += [
            MetricQuery(f"load{index}", CONCURRENCY_METRIC, "Sum", dims),
            MetricQuery(f"samples{index}", CONCURRENCY_METRIC, "SampleCount", dims),
        ]
        load_terms.append(f"FILL(load{index},0)")
        capacity_terms.append(f"FILL(samples{index},0)*{_number(pool.max_concurrency)}")
    load, capacity = "+".join(load_terms), "+".join(capacity_terms)
    queries.append(
        MetricQuery(
            "utilization",
            # No false branch: no data point where nothing was published (see above).
            expression=f"IF(({capacity})>0,({load})/({capacity}))",
            label="Fleet utilization (concurrent requests / capacity)",
            return_data=True,
        )
    )
    return queries


#: The asynchronous endpoint's queue over its instance count, by ``EndpointName``
#: (async-inference-monitor.html).
BACKLOG_PER_INSTANCE_METRIC = "ApproximateBacklogSizePerInstance"
#: The host metric whose SampleCount counts an asynchronous pool's instances, as AWS counts
#: them (async-inference-troubleshooting.html); asynchronous endpoints publish no concurrency.
HOST_COUNT_METRIC = "CPUUtilization"
HOST_NAMESPACE = "/aws/sagemaker/Endpoints"
#: ``aws cloudwatch list-metrics`` showing whether the host metric carries ``InstanceType`` on a
#: pooled endpoint (``<endpoint>`` replaced by the endpoint's name).
HOST_INSTANCE_TYPE_CHECK = (
    "aws cloudwatch list-metrics --namespace /aws/sagemaker/Endpoints "
    "--metric-name CPUUtilization --dimensions Name=EndpointName,Value=<endpoint>"
)


def weighted_backlog_queries(
    endpoint_name: str, variant_name: str, pools: Sequence[PoolCapacity]
) -> list[MetricQuery]:
    """An asynchronous fleet's backlog per instance of its first (preferred) pool's size.

        backlog = ApproximateBacklogSizePerInstance * sum_i(S_i) / sum_i(S_i * w_i)

    with S_i the SampleCount of ``CPUUtilization`` of pool i and w_i = cap_i / cap_1: the queue
    over the fleet's capacity in first-pool instances (one pool: AWS's metric). Missing data
    stays missing; with no pool's count the false branch is AWS's unweighted backlog.
    UNCONFIRMED[host-metric-instance-type]: that ``CPUUtilization`` carries ``InstanceType`` on
    a pooled endpoint (check: ``HOST_INSTANCE_TYPE_CHECK``). Derivation:
    docs/design/observability.md ("Weighted backlog").
    """
    _check_fleet(
        "weighted backlog",
        pools,
        len(pools) + 1,
        f"one metric per pool plus the backlog, at most {MAX_ALARM_METRICS}",
    )
    first = pools[0].max_concurrency
    queries = [
        MetricQuery(
            "backlog", BACKLOG_PER_INSTANCE_METRIC, "Average", (("EndpointName", endpoint_name),)
        )
    ]
    counts, weighted = [], []
    for index, pool in enumerate(pools, start=1):
        dims = (
            ("EndpointName", endpoint_name),
            ("VariantName", variant_name),
            ("InstanceType", str(pool.instance_type)),
        )
        queries.append(
            MetricQuery(
                f"hosts{index}", HOST_COUNT_METRIC, "SampleCount", dims, namespace=HOST_NAMESPACE
            )
        )
        counts.append(f"FILL(hosts{index},0)")
        weighted.append(f"FILL(hosts{index},0)*{_number(pool.max_concurrency / first)}")
    count, capacity = "+".join(counts), "+".join(weighted)
    queries.append(
        MetricQuery(
            "weightedbacklog",
            # False branch: AWS's own value where no count is there; none without a backlog.
            expression=f"IF((({capacity})>0)*(backlog>=0),backlog*({count})/({capacity}),backlog)",
            label="Backlog per instance of the first pool's size",
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
                namespace=query.namespace,
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
