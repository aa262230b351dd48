"""``HyperPodServingAddons``: what GPU serving needs on a ``HyperPodEksCluster``.

The HyperPod dependencies chart, which the user supplies (``HelmChartSource``; without it, synth
warns and the device plugins come from their published charts), installed before the HyperPod
cluster; the LeaderWorkerSet controller and the AWS Load Balancer Controller; and, once per
cluster on request, KEDA, the managed scraper's ClusterRole and cert-manager. Every other chart
is installed after the nodes exist (docs/design/hyperpod-cluster.md, "Serving add-ons")."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, CfnElement, Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from .._cdk.nag import acknowledge_cdk_internals, acknowledge_generated_statements
from .._cdk.pod_identity import pod_identity_role
from ..errors import Problems, checked_props
from ..planning.catalog import Catalog, default_catalog
from ._eks_addon import eks_addon
from ._facts import chart_pins, inference_operator_facts
from .chart_source import HelmChartSource
from .cluster import HyperPodEksCluster
from .constants import (
    COLLECTOR_CLUSTER_ROLE,
    COLLECTOR_ROLE_BINDING,
    COLLECTOR_USER,
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_RELEASE,
    HYPERPOD_DEPENDENCIES_CHART,
    KEDA_CHART,
    KEDA_NAMESPACE,
    KEDA_OPERATOR_ACCOUNT,
    LWS_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    NVIDIA_DEVICE_PLUGIN_RELEASE,
    ROLE_LABEL,
    SYSTEM_NODE_ROLE,
)
from .device_plugins import (
    deep_merge,
    efa_instance_types,
    efa_values,
    hyperpod_chart_values,
    nvidia_values,
)
from .interfaces import IHyperPodCluster
from .node_image_pulls import (
    efa_device_plugin_repository_arn,
    load_balancer_controller_repository_arn,
)

__all__ = ["HelmChartSource", "HyperPodServingAddons", "KedaInstallation"]

_HYPERPOD_CHART_HINT = (
    "the HyperPod dependencies Helm chart is required for HyperPod clusters created through the API: "
    "pass hyperpod_chart=HelmChartSource.from_directory('<checkout>/helm_chart/HyperPodHelmChart') from a checkout "
    "of github.com/aws/sagemaker-hyperpod-cli after `helm dependency build` in that directory (or "
    "HelmChartSource.from_repository('oci://<registry>/<path>/hyperpod-helm-chart', '<version>') for a copy you "
    "publish to your own OCI registry). Until then the NVIDIA and EFA device plugins come from their published charts, but the HyperPod "
    "health-monitoring agent and job auto-restart are missing."
)

#: Where the cert-manager add-on runs its webhook: AWS publishes not the add-on's manifests, so
#: the upstream chart's names at its version (https://cert-manager.io/docs/installation/helm/),
#: to confirm on a live add-on (docs/design/hyperpod-cluster.md, "cert-manager").
CERT_MANAGER_NAMESPACE = "cert-manager"
CERT_MANAGER_WEBHOOK = "cert-manager-webhook"

#: ``chart_images`` key -> (the chart, the path of its image's values). Each published chart
#: renders ``<repository>:<tag>`` (KEDA: ``<registry>/<repository>:<tag>``) with no digest value
#: of its own, so a digest rides in the tag (the charts' templates: docs/design/hyperpod-cluster.md).
CHART_IMAGE_VALUES: dict[str, tuple[str, tuple[str, ...]]] = {
    NVIDIA_DEVICE_PLUGIN_CHART: (NVIDIA_DEVICE_PLUGIN_CHART, ("image",)),
    EFA_DEVICE_PLUGIN_CHART: (EFA_DEVICE_PLUGIN_CHART, ("image",)),
    LWS_CHART: (LWS_CHART, ("image", "manager")),
    KEDA_CHART: (KEDA_CHART, ("image", "keda")),
    "keda-metrics-apiserver": (KEDA_CHART, ("image", "metricsApiServer")),
    "keda-admission-webhooks": (KEDA_CHART, ("image", "webhooks")),
}
#: ``<repository>:<tag>@sha256:<digest>``: what a chart's image values can carry.
_PINNED_IMAGE = re.compile(
    r"^(?P<repository>[^\s@]+):(?P<tag>[\w][\w.-]{0,127})@(?P<digest>sha256:[a-f0-9]{64})$"
)


def chart_image_values(name: str, image: str) -> dict[str, Any]:
    """The values that make chart image ``name`` (a ``CHART_IMAGE_VALUES`` key) ``image``."""
    match = _PINNED_IMAGE.match(image)
    assert match, image  # validated
    chart, path = CHART_IMAGE_VALUES[name]
    repository, tag = match["repository"], f"{match['tag']}@{match['digest']}"
    leaf: dict[str, Any] = {"repository": repository, "tag": tag}
    if chart == KEDA_CHART:
        registry, _, rest = repository.partition("/")
        has_registry = rest and ("." in registry or ":" in registry or registry == "localhost")
        leaf = {
            "registry": registry if has_registry else "docker.io",
            "repository": rest if has_registry else repository,
            "tag": tag,
        }
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


@dataclass(frozen=True)
class KedaInstallation:
    """KEDA on one cluster: its chart and the operator's Pod Identity (one per cluster).

    KEDA's ``aws`` TriggerAuthentication with ``identityOwner: operator`` queries with the
    operator's role, so a workspace grants its query to that grantee:
    ``observability.grant_query(keda.operator_role)``.
    """

    chart: eks.HelmChart
    operator_role: iam.Role
    operator_identity: eks.CfnPodIdentityAssociation


class HyperPodServingAddons(Construct):
    """Helm charts for serving, in a deployable order; cluster-wide pieces, once each.

    :param cluster: the cluster to install into.
    :param hyperpod_chart: the HyperPod dependencies chart (release ``hyperpod-dependencies`` in
        ``kube-system``, before the HyperPod cluster); its device plugins replace the direct
        installs. Default: none, with a synth warning, and the plugins' published charts.
    :param hyperpod_chart_values: values merged over ours (``device_plugins.hyperpod_chart_values``)
        key by key; lists replace. Default: none.
    :param chart_versions: chart name -> version overrides of ``assets/hyperpod.json``'s pins
        (``nvidia-device-plugin``, ``aws-efa-k8s-device-plugin``, ``lws``, ``keda``).
    :param chart_images: a ``CHART_IMAGE_VALUES`` key -> ``<repository>:<tag>@sha256:<digest>``
        (read a digest with ``crane digest <repository>:<tag>``). Default: none, each chart's
        own tag.
    :param load_balancer_controller: install the AWS Load Balancer Controller (aws-cdk-lib's
        ``AlbController`` takes a cluster this app creates). Default: ``True``.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: IHyperPodCluster,
        hyperpod_chart: HelmChartSource | None = None,
        hyperpod_chart_values: Mapping[str, Any] | None = None,
        chart_versions: Mapping[str, str] | None = None,
        chart_images: Mapping[str, str] | None = None,
        load_balancer_controller: bool = True,
    ) -> None:
        super().__init__(scope, id)
        self.cluster = cluster
        self._validate(hyperpod_chart, chart_versions, chart_images or {}, load_balancer_controller)
        for image in sorted((chart_images or {}).values()):
            cluster.allow_image_pull(image)  # a mirror in ECR needs the nodes' pull grant
        #: Chart name -> the image values ``chart_images`` sets in it.
        self._image_values: dict[str, dict[str, Any]] = {}
        for name, image in sorted((chart_images or {}).items()):
            chart = CHART_IMAGE_VALUES[name][0]
            self._image_values[chart] = deep_merge(
                self._image_values.get(chart, {}), chart_image_values(name, image)
            )
        self.chart_versions: dict[str, str] = {
            name: (chart_versions or {}).get(name, pin["version"])
            for name, pin in chart_pins().items()
        }
        self.charts: dict[str, eks.HelmChart] = {}
        self._render_node_charts(hyperpod_chart, hyperpod_chart_values)
        self.leader_worker_set = self._published_chart(LWS_CHART, values={})
        self.load_balancer_controller: eks.AlbController | None = (
            self._render_load_balancer_controller() if load_balancer_controller else None
        )
        self._keda: KedaInstallation | None = None
        self._scraper_access: eks.KubernetesManifest | None = None
        self._cert_manager: eks.Addon | None = None
        self._cert_manager_webhook: eks.KubernetesObjectValue | None = None

    # -- what services request (once per cluster) ---------------------------------------

    def enable_keda(self) -> KedaInstallation:
        """KEDA and its operator's Pod Identity; installed on the first call, reused after.

        EKS allows one Pod Identity association per service account
        (https://docs.aws.amazon.com/eks/latest/userguide/pod-identities.html) and the chart's
        CRDs exist once per cluster: every ``VllmReplicaAutoScaling`` shares these.
        """
        if self._keda is None:
            self._keda = self._render_keda()
        return self._keda

    def enable_scraper_access(self) -> eks.KubernetesManifest:
        """The ClusterRole and binding the AMP managed scraper's user needs; created once.

        Each scraper maps its own role to the Kubernetes user ``aps-collector-user``
        (``VllmObservability``); the read-only rights of that user are cluster-wide (AMP user
        guide, https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html).
        """
        if self._scraper_access is None:
            self._scraper_access = eks.KubernetesManifest(
                self, "ScraperRbac", cluster=self.cluster.eks_cluster, manifest=_scraper_rbac()
            )
            self._scraper_access.node.add_dependency(self.cluster.nodes_ready)
        return self._scraper_access

    def enable_cert_manager(self) -> eks.Addon:
        """The EKS add-on ``cert-manager``, after the nodes; installed on the first call.

        One per cluster (https://docs.aws.amazon.com/eks/latest/userguide/creating-an-add-on.html),
        shared by every ``VllmMultiNodeService`` (its TLS certificates) and the inference
        operator (its CRDs); pinned as AWS's operator migration script installs it
        (``assets/inference_operator.json``). Its pods land on the untainted system group.
        """
        if self._cert_manager is None:
            self._cert_manager = eks_addon(
                self,
                "CertManager",
                cluster=self.cluster.eks_cluster,
                addon_name="cert-manager",
                addon_version=inference_operator_facts()["dependencies"]["cert-manager"],
            )
            self._cert_manager.node.add_dependency(self.cluster.nodes_ready)
            # The operator's logical id from before the add-on was shared: a new id makes an
            # update create a second cert-manager add-on, which EKS refuses (ResourceInUseException).
            cfn = self._cert_manager.node.default_child
            assert isinstance(cfn, CfnElement)
            cfn.override_logical_id(
                _logical_id(self, ["InferenceOperator", "Addon-cert-manager", "Resource"])
            )
        return self._cert_manager

    def enable_cert_manager_webhook(self) -> eks.KubernetesObjectValue:
        """A wait for cert-manager's webhook (its ready replicas, up to 10 minutes) after the
        add-on, one per cluster: its API refuses resources until the webhook serves, after the
        add-on is ``ACTIVE`` (docs/design/hyperpod-cluster.md, "cert-manager")."""
        if self._cert_manager_webhook is None:
            self._cert_manager_webhook = eks.KubernetesObjectValue(
                self,
                "CertManagerWebhookReady",
                cluster=self.cluster.eks_cluster,
                object_type="deployment",
                object_name=CERT_MANAGER_WEBHOOK,
                object_namespace=CERT_MANAGER_NAMESPACE,
                json_path=".status.readyReplicas",
                timeout=Duration.minutes(10),
            )
            self._cert_manager_webhook.node.add_dependency(self.enable_cert_manager())
        return self._cert_manager_webhook

    # -- validate -----------------------------------------------------------------------

    def _validate(
        self,
        hyperpod_chart: HelmChartSource | None,
        chart_versions: Mapping[str, str] | None,
        chart_images: Mapping[str, str],
        load_balancer_controller: bool,
    ) -> None:
        problems = Problems(f"HyperPodServingAddons '{self.node.path}'")
        self._check_chart_images(problems, chart_images, hyperpod_chart)
        if hyperpod_chart is not None:
            hyperpod_chart.validate(problems, "hyperpod_chart")
        elif isinstance(self.cluster, HyperPodEksCluster):
            explicit = [
                group.name for group in self.cluster.instance_groups if group.deep_health_checks
            ]
            if explicit:
                problems.add(
                    "hyperpod_chart",
                    None,
                    f"instance groups {', '.join(repr(n) for n in explicit)} set deep_health_checks, "
                    "which run with the HyperPod dependencies chart (without it AWS documents that "
                    "cluster creation can fail): pass hyperpod_chart=..., or deep_health_checks=() "
                    "on those groups",
                )
        pins = chart_pins()
        for name, version in (chart_versions or {}).items():
            if name not in pins:
                problems.add(
                    f"chart_versions[{name!r}]",
                    version,
                    f"not one of our charts: {', '.join(pins)}",
                )
        if load_balancer_controller and not isinstance(self.cluster.eks_cluster, eks.Cluster):
            problems.add(
                "load_balancer_controller",
                load_balancer_controller,
                "aws-cdk-lib's AlbController needs a cluster this app creates; pass False for an "
                "imported cluster (install the controller there yourself)",
            )
        problems.raise_if_any()

    @staticmethod
    def _check_chart_images(
        problems: Problems, images: Mapping[str, str], hyperpod_chart: HelmChartSource | None
    ) -> None:
        for name, image in images.items():
            prop = f"chart_images[{name!r}]"
            if name not in CHART_IMAGE_VALUES:
                problems.add(prop, image, f"one of {', '.join(CHART_IMAGE_VALUES)}")
            elif not isinstance(image, str) or not _PINNED_IMAGE.match(image):
                problems.add(
                    prop,
                    image,
                    "<repository>:<tag>@sha256:<digest> (the charts render <repository>:<tag>; "
                    "the digest rides in the tag)",
                )
            elif hyperpod_chart is not None and name in (
                NVIDIA_DEVICE_PLUGIN_CHART,
                EFA_DEVICE_PLUGIN_CHART,
            ):
                problems.add(
                    prop,
                    image,
                    "the HyperPod dependencies chart installs the device plugins: set their "
                    "images in hyperpod_chart_values",
                )

    # -- render -------------------------------------------------------------------------

    def _render_node_charts(
        self, hyperpod_chart: HelmChartSource | None, values: Mapping[str, Any] | None
    ) -> None:
        """The HyperPod dependencies chart, or (with a warning, and the groups' default deep
        health checks turned off) the device plugins alone."""
        if hyperpod_chart is None:
            self._warn_chart_missing()
            groups = self.cluster.instance_groups  # read after: the checks have changed
            self._published_chart(
                NVIDIA_DEVICE_PLUGIN_CHART,
                values=nvidia_values(groups),
                release=NVIDIA_DEVICE_PLUGIN_RELEASE,
            )
            if efa_instance_types(groups, self._catalog):  # no EFA node: no EFA plugin
                self._published_chart(
                    EFA_DEVICE_PLUGIN_CHART,
                    values=efa_values(groups, self._catalog),
                    release=EFA_DEVICE_PLUGIN_RELEASE,
                )
                if isinstance(self.cluster, HyperPodEksCluster):
                    self.cluster.allow_registry_pull(efa_device_plugin_repository_arn())
            return
        groups = self.cluster.instance_groups
        ours = hyperpod_chart_values(groups, self._catalog, Stack.of(self).region)
        chart = self._chart(
            HYPERPOD_DEPENDENCIES_CHART,
            **hyperpod_chart._render(self, "HyperPodChartAsset"),
            namespace="kube-system",
            values=deep_merge(ours, values or {}),
            release=HYPERPOD_DEPENDENCIES_CHART,
            before_nodes=True,
        )
        self.charts[HYPERPOD_DEPENDENCIES_CHART] = chart
        if isinstance(self.cluster, HyperPodEksCluster):
            self.cluster.order_nodes_after(chart)
            # Its agents' images come from per-Region accounts in its own templates and
            # values (node_image_registries.json, hyperpod_chart_note): not modelled.
            self.cluster.allow_any_image_pull(
                "the HyperPod dependencies chart's agents pull from per-Region registries its "
                "templates name"
            )

    def _warn_chart_missing(self) -> None:
        """Warn that the chart is missing; on a cluster built here, turn off the deep health
        checks its groups run by default and name them (AWS documents that cluster creation
        can fail without the chart; explicit checks were refused by ``_validate``)."""
        unchecked = (
            self.cluster.disable_default_deep_health_checks()
            if isinstance(self.cluster, HyperPodEksCluster)
            else []
        )
        checks = (
            f" Without it, deep health checks are off: instance groups "
            f"{', '.join(repr(n) for n in unchecked)} run none (their default), as AWS "
            "documents that cluster creation can fail without the chart "
            "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-install-packages-using-helm-chart.html)."
            if unchecked
            else ""
        )
        Annotations.of(self).add_warning_v2(
            "cdk-llm-serving:hyperpodChartMissing", _HYPERPOD_CHART_HINT + checks
        )

    @property
    def _catalog(self) -> Catalog:
        """The cluster's instance catalog (EFA device counts), else the planner's default."""
        catalog = getattr(self.cluster, "catalog", None)
        return catalog if isinstance(catalog, Catalog) else default_catalog()

    def _render_load_balancer_controller(self) -> eks.AlbController:
        cluster = self.cluster.eks_cluster
        assert isinstance(cluster, eks.Cluster)  # _validate refused anything else
        controller = eks.AlbController(
            self,
            "LoadBalancerController",
            cluster=cluster,
            version=eks.AlbControllerVersion.V2_9_2,
        )
        controller.node.add_dependency(self.cluster.nodes_ready)
        if isinstance(self.cluster, HyperPodEksCluster):
            self.cluster.allow_registry_pull(load_balancer_controller_repository_arn())
        acknowledge_cdk_internals(
            controller,
            "The AWS Load Balancer Controller's own IAM policy (shipped with aws-cdk-lib's AlbController): it manages load balancers, target groups and security groups it names at run time.",
        )
        return controller

    def _render_keda(self) -> KedaInstallation:
        """KEDA's chart on the system nodes, and a Pod Identity role for its operator.

        ``tolerations``/``nodeSelector`` are top-level keys of kedacore/charts keda/values.yaml.
        """
        chart = self._published_chart(
            KEDA_CHART,
            id="Keda",
            values={
                "tolerations": [],
                "nodeSelector": {ROLE_LABEL: SYSTEM_NODE_ROLE},
                # The operator's metrics on port 8080 (``keda_scaler_active`` for the wake
                # alarm; ``VllmObservability.scrape_keda_operator``).
                "prometheus": {"operator": {"enabled": True}},
            },
        )
        role = pod_identity_role(
            self,
            "KedaQueryRole",
            cluster_arn=self.cluster.eks_cluster.cluster_arn,
            namespace=KEDA_NAMESPACE,
            service_account=KEDA_OPERATOR_ACCOUNT,
            description="KEDA operator: reads the vLLM queue depth from Amazon Managed Prometheus",
        )
        identity = eks.CfnPodIdentityAssociation(
            self,
            "KedaQueryIdentity",
            cluster_name=self.cluster.eks_cluster.cluster_name,
            namespace=KEDA_NAMESPACE,
            service_account=KEDA_OPERATOR_ACCOUNT,
            role_arn=role.role_arn,
        )
        identity.node.add_dependency(self.cluster.pod_identity_agent)
        return KedaInstallation(chart=chart, operator_role=role, operator_identity=identity)

    def _published_chart(
        self,
        name: str,
        values: Mapping[str, Any],
        id: str | None = None,
        release: str | None = None,
    ) -> eks.HelmChart:
        pin = chart_pins()[name]
        chart = self._chart(
            id or name,
            chart=pin["chart"],
            repository=pin["repository"],
            version=self.chart_versions[name],
            namespace=pin["namespace"],
            values=deep_merge(dict(values), self._image_values.get(name, {})),
            release=release,
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
        values: dict[str, Any],
        chart_asset: s3_assets.Asset | None = None,
        release: str | None = None,
        before_nodes: bool = False,
    ) -> eks.HelmChart:
        """A chart after the nodes (``--wait``), or ``before_nodes`` without waiting.

        ``release``: an explicit release name; ``None`` keeps aws-cdk-lib's derived one.
        """
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
            release=release,
            wait=not before_nodes,
        )
        provider = self.cluster.eks_cluster.node.try_find_child("KubectlProvider")
        if chart_asset is not None and provider is not None:
            # aws-cdk-lib's HelmChart just granted the kubectl handler read of the chart's
            # asset on the CDK asset bucket: bound to those statements now.
            acknowledge_generated_statements(
                provider,
                "aws-cdk-lib's kubectl handler reads the chart's asset from the CDK asset bucket (HelmChart chart_asset).",
            )
        if not before_nodes:
            helm.node.add_dependency(self.cluster.nodes_ready)
        return helm


def _logical_id(scope: Construct, below: list[str]) -> str:
    """The logical id aws-cdk-lib gives an element at ``below`` under ``scope`` (``makeUniqueId``,
    https://github.com/aws/aws-cdk/blob/main/packages/aws-cdk-lib/core/lib/private/uniqueid.ts)."""
    scopes = scope.node.scopes
    stack_at = max(i for i, s in enumerate(scopes) if Stack.is_stack(s))
    path = [s.node.id for s in scopes[stack_at + 1 :]] + below
    path = [part for part in path if part != "Default"]
    digest = hashlib.md5("/".join(path).encode(), usedforsecurity=False).hexdigest()[:8]
    human = [part for i, part in enumerate(path) if i == 0 or part != path[i - 1]]
    readable = "".join(re.sub("[^A-Za-z0-9]", "", part) for part in human if part != "Resource")
    return readable[:240] + digest.upper()


def _scraper_rbac() -> list[dict[str, Any]]:
    """Read-only discovery and /metrics rights for the scraper's user (AMP user guide)."""
    read = ["describe", "get", "list", "watch"]
    core = ["nodes", "nodes/proxy", "nodes/metrics", "services", "endpoints", "pods"]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": COLLECTOR_CLUSTER_ROLE},
            "rules": [
                {"apiGroups": [""], "resources": [*core, "ingresses", "configmaps"], "verbs": read},
                {
                    "apiGroups": ["extensions", "networking.k8s.io"],
                    "resources": ["ingresses/status", "ingresses"],
                    "verbs": read,
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
            "metadata": {"name": COLLECTOR_ROLE_BINDING},
            "subjects": [
                {"kind": "User", "name": COLLECTOR_USER, "apiGroup": "rbac.authorization.k8s.io"}
            ],
            "roleRef": {
                "kind": "ClusterRole",
                "name": COLLECTOR_CLUSTER_ROLE,
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
    ]
