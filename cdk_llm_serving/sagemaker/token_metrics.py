"""Token-level latency and throughput of a pool endpoint, as PromQL over detailed observability.

Route chosen: SageMaker's detailed observability (``MetricsConfig.EnableDetailedObservability``,
on by default here) scrapes the vLLM container's Prometheus endpoint and publishes "native
vLLM ... metrics — including tokens per second, time to first token (TTFT), inter-token
latency" to CloudWatch as OpenTelemetry metrics, queryable with PromQL only ("These are not
Prometheus metrics ... queryable using PromQL syntax"):
https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html,
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/SageMaker-AI-Insights-Metrics.html.
Every data point carries ``aws.sagemaker.endpoint.name``, ``aws.sagemaker.variant.name`` and
``@resource.host.type`` (the instance type, i.e. the pool):
https://docs.aws.amazon.com/sagemaker/latest/dg/inference-monitoring.html. So there is no classic
namespace/dimension metric to put in a ``cloudwatch.Metric``; alarms are PromQL alarms
(aws-cdk-lib 2.275 ``cloudwatch.PromQLAlarm``, ``AWS::CloudWatch::Alarm`` ``EvaluationCriteria
.PromQLCriteria``) and charts query CloudWatch's Prometheus-compatible API
(``https://monitoring.<region>.amazonaws.com/api/v1/query_range``, SigV4 service
``monitoring``, ``cloudwatch:GetMetricData`` + ``cloudwatch:ListMetrics``:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-PromQL-API-QueryMetrics.html).
CloudWatch's PromQL follows Prometheus 3.0, so dotted label names are quoted.

UNCONFIRMED: the exact names under which the vLLM histograms land. AWS's table names only
derived aggregates (``OutputTokensPerSecond``, ...); the scraped names are assumed to be
vLLM's own (``vllm/v1/metrics/loggers.py`` in vLLM 0.20.0, the pinned container's, and 0.33.0:
``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds`` histograms,
``vllm:generation_tokens`` counter, exposed as ``..._total``), with classic ``_bucket`` series. ``TokenMetricNames`` holds them in one place to change.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The window of ``rate()`` in every query.
RATE_WINDOW = "5m"
POOL_LABEL = "@resource.host.type"


@dataclass(frozen=True)
class TokenMetricNames:
    """The PromQL names of vLLM's token metrics as detailed observability stores them."""

    ttft_bucket: str = "vllm:time_to_first_token_seconds_bucket"
    inter_token_bucket: str = "vllm:inter_token_latency_seconds_bucket"
    generation_tokens: str = "vllm:generation_tokens_total"


@dataclass(frozen=True)
class TokenQueries:
    """PromQL of one endpoint variant's token metrics, one series per pool (instance type)."""

    endpoint_name: str
    variant_name: str
    names: TokenMetricNames = TokenMetricNames()

    def _selector(self, metric: str) -> str:
        return (
            f'{{"{metric}", "aws.sagemaker.endpoint.name"="{self.endpoint_name}", '
            f'"aws.sagemaker.variant.name"="{self.variant_name}"}}'
        )

    def _quantile(self, bucket: str, quantile: float) -> str:
        return (
            f'histogram_quantile({quantile:g}, sum by (le, "{POOL_LABEL}") '
            f"(rate({self._selector(bucket)}[{RATE_WINDOW}])))"
        )

    def ttft(self, quantile: float) -> str:
        """Time to first token (seconds) at ``quantile`` per pool."""
        return self._quantile(self.names.ttft_bucket, quantile)

    def inter_token(self, quantile: float) -> str:
        """Inter-token latency (seconds) at ``quantile`` per pool."""
        return self._quantile(self.names.inter_token_bucket, quantile)

    def tokens_per_second(self) -> str:
        """Generated tokens per second per pool."""
        return (
            f'sum by ("{POOL_LABEL}") '
            f"(rate({self._selector(self.names.generation_tokens)}[{RATE_WINDOW}]))"
        )
