"""cert-manager issuing Certificates into Secrets, with a real CA and leaf (``cryptography``).

* An ``Issuer`` with ``selfSigned: {}`` signs a Certificate with the Certificate's own key; its
  Secret's ``ca.crt`` is the certificate itself (https://cert-manager.io/docs/configuration/selfsigned/).
* An ``Issuer`` with ``ca.secretName`` signs with the key pair in that Secret (``tls.crt``,
  ``tls.key``) and is ready only once the Secret exists; the issued Secret's ``ca.crt`` is the
  CA's certificate (https://cert-manager.io/docs/configuration/ca/).
* The issued Secret (``spec.secretName``) holds ``tls.crt``, ``tls.key``, ``ca.crt``
  (https://cert-manager.io/docs/usage/certificate/); ``dnsNames``, ``ipAddresses``,
  ``commonName``, ``isCA``, ``duration`` (default 2160h), ``usages`` and ``privateKey``
  (algorithm RSA/ECDSA, size) shape it (https://cert-manager.io/docs/reference/api-docs/#cert-manager.io/v1.CertificateSpec).
* Nothing is issued while cert-manager's controller Deployment has no running pod.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import re
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rehearsal.findings import Finding
from rehearsal.world import World

SOURCE = "https://cert-manager.io/docs/configuration/ca/ and /selfsigned/; https://cert-manager.io/docs/usage/certificate/"
CONTROLLER = "controller:cert-manager"
#: A fixed instant, so certificates are valid whenever the rehearsal runs... from now.
_UNITS = {"h": 3600, "m": 60, "s": 1}


def go_duration(text: str) -> datetime.timedelta:
    """A Go duration (``8760h``, ``2160h0m0s``)."""
    seconds = sum(float(n) * _UNITS[u] for n, u in re.findall(r"([0-9.]+)([hms])", text))
    return datetime.timedelta(seconds=seconds)


def _key(private_key: dict[str, Any]) -> Any:
    algorithm = str(private_key.get("algorithm", "RSA")).upper()
    if algorithm == "ECDSA":
        curve = {256: ec.SECP256R1(), 384: ec.SECP384R1(), 521: ec.SECP521R1()}[
            int(private_key.get("size", 256))
        ]
        return ec.generate_private_key(curve)
    return rsa.generate_private_key(
        public_exponent=65537, key_size=int(private_key.get("size", 2048))
    )


def issue(spec: dict[str, Any], signer: tuple[Any, x509.Certificate] | None) -> dict[str, bytes]:
    """The Secret data of a Certificate with ``spec``, signed by ``signer`` (key, cert) or
    self-signed."""
    key = _key(spec.get("privateKey") or {})
    names = (
        [x509.NameAttribute(NameOID.COMMON_NAME, spec["commonName"])]
        if spec.get("commonName")
        else []
    )
    for unit in (spec.get("subject") or {}).get("organizationalUnits") or []:
        names.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    subject = x509.Name(names)
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    duration = go_duration(str(spec.get("duration", "2160h")))
    issuer_key, issuer_cert = signer if signer else (key, None)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_cert.subject if issuer_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + duration)
    )
    alt: list[x509.GeneralName] = [x509.DNSName(n) for n in spec.get("dnsNames") or []]
    alt += [x509.IPAddress(ipaddress.ip_address(a)) for a in spec.get("ipAddresses") or []]
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    is_ca = bool(spec.get("isCA"))
    builder = builder.add_extension(
        x509.BasicConstraints(ca=is_ca, path_length=None), critical=True
    )
    usages = set(spec.get("usages") or ["digital signature", "key encipherment"])
    builder = builder.add_extension(
        x509.KeyUsage(
            digital_signature="digital signature" in usages or is_ca,
            content_commitment=False,
            key_encipherment="key encipherment" in usages,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=is_ca,
            crl_sign=False,
            encipher_only=False,
            decipher_only=False,
        ),
        critical=True,
    )
    extended = [
        o
        for u, o in (
            ("server auth", ExtendedKeyUsageOID.SERVER_AUTH),
            ("client auth", ExtendedKeyUsageOID.CLIENT_AUTH),
        )
        if u in usages
    ]
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    cert = builder.sign(issuer_key, hashes.SHA256())
    pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    ca_pem = issuer_cert.public_bytes(serialization.Encoding.PEM) if issuer_cert else pem
    return {"tls.crt": pem, "tls.key": key_pem, "ca.crt": ca_pem}


def _signer(
    world: World, namespace: str, issuer_ref: dict[str, Any]
) -> tuple[bool, tuple[Any, x509.Certificate] | None]:
    """(ready, signer) of the Certificate's issuer."""
    kind = issuer_ref.get("kind", "Issuer")
    issuer = world.get(kind, "" if kind == "ClusterIssuer" else namespace, issuer_ref["name"])
    if issuer is None:
        return False, None
    spec = issuer.get("spec") or {}
    if "selfSigned" in spec:
        return True, None
    if "ca" in spec:
        secret = world.get("Secret", namespace, spec["ca"]["secretName"])
        if secret is None:
            return False, None
        data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
        key = serialization.load_pem_private_key(data["tls.key"], password=None)
        return True, (key, x509.load_pem_x509_certificate(data["tls.crt"]))
    return False, None


def running(world: World) -> bool:
    return any(
        p.running
        for k, _ in world.of_kind("Deployment")
        if k[2] == "cert-manager"
        for p in world.pods_of(k)
    )


def reconcile(world: World) -> bool:
    if not running(world):
        return False
    changed = False
    for (_, namespace, name), certificate in world.of_kind("Certificate"):
        spec = certificate.get("spec") or {}
        secret_name = spec["secretName"]
        if world.get("Secret", namespace, secret_name) is not None:
            continue
        ready, signer = _signer(world, namespace, spec["issuerRef"])
        if not ready:
            continue
        data = issue(spec, signer)
        world.put(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {
                    "name": secret_name,
                    "namespace": namespace,
                    "annotations": {"cert-manager.io/certificate-name": name},
                },
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
            },
            CONTROLLER,
            namespace,
        )
        world.facts.setdefault("certificates", {})[(namespace, name)] = spec
        changed = True
    return changed


def not_issued(world: World) -> list[Finding]:
    """Certificates whose Secret never appeared, and why."""
    found = []
    for (_, namespace, name), certificate in world.of_kind("Certificate"):
        spec = certificate.get("spec") or {}
        if world.get("Secret", namespace, spec["secretName"]) is not None:
            continue
        why = (
            "cert-manager is not running"
            if not running(world)
            else f"issuer {spec['issuerRef']['name']} is not ready"
        )
        found.append(
            Finding("cert-manager.not-issued", f"Certificate {namespace}/{name}", why, SOURCE)
        )
    return found
