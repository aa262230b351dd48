"""The Load Balancer Controller's subnets and zones; cert-manager's CA and leaf."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding

from rehearsal.controllers import certmanager, lbc
from rehearsal.world import PodState
from tests.rehearsal.builders import deployment, node, world


def _subnet(zone: dict, tags: dict) -> dict:
    return {
        "Type": "AWS::EC2::Subnet",
        "Properties": {
            **zone,
            "CidrBlock": "10.0.0.0/24",
            "VpcId": "vpc-1",
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        },
    }


INTERNAL = {"kubernetes.io/role/internal-elb": "1"}
AZ0 = {"AvailabilityZone": {"Fn::Select": [0, {"Fn::GetAZs": ""}]}}
AZ1 = {"AvailabilityZone": {"Fn::Select": [1, {"Fn::GetAZs": ""}]}}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "api",
        "namespace": "default",
        "annotations": {lbc.PREFIX + "type": "external", lbc.PREFIX + "scheme": "internal"},
    },
    "spec": {"type": "LoadBalancer", "selector": {"app": "api"}},
}


def _world(tmp_path, gpu_subnet: dict, service: dict = SERVICE):
    resources = {
        "Private1": _subnet(AZ0, INTERNAL),
        "Private2": _subnet(AZ1, INTERNAL),
        "Gpu": gpu_subnet,
    }
    w = world(tmp_path, resources)
    w.nodes = [node("system-0", cpu=64), node("gpu-0", cpu=64)]
    w.put(deployment("aws-load-balancer-controller", "kube-system"), "helm:lbc")
    w.put(service, "Service")
    w.reconcile()
    w.node_subnets = {"gpu-0": str(w.resolver.ref("Gpu"))}
    target = PodState(
        ("Pod", "default", "api-0"),
        {"spec": {}},
        ("Deployment", "default", "api"),
        node="gpu-0",
        started=True,
    )
    return w, target


def test_discovery_takes_one_tagged_subnet_per_zone_and_the_service_gets_a_hostname(tmp_path):
    w, _ = _world(tmp_path, _subnet(AZ0, {}))
    chosen = lbc.choose_subnets(w, SERVICE, "cluster")
    assert {s.logical_id for s in chosen} == {"Private1", "Private2"}
    assert w.get("Service", "default", "api")["status"]["loadBalancer"]["ingress"][0][
        "hostname"
    ].endswith(".elb.us-west-2.amazonaws.com")


def test_a_target_in_a_zone_named_by_id_is_not_covered_by_zones_named_by_position(tmp_path):
    w, target = _world(tmp_path, _subnet({"AvailabilityZoneId": "usw2-az2"}, {"Name": "gpu"}))
    finding = lbc.check(w, ("Service", "default", "api"), [target])
    assert (
        finding is not None
        and finding.rule == "lbc.target-zone-not-enabled"
        and "usw2-az2" in finding.message
    )


def test_a_target_in_a_subnet_of_a_load_balancer_zone_is_covered(tmp_path):
    w, target = _world(tmp_path, _subnet(AZ1, {}))
    assert lbc.check(w, ("Service", "default", "api"), [target]) is None


def test_a_target_subnet_tagged_for_internal_load_balancers_is_one_of_them(tmp_path):
    w, target = _world(
        tmp_path, _subnet({"AvailabilityZoneId": "usw2-az2"}, {"Name": "gpu", **INTERNAL})
    )
    assert {s.logical_id for s in lbc.choose_subnets(w, SERVICE, "cluster")} == {
        "Private1",
        "Private2",
        "Gpu",
    }
    assert lbc.check(w, ("Service", "default", "api"), [target]) is None


def test_the_subnets_annotation_replaces_discovery(tmp_path):
    annotated = {
        **SERVICE,
        "metadata": {
            **SERVICE["metadata"],
            "annotations": {**SERVICE["metadata"]["annotations"], lbc.PREFIX + "subnets": "gpu"},
        },
    }
    w, target = _world(
        tmp_path, _subnet({"AvailabilityZoneId": "usw2-az2"}, {"Name": "gpu"}), annotated
    )
    assert [s.logical_id for s in lbc.choose_subnets(w, annotated, "cluster")] == ["Gpu"]
    assert lbc.check(w, ("Service", "default", "api"), [target]) is None


def test_no_tagged_subnet_means_no_load_balancer(tmp_path):
    w = world(tmp_path, {"Public": _subnet(AZ0, {"kubernetes.io/role/elb": "1"})})
    w.nodes = [node("system-0")]
    w.put(deployment("aws-load-balancer-controller", "kube-system"), "helm:lbc")
    w.put(SERVICE, "Service")
    w.reconcile()
    assert "status" not in w.get("Service", "default", "api")
    finding = lbc.check(w, ("Service", "default", "api"), [])
    assert finding is not None and finding.rule == "lbc.no-subnets"


def test_a_ca_issuer_signs_a_leaf_for_the_certificates_names():
    ca = certmanager.issue({"isCA": True, "commonName": "serving CA", "duration": "87600h"}, None)
    from cryptography.hazmat.primitives import serialization

    ca_key = serialization.load_pem_private_key(ca["tls.key"], password=None)
    ca_cert = x509.load_pem_x509_certificate(ca["tls.crt"])
    leaf = certmanager.issue(
        {"dnsNames": ["svc.ns.svc", "lb.example"], "duration": "8760h", "usages": ["server auth"]},
        (ca_key, ca_cert),
    )
    cert = x509.load_pem_x509_certificate(leaf["tls.crt"])
    assert leaf["ca.crt"] == ca["tls.crt"]
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName)
    assert names == ["svc.ns.svc", "lb.example"]
    ca_cert.public_key().verify(
        cert.signature,
        cert.tbs_certificate_bytes,
        padding.PKCS1v15(),
        cert.signature_hash_algorithm,
    )
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert abs(life - datetime.timedelta(hours=8760, minutes=1)) < datetime.timedelta(seconds=5)


def test_certificates_are_issued_only_while_cert_manager_runs_and_its_issuer_is_ready(tmp_path):
    w = world(tmp_path)
    w.nodes = [node("system-0", cpu=64)]
    issuer = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": "ca", "namespace": "default"},
        "spec": {"ca": {"secretName": "ca"}},
    }
    leaf = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "tls", "namespace": "default"},
        "spec": {"secretName": "tls", "dnsNames": ["a"], "issuerRef": {"name": "ca"}},
    }
    w.put(issuer, "Issuers")
    w.put(leaf, "Cert")
    w.reconcile()
    assert [f.rule for f in certmanager.not_issued(w)] == ["cert-manager.not-issued"]
    assert "not running" in certmanager.not_issued(w)[0].message
    w.put(deployment("cert-manager", "cert-manager"), "addon:cert-manager")
    w.reconcile()
    assert "not ready" in certmanager.not_issued(w)[0].message  # the CA's Secret is missing
    root = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "ca", "namespace": "default"},
        "spec": {
            "secretName": "ca",
            "isCA": True,
            "commonName": "CA",
            "issuerRef": {"name": "self"},
        },
    }
    selfsigned = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": "self", "namespace": "default"},
        "spec": {"selfSigned": {}},
    }
    w.put(selfsigned, "Issuers")
    w.put(root, "Issuers")
    w.reconcile()
    assert certmanager.not_issued(w) == [] and w.get("Secret", "default", "tls") is not None


def _ip_targets(namespace_labels: dict[str, str] | None) -> tuple:
    service = {
        **SERVICE,
        "metadata": {
            **SERVICE["metadata"],
            "namespace": "inference",
            "annotations": {
                **SERVICE["metadata"]["annotations"],
                lbc.PREFIX + "nlb-target-type": "ip",
            },
        },
    }
    return service, {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "inference",
            **({"labels": namespace_labels} if namespace_labels else {}),
        },
    }


def test_ip_targets_in_a_namespace_without_the_readiness_gate_label_degrade_rollouts(tmp_path):
    service, namespace = _ip_targets(None)
    w, _ = _world(tmp_path, _subnet(AZ1, {}), service)
    w.put(namespace, "Namespace")
    finding = lbc.readiness_gate(w, ("Service", "inference", "api"))
    assert finding is not None and finding.rule == "lbc.no-readiness-gate"
    assert finding.severity == "degrades"


def test_ip_targets_in_a_labelled_namespace_wait_for_target_health(tmp_path):
    service, namespace = _ip_targets(dict([lbc.READINESS_GATE_LABEL]))
    w, _ = _world(tmp_path, _subnet(AZ1, {}), service)
    w.put(namespace, "Namespace")
    assert lbc.readiness_gate(w, ("Service", "inference", "api")) is None


def test_the_namespace_the_cluster_declares_passes_the_controllers_readiness_gate_rule(tmp_path):
    """The two sides together: the Namespace object a HyperPodEksCluster renders, put into the
    rehearsal's world beside an IP-target Service, satisfies the controller's rule."""
    from tests.support.builders import new_stack, template_of
    from tests.support.hyperpod import hyperpod_cluster
    from tests.support.template_helpers import manifest_objects

    stack = new_stack("Gate")
    hyperpod_cluster(stack).kubernetes_namespace("inference")
    (namespace,) = manifest_objects(template_of(stack), "Namespaceinference")
    service, _ = _ip_targets(None)
    w, _ = _world(tmp_path, _subnet(AZ1, {}), service)
    w.put(namespace, "Namespace")
    assert lbc.readiness_gate(w, ("Service", "inference", "api")) is None
