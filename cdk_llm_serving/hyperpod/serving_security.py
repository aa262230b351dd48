"""Authenticated serving and in-cluster isolation for the multi-node vLLM service.

The API key is a Secrets Manager secret that reaches the leader as a file through the Secrets
Store CSI driver and the AWS provider (EKS add-on ``aws-secrets-store-csi-driver-provider``),
fetched with the pod's own EKS Pod Identity, so the value never enters a template or etcd; one
key per line, each accepted by vLLM (rotation: README, "Rotating the key"). NetworkPolicies let
a service's pods talk to each other, the VPC reach the leader's API port, and no pod reach the
instance metadata service. Sources and limits: ``docs/design/multi-node-service.md``, "The API
key and NetworkPolicies".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from .._cdk.nag import acknowledge
from ._eks_addon import eks_addon
from ._facts import addon_versions
from .device_plugins import secrets_store_values
from .interfaces import IHyperPodCluster

#: EKS add-on name of the AWS Secrets and Configuration Provider with the CSI driver.
SECRETS_STORE_ADDON = "aws-secrets-store-csi-driver-provider"
#: The Secrets Store CSI driver's name and its SecretProviderClass API
#: (kubernetes-sigs/secrets-store-csi-driver, https://secrets-store-csi-driver.sigs.k8s.io/).
SECRETS_STORE_DRIVER = "secrets-store.csi.k8s.io"
SECRET_PROVIDER_CLASS_API = "secrets-store.csi.x-k8s.io/v1"
#: Where the leader finds the key file.
API_KEY_MOUNT = "/var/run/secrets/vllm-api-key"
API_KEY_FILE_NAME = "api-key"
API_KEY_FILE = f"{API_KEY_MOUNT}/{API_KEY_FILE_NAME}"
#: The instance metadata service: no serving pod may reach it.
IMDS_CIDR = "169.254.169.254/32"
#: An egress peer: anywhere but the instance metadata service.
ANYWHERE_BUT_IMDS = {"ipBlock": {"cidr": "0.0.0.0/0", "except": [IMDS_CIDR]}}
_SECRETS_STORE_ID = "SecretsStoreCsiDriver"


def secrets_store_addon(scope: Construct, cluster: IHyperPodCluster) -> eks.Addon:
    """The ASCP add-on of ``cluster``, created on first use (one per cluster and stack)."""
    eks_cluster = cluster.eks_cluster
    stack = Stack.of(scope)
    addon_id = f"{_SECRETS_STORE_ID}{eks_cluster.node.addr[:8]}"
    existing = stack.node.try_find_child(addon_id)
    if isinstance(existing, eks.Addon):
        return existing
    addon = eks_addon(
        stack,
        addon_id,
        cluster=eks_cluster,
        addon_name=SECRETS_STORE_ADDON,
        addon_version=_pinned_version(cluster, SECRETS_STORE_ADDON),
        configuration_values=secrets_store_values(cluster.instance_groups),
    )
    addon.node.add_dependency(cluster.nodes_ready)
    return addon


def _pinned_version(cluster: IHyperPodCluster, addon: str) -> str | None:
    """The cluster's version of ``addon``: its ``addon_versions`` (our pins with the user's
    overrides) for a cluster built here, else our pin for its Kubernetes version
    (``assets/hyperpod.json``); an imported cluster's version is unknown here, so EKS picks
    its default there."""
    versions = getattr(cluster, "addon_versions", None)
    if isinstance(versions, Mapping) and addon in versions:
        pinned: str | None = versions[addon]
        return pinned
    version = getattr(cluster, "kubernetes_version", None)
    return addon_versions(version).get(addon) if isinstance(version, str) else None


def generated_api_key(scope: Construct, name: str) -> secretsmanager.Secret:
    """A random 48-character key without punctuation (safe in an ``Authorization`` header),
    encrypted with a customer managed key of its own (``ApiKeyKey``, rotated yearly,
    retained): whoever reads the secret needs ``kms:Decrypt`` on that key too, which only
    the readers ``grant_read`` names get (through Secrets Manager, ``kms:ViaService``) and
    the account's IAM administrators (the key policy's account statement) have."""
    key = kms.Key(
        scope,
        "ApiKeyKey",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
        description=f"{name}: encrypts the vLLM endpoint's API key",
    )
    secret = secretsmanager.Secret(
        scope,
        "ApiKey",
        description=f"{name}: API key of the vLLM OpenAI-compatible endpoint",
        encryption_key=key,
        generate_secret_string=secretsmanager.SecretStringGenerator(
            exclude_punctuation=True, password_length=48
        ),
    )
    acknowledge(
        secret,
        "AwsSolutions-SMG4",
        "vLLM reads its keys once at start, so a rotation Lambda replacing the value would lock "
        "clients out; rotate with both keys in the secret and a rolling restart (README).",
    )
    return secret


def restrict_api_key_readers(secret: secretsmanager.ISecret, reader: iam.IRole) -> None:
    """The secret's resource policy names its reader: ``reader`` may read it, and no
    principal of another account may, whatever that account's policies or the key's grants
    say (an explicit ``Deny`` wins over any ``Allow``: IAM policy evaluation logic).
    Principals of this account still need an IAM policy that allows the read (admins)."""
    secret.add_to_resource_policy(
        iam.PolicyStatement(
            sid="ThePodsRoleReadsTheKey",
            principals=[reader],
            actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            resources=["*"],
        )
    )
    secret.add_to_resource_policy(
        iam.PolicyStatement(
            sid="NoReaderOutsideTheAccount",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:GetSecretValue"],
            resources=["*"],
            conditions={"StringNotEquals": {"aws:PrincipalAccount": Stack.of(secret).account}},
        )
    )


def secret_provider_class(
    name: str, namespace: str, secret: secretsmanager.ISecret, region: str
) -> dict[str, Any]:
    """The SecretProviderClass that mounts ``secret`` as ``api-key`` via Pod Identity."""
    objects = (
        f'- objectName: "{secret.secret_arn}"\n'
        '  objectType: "secretsmanager"\n'
        f'  objectAlias: "{API_KEY_FILE_NAME}"\n'
    )
    return {
        "apiVersion": SECRET_PROVIDER_CLASS_API,
        "kind": "SecretProviderClass",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "provider": "aws",
            "parameters": {"region": region, "usePodIdentity": "true", "objects": objects},
        },
    }


def api_key_volume(provider_class: str) -> dict[str, Any]:
    return {
        "name": "api-key",
        "csi": {
            "driver": SECRETS_STORE_DRIVER,
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": provider_class},
        },
    }


def network_policies(
    name: str,
    namespace: str,
    group_labels: dict[str, str],
    leader_labels: dict[str, str],
    api_port: int,
    vpc_cidr: str,
) -> list[dict[str, Any]]:
    """Group-internal traffic, the API port from the VPC to leaders, no metadata service."""
    group = {"podSelector": {"matchLabels": group_labels}}
    isolate = network_policy(
        {"name": f"{name}-group", "namespace": namespace},
        group_labels,
        ingress=[{"from": [group]}],
        egress=[{"to": [group]}, {"to": [ANYWHERE_BUT_IMDS]}],
    )
    api = network_policy(
        {"name": f"{name}-api", "namespace": namespace},
        leader_labels,
        ingress=[
            {
                "from": [{"ipBlock": {"cidr": vpc_cidr}}],
                "ports": [{"protocol": "TCP", "port": api_port}],
            }
        ],
    )
    return [isolate, api]


def network_policy(
    metadata: dict[str, Any],
    labels: dict[str, str],
    *,
    ingress: list[dict[str, Any]],
    egress: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A NetworkPolicy on the pods with ``labels``; egress is restricted only when given."""
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": labels},
        "policyTypes": ["Ingress", "Egress"] if egress is not None else ["Ingress"],
        "ingress": ingress,
    }
    if egress is not None:
        spec["egress"] = egress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": spec,
    }
