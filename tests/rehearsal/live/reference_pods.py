"""The live run's test input from the REAL synthesized reference template: the LeaderWorkerSet's
leader and worker containers as written, with what the controllers would add, played by this
small adapter (the rehearsal's controller model produces these for ``make rehearse``):

- the ``LWS_*`` variables as the LeaderWorkerSet controller sets them (kubernetes-sigs/lws
  ``api/leaderworkerset/v1/leaderworkerset_types.go``: ``LWS_LEADER_ADDRESS``
  ``<lws>-<group>.<lws>.<namespace>``, ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX``), pod names
  ``<lws>-<group>`` and ``<lws>-<group>-<index>``, the headless Service's DNS records;
- the files the volumes mount: the API key file the CSI provider writes (``objectAlias``
  ``api-key``), and a certificate and key from a CA made here (cert-manager's part), for the
  names the template's Certificate lists.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from rehearsal.pods import ContainerRun, LiveDeployment, PodRun, ServiceAddress

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "cdk.out" / "ReferenceMoeHyperPod.template.json"
NLB_HOSTNAME = "internal-k8s-inferenc-referenc-0123456789.elb.us-west-2.amazonaws.com"
LEADER_IP, WORKER_IP = "10.1.0.10", "10.1.0.11"
API_KEYS = ("rehearsal-key-one", "rehearsal-key-two")


def _resolve(value: Any) -> Any:
    """A manifest property with its CloudFormation functions filled in (the load balancer's
    host name, a Secrets Manager ARN: placeholders)."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(_resolve(part)) for part in parts)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return NLB_HOSTNAME if "LoadBalancer" in value["Fn::GetAtt"][0] else "placeholder"
    if isinstance(value, dict) and "Ref" in value:
        return "arn:aws:secretsmanager:us-west-2:111122223333:secret:placeholder"
    return value


def manifests(template: dict[str, Any]) -> list[dict[str, Any]]:
    objects = []
    for resource in template["Resources"].values():
        manifest = resource.get("Properties", {}).get("Manifest")
        if manifest is not None:
            objects += json.loads(_resolve(manifest))
    return objects


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} in the template"
    return found[0]


def certificate(directory: Path, dns_names: list[str]) -> tuple[bytes, bytes, bytes]:
    """(CA PEM, certificate PEM, key PEM): a CA and a server certificate for ``dns_names``."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=vLLM serving CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "tls.key",
        "-out",
        "tls.csr",
        "-subj",
        "/CN=vllm",
    )
    sans = ",".join(f"DNS:{name}" for name in dns_names)
    (directory / "ext.cnf").write_text(
        f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nauthorityKeyIdentifier=keyid\n"
    )
    openssl(
        "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "tls.crt", "-days", "2", "-extfile", "ext.cnf",
    )  # fmt: skip
    return tuple((directory / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key"))  # type: ignore[return-value]


def _container(
    spec: dict[str, Any], env: list[tuple[str, str]], files: dict[str, dict[str, bytes]]
) -> ContainerRun:
    container = spec["containers"][0]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = container.get("volumeMounts", [])
    models = tuple(m["mountPath"] for m in mounts if "persistentVolumeClaim" in volumes[m["name"]])
    for mount in mounts:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            files.setdefault(mount["mountPath"], {})
    return ContainerRun(
        name=container["name"],
        image=container["image"],
        command=tuple(container.get("command", ())),
        args=tuple(container.get("args", ())),
        env=(*env, *((e["name"], e["value"]) for e in container.get("env", []))),
        files=files,
        model_mounts=models,
        ports={p["name"]: p["containerPort"] for p in container.get("ports", [])},
    )


def reference_deployment(
    directory: Path,
    template: dict[str, Any] | None = None,
    *,
    api_key_file: bytes | None = b"rehearsal-key-one\nrehearsal-key-two\n",
    leader_record: bool = True,
) -> LiveDeployment:
    """The reference's serving group as the controllers would start it.

    :param api_key_file: the ``api-key`` file's content (``None``: the CSI volume mounted
        nothing, as when the provider never ran).
    :param leader_record: ``False``: the cluster DNS has no record for the leader (no headless
        Service of the LeaderWorkerSet's name).
    """
    template = template or json.loads(TEMPLATE.read_text())
    objects = manifests(template)
    lws = _one(objects, "LeaderWorkerSet")
    name, namespace = lws["metadata"]["name"], lws["metadata"]["namespace"]
    cert = next(o for o in objects if o["kind"] == "Certificate" and "dnsNames" in o["spec"])
    dns_names = cert["spec"]["dnsNames"]
    ca_pem, crt, key = certificate(directory / "tls", dns_names)
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    leader_name = f"{name}-0"
    leader_address = f"{leader_name}.{name}.{namespace}"

    def lws_env(index: int) -> list[tuple[str, str]]:
        return [
            ("LWS_LEADER_ADDRESS", leader_address),
            ("LWS_GROUP_SIZE", str(size)),
            ("LWS_WORKER_INDEX", str(index)),
        ]

    template_spec = lws["spec"]["leaderWorkerTemplate"]
    leader_spec = template_spec["leaderTemplate"]["spec"]
    tls_mount = next(
        m["mountPath"] for m in leader_spec["containers"][0]["volumeMounts"] if m["name"] == "tls"
    )
    key_mount = next(
        m["mountPath"]
        for m in leader_spec["containers"][0]["volumeMounts"]
        if m["name"] == "api-key"
    )
    leader_files: dict[str, dict[str, bytes]] = {
        tls_mount: {"tls.crt": crt, "tls.key": key},
        key_mount: {} if api_key_file is None else {"api-key": api_key_file},
    }
    probe = leader_spec["containers"][0]["readinessProbe"]["httpGet"]
    leader = PodRun(
        name=leader_name,
        namespace=namespace,
        hostname=leader_name,
        subdomain=name,
        ip=LEADER_IP,
        node="gpu-node-0",
        role="leader",
        container=_container(leader_spec, lws_env(0), leader_files),
        readiness=(probe["path"], probe["port"], probe["scheme"]),
    )
    worker_name = f"{name}-0-1"
    worker = PodRun(
        name=worker_name,
        namespace=namespace,
        hostname=worker_name,
        subdomain=name,
        ip=WORKER_IP,
        node="gpu-node-1",
        role="worker",
        container=_container(template_spec["workerTemplate"]["spec"], lws_env(1), {}),
    )
    dns: dict[str, str] = {}
    for pod in (leader, worker):
        if pod is leader and not leader_record:
            continue
        for suffix in ("", ".svc", ".svc.cluster.local"):
            dns[f"{pod.hostname}.{name}.{namespace}{suffix}"] = pod.ip
    service = ServiceAddress(
        name=f"{namespace}/{name}",
        port=443,
        target_port=leader.container.ports["https"],
        endpoints=(LEADER_IP,),
        tls_passthrough=True,
        ca_pem=ca_pem,
        dns_names=tuple(dns_names),
    )
    served = leader.container.args[leader.container.args.index("--served-model-name") + 1]
    return LiveDeployment(
        pods=(leader, worker), dns=dns, service=service, api_keys=API_KEYS, served_model_name=served
    )
