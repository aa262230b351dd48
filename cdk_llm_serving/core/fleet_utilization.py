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
metrics (realtime-endpoints-heterogeneous.html; FACTS: ConcurrentRequestsPerModel among them).

Interval (only the displayed pool counts depend on it: ``EndpointMetrics.metric_pool_instances``;
the scaling expression does not, k cancels): ``ConcurrentRequestsPerModel`` is a
high-resolution metric that "emit[s] data every 10 seconds"
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-add-code-define.html,
"Specify a high-resolution predefined metric"), but with enhanced metrics
``MetricPublishFrequencyInSeconds`` "applies to both utilization and invocation metrics"
(botocore ``sagemaker`` ``MetricsConfig`` documentation; default 60):
``concurrency_sample_seconds``. AWS publishes no per-instance-type instance count in
``AWS/SageMaker`` (detailed observability's ``InstanceCountPerEndpoint`` is an OTel aggregate
per endpoint, https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/SageMaker-AI-Insights-Metrics.html),
so the count stays derived from samples. UNCONFIRMED[idle-instance-samples] by AWS text: that an idle instance still
reports 0 (the gauge's nature) and that the per-type series keeps every instance's sample (not
an agent-side average). If an idle instance reported nothing, its pool would count 0
instances: utilization would read high and scaling would err toward more capacity.

Missing data reads as missing. Target tracking does not scale on a metric without data:
"If the specified metric has insufficient data, the target tracking scaling policy doesn't
scale ... It doesn't interpret insufficient data as low utilization" (Application Auto
Scaling, "How target tracking scaling works",
https://docs.aws.amazon.com/autoscaling/application/userguide/target-tracking-scaling-policy-overview.html;
the same words in the ECS guide, service-autoscaling-targettracking.html). So the expression
must have no data point when nothing was published: the final ``IF(capacity>0, load/capacity)``
has no false branch, and CloudWatch drops the point where the condition is false ("is dropped
... if metric3 is omitted from the expression",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html, IF).
``FILL(…, 0)`` stays on each pool's terms only: a pool without instances publishes nothing and
must read 0 while the others publish. Whether FILL makes a point where no series has any (a
full outage) the metric-math page does not say; either way the result is then missing (capacity
0 or no timestamp at all), which ``tests/sagemaker/test_scaling_outage.py`` checks on the
synthesized expression. An idle fleet still publishes its zeros: capacity > 0, utilization 0,
and the policy scales in, as it should.
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
#: metrics (the high-resolution metric, see above); ``concurrency_sample_seconds`` picks.
CONCURRENCY_SAMPLE_SECONDS = 10
#: CloudWatch's hard limit of metrics in one metric-math alarm ("Alarms based on metric math
#: expressions can reference a maximum of 10 metrics. This is a hard limit":
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-limits.html), which
#: binds a target-tracking customized metric too: Application Auto Scaling "creates and
#: manages the CloudWatch alarms that trigger the scaling policy" (target-tracking-scaling-
#: policy-overview.html) and PutMetricAlarm takes "as many as 10 ... MetricStat" queries
#: (botocore ``cloudwatch`` ``PutMetricAlarm`` ``Metrics``). The Application Auto Scaling
#: metric-math page (application-auto-scaling-target-tracking-metric-math.html) states no
#: number of its own: UNCONFIRMED[ten-metrics-per-policy] that it accepts exactly as many; check with
#: ``aws application-autoscaling put-scaling-policy`` on a test endpoint.
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


def _check_fleet(subject: str, pools: Sequence[PoolCapacity]) -> None:
    """A fleet to weigh: at least one pool, each sustaining some load. No pool leaves an
    expression of empty sums (``IF(()>0,()/())``, which CloudWatch refuses); a capacity of 0
    divides the backlog's weights by zero."""
    problems = [
        Problem(f"pools[{index}].max_concurrency", pool.max_concurrency, "must be above 0")
        for index, pool in enumerate(pools)
        if not pool.max_concurrency > 0
    ]
    if not pools:
        problems.append(Problem("pools", [], "needs at least one pool to weigh"))
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
    _check_fleet("fleet utilization", pools)
    queries: list[MetricQuery] = []
    load_terms, capacity_terms = [], []
    if len(pools) * METRICS_PER_POOL > MAX_ALARM_METRICS:
        raise ConfigurationError(
            "fleet utilization",
            [
                Problem(
                    "pools",
                    [str(pool.instance_type) for pool in pools],
                    f"{METRICS_PER_POOL} metrics per pool and at most {MAX_ALARM_METRICS} in a target-tracking metric: at most {MAX_WEIGHTED_POOLS} pools",
                )
            ],
        )
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
    # Written without spaces: the expression is in the template twice (policy, dashboard).
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


#: The asynchronous endpoint's backlog per instance: "Number of items in the queue divided by
#: the number of instances behind an endpoint ... primarily used for setting up application
#: autoscaling", published with the ``EndpointName`` dimension (async-inference-monitor.html,
#: "Asynchronous Inference Endpoint Metrics").
BACKLOG_PER_INSTANCE_METRIC = "ApproximateBacklogSizePerInstance"
#: The host metric whose SampleCount counts an asynchronous pool's instances: asynchronous
#: endpoints publish no ``ConcurrentRequestsPerModel`` (the async metric list is "exhaustive";
#: "Any metric not listed below is not published", async-inference-monitor.html), but they do
#: publish host-level metrics, and AWS's own way to read the instance count is "CPUUtilization
#: ... check the sample count statistic for a 1 minute period. The count should be equal to the
#: number of active instances" (async-inference-troubleshooting.html).
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

    AWS's ``ApproximateBacklogSizePerInstance`` is the queue over the instance count, every
    instance counted as one: a g6e.2xlarge like a g6e.12xlarge. With S_i the SampleCount of
    ``CPUUtilization`` of pool i over the period (k samples per instance, k = period / publish
    interval, the same for every pool) and w_i = cap_i / cap_1 (what one instance of pool i
    sustains relative to one of the first pool), ``sum(S_i) / sum(S_i * w_i)`` is
    ``sum(n_i) / sum(n_i * w_i)`` (k cancels: no assumption about the publish interval or the
    policy's period), so the result is ``ApproximateBacklogSize / sum(n_i * w_i)``: the queue
    over the fleet's capacity in first-pool instances. One pool, or equal capacities: exactly
    AWS's metric. A target of 5 keeps meaning "5 queued requests per instance of the first pool".

    Missing data reads as missing (the real-time expression's reasoning, module docstring):
    ``IF((capacity>0)*(backlog>=0), weighted, backlog)``. Where the backlog has no point the
    condition is false (a comparison with a scalar has no point there, and a product of series
    reads a missing operand as 0) and the false branch, the backlog itself, has none either: the
    point is dropped ("if metric3 ... does not exist"), so target tracking holds. Where the
    backlog is there but no pool's count is (the host series missing), the false branch is AWS's
    own unweighted backlog per instance: the policy keeps scaling, as before the weighting,
    rather than going blind. ``FILL(…, 0)`` stays on each pool's count only (an empty pool
    publishes nothing). At zero instances AWS's per-instance backlog has no instance to divide
    by: the step policy on ``HasBacklogWithoutCapacity`` brings the first instance
    (``EndpointAutoScaling``).

    UNCONFIRMED[host-metric-instance-type]: that ``CPUUtilization`` in ``/aws/sagemaker/Endpoints`` carries the
    ``InstanceType`` dimension on an endpoint with instance pools (AWS documents the dimension
    on the pools' invocation metrics, realtime-endpoints-heterogeneous.html, not on host
    metrics). Check with ``HOST_INSTANCE_TYPE_CHECK``: the listing must show
    ``{EndpointName, VariantName, InstanceType}`` series. Were it absent, every count would be
    missing and the policy would track AWS's unweighted backlog per instance (the false branch).
    """
    _check_fleet("weighted backlog", pools)
    if len(pools) + 1 > MAX_ALARM_METRICS:
        raise ConfigurationError(
            "weighted backlog",
            [
                Problem(
                    "pools",
                    [str(pool.instance_type) for pool in pools],
                    f"one metric per pool plus the backlog, at most {MAX_ALARM_METRICS}",
                )
            ],
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
