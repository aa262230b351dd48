"""``VllmObservability``: vLLM's Prometheus metrics into Amazon Managed Service for Prometheus.

The AMP managed scraper (``AWS::APS::Scraper``) collects them, outside the cluster and with
vLLM's histograms whole (why this collector: docs/design/observability.md, "vLLM on
HyperPod"). Recording rules publish the SLO series; alerting rules (``alarm_rule``) fire on
TTFT p99, queue depth and KV-cache saturation, routed by the workspace's alert manager to an
encrypted SNS topic. The scraper's Kubernetes user is cluster-wide: ``HyperPodServingAddons``
holds its ClusterRole.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import yaml
from aws_cdk import Aws, CfnOutput, Duration, Fn, RemovalPolicy
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct

from .._cdk.alarm_topic import encrypted_alarm_topic
from .._cdk.validation import check_at_least
from ..errors import Problems, checked_props
from .constants import (
    APP_NAME_LABEL,
    COLLECTOR_USER,
    E2E_P99_RULE,
    GENERATION_TOKENS_RATE_RULE,
    GROUP_LABEL,
    INTER_TOKEN_P99_RULE,
    KEDA_NAMESPACE,
    KEDA_OPERATOR_NAME,
    KV_CACHE_USAGE_RULE,
    LEADER_POD_ROLE,
    PROMPT_TOKENS_RATE_RULE,
    QUEUE_DEPTH_RULE,
    REQUESTS_RUNNING_RULE,
    ROLE_LABEL,
    SPEC_ACCEPTANCE_RULE,
    TTFT_P99_RULE,
    VLLM_API_PORT,
    VLLM_E2E_HISTOGRAM,
    VLLM_GENERATION_TOKENS,
    VLLM_INTER_TOKEN_HISTOGRAM,
    VLLM_KV_CACHE_USAGE,
    VLLM_METRICS_PATH,
    VLLM_PROMPT_TOKENS,
    VLLM_REQUESTS_RUNNING,
    VLLM_REQUESTS_WAITING,
    VLLM_SPEC_ACCEPTED_TOKENS,
    VLLM_SPEC_DRAFT_TOKENS,
    VLLM_TTFT_HISTOGRAM,
    prometheus_node_label,
    prometheus_pod_label,
)
from .interfaces import IHyperPodCluster
from .multi_node_service import VllmMultiNodeService
from .prefix_routing import ROUTER_METRICS_PORT

#: The scrape job of the service's GPU nodes (``VllmObservability._node_job``): ``up`` per node.
KUBELET_JOB = "kubelet"
#: The scrape job of KEDA's operator (``VllmObservability.scrape_keda_operator``).
KEDA_OPERATOR_JOB = "keda-operator"
#: The service-account token the managed collector presents to the API server, as AWS's
#: default configuration names it (``VllmObservability._node_job``).
_COLLECTOR_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"

# -- prefix cache and KV offload: vLLM 0.32.0's counters (vllm/v1/metrics/loggers.py;
# vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py; what each counts:
# docs/design/observability.md, "vLLM on HyperPod").
VLLM_PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
VLLM_PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
VLLM_EXTERNAL_PREFIX_CACHE_QUERIES = "vllm:external_prefix_cache_queries_total"
VLLM_EXTERNAL_PREFIX_CACHE_HITS = "vllm:external_prefix_cache_hits_total"
VLLM_KV_OFFLOAD_LOAD_BYTES = "vllm:kv_offload_load_bytes_total"
VLLM_KV_OFFLOAD_STORE_BYTES = "vllm:kv_offload_store_bytes_total"
#: Share of prompt tokens served from the GPU prefix cache (0-1), over all leaders.
PREFIX_CACHE_HIT_RATE_RULE = "vllm:prefix_cache_hit_rate"
#: Share of the tokens asked of the host-memory offload that it supplied (0-1).
OFFLOAD_HIT_RATE_RULE = "vllm:kv_offload_hit_rate"
#: Bytes per second loaded from host memory into GPU memory (offload hits).
OFFLOAD_LOAD_RATE_RULE = "vllm:kv_offload_load_bytes_per_second"
#: Bytes per second stored from GPU memory into host memory.
OFFLOAD_STORE_RATE_RULE = "vllm:kv_offload_store_bytes_per_second"
# The prefix-aware router's series (``prefix_routing``; vllm-router 0.1.17's /metrics, read
# from a running router; labels and outcomes: docs/design/observability.md).
ROUTER_PROCESSED_REQUESTS = "vllm_router_processed_requests_total"
ROUTER_WORKER_HEALTH = "vllm_router_worker_health"
ROUTER_PREFIX_DECISIONS = "vllm_router_prefix_routing_decisions_total"
#: Requests per second the routers sent to each replica (label ``worker``: its leader's URL).
ROUTER_REQUESTS_RULE = "vllm_router:requests_per_replica"
#: Share of the routers' cache-aware decisions that found a replica holding the prefix (0-1).
ROUTER_PREFIX_HIT_RULE = "vllm_router:prefix_hit_share"
#: Replicas at least one router sees healthy.
ROUTER_HEALTHY_RULE = "vllm_router:healthy_replicas"


class VllmObservability(Construct):
    """Scrape the service's leaders, record its SLO series, alarm on them.

    :param service: the vLLM service to watch; its cluster hosts the scraper and its add-ons
        hold the scraper's cluster role.
    :param ttft_p99_threshold: TTFT p99 that alarms (5 minutes). Default: 2 seconds.
    :param max_waiting_requests: queued requests that alarm (5 minutes). Default: 32.
    :param kv_cache_saturation: KV-cache usage (0-1) that alarms (10 minutes). Default: 0.95.
    :param scrape_interval: Default: 30 seconds.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        service: VllmMultiNodeService,
        ttft_p99_threshold: Duration = Duration.seconds(2),
        max_waiting_requests: int = 32,
        kv_cache_saturation: float = 0.95,
        scrape_interval: Duration = Duration.seconds(30),
    ) -> None:
        super().__init__(scope, id)
        self._validate(
            ttft_p99_threshold, max_waiting_requests, kv_cache_saturation, scrape_interval
        )
        self.service = service
        self.ttft_p99_threshold_seconds = ttft_p99_threshold.to_seconds()
        self.max_waiting_requests = max_waiting_requests
        self.kv_cache_saturation = kv_cache_saturation

        self.alarm_topic = self._render_alarm_topic()
        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=f"{service.name}-metrics",
            alert_manager_definition=self.alert_manager_definition(),
        )
        # The metrics history outlives the stack, as the alarm topic and its key do.
        self.workspace.apply_removal_policy(RemovalPolicy.RETAIN)
        self.rules = aps.CfnRuleGroupsNamespace(
            self,
            "Rules",
            name=f"{service.name}-slo",
            workspace=self.workspace.attr_arn,
            data=self.rule_groups(ttft_p99_threshold, max_waiting_requests, kv_cache_saturation),
        )
        self._scrape_interval = scrape_interval
        #: Jobs added after construction (``scrape_keda_operator``).
        self._extra_jobs: list[dict[str, Any]] = []
        self.scraper = self._render_scraper(service.cluster, scrape_interval)
        self.access_entry = self._render_scraper_access(service.cluster)
        #: The scraper user's cluster-wide rights, shared by every service on the cluster.
        self.rbac = service.addons.enable_scraper_access()
        self._render_outputs()

    @property
    def server_address(self) -> str:
        """The workspace's Prometheus-compatible base URL without a trailing slash, for clients
        that append ``/api/v1/query`` themselves (KEDA's ``prometheus`` scaler); the
        workspace's ``PrometheusEndpoint`` ends in ``/`` (AMP-onboard-query-APIs.html)."""
        return Fn.join(
            "",
            [
                "https://aps-workspaces.",
                Aws.REGION,
                ".",
                Aws.URL_SUFFIX,
                "/workspaces/",
                self.workspace.attr_workspace_id,
            ],
        )

    def _render_outputs(self) -> None:
        CfnOutput(
            self,
            "PrometheusQueryUrl",
            value=f"{self.workspace.attr_prometheus_endpoint}api/v1/query",
            description="PromQL query endpoint (SigV4, service aps)",
        )
        CfnOutput(self, "AlertsTopicArn", value=self.alarm_topic.topic_arn)

    # -- grants --------------------------------------------------------------------------

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` query this workspace's metrics (``aps:QueryMetrics``).

        CDK's grant adds the statement to the grantee's default (inline) policy; where inline
        policies are refused (HIPAA.Security ``IAMNoInlinePolicy``), attach
        ``query_statement()`` in a managed policy instead, as ``VllmReplicaAutoScaling`` does
        for KEDA's operator role.
        """
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["aps:QueryMetrics"], resource_arns=[self.workspace.attr_arn]
        )

    def query_statement(self) -> iam.PolicyStatement:
        """The statement ``grant_query`` grants: ``aps:QueryMetrics`` on this workspace only."""
        return iam.PolicyStatement(
            actions=["aps:QueryMetrics"], resources=[self.workspace.attr_arn]
        )

    # -- validate ------------------------------------------------------------------------

    def _validate(
        self,
        ttft_p99_threshold: Duration,
        max_waiting_requests: int,
        kv_cache_saturation: float,
        scrape_interval: Duration,
    ) -> None:
        problems = Problems(f"VllmObservability '{self.node.path}'")
        if ttft_p99_threshold.to_seconds() <= 0:
            problems.add(
                "ttft_p99_threshold", ttft_p99_threshold.to_human_string(), "must be positive"
            )
        check_at_least(problems, "max_waiting_requests", max_waiting_requests, 1)
        if not 0 < kv_cache_saturation <= 1:
            problems.add("kv_cache_saturation", kv_cache_saturation, "must be in (0, 1]")
        if not 10 <= scrape_interval.to_seconds() <= 300:
            problems.add(
                "scrape_interval", scrape_interval.to_human_string(), "must be 10 s to 5 min"
            )
        problems.raise_if_any()

    # -- render --------------------------------------------------------------------------

    def _render_alarm_topic(self) -> sns.Topic:
        """An SNS topic, encrypted with a key AMP may use, that only AMP of this account publishes to."""
        topic = encrypted_alarm_topic(
            self,
            publisher="aps.amazonaws.com",
            key_description="Encrypts vLLM alert notifications",
            display_name=f"{self.service.name} alerts",
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("aps.amazonaws.com")],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        return topic

    def _render_scraper(self, cluster: IHyperPodCluster, interval: Duration) -> aps.CfnScraper:
        """The AMP managed scraper in the nodes' subnets, writing to the workspace."""
        return aps.CfnScraper(
            self,
            "Scraper",
            alias=f"{self.service.name}-scraper",
            source=aps.CfnScraper.SourceProperty(
                eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                    cluster_arn=cluster.eks_cluster.cluster_arn,
                    subnet_ids=[subnet.subnet_id for subnet in cluster.private_subnets],
                    security_group_ids=[cluster.node_security_group.security_group_id],
                )
            ),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(
                    workspace_arn=self.workspace.attr_arn
                )
            ),
            scrape_configuration=self._scrape_blob(),
        )

    def _render_scraper_access(self, cluster: IHyperPodCluster) -> eks.CfnAccessEntry:
        """The scraper's service-linked role as the Kubernetes user ``aps-collector-user``.

        EKS access entries take the role ARN without its /aws-service-role/... path.
        """
        parts = Fn.split("/", self.scraper.attr_role_arn)
        return eks.CfnAccessEntry(
            self,
            "ScraperAccess",
            cluster_name=cluster.eks_cluster.cluster_name,
            principal_arn=Fn.join("/", [Fn.select(0, parts), Fn.select(3, parts)]),
            username=COLLECTOR_USER,
        )

    # -- configuration documents ---------------------------------------------------------

    def scrape_configuration(self, interval: Duration) -> str:
        """Prometheus scrape configuration: the service's leader pods, the API port, /metrics,
        over HTTPS (``scheme``, ``tls_config``: AMP-collector-how-to.html, scraper configuration)."""
        seconds = f"{int(interval.to_seconds())}s"
        # vLLM serves HTTPS only (serving_tls); the leader's CA is made in the cluster at
        # deploy time, so the collector cannot verify it: encrypted, not authenticated.
        job = _pod_job(
            "vllm",
            self.service.namespace,
            [
                (prometheus_pod_label(APP_NAME_LABEL), self.service.name),
                (prometheus_pod_label(ROLE_LABEL), LEADER_POD_ROLE),
                ("__meta_kubernetes_pod_container_port_number", str(VLLM_API_PORT)),
            ],
            tls={"scheme": "https", "tls_config": {"insecure_skip_verify": True}},
        )
        jobs = [job, *self._router_job(), self._node_job(), *self._extra_jobs]
        document = {"global": {"scrape_interval": seconds}, "scrape_configs": jobs}
        return yaml_text(document)

    def _node_job(self) -> dict[str, Any]:
        """Each node of the service's GPU group through the API server's proxy to its kubelet,
        labelled ``group``: ``up`` per node is the group's node count (``node_panels``).

        Address, path and token as AWS's default collector's ``cadvisor`` job
        (AMP-collector-how-to.html); the kubelet's own series are dropped, ``up`` stays
        (docs/design/observability.md, "vLLM on HyperPod").
        """
        group = prometheus_node_label(GROUP_LABEL)
        return {
            "job_name": KUBELET_JOB,
            "scheme": "https",
            "authorization": {"credentials_file": _COLLECTOR_TOKEN},
            "kubernetes_sd_configs": [{"role": "node"}],
            "relabel_configs": [
                {"source_labels": [group], "regex": self.service.group.name, "action": "keep"},
                {"source_labels": [group], "target_label": "group"},
                {"source_labels": ["__meta_kubernetes_node_name"], "target_label": "node"},
                {"target_label": "__address__", "replacement": "kubernetes.default.svc:443"},
                {
                    "source_labels": ["__meta_kubernetes_node_name"],
                    "regex": "(.+)",
                    "target_label": "__metrics_path__",
                    "replacement": "/api/v1/nodes/$1/proxy/metrics",
                },
            ],
            "metric_relabel_configs": [
                {"source_labels": ["__name__"], "regex": ".+", "action": "drop"}
            ],
        }

    def scrape_keda_operator(self) -> None:
        """Add the KEDA operator's metrics (``keda_scaler_active`` and the like; KEDA, "Integrate
        with Prometheus", port 8080 at ``/metrics``,
        https://keda.sh/docs/2.17/integrations/prometheus/) to the scraper: its pods in
        ``KEDA_NAMESPACE`` by the chart's ``app`` label, their ``metrics`` port (kedacore/charts
        ``keda/templates/manager/deployment.yaml``, with ``prometheus.operator.enabled``).
        Idempotent: once per scraper."""
        if any(job["job_name"] == KEDA_OPERATOR_JOB for job in self._extra_jobs):
            return
        keep = [
            (prometheus_pod_label("app"), KEDA_OPERATOR_NAME),
            ("__meta_kubernetes_pod_container_port_name", "metrics"),
        ]
        self._extra_jobs.append(_pod_job(KEDA_OPERATOR_JOB, KEDA_NAMESPACE, keep, pod_label=False))
        self.scraper.scrape_configuration = self._scrape_blob()

    def _scrape_blob(self) -> aps.CfnScraper.ScrapeConfigurationProperty:
        return aps.CfnScraper.ScrapeConfigurationProperty(
            configuration_blob=base64.b64encode(
                self.scrape_configuration(self._scrape_interval).encode()
            ).decode()
        )

    def _router_job(self) -> list[dict[str, Any]]:
        """The prefix-aware routers' metrics port (plain HTTP inside the VPC, no key: request
        counts and replica health only; ``prefix_routing``), when the service has them."""
        router = self.service.router
        if router is None:
            return []
        keep = [
            (prometheus_pod_label(APP_NAME_LABEL), router.router_name),
            ("__meta_kubernetes_pod_container_port_number", str(ROUTER_METRICS_PORT)),
        ]
        return [_pod_job("vllm-router", self.service.namespace, keep)]

    def rule_groups(self, ttft: Duration, max_waiting: int, kv_saturation: float) -> str:
        """Recording rules for the serving SLOs and the alarms on them (Prometheus rule file)."""
        name = self.service.name
        recording = _recording_rules() + (_router_recording_rules() if self.service.router else [])
        return rule_file(
            {"name": f"{name}-recording", "interval": "1m", "rules": recording},
            {
                "name": f"{name}-alerts",
                "rules": self._alarm_rules(ttft, max_waiting, kv_saturation),
            },
        )

    def _alarm_rules(
        self, ttft: Duration, max_waiting: int, kv_saturation: float
    ) -> list[dict[str, Any]]:
        """TTFT p99, queue depth and KV-cache saturation above their thresholds."""
        name = self.service.name
        labels = {"severity": "warning", "service": name}
        seconds = ttft.to_seconds()
        return [
            alarm_rule(
                "VllmTtftP99High",
                f"{TTFT_P99_RULE} > {seconds:g}",
                for_="5m",
                labels=labels,
                summary=f"{name}: time to first token p99 above {seconds:g} s",
            ),
            alarm_rule(
                "VllmQueueDepthHigh",
                f"{QUEUE_DEPTH_RULE} > {max_waiting}",
                for_="5m",
                labels=labels,
                summary=f"{name}: more than {max_waiting} requests waiting for a slot",
            ),
            alarm_rule(
                "VllmKvCacheSaturated",
                f"{KV_CACHE_USAGE_RULE} > {kv_saturation:g}",
                for_="10m",
                labels=labels,
                summary=f"{name}: KV cache above {kv_saturation:.0%}: requests queue or get preempted",
            ),
        ]

    def alert_manager_definition(self) -> str:
        """Alert manager configuration (AMP's format: the config as a YAML block): every alarm to SNS."""
        config = yaml_text(
            {
                "route": {"receiver": "sns", "group_by": ["alertname", "service"]},
                "receivers": [
                    {
                        "name": "sns",
                        "sns_configs": [
                            {
                                "topic_arn": "TOPIC_ARN",
                                "sigv4": {"region": "REGION"},
                                "attributes": {"service": self.service.name},
                            }
                        ],
                    }
                ],
            }
        )
        block = "".join(f"  {line}\n" for line in config.splitlines())
        return (
            ("alertmanager_config: |\n" + block)
            .replace("TOPIC_ARN", self.alarm_topic.topic_arn)
            .replace("REGION", Aws.REGION)
        )


def _pod_job(
    name: str,
    namespace: str,
    keep: list[tuple[str, str]],
    *,
    tls: Mapping[str, Any] | None = None,
    pod_label: bool = True,
) -> dict[str, Any]:
    """A scrape job of the pods in ``namespace`` whose ``keep`` labels match, at /metrics,
    each series labelled with its ``pod`` unless ``pod_label`` is false."""
    relabel: list[dict[str, Any]] = [
        {"source_labels": [label], "regex": regex, "action": "keep"} for label, regex in keep
    ]
    if pod_label:
        relabel.append({"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"})
    return {
        "job_name": name,
        "metrics_path": VLLM_METRICS_PATH,
        **(tls or {}),
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
        "relabel_configs": relabel,
    }


def yaml_text(document: object) -> str:
    """A YAML document as Prometheus and AMP read it: keys in order, no line wrapping."""
    return str(yaml.safe_dump(document, sort_keys=False, width=1_000_000))


def alarm_rule(
    name: str, expr: str, *, for_: str, labels: Mapping[str, str], summary: str
) -> dict[str, Any]:
    """One Prometheus alerting rule: the way every HyperPod alarm is written (the workspace's
    alert manager routes it; ``VllmObservability`` sends each to its alarm topic)."""
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": dict(labels),
        "annotations": {"summary": summary},
    }


def rule_file(*groups: Mapping[str, Any]) -> str:
    """A Prometheus rule file of ``groups`` (an ``AWS::APS::RuleGroupsNamespace``'s data)."""
    return yaml_text({"groups": [dict(group) for group in groups]})


def _router_recording_rules() -> list[dict[str, str]]:
    """Requests per replica, the share of prefix hits, the replicas the routers see healthy."""
    decisions = f"sum(rate({ROUTER_PREFIX_DECISIONS}[5m]))"
    return [
        {
            "record": ROUTER_REQUESTS_RULE,
            "expr": f"sum by (worker) (rate({ROUTER_PROCESSED_REQUESTS}[5m]))",
        },
        {
            "record": ROUTER_PREFIX_HIT_RULE,
            "expr": (
                f'sum(rate({ROUTER_PREFIX_DECISIONS}{{outcome="prefix_hit"}}[5m])) / {decisions}'
            ),
        },
        {
            "record": ROUTER_HEALTHY_RULE,
            "expr": f"count(max by (worker) ({ROUTER_WORKER_HEALTH}) == 1)",
        },
    ]


def _recording_rules() -> list[dict[str, str]]:
    """p99 latencies from vLLM's histograms, queue, KV cache, token rates, MTP acceptance."""
    quantile = "histogram_quantile(0.99, sum by (le) (rate({metric}_bucket[5m])))"
    rate = "sum(rate({metric}[5m]))"
    return [
        {"record": TTFT_P99_RULE, "expr": quantile.format(metric=VLLM_TTFT_HISTOGRAM)},
        {
            "record": INTER_TOKEN_P99_RULE,
            "expr": quantile.format(metric=VLLM_INTER_TOKEN_HISTOGRAM),
        },
        {"record": E2E_P99_RULE, "expr": quantile.format(metric=VLLM_E2E_HISTOGRAM)},
        {"record": QUEUE_DEPTH_RULE, "expr": f"sum({VLLM_REQUESTS_WAITING})"},
        {"record": REQUESTS_RUNNING_RULE, "expr": f"sum({VLLM_REQUESTS_RUNNING})"},
        {"record": KV_CACHE_USAGE_RULE, "expr": f"max({VLLM_KV_CACHE_USAGE})"},
        {"record": GENERATION_TOKENS_RATE_RULE, "expr": rate.format(metric=VLLM_GENERATION_TOKENS)},
        {"record": PROMPT_TOKENS_RATE_RULE, "expr": rate.format(metric=VLLM_PROMPT_TOKENS)},
        {
            "record": SPEC_ACCEPTANCE_RULE,
            "expr": f"{rate.format(metric=VLLM_SPEC_ACCEPTED_TOKENS)} / {rate.format(metric=VLLM_SPEC_DRAFT_TOKENS)}",
        },
        {
            "record": PREFIX_CACHE_HIT_RATE_RULE,
            "expr": f"{rate.format(metric=VLLM_PREFIX_CACHE_HITS)} / {rate.format(metric=VLLM_PREFIX_CACHE_QUERIES)}",
        },
        {
            "record": OFFLOAD_HIT_RATE_RULE,
            "expr": f"{rate.format(metric=VLLM_EXTERNAL_PREFIX_CACHE_HITS)} / {rate.format(metric=VLLM_EXTERNAL_PREFIX_CACHE_QUERIES)}",
        },
        {"record": OFFLOAD_LOAD_RATE_RULE, "expr": rate.format(metric=VLLM_KV_OFFLOAD_LOAD_BYTES)},
        {
            "record": OFFLOAD_STORE_RATE_RULE,
            "expr": rate.format(metric=VLLM_KV_OFFLOAD_STORE_BYTES),
        },
    ]
