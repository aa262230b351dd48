"""The reference stack (the recorded findings fixed) serves by the rehearsal: no blocking rule
fires on it, and the live run gets what the kubelet would give the pods (the LWS environment, the
API key file, the TLS files, DNS, the Service); one finding put back in its template is found."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding

from rehearsal.__main__ import main
from rehearsal.assembly import Assembly
from rehearsal.play import Rehearsal, play
from rehearsal.variants import reference_weight_bytes

LWS = "reference-moe-nvfp4"
WEIGHTS = reference_weight_bytes()


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    return value


def patched_copy(
    source: Assembly, destination: Path, patch: Callable[[dict[str, Any]], None]
) -> Path:
    """``source`` with its stack template changed by ``patch`` (in place), in ``destination``."""
    destination.mkdir()
    for entry in source.directory.iterdir():
        if entry.name.startswith("asset."):
            (destination / entry.name).symlink_to(entry)
    (destination / "manifest.json").write_text((source.directory / "manifest.json").read_text())
    template = json.loads(json.dumps(source.template))
    patch(template)
    stack_file = json.loads((source.directory / "manifest.json").read_text())["artifacts"][
        source.stack
    ]["properties"]["templateFile"]
    (destination / stack_file).write_text(json.dumps(template))
    return destination


def shadowing_copy(source: Assembly, destination: Path) -> Path:
    """``source`` with the load-balanced Service named after the LeaderWorkerSet again (the
    finding of d398b68: LWS then creates no headless Service)."""

    def shadow(template: dict[str, Any]) -> None:
        for resource in template["Resources"].values():
            if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
                resource["Properties"] = _replace(
                    resource["Properties"],
                    f'"kind":"Service","metadata":{{"name":"{LWS}-api"',
                    f'"kind":"Service","metadata":{{"name":"{LWS}"',
                )
            if (
                resource["Type"] == "Custom::AWSCDK-EKS-KubernetesObjectValue"
                and resource["Properties"]["ObjectType"] == "service"
            ):
                resource["Properties"]["ObjectName"] = LWS

    return patched_copy(source, destination, shadow)


@pytest.fixture(scope="module")
def fixed(reference_variant: Assembly) -> Rehearsal:
    return play(reference_variant, weight_bytes=WEIGHTS)


def test_the_fixed_reference_serves_with_only_degrades_left(fixed: Rehearsal):
    assert fixed.stopped is None, fixed.stopped
    # Without the HyperPod chart (the app's default), one replica on a two-node group.
    assert set(fixed.rules) == {"hyperpod.dependencies-chart-missing", "lws.rollout-outage"}
    assert {f.severity for f in fixed.findings} == {"degrades"}
    assert fixed.deployment is not None


def test_the_workers_resolve_the_leader_through_the_lws_headless_service(fixed: Rehearsal):
    deployment = fixed.deployment
    assert deployment is not None
    leader, worker = deployment.pods
    assert (leader.role, worker.role) == ("leader", "worker") and leader.node != worker.node
    env = dict(worker.container.env)
    assert (
        env["LWS_LEADER_ADDRESS"] == f"{LWS}-0.{LWS}.inference" and env["LWS_WORKER_INDEX"] == "1"
    )
    assert deployment.dns[env["LWS_LEADER_ADDRESS"]] == leader.ip
    assert deployment.dns[f"{LWS}-0.{LWS}.inference.svc.cluster.local"] == leader.ip
    assert worker.container.args[-3:] == (
        "--data-parallel-start-rank",
        "$(LWS_WORKER_INDEX)",
        "--headless",
    )


def test_the_leader_mounts_the_api_key_and_a_certificate_clients_can_verify(fixed: Rehearsal):
    deployment = fixed.deployment
    assert deployment is not None
    leader = deployment.pods[0]
    files = leader.container.files
    (key,) = deployment.api_keys
    assert files["/var/run/secrets/vllm-api-key"] == {"api-key": key.encode()} and len(key) == 48
    assert set(files["/var/run/secrets/vllm-tls"]) == {"tls.crt", "tls.key"}
    assert leader.container.model_mounts == ("/models",) and files["/models"] == {}
    cert = x509.load_pem_x509_certificate(files["/var/run/secrets/vllm-tls"]["tls.crt"])
    ca = x509.load_pem_x509_certificate(deployment.service.ca_pem)
    ca.public_key().verify(
        cert.signature,
        cert.tbs_certificate_bytes,
        padding.PKCS1v15(),
        cert.signature_hash_algorithm,
    )
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName)
    assert names == list(deployment.service.dns_names) and names[-1].endswith(
        ".elb.us-west-2.amazonaws.com"
    )
    assert deployment.service.endpoints == (leader.ip,) and deployment.service.target_port == 8000
    assert deployment.served_model_name == LWS and leader.readiness == ("/health", 8000, "HTTPS")


def test_the_cli_exits_0_on_the_reference_and_1_when_a_service_shadows_the_lws(
    reference_variant: Assembly, tmp_path, capsys
):
    assert main(["--assembly", str(reference_variant.directory), "--no-live"]) == 0
    assert "serves" in capsys.readouterr().out
    directory = shadowing_copy(reference_variant, tmp_path / "assembly")
    assert main(["--assembly", str(directory), "--no-live"]) == 1
    out = capsys.readouterr().out
    assert "DOES NOT SERVE" in out and "lws.headless-service-shadowed" in out


def test_the_cli_names_a_setup_error_in_one_line(tmp_path, capsys):
    assert main(["--assembly", str(tmp_path), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert main(["--charts", str(tmp_path / "none"), "--no-live"]) == 2


def test_a_worker_without_its_service_account_is_rejected(reference_variant, tmp_path, capsys):
    """The workers run as their own ServiceAccount: the identity manifest must
    declare it, or the admission controller rejects every worker pod."""

    def drop_worker_account(template: dict[str, Any]) -> None:
        for key, resource in template["Resources"].items():
            if key.startswith("ServingWeightsIdentity"):
                resource["Properties"] = _replace(
                    resource["Properties"], f'"name":"{LWS}-vllm-worker"', f'"name":"{LWS}-other"'
                )

    directory = patched_copy(reference_variant, tmp_path / "copy", drop_worker_account)
    assert main(["--assembly", str(directory), "--no-live"]) == 1
    out = capsys.readouterr().out
    assert "DOES NOT SERVE" in out and "pod.service-account-missing" in out
    assert f"ServiceAccount inference/{LWS}-vllm-worker does not exist" in out
