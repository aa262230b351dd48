"""End-to-end TLS for the multi-node vLLM service: vLLM serves HTTPS itself.

* **Who serves TLS.** The leader's ``vllm serve`` listens with ``--ssl-keyfile`` and
  ``--ssl-certfile`` (vllm-project/vllm ``vllm/entrypoints/openai/cli_args.py``, passed to
  uvicorn by ``serve_http``; names checked against ``vllm/data/vllm_registry.json``), so no hop
  between a client and vLLM is plaintext: the load balancer passes TLS through, or re-encrypts
  to the pod (``multi_node_service.Exposure``). ``--enable-ssl-refresh`` makes vLLM reload the
  key and certificate when the files change (``vllm/entrypoints/ssl.py``, ``SSLCertRefresher``
  watches both paths and calls ``load_cert_chain`` on any change; its ``watchfiles`` is a
  dependency of every vLLM, ``requirements/common.txt``; the flag exists since vLLM 0.8, older
  than the default image's 0.31).
* **Where the certificate comes from.** cert-manager (the EKS add-on ``cert-manager``, one per
  cluster: ``HyperPodServingAddons.enable_cert_manager``, shared with the inference operator),
  per service: a self-signed bootstrap ``Issuer`` signs a CA ``Certificate``; a CA ``Issuer``
  backed by that CA's Secret signs the serving ``Certificate`` (cert-manager's documented CA
  bootstrap, https://cert-manager.io/docs/configuration/selfsigned/#bootstrapping-ca-issuers).
  The serving Secret (type ``kubernetes.io/tls``: ``tls.crt``, ``tls.key`` and ``ca.crt``,
  https://cert-manager.io/docs/usage/certificate/) is mounted read-only into the leader. Its
  names: the Service's in-cluster DNS names, the load balancer's hostname (so the ``BaseUrl``
  output verifies against the CA) and ``Exposure.tls_dns_names``.
* **Rotation.** The serving certificate lives 1 year and is renewed 30 days before it ends
  with a new key (``rotationPolicy: Always``); the kubelet updates the mounted Secret's files
  (https://kubernetes.io/docs/concepts/configuration/secret/#mounted-secrets-are-updated-automatically)
  by writing a new timestamped directory, swapping the ``..data`` symlink to it and deleting
  the old one (kubernetes ``pkg/volume/util/atomic_writer.go``). vLLM's ``SSLCertRefresher``
  watches the two file paths with ``watchfiles.awatch`` and reloads on any change; the watch
  follows the files of the old directory, so it reports the first swap (the old files are
  deleted after the new ones are in place, and the reload reads the new pair) and nothing
  after: measured with watchfiles 1.3.0 on a copy of that layout, three swaps gave one batch
  of changes; a rename over the watched file behaves the same, only writes in place into
  the same file are seen each time (cf. spring-projects/spring-boot#44807,
  kubernetes/ingress-nginx#6386). Copying the pair into files vLLM watches and rewriting them
  in place would be seen every time, but a reload could then read a new certificate with the
  old key, so it is not done. Hence one year: a leader reloads the first renewal after its
  start and serves that certificate until it ends, at least 365 days after the start; a leader
  restarted within a year of its start never serves an expired certificate (any rollout of the
  LeaderWorkerSet restarts it too). The CA lives 10 years and keeps its key
  (``rotationPolicy: Never``), so the ``ca.crt`` clients hold stays the trust anchor.
* **Kubelet probes** use ``scheme: HTTPS``: the kubelet does not verify the certificate
  (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe,
  ``httpGet.scheme``; "If scheme field is set to HTTPS, the kubelet sends an HTTPS request
  skipping the certificate verification",
  https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/).

Every manifest here is a cert-manager custom resource (``cert-manager.io/v1``), checked in the
tests against the CRDs of cert-manager v1.18.2 (the version of the pinned add-on).
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
#: renewal after a leader starts: "Rotation" above). CA: 10 years.
SERVING_DURATION = "8760h"
SERVING_RENEW_BEFORE = "720h"
CA_DURATION = "87600h"
#: The CA's commonName: one short constant. cert-manager's webhook refuses a commonName over 64
#: characters (cert-manager ``internal/apis/certmanager/validation/certificate.go``,
#: ``field.TooLong(..., 64)``; RFC 5280's ``ub-common-name``), and a Service and its namespace
#: may each be 63. Which service the CA belongs to is in ``subject.organizationalUnits`` instead:
#: the namespace and the service, one per value, so each stays within RFC 5280's
#: ``ub-organizational-unit-name`` of 64 too. The serving certificate has no commonName (its
#: names are ``dnsNames``).
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
    service: str, namespace: str, labels: dict[str, str], dns_names: Sequence[str]
) -> dict[str, Any]:
    """The leader's certificate, signed by the service's CA, for ``dns_names``."""
    return _object(
        "Certificate",
        serving_secret_name(service),
        namespace,
        labels,
        {
            "secretName": serving_secret_name(service),
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
