"""The fleet's true utilization across instance pools, as CloudWatch metric math.

    utilization = sum_i(n_i * c_i) / sum_i(n_i * cap_i)

with, for pool i (all from ``AWS/SageMaker`` with dimensions EndpointName,
VariantName, InstanceType):

* ``c_i``  = ``ConcurrentRequestsPerModel`` (Average): concurrent requests per instance;
* ``n_i``  = ``Invocations`` (Sum) / ``InvocationsPerInstance`` (Sum): SageMaker has no
  per-type instance-count metric, but ``InvocationsPerInstance`` adds 1/n for each
  request, so the ratio of the two sums is the number of instances of that type;
* ``cap_i`` = what one instance of that type sustains (``InstancePool.max_concurrency``).

A pool with no instances (the normal state of a fallback pool) publishes nothing;
every series is wrapped in ``FILL(…, 0)`` so the expression never goes without data,
and ``IF(capacity > 0, …, 0)`` makes an idle fleet read 0 (scale in) rather than 0/0.

Known limits, decided here:

* A type that served no new request during the period counts 0 instances, so its
  capacity is left out and utilization reads high: scaling errs toward more capacity.
* CloudWatch alarms (which target tracking creates) read at most 10 metrics; at 3 per
  pool, weighted scaling covers at most ``MAX_WEIGHTED_POOLS`` pools.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

NAMESPACE = "AWS/SageMaker"
#: CloudWatch's hard limit of metrics in one metric-math alarm.
MAX_ALARM_METRICS = 10
METRICS_PER_POOL = 3
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


def instance_count_expression(index: int) -> str:
    """``n_i``: instances of pool ``index``, derived from its invocation metrics."""
    return f"IF(FILL(ipi{index}, 0) > 0, FILL(inv{index}, 0) / FILL(ipi{index}, 0), 0)"


def fleet_utilization_queries(
    endpoint_name: str, variant_name: str, pools: Sequence[PoolCapacity]
) -> list[MetricQuery]:
    """The query list: 3 metrics and one ``n_i`` expression per pool, then the utilization."""
    queries: list[MetricQuery] = []
    load_terms, capacity_terms = [], []
    for index, pool in enumerate(pools, start=1):
        dims = (
            ("EndpointName", endpoint_name),
            ("VariantName", variant_name),
            ("InstanceType", pool.instance_type),
        )
        queries += [
            MetricQuery(f"inv{index}", "Invocations", "Sum", dims),
            MetricQuery(f"ipi{index}", "InvocationsPerInstance", "Sum", dims),
            MetricQuery(f"conc{index}", "ConcurrentRequestsPerModel", "Average", dims),
            MetricQuery(
                f"n{index}",
                expression=instance_count_expression(index),
                label=f"{pool.instance_type} instances",
            ),
        ]
        load_terms.append(f"n{index} * FILL(conc{index}, 0)")
        capacity_terms.append(f"n{index} * {_number(pool.max_concurrency)}")
    load, capacity = " + ".join(load_terms), " + ".join(capacity_terms)
    queries.append(
        MetricQuery(
            "utilization",
            expression=f"IF(({capacity}) > 0, ({load}) / ({capacity}), 0)",
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
