"""``HyperPodServingAddons``: what GPU serving needs on a ``HyperPodEksCluster``.

* The HyperPod dependencies Helm chart (health-monitoring agent, deep health checks, NVIDIA
  and EFA device plugins, ...) is required for clusters created through the API but is
  published to no Helm repository, and its code does not belong in this repository: the
  user supplies it (``HelmChartSource``); without it, synth warns and says where to get it,
  and the NVIDIA and EFA device plugins are installed from their published charts instead.
* LeaderWorkerSet controller (multi-node replicas), pinned.
* AWS Load Balancer Controller (internal NLB/ALB for the serving endpoint), pinned.

Every chart is installed after the HyperPod nodes exist (their webhooks need pods).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from .._cdk.nag import acknowledge_cdk_internals
from ..errors import Problems
from .cluster import HyperPodEksCluster, hyperpod_facts

HYPERPOD_CHART_HINT = (
    "the HyperPod dependencies Helm chart is required for HyperPod clusters created through the API: "
    "pass hyperpod_chart=HelmChartSource.from_directory('<checkout>/helm_chart/HyperPodHelmChart') from a checkout "
    "of github.com/aws/sagemaker-hyperpod-cli (or HelmChartSource.from_repository(...) for a copy you publish to your own "
    "OCI registry). Until then the NVIDIA and EFA device plugins come from their published charts, but the HyperPod "
    "health-monitoring agent and job auto-restart are missing."
)


@dataclass(frozen=True)
class HelmChartSource:
    """A chart from a local directory (bundled as an asset) or a repository / OCI reference."""

    chart: str
    repository: str | None = None
    version: str | None = None
    directory: str | None = None

    @classmethod
    def from_directory(cls, path: str, chart: str = "hyperpod-dependencies") -> HelmChartSource:
        return cls(chart=chart, directory=path)

    @classmethod
    def from_repository(cls, repository: str, chart: str, version: str) -> HelmChartSource:
        return cls(chart=chart, repository=repository, version=version)

    def validate(self, problems: Problems, prop: str) -> None:
        if (self.directory is None) == (self.repository is None):
            problems.add(prop, self, "give exactly one of directory or repository")
        if self.repository is not None and not self.version:
            problems.add(
                f"{prop}.version", self.version, "pin the chart version of a repository chart"
            )


class HyperPodServingAddons(Construct):
    """Helm charts for serving, in a deployable order.

    :param cluster: the cluster to install into.
    :param hyperpod_chart: the HyperPod dependencies chart. Default: none, with a synth warning.
    :param hyperpod_chart_values: values for it. Default: none.
    :param chart_versions: chart name -> version overrides of ``data/hyperpod.json``'s pins.
    :param load_balancer_controller: install the AWS Load Balancer Controller. Default: ``True``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: HyperPodEksCluster,
        hyperpod_chart: HelmChartSource | None = None,
        hyperpod_chart_values: Mapping[str, Any] | None = None,
        chart_versions: Mapping[str, str] | None = None,
        load_balancer_controller: bool = True,
    ) -> None:
        super().__init__(scope, id)
        self.cluster = cluster
        problems = Problems(f"HyperPodServingAddons '{self.node.path}'")
        if hyperpod_chart is not None:
            hyperpod_chart.validate(problems, "hyperpod_chart")
        pins = hyperpod_facts()["charts"]
        for name in chart_versions or {}:
            if name not in pins:
                problems.add(
                    f"chart_versions[{name!r}]",
                    chart_versions[name],
                    f"not one of our charts: {', '.join(pins)}",
                )  # type: ignore[index]
        problems.raise_if_any()
        versions = {
            name: (chart_versions or {}).get(name, pin["version"]) for name, pin in pins.items()
        }

        self.charts: dict[str, eks.HelmChart] = {}
        if hyperpod_chart is None:
            Annotations.of(self).add_warning_v2(
                "cdk-llm-serving:hyperpodChartMissing", HYPERPOD_CHART_HINT
            )
            for name in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
                self._published_chart(name, versions[name], values=_DEVICE_PLUGIN_VALUES[name])
        else:
            self.charts["hyperpod-dependencies"] = self._chart(
                "hyperpod-dependencies",
                chart=hyperpod_chart.chart,
                repository=hyperpod_chart.repository,
                version=hyperpod_chart.version,
                chart_asset=s3_assets.Asset(
                    self, "HyperPodChartAsset", path=hyperpod_chart.directory
                )
                if hyperpod_chart.directory
                else None,
                namespace="kube-system",
                values=dict(hyperpod_chart_values or {}),
            )
        self.leader_worker_set = self._published_chart("lws", versions["lws"], values={})

        self.load_balancer_controller: eks.AlbController | None = None
        if load_balancer_controller:
            self.load_balancer_controller = eks.AlbController(
                self,
                "LoadBalancerController",
                cluster=cluster.eks_cluster,
                version=eks.AlbControllerVersion.V2_9_2,
            )
            self.load_balancer_controller.node.add_dependency(cluster.nodes_ready)
            acknowledge_cdk_internals(
                self.load_balancer_controller,
                "The AWS Load Balancer Controller's own IAM policy (shipped with aws-cdk-lib's AlbController): it manages load balancers, target groups and security groups it names at run time.",
            )

    def _published_chart(self, name: str, version: str, values: Mapping[str, Any]) -> eks.HelmChart:
        pin = hyperpod_facts()["charts"][name]
        chart = self._chart(
            name,
            chart=pin["chart"],
            repository=pin["repository"],
            version=version,
            namespace=pin["namespace"],
            values=dict(values),
        )
        self.charts[name] = chart
        return chart

    def _chart(
        self,
        id: str,
        *,
        chart: str,
        repository: str | None,
        version: str | None,
        namespace: str,
        values: dict,
        chart_asset: s3_assets.Asset | None = None,
    ) -> eks.HelmChart:
        helm = eks.HelmChart(
            self,
            id,
            cluster=self.cluster.eks_cluster,
            chart=chart,
            chart_asset=chart_asset,
            repository=repository,
            version=version,
            namespace=namespace,
            create_namespace=namespace != "kube-system",
            values=values or None,
            wait=True,
        )
        helm.node.add_dependency(self.cluster.nodes_ready)
        return helm


#: Device plugins run only on GPU nodes, which carry the GPU taint.
_GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
_DEVICE_PLUGIN_VALUES: dict[str, dict[str, Any]] = {
    "nvidia-device-plugin": {
        "tolerations": _GPU_TOLERATION,
        "nodeSelector": {"cdk-llm-serving/role": "gpu"},
    },
    "aws-efa-k8s-device-plugin": {
        "tolerations": _GPU_TOLERATION,
        "nodeSelector": {"cdk-llm-serving/role": "gpu"},
    },
}
