"""``VllmObservability``: vLLM's Prometheus metrics into Amazon Managed Service for Prometheus.

Collector choice: the AMP managed scraper (``AWS::APS::Scraper``). It runs outside the
cluster, so nothing extra takes GPU-node resources, it is created by CloudFormation
with the stack, and it keeps vLLM's histograms whole: TTFT and inter-token latency
percentiles are exact PromQL ``histogram_quantile`` results, where agents that turn
Prometheus histograms into CloudWatch metrics keep only sums and counts.

Recording rules publish p99 TTFT, inter-token and end-to-end latency, queue depth,
KV-cache usage, token throughput and the speculative-decoding acceptance rate; alerting
rules fire on TTFT p99, queue depth and KV-cache saturation, routed by the workspace's
alert manager to an encrypted SNS topic.
"""

from __future__ import annotations

import base64

import yaml
from aws_cdk import Aws, CfnOutput, Duration, Fn, RemovalPolicy
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from ..errors import Problems
from .cluster import HyperPodEksCluster
from .multi_node_service import VllmMultiNodeService

COLLECTOR_USER = "aps-collector-user"


class VllmObservability(Construct):
    """Scrape the service's leaders, record its SLO series, alert on them.

    :param cluster: the HyperPod cluster (network, EKS).
    :param service: the vLLM service to watch.
    :param ttft_p99_threshold: TTFT p99 that alerts (5 minutes). Default: 2 seconds.
    :param max_waiting_requests: queued requests that alert (5 minutes). Default: 32.
    :param kv_cache_saturation: KV-cache usage (0-1) that alerts (10 minutes). Default: 0.95.
    :param scrape_interval: Default: 30 seconds.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: HyperPodEksCluster,
        service: VllmMultiNodeService,
        ttft_p99_threshold: Duration = Duration.seconds(2),
        max_waiting_requests: int = 32,
        kv_cache_saturation: float = 0.95,
        scrape_interval: Duration = Duration.seconds(30),
    ) -> None:
        super().__init__(scope, id)
        problems = Problems(f"VllmObservability '{self.node.path}'")
        if ttft_p99_threshold.to_seconds() <= 0:
            problems.add(
                "ttft_p99_threshold", ttft_p99_threshold.to_human_string(), "must be positive"
            )
        if max_waiting_requests < 1:
            problems.add("max_waiting_requests", max_waiting_requests, "must be at least 1")
        if not 0 < kv_cache_saturation <= 1:
            problems.add("kv_cache_saturation", kv_cache_saturation, "must be in (0, 1]")
        if not 10 <= scrape_interval.to_seconds() <= 300:
            problems.add(
                "scrape_interval", scrape_interval.to_human_string(), "must be 10 s to 5 min"
            )
        problems.raise_if_any()
        self.service = service
        self.ttft_p99_threshold_seconds = ttft_p99_threshold.to_seconds()
        self.max_waiting_requests = max_waiting_requests
        self.kv_cache_saturation = kv_cache_saturation

        key = kms.Key(
            self,
            "AlertsKey",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
            description="Encrypts vLLM alert notifications",
        )
        key.grant(iam.ServicePrincipal("aps.amazonaws.com"), "kms:GenerateDataKey*", "kms:Decrypt")
        self.alerts_topic = sns.Topic(
            self, "Alerts", master_key=key, enforce_ssl=True, display_name=f"{service.name} alerts"
        )
        self.alerts_topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("aps.amazonaws.com")],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[self.alerts_topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )

        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=f"{service.name}-metrics",
            alert_manager_definition=self.alert_manager_definition(),
        )
        self.rules = aps.CfnRuleGroupsNamespace(
            self,
            "Rules",
            name=f"{service.name}-slo",
            workspace=self.workspace.attr_arn,
            data=self.rule_groups(ttft_p99_threshold, max_waiting_requests, kv_cache_saturation),
        )

        self.scraper = aps.CfnScraper(
            self,
            "Scraper",
            alias=f"{service.name}-scraper",
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
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(
                configuration_blob=base64.b64encode(
                    self.scrape_configuration(scrape_interval).encode()
                ).decode()
            ),
        )
        # The scraper's service-linked role reaches the cluster as a Kubernetes user bound to
        # read-only discovery and /metrics rights. EKS access entries take the role ARN
        # without its /aws-service-role/... path.
        role_arn = self.scraper.attr_role_arn
        parts = Fn.split("/", role_arn)
        self.access_entry = eks.CfnAccessEntry(
            self,
            "ScraperAccess",
            cluster_name=cluster.eks_cluster.cluster_name,
            principal_arn=Fn.join("/", [Fn.select(0, parts), Fn.select(3, parts)]),
            username=COLLECTOR_USER,
        )
        self.rbac = eks.KubernetesManifest(
            self, "ScraperRbac", cluster=cluster.eks_cluster, manifest=self.rbac_objects()
        )
        self.rbac.node.add_dependency(cluster.nodes_ready)
        CfnOutput(
            self,
            "PrometheusQueryUrl",
            value=f"{self.workspace.attr_prometheus_endpoint}api/v1/query",
            description="PromQL query endpoint (SigV4, service aps)",
        )
        CfnOutput(self, "AlertsTopicArn", value=self.alerts_topic.topic_arn)

    # -- configuration documents ---------------------------------------------------------

    def scrape_configuration(self, interval: Duration) -> str:
        """Prometheus scrape configuration: the service's leader pods, port 8000, /metrics."""
        seconds = f"{int(interval.to_seconds())}s"
        return yaml.safe_dump(
            {
                "global": {"scrape_interval": seconds},
                "scrape_configs": [
                    {
                        "job_name": "vllm",
                        "metrics_path": "/metrics",
                        "kubernetes_sd_configs": [
                            {"role": "pod", "namespaces": {"names": [self.service.namespace]}}
                        ],
                        "relabel_configs": [
                            {
                                "source_labels": [
                                    "__meta_kubernetes_pod_label_app_kubernetes_io_name"
                                ],
                                "regex": self.service.name,
                                "action": "keep",
                            },
                            {
                                "source_labels": [
                                    "__meta_kubernetes_pod_label_cdk_llm_serving_role"
                                ],
                                "regex": "leader",
                                "action": "keep",
                            },
                            {
                                "source_labels": ["__meta_kubernetes_pod_container_port_number"],
                                "regex": "8000",
                                "action": "keep",
                            },
                            {
                                "source_labels": ["__meta_kubernetes_pod_name"],
                                "target_label": "pod",
                            },
                        ],
                    }
                ],
            },
            sort_keys=False,
            width=1_000_000,
        )

    def rule_groups(self, ttft: Duration, max_waiting: int, kv_saturation: float) -> str:
        """Recording rules for the serving SLOs and the alerts on them (Prometheus rule file)."""
        quantile = "histogram_quantile(0.99, sum by (le) (rate({metric}_bucket[5m])))"
        recording = [
            {
                "record": "vllm:ttft_seconds:p99",
                "expr": quantile.format(metric="vllm:time_to_first_token_seconds"),
            },
            {
                "record": "vllm:inter_token_latency_seconds:p99",
                "expr": quantile.format(metric="vllm:inter_token_latency_seconds"),
            },
            {
                "record": "vllm:e2e_request_latency_seconds:p99",
                "expr": quantile.format(metric="vllm:e2e_request_latency_seconds"),
            },
            {"record": "vllm:requests_waiting", "expr": "sum(vllm:num_requests_waiting)"},
            {"record": "vllm:requests_running", "expr": "sum(vllm:num_requests_running)"},
            {"record": "vllm:kv_cache_usage", "expr": "max(vllm:kv_cache_usage_perc)"},
            {
                "record": "vllm:generation_tokens_per_second",
                "expr": "sum(rate(vllm:generation_tokens_total[5m]))",
            },
            {
                "record": "vllm:prompt_tokens_per_second",
                "expr": "sum(rate(vllm:prompt_tokens_total[5m]))",
            },
            {
                "record": "vllm:spec_decode_acceptance_rate",
                "expr": "sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / sum(rate(vllm:spec_decode_num_draft_tokens_total[5m]))",
            },
        ]
        name = self.service.name
        alerts = [
            {
                "alert": "VllmTtftP99High",
                "expr": f"vllm:ttft_seconds:p99 > {ttft.to_seconds():g}",
                "for": "5m",
                "labels": {"severity": "warning", "service": name},
                "annotations": {
                    "summary": f"{name}: time to first token p99 above {ttft.to_seconds():g} s"
                },
            },
            {
                "alert": "VllmQueueDepthHigh",
                "expr": f"vllm:requests_waiting > {max_waiting}",
                "for": "5m",
                "labels": {"severity": "warning", "service": name},
                "annotations": {
                    "summary": f"{name}: more than {max_waiting} requests waiting for a slot"
                },
            },
            {
                "alert": "VllmKvCacheSaturated",
                "expr": f"vllm:kv_cache_usage > {kv_saturation:g}",
                "for": "10m",
                "labels": {"severity": "warning", "service": name},
                "annotations": {
                    "summary": f"{name}: KV cache above {kv_saturation:.0%}: requests queue or get preempted"
                },
            },
        ]
        return yaml.safe_dump(
            {
                "groups": [
                    {"name": f"{name}-recording", "interval": "1m", "rules": recording},
                    {"name": f"{name}-alerts", "rules": alerts},
                ]
            },
            sort_keys=False,
            width=1_000_000,
        )

    def alert_manager_definition(self) -> str:
        """Alert manager configuration (AMP's format: the config as a YAML block): every alert to SNS."""
        config = yaml.safe_dump(
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
            },
            sort_keys=False,
            width=1_000_000,
        )
        block = "".join(f"  {line}\n" for line in config.splitlines())
        return (
            ("alertmanager_config: |\n" + block)
            .replace("TOPIC_ARN", self.alerts_topic.topic_arn)
            .replace("REGION", Aws.REGION)
        )

    def rbac_objects(self) -> list[dict]:
        return [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "aps-collector-role"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": [
                            "nodes",
                            "nodes/proxy",
                            "nodes/metrics",
                            "services",
                            "endpoints",
                            "pods",
                            "ingresses",
                            "configmaps",
                        ],
                        "verbs": ["describe", "get", "list", "watch"],
                    },
                    {
                        "apiGroups": ["extensions", "networking.k8s.io"],
                        "resources": ["ingresses/status", "ingresses"],
                        "verbs": ["describe", "get", "list", "watch"],
                    },
                    {
                        "apiGroups": ["discovery.k8s.io"],
                        "resources": ["endpointslices"],
                        "verbs": ["get", "list", "watch"],
                    },
                    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "aps-collector-user-role-binding"},
                "subjects": [
                    {
                        "kind": "User",
                        "name": COLLECTOR_USER,
                        "apiGroup": "rbac.authorization.k8s.io",
                    }
                ],
                "roleRef": {
                    "kind": "ClusterRole",
                    "name": "aps-collector-role",
                    "apiGroup": "rbac.authorization.k8s.io",
                },
            },
        ]
