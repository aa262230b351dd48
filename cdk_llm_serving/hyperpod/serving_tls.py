"""End-to-end TLS for the multi-node vLLM service: vLLM serves HTTPS itself.

The leader runs ``vllm serve --ssl-keyfile --ssl-certfile --enable-ssl-refresh`` with a
certificate from cert-manager: per service, a self-signed bootstrap Issuer signs the service's
CA, whose Issuer signs the serving certificate (1 year, renewed 30 days before it ends; the CA
10 years, keeping its key), mounted read-only into the leader. Why one year, what vLLM's reload
sees, and the CA's names: ``docs/design/multi-node-service.md``, "TLS".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..vllm.config import FlagValue

#: cert-manager's API of Issuers and Certificates (https://cert-manager.io/docs/reference/api-docs/).
CERT_MANAGER_API = "cert-manager.io/v1"
#: Where the leader finds its key and certificate (a Secret volume, read-only).
TLS_MOUNT = "/var/run/secrets/vllm-tls"
TLS_KEY_FILE = f"{TLS_MOUNT}/tls.key"
TLS_CERT_FILE = f"{TLS_MOUNT}/tls.crt"
TLS_VOLUME = "tls"
#: The flags this module sets on the leader; a config may not set them itself.
TLS_FLAGS = (
    "ssl-keyfile",
    "ssl-certfile",
    "ssl-ca-certs",
    "ssl-cert-reqs",
    "enable-ssl-refresh",
)
#: Serving certificate: 1 year, renewed 30 days before it ends (vLLM sees only the first
#: renewal after a leader starts: design note, "TLS"). CA: 10 years.
SERVING_DURATION = "8760h"
SERVING_RENEW_BEFORE = "720h"
CA_DURATION = "87600h"
#: The CA's commonName: one short constant, as cert-manager refuses one over 64 characters; the
#: service is named in ``subject.organizationalUnits`` instead (design note, "TLS").
CA_COMMON_NAME = "vLLM serving CA"
#: RSA 2048, cert-manager's default, stated explicitly: every client and the NLB's TLS target
#: connections accept it.
_KEY = {"algorithm": "RSA", "size": 2048}


def serving_secret_name(service: str) -> str:
    return f"{service}-tls"


def tls_flags() -> dict[str, FlagValue]:
    """vLLM's flags for HTTPS from the mounted Secret, reloaded when the files change."""
    return {
        "ssl-keyfile": TLS_KEY_FILE,
        "ssl-certfile": TLS_CERT_FILE,
        "enable-ssl-refresh": True,
    }


def tls_volume(secret_name: str) -> dict[str, Any]:
    """The serving Secret's key and certificate as files only root (the container) reads."""
    return {
        "name": TLS_VOLUME,
        "secret": {
            "secretName": secret_name,
            "defaultMode": 0o400,
            "items": [
                {"key": "tls.key", "path": "tls.key"},
                {"key": "tls.crt", "path": "tls.crt"},
            ],
        },
    }


def tls_mount() -> dict[str, Any]:
    return {"name": TLS_VOLUME, "mountPath": TLS_MOUNT, "readOnly": True}


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a pod in the cluster reaches the Service by."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def ca_manifests(service: str, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The service's own CA: a self-signed bootstrap Issuer, the CA Certificate, its Issuer."""
    bootstrap, ca = f"{service}-tls-bootstrap", f"{service}-ca"
    return [
        _object("Issuer", bootstrap, namespace, labels, {"selfSigned": {}}),
        _object(
            "Certificate",
            ca,
            namespace,
            labels,
            {
                "isCA": True,
                "commonName": CA_COMMON_NAME,
                "subject": {"organizationalUnits": [namespace, service]},
                "secretName": ca,
                "duration": CA_DURATION,
                "privateKey": {**_KEY, "rotationPolicy": "Never"},
                "issuerRef": {"name": bootstrap, "kind": "Issuer", "group": "cert-manager.io"},
            },
        ),
        _object("Issuer", ca, namespace, labels, {"ca": {"secretName": ca}}),
    ]


def serving_certificate(
    service: str,
    namespace: str,
    labels: dict[str, str],
    dns_names: Sequence[str],
    secret_name: str | None = None,
) -> dict[str, Any]:
    """A certificate for ``dns_names`` signed by the service's CA, in ``secret_name`` (and of
    that name). Default: the leader's, ``serving_secret_name(service)``."""
    secret = secret_name or serving_secret_name(service)
    return _object(
        "Certificate",
        secret,
        namespace,
        labels,
        {
            "secretName": secret,
            "dnsNames": list(dns_names),
            "duration": SERVING_DURATION,
            "renewBefore": SERVING_RENEW_BEFORE,
            "usages": ["server auth", "digital signature", "key encipherment"],
            "privateKey": {**_KEY, "rotationPolicy": "Always"},
            "issuerRef": {"name": f"{service}-ca", "kind": "Issuer", "group": "cert-manager.io"},
        },
    )


def _object(
    kind: str, name: str, namespace: str, labels: dict[str, str], spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": CERT_MANAGER_API,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }
