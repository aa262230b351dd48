"""CSI volumes (driver and provider on the node), Secret volumes, and EKS add-on creation."""

from __future__ import annotations

import base64

from rehearsal.controllers import addons, volumes
from rehearsal.world import Addon
from tests.rehearsal.builders import GPU_TAINT, container, deployment, namespace, node, world

SPC = {
    "apiVersion": "secrets-store.csi.x-k8s.io/v1",
    "kind": "SecretProviderClass",
    "metadata": {"name": "keys", "namespace": "inference"},
    "spec": {
        "provider": "aws",
        "parameters": {
            "usePodIdentity": "true",
            "objects": '- objectName: "arn:secret"\n  objectType: "secretsmanager"\n  objectAlias: "api-key"\n',
        },
    },
}
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _serving(tmp_path, provider_tolerations):
    w = world(tmp_path)
    w.nodes = [node("gpu-0", taints=[GPU_TAINT])]
    namespace(w, "inference")
    addon = Addon(
        "Provider",
        "aws-secrets-store-csi-driver-provider",
        "v3",
        {"tolerations": provider_tolerations},
        "OVERWRITE",
    )
    for obj in addons.objects(addon):
        w.put(obj, "addon:provider", "kube-system")
    w.put(SPC, "ApiKeyProvider")
    w.secret_values["arn:secret"] = "key-1"
    w.facts["pod_identity"] = {("inference", "vllm")}
    pod = deployment(
        "leader", "inference", tolerations=TOLERATE_GPU, serviceAccountName="vllm",
        volumes=[{"name": "api-key", "csi": {"driver": "secrets-store.csi.k8s.io", "volumeAttributes": {"secretProviderClass": "keys"}}}],
    )  # fmt: skip
    pod["spec"]["template"]["spec"]["containers"] = [
        container(volumeMounts=[{"name": "api-key", "mountPath": "/keys"}])
    ]
    w.put(pod, "Leader")
    w.reconcile()
    return w, w.pods[("Pod", "inference", "leader-0")]


def test_the_provider_with_default_tolerations_is_not_on_a_gpu_node_and_the_mount_fails(tmp_path):
    _, leader = _serving(tmp_path, provider_tolerations=[])
    assert leader.node == "gpu-0" and not leader.running
    assert leader.problem is not None and leader.problem.rule == "csi.provider-not-on-node"
    assert "issue 267" in leader.problem.source


def test_a_provider_that_tolerates_the_gpu_taint_mounts_the_api_key_file(tmp_path):
    _, leader = _serving(tmp_path, provider_tolerations=TOLERATE_GPU)
    assert leader.running and leader.files["/keys"] == {"api-key": b"key-1"}


def test_usepodidentity_needs_an_association_for_the_service_account(tmp_path):
    w, leader = _serving(tmp_path, provider_tolerations=TOLERATE_GPU)
    w.facts["pod_identity"] = set()
    files, problem = volumes.mount(w, leader)
    assert problem is not None and problem.rule == "csi.pod-identity-missing"


def test_a_secret_volume_needs_its_secret_and_items_name_the_files(tmp_path):
    w = world(tmp_path)
    w.nodes = [node("system-0")]
    pod = deployment(
        "web",
        volumes=[
            {
                "name": "tls",
                "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "cert.pem"}]},
            }
        ],
    )
    pod["spec"]["template"]["spec"]["containers"] = [
        container(volumeMounts=[{"name": "tls", "mountPath": "/tls"}])
    ]
    w.put(pod, "Web")
    w.reconcile()
    web = w.pods[("Pod", "default", "web-0")]
    assert web.problem is not None and web.problem.rule == "volume.secret-missing"
    data = {
        "tls.crt": base64.b64encode(b"CERT").decode(),
        "tls.key": base64.b64encode(b"KEY").decode(),
    }
    w.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "tls", "namespace": "default"},
            "data": data,
        },
        "cert-manager",
    )
    w.reconcile()
    assert web.running and web.files["/tls"] == {"cert.pem": b"CERT"}


def test_an_optional_secret_volume_mounts_empty_without_its_secret(tmp_path):
    w = world(tmp_path)
    w.nodes = [node("system-0")]
    pod = deployment(
        "web", volumes=[{"name": "certs", "secret": {"secretName": "later", "optional": True}}]
    )
    pod["spec"]["template"]["spec"]["containers"] = [
        container(volumeMounts=[{"name": "certs", "mountPath": "/certs"}])
    ]
    w.put(pod, "Web")
    w.reconcile()
    web = w.pods[("Pod", "default", "web-0")]
    assert web.running and web.files["/certs"] == {}


def _addon(name, resolve=None, config=None):
    return Addon("Addon", name, "v1", config or {}, resolve)


def test_a_self_managed_addon_created_without_overwrite_may_fail():
    finding = addons.conflict(
        _addon("vpc-cni", config={"enableNetworkPolicy": "true"}), bootstraps_self_managed=True
    )
    assert finding is not None and finding.rule == "eks-addon.conflicts-unresolved"
    assert "enableNetworkPolicy" in finding.message


def test_overwrite_or_no_self_managed_version_creates_cleanly():
    assert addons.conflict(_addon("kube-proxy", "OVERWRITE"), bootstraps_self_managed=True) is None
    assert addons.conflict(_addon("coredns"), bootstraps_self_managed=False) is None
    assert addons.conflict(_addon("cert-manager"), bootstraps_self_managed=True) is None


def test_configuration_values_are_read_as_json_or_yaml():
    assert addons.configuration('{"a": 1}') == {"a": 1}
    assert addons.configuration("tolerations:\n- operator: Exists\n") == {
        "tolerations": [{"operator": "Exists"}]
    }
    assert addons.configuration(None) == {}
