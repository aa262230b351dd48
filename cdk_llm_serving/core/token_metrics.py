"""Token-level latency and throughput of a pool endpoint, as PromQL over detailed observability.

SageMaker's detailed observability scrapes the vLLM container's metrics into CloudWatch as
OpenTelemetry data, queryable with PromQL only, each point labelled with the endpoint, the
variant and ``@resource.host.type`` (the pool):
https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html.
So alarms are ``cloudwatch.PromQLAlarm`` and charts ``PromQLCharts``. The stored names are in
``STORED_NAMES``; UNCONFIRMED[token-counter-name]: the counter's name (no AWS example shows
one). Check what an endpoint stores with ``awscurl`` (docs/design/observability.md, "Token
metrics") and, if the names differ, pass ``TokenMetricNames(...)`` to ``PoolEndpointAlarms``
and ``PoolEndpointDashboard``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The window of ``rate()`` in every query.
RATE_WINDOW = "5m"
POOL_LABEL = "@resource.host.type"


@dataclass(frozen=True)
class StoredMetric:
    """How one vLLM metric lands in CloudWatch's OTel store (see the module docstring)."""

    #: What vLLM's ``/metrics`` exposes (the Prometheus exposition names).
    exposed: tuple[str, ...]
    #: The PromQL name detailed observability stores it under.
    stored: str
    #: ``native histogram``, ``counter`` or ``gauge``, as stored.
    kind: str
    #: Where the stored name comes from; marked unconfirmed (with its README id) where no AWS text shows it.
    source: str


_BLOG = "AWS ML Blog, SageMaker detailed metrics and Insights dashboard, Step 4 (PromQL)"

#: vLLM name -> stored name: the ONE table alarms, charts and the container rehearsal use.
STORED_NAMES: dict[str, StoredMetric] = {
    "vllm:time_to_first_token_seconds": StoredMetric(
        exposed=(
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:time_to_first_token_seconds_sum",
            "vllm:time_to_first_token_seconds_count",
        ),
        stored="vllm:time_to_first_token_seconds",
        kind="native histogram",
        source=_BLOG,
    ),
    "vllm:inter_token_latency_seconds": StoredMetric(
        exposed=(
            "vllm:inter_token_latency_seconds_bucket",
            "vllm:inter_token_latency_seconds_sum",
            "vllm:inter_token_latency_seconds_count",
        ),
        stored="vllm:inter_token_latency_seconds",
        kind="native histogram",
        source=f"{_BLOG} (by analogy with TTFT: the same vLLM histogram type)",
    ),
    "vllm:generation_tokens": StoredMetric(
        exposed=("vllm:generation_tokens_total",),
        stored="vllm:generation_tokens_total",
        kind="counter",
        source="UNCONFIRMED[token-counter-name] (no AWS example of a counter); check with awscurl (docs/design/observability.md)",
    ),
}


@dataclass(frozen=True)
class TokenMetricNames:
    """The PromQL names of vLLM's token metrics as detailed observability stores them.

    :param ttft: the time-to-first-token histogram. Default: ``STORED_NAMES``'.
    :param inter_token: the inter-token latency histogram. Default: ``STORED_NAMES``'.
    :param generation_tokens: the generated-tokens counter. Default: ``STORED_NAMES``'.
    :param native_histograms: the histograms are stored whole (native histograms, queried
        without ``le``); ``False`` queries classic ``<name>_bucket`` series by ``le``.
        Default: ``True``.
    """

    ttft: str = STORED_NAMES["vllm:time_to_first_token_seconds"].stored
    inter_token: str = STORED_NAMES["vllm:inter_token_latency_seconds"].stored
    generation_tokens: str = STORED_NAMES["vllm:generation_tokens"].stored
    native_histograms: bool = True


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

    def _quantile(self, histogram: str, quantile: float) -> str:
        if self.names.native_histograms:
            series, by = histogram, f'"{POOL_LABEL}"'
        else:
            series, by = f"{histogram}_bucket", f'le, "{POOL_LABEL}"'
        return (
            f"histogram_quantile({quantile:g}, sum by ({by}) "
            f"(rate({self._selector(series)}[{RATE_WINDOW}])))"
        )

    def ttft(self, quantile: float) -> str:
        """Time to first token (seconds) at ``quantile`` per pool."""
        return self._quantile(self.names.ttft, quantile)

    def inter_token(self, quantile: float) -> str:
        """Inter-token latency (seconds) at ``quantile`` per pool."""
        return self._quantile(self.names.inter_token, quantile)

    def tokens_per_second(self) -> str:
        """Generated tokens per second per pool."""
        return (
            f'sum by ("{POOL_LABEL}") '
            f"(rate({self._selector(self.names.generation_tokens)}[{RATE_WINDOW}]))"
        )
