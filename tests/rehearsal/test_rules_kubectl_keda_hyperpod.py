"""The kubectl handler's apply, KEDA's scale target, HyperPod's chart and node wait."""

from __future__ import annotations

from pathlib import Path

from rehearsal import cluster
from rehearsal.controllers import hyperpod, keda, kubectl
from tests.rehearsal.builders import lws, lws_controller, namespace, world

SCALED = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": "svc", "namespace": "inference"},
    "spec": {
        "scaleTargetRef": {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "svc",
        }
    },
}


def test_a_custom_resource_before_its_crd_and_an_object_before_its_namespace_are_rejected(tmp_path):
    w = world(tmp_path)
    found = kubectl.apply(w, "R", [lws()], overwrite=True, resource="R")
    assert [f.rule for f in found] == ["kubectl.no-such-kind"]
    lws_controller(w)
    found = kubectl.apply(w, "R", [lws()], overwrite=True, resource="R")
    assert [f.rule for f in found] == ["kubectl.namespace-missing"]
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inference"}}
    assert kubectl.apply(w, "R", [ns, lws()], overwrite=True, resource="R") == []


def test_create_without_overwrite_fails_on_an_existing_object(tmp_path):
    w = world(tmp_path)
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inference"}}
    assert kubectl.apply(w, "A", [ns], overwrite=False, resource="A") == []
    assert [f.rule for f in kubectl.apply(w, "B", [ns], overwrite=False, resource="B")] == [
        "kubectl.already-exists"
    ]
    assert kubectl.apply(w, "C", [ns], overwrite=True, resource="C") == []
    (twice,) = kubectl.declared_twice(w)
    assert (
        twice.rule == "kubectl.declared-twice"
        and twice.severity == "degrades"
        and "every object in it" in twice.message
    )


def test_keda_needs_a_scalable_target_and_a_manifest_that_does_not_pin_replicas(tmp_path):
    w = world(tmp_path)
    namespace(w, "inference")
    w.put(SCALED, "Scaling")
    assert [f.rule for f in keda.check(w)] == ["keda.scale-target-missing"]
    lws_controller(w)
    w.put(lws(), "ServingLeaderWorkerSet")
    assert [f.rule for f in keda.check(w)] == ["keda.replicas-pinned"]
    unpinned = lws()
    del unpinned["spec"]["replicas"]
    w.put(unpinned, "ServingLeaderWorkerSet")
    assert keda.check(w) == []


GROUPS = cluster.instance_groups(
    {
        "InstanceGroups": [
            {
                "InstanceGroupName": "gpu",
                "InstanceType": "ml.p5en.48xlarge",
                "InstanceCount": 1,
                "OnStartDeepHealthChecks": ["InstanceStress"],
            }
        ]
    }
)


def test_the_dependencies_chart_must_come_before_a_cluster_with_deep_health_checks(tmp_path):
    w = world(tmp_path)
    finding = hyperpod.dependencies_chart(
        w, "Cluster", GROUPS, [{"Release": "nvidia-device-plugin"}]
    )
    assert (
        finding is not None
        and finding.rule == "hyperpod.dependencies-chart-missing"
        and finding.severity == "blocking"
    )
    assert (
        hyperpod.dependencies_chart(w, "Cluster", GROUPS, [{"Release": "hyperpod-dependencies"}])
        is None
    )
    no_checks = cluster.instance_groups(
        {
            "InstanceGroups": [
                {"InstanceGroupName": "gpu", "InstanceType": "ml.p5en.48xlarge", "InstanceCount": 1}
            ]
        }
    )
    assert hyperpod.dependencies_chart(w, "Cluster", no_checks, []).severity == "degrades"


STAGE = {
    "ClusterName": "c",
    "InstanceGroups": {"gpu": "2"},
    "DeadlineSeconds": "2310",
    "Final": "true",
}
WAITS = '''
def is_complete(event, context=None, client=None, now=None):
    """ListClusterNodes: keeps waiting whatever the nodes say."""
    return {"IsComplete": False}
'''
FAILS_FAST = '''
def is_complete(event, context=None, client=None, now=None):
    """ListClusterNodes: fails on a node in Failure."""
    nodes = client.list_cluster_nodes()["ClusterNodeSummaries"]
    if any(n["InstanceStatus"]["Status"] == "Failure" for n in nodes):
        raise RuntimeError("a node failed")
    return {"IsComplete": False}
'''


def _with_handler(tmp_path: Path, code: str):
    w = world(tmp_path)
    (tmp_path / "asset.0123456789abcdef").mkdir()
    (tmp_path / "asset.0123456789abcdef" / "index.py").write_text(code)
    return w


def test_a_node_wait_that_does_not_fail_fast_on_a_failed_node_degrades(tmp_path):
    w = _with_handler(tmp_path, WAITS)
    finding = hyperpod.node_wait(w, [("Wait", STAGE)], cluster_retained=False)
    assert (
        finding is not None
        and finding.rule == "node-wait.no-fail-fast"
        and "rollback" in finding.message
    )


def test_a_node_wait_that_fails_fast_passes(tmp_path):
    w = _with_handler(tmp_path, FAILS_FAST)
    assert hyperpod.node_wait(w, [("Wait", STAGE)], cluster_retained=False) is None


def _fsx_world(tmp_path, per_tib: int, capacity: int, failure_threshold: int):
    from rehearsal.controllers import fsx

    resources = {
        "Fs": {
            "Type": "AWS::FSx::FileSystem",
            "Properties": {
                "StorageCapacity": capacity,
                "LustreConfiguration": {"PerUnitStorageThroughput": per_tib},
            },
        },
        "Dra": {
            "Type": "AWS::FSx::DataRepositoryAssociation",
            "Properties": {"FileSystemId": {"Ref": "Fs"}, "BatchImportMetaDataOnCreate": True},
        },
    }
    w = world(tmp_path, resources)
    namespace(w, "inference")
    handle = str(w.resolver.ref("Fs"))
    w.put(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv"},
            "spec": {"csi": {"driver": "fsx.csi.aws.com", "volumeHandle": handle}},
        },
        "Volume",
    )
    w.put(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "weights", "namespace": "inference"},
            "spec": {"volumeName": "pv"},
        },
        "Volume",
    )
    lws_controller(w)
    serving = lws()
    spec = serving["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    spec["volumes"] = [{"name": "w", "persistentVolumeClaim": {"claimName": "weights"}}]
    spec["containers"][0]["startupProbe"] = {
        "periodSeconds": 10,
        "failureThreshold": failure_threshold,
    }
    w.put(serving, "Serving")
    return fsx, w


def test_a_probe_shorter_than_the_lazy_hydration_from_s3_degrades(tmp_path):
    fsx, w = _fsx_world(tmp_path, per_tib=125, capacity=1200, failure_threshold=90)
    (finding,) = fsx.check(w, 1.4e12)
    # 1.4 TB at 125 MB/s/TiB x 1.17 TiB = 146 MB/s: 9557 s + 180 s engine start > 900 s.
    assert finding.rule == "startup.cold-start-exceeds-probe" and "900 s" in finding.message


def test_a_probe_that_covers_the_hydration_at_the_baseline_passes(tmp_path):
    fsx, w = _fsx_world(tmp_path, per_tib=500, capacity=4800, failure_threshold=177)
    assert fsx.check(w, 1.4075e12) == []
    ((needed, budget),) = w.facts["cold_start"].values()
    assert round(needed) == 781 and budget == 1770


def _role_world(tmp_path, actions):
    from rehearsal.controllers import iam

    resources = {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "ManagedPolicyArns": [
                    "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"
                ]
            },
        },
        "Policy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {
                "Roles": [{"Ref": "Role"}],
                "PolicyDocument": {
                    "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]
                },
            },
        },
    }
    w = world(tmp_path, resources)
    group = {"InstanceGroupName": "gpu", "ExecutionRole": w.resolver.get_att("Role", "Arn")}
    return iam, w, group


def test_a_node_role_without_the_vpc_cni_actions_leaves_pods_without_addresses(tmp_path):
    iam, w, group = _role_world(tmp_path, ["ecr:GetAuthorizationToken"])
    finding = iam.check(w, "Cluster", [group])
    assert (
        finding is not None
        and finding.rule == "iam.node-role-lacks-vpc-cni"
        and "ec2:AssignPrivateIpAddresses" in finding.message
    )


def test_the_actions_or_a_cni_role_of_its_own_satisfy_it(tmp_path):
    iam, w, group = _role_world(tmp_path, ["ec2:*"])
    assert iam.check(w, "Cluster", [group]) is None
    iam, w, group = _role_world(tmp_path / "own", ["s3:GetObject"])
    w.facts["pod_identity"] = {("kube-system", "aws-node")}
    from rehearsal.world import Addon

    w.addons["vpc-cni"] = Addon("Cni", "vpc-cni", "v1", {}, "OVERWRITE")
    assert iam.check(w, "Cluster", [group]) is None


def test_the_keda_operator_writes_the_certificate_secret_its_other_components_mount(tmp_path):
    from tests.rehearsal.builders import deployment, node

    w = world(tmp_path)
    w.nodes = [node("system-0", cpu=64)]
    namespace(w, "keda")
    operator = deployment("keda-operator", "keda")
    operator["spec"]["template"]["spec"]["containers"][0]["args"] = [
        "--enable-cert-rotation=true",
        "--cert-secret-name=kedaorg-certs",
    ]
    w.put(operator, "helm:keda")
    w.reconcile()
    assert set(w.get("Secret", "keda", "kedaorg-certs")["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    manual = deployment("keda-operator", "other")
    manual["spec"]["template"]["spec"]["containers"][0]["args"] = ["--enable-cert-rotation=false"]
    namespace(w, "other")
    w.put(manual, "helm:keda")
    w.reconcile()
    assert w.get("Secret", "other", "kedaorg-certs") is None


def test_the_inference_operator_addon_serves_its_custom_resources(tmp_path):
    from rehearsal.controllers import addons
    from rehearsal.world import Addon

    w = world(tmp_path)
    namespace(w, "inference")
    config = {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "m", "namespace": "inference"},
    }
    assert [f.rule for f in kubectl.apply(w, "R", [config], overwrite=True, resource="R")] == [
        "kubectl.no-such-kind"
    ]
    for obj in addons.objects(Addon("Op", "amazon-sagemaker-hyperpod-inference", "v1", {}, None)):
        w.put(obj, "addon:inference")
    assert kubectl.apply(w, "R", [config], overwrite=True, resource="R") == []


def _chart_resource(**props):
    return {
        "Chart": {
            "Type": "Custom::AWSCDK-EKS-HelmChart",
            "Properties": {"Release": "r", "Namespace": "default", **props},
        }
    }


def test_a_chart_that_does_not_render_fails_its_install(tmp_path):
    from rehearsal.play import play
    from tests.rehearsal.builders import assembly

    chart = tmp_path / "assembly" / ("asset." + "a" * 64)
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: broken\nversion: 0.1.0\n")
    (chart / "templates" / "x.yaml").write_text("{{ .Values.missing.field }}\n")
    built = assembly(tmp_path / "assembly", _chart_resource(ChartAssetURL=f"s3://b/{'a' * 64}.zip"))
    result = play(built, stop_at_blocking=False)
    assert [f.rule for f in result.findings] == ["helm.render-failed"]


def test_a_chart_missing_from_the_published_charts_is_a_setup_error(tmp_path, capsys):
    from rehearsal.__main__ import main
    from tests.rehearsal.builders import assembly

    built = assembly(tmp_path / "assembly", _chart_resource(Chart="lws", Version="9.9.9"))
    assert main(["--assembly", str(built.directory), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Chart: no published chart lws 9.9.9") and err.count("\n") == 1
