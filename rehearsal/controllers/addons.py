"""EKS add-ons: creation against a cluster's self-managed add-ons, and what each one installs.

Creation: an EKS cluster created with ``BootstrapSelfManagedAddons`` (default ``true``,
CloudFormation ``AWS::EKS::Cluster``) runs self-managed ``vpc-cni``, ``kube-proxy`` and
``coredns``. Creating the EKS add-on of one of them without ``ResolveConflicts: OVERWRITE``:
"None – If the self-managed version of the add-on is installed on your cluster, Amazon EKS
doesn't change the value. Creation of the add-on might fail."
(https://docs.aws.amazon.com/eks/latest/userguide/creating-an-add-on.html, "Conflict resolution";
AWS's reference HyperPod template sets ``ResolveConflicts: OVERWRITE`` on every add-on:
aws-samples/awsome-distributed-training ``1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/eks-cluster-stack.yaml``;
aws/aws-network-policy-agent issue 200 shows the failure).

Installed objects, only those the serving path needs. ASSUMED: the rest (the VPC CNI,
kube-proxy, CoreDNS, the Pod Identity agent) run wherever the serving path needs them, so they
are not modelled (as in ``rehearsal.scheduling``).

* ``aws-secrets-store-csi-driver-provider``: the driver DaemonSet (subchart
  ``secrets-store-csi-driver``, ``linux.tolerations: [{operator: Exists}]``, every taint:
  kubernetes-sigs/secrets-store-csi-driver ``charts/secrets-store-csi-driver/values.yaml`` at
  0aad886f, chart 1.6.0) and the AWS provider DaemonSet (``tolerations: []``:
  aws/secrets-store-csi-driver-provider-aws ``charts/secrets-store-csi-driver-provider-aws/values.yaml``
  at a74182c, chart 3.1.1), plus the SecretProviderClass CRD. ASSUMED: the add-on's configuration schema takes the chart's values (``tolerations``,
  ``secrets-store-csi-driver.linux.tolerations``), as EKS add-ons that package a chart do.
* ``aws-fsx-csi-driver``: the node DaemonSet ``fsx-csi-node`` with ``tolerateAllTaints: true``
  (kubernetes-sigs/aws-fsx-csi-driver ``charts/aws-fsx-csi-driver/values.yaml``) and the
  controller Deployment (tolerations ``CriticalAddonsOnly``, ``NoExecute``).
* ``amazon-sagemaker-hyperpod-inference``: the inference operator's custom resources
  ``InferenceEndpointConfig`` and ``JumpStartModel`` (group ``inference.sagemaker.aws.amazon.com``,
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-setup.html);
  the operator's own pods and the endpoints it creates are not modelled.
* ``cert-manager``: Deployments ``cert-manager``, ``cert-manager-webhook``,
  ``cert-manager-cainjector`` in ``cert-manager`` (chart default tolerations ``[]``:
  cert-manager/cert-manager ``deploy/charts/cert-manager/values.yaml``) and its CRDs.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from rehearsal.controllers.volumes import CSI_DRIVER_ANNOTATION, PROVIDER_ANNOTATION
from rehearsal.findings import Finding
from rehearsal.world import Addon

SELF_MANAGED = ("vpc-cni", "kube-proxy", "coredns")
CONFLICT_SOURCE = (
    "https://docs.aws.amazon.com/eks/latest/userguide/creating-an-add-on.html (Conflict resolution); "
    "aws-samples/awsome-distributed-training 1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/eks-cluster-stack.yaml"
)
_TOLERATE_ALL = [{"operator": "Exists"}]


def configuration(value: Any) -> dict[str, Any]:
    """``ConfigurationValues`` (a JSON or YAML string) as a dict."""
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = yaml.safe_load(value)
    return dict(parsed or {})


def conflict(addon: Addon, bootstraps_self_managed: bool) -> Finding | None:
    """Creating a self-managed add-on's EKS add-on without OVERWRITE may fail."""
    if addon.name not in SELF_MANAGED or not bootstraps_self_managed:
        return None
    if str(addon.resolve_conflicts or "").upper() == "OVERWRITE":
        return None
    return Finding(
        "eks-addon.conflicts-unresolved",
        f"{addon.logical_id} (AWS::EKS::Addon {addon.name})",
        f"the cluster bootstraps a self-managed {addon.name} and the add-on is created with "
        f"ResolveConflicts {addon.resolve_conflicts or 'absent (NONE)'}: creation fails on any "
        "field the self-managed one set differently"
        + (
            f" (ConfigurationValues {json.dumps(addon.configuration)})"
            if addon.configuration
            else ""
        ),
        CONFLICT_SOURCE,
    )


def _workload(
    kind: str,
    name: str,
    namespace: str,
    tolerations: list[Any],
    requests: dict[str, str],
    annotations: dict[str, str] | None = None,
    replicas: int | None = None,
) -> dict[str, Any]:
    """A stand-in for a workload an add-on installs: its tolerations and requests are what the
    scheduler model reads."""
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "tolerations": tolerations,
                "containers": [{"name": name, "image": name, "resources": {"requests": requests}}],
            },
        }
    }
    if replicas is not None:
        spec["replicas"] = replicas
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": metadata, "spec": spec}


def _daemonset(
    name: str, namespace: str, tolerations: list[Any], annotations: dict[str, str], cpu: str = "50m"
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "100Mi"}
    return _workload("DaemonSet", name, namespace, tolerations, requests, annotations)


def _deployment(
    name: str, namespace: str, tolerations: list[Any], replicas: int = 1
) -> dict[str, Any]:
    requests = {"cpu": "10m", "memory": "64Mi"}
    return _workload("Deployment", name, namespace, tolerations, requests, replicas=replicas)


def _crd(kind: str, group: str, scale: bool = False) -> dict[str, Any]:
    plural = kind.lower() + "s"
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
    if scale:
        version["subresources"] = {"scale": {"specReplicasPath": ".spec.replicas"}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": {"kind": kind, "plural": plural}, "versions": [version]},
    }


def objects(addon: Addon) -> list[dict[str, Any]]:
    """The objects the add-on installs that the rehearsal models."""
    config = addon.configuration
    if addon.name == "aws-secrets-store-csi-driver-provider":
        linux = (config.get("secrets-store-csi-driver") or {}).get("linux") or {}
        driver = list(linux.get("tolerations", _TOLERATE_ALL))
        return [
            _crd("SecretProviderClass", "secrets-store.csi.x-k8s.io"),
            _crd("SecretProviderClassPodStatus", "secrets-store.csi.x-k8s.io"),
            _daemonset("secrets-store-csi-driver", "kube-system", driver, {CSI_DRIVER_ANNOTATION: "secrets-store.csi.k8s.io"}),
            _daemonset(
                "secrets-store-csi-driver-provider-aws", "kube-system", list(config.get("tolerations") or []),
                {PROVIDER_ANNOTATION: "aws"},
            ),
        ]  # fmt: skip
    if addon.name == "aws-fsx-csi-driver":
        node = config.get("node") or {}
        tolerations = (
            _TOLERATE_ALL
            if node.get("tolerateAllTaints", True)
            else list(node.get("tolerations") or [])
        )
        return [
            _daemonset("fsx-csi-node", "kube-system", tolerations, {CSI_DRIVER_ANNOTATION: "fsx.csi.aws.com"}, "10m"),
            _deployment(
                "fsx-csi-controller", "kube-system",
                [{"key": "CriticalAddonsOnly", "operator": "Exists"}, {"effect": "NoExecute", "operator": "Exists"}], 2,
            ),
        ]  # fmt: skip
    if addon.name == "amazon-sagemaker-hyperpod-inference":
        group = "inference.sagemaker.aws.amazon.com"
        return [_crd("InferenceEndpointConfig", group), _crd("JumpStartModel", group)]
    if addon.name == "cert-manager":
        tolerations = list(config.get("tolerations") or [])
        return [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cert-manager"}},
            *(
                _crd(k, "cert-manager.io")
                for k in ("Certificate", "Issuer", "ClusterIssuer", "CertificateRequest")
            ),
            *(_crd(k, "acme.cert-manager.io") for k in ("Order", "Challenge")),
            *(
                _deployment(n, "cert-manager", tolerations)
                for n in ("cert-manager", "cert-manager-webhook", "cert-manager-cainjector")
            ),
        ]
    return []
