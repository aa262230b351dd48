"""Placement: every workload a HyperPod stack deploys lands on the cluster's HyperPod nodes.

Every Helm chart the template installs is rendered by the real ``helm`` (from the kubectl layer)
from the published chart in ``../shared/charts`` (or the chart asset as staged) with the values
the template carries; with the template's own manifests, every workload is placed by
Kubernetes' scheduling rules on a model of the HyperPod nodes (``tests/support/scheduling.py``).
Variants: the reference stack (p6-b200), a p5en reference stack that scales with KEDA, and the
reference stack given AWS's HyperPod dependencies chart through the README's context key.
The KEDA variant's GPU group autoscales (it is created with 0 nodes): it is placed at the size
its Karpenter NodePool may grow it to (``_grown``; the deploy rehearsal plays the growth).

The nodes' CPUs follow each group's ``ThreadsPerCore`` (the node model's ``allocatable``): with
1, multithreading is off and the kubelet sees half the catalog's vCPUs (CloudFormation/botocore ``ThreadsPerCore``:
"specify 1 for disabling multithreading"; EC2 CPU options: vCPUs = cores x threads per core).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Environment, Validations
from cdk_nag import AwsSolutionsChecks

from cdk_llm_serving.planning.catalog import default_catalog
from stacks import add_reference_stacks
from stacks.hyperpod_reference_stack import HyperPodReferenceStack, HyperPodSettings
from tests.support.app import SHARED, new_app
from tests.support.helm import (
    chart_installs,
    find_chart,
    helm_template,
    namespace_of,
    render_template_charts,
)
from tests.support.kubernetes_schemas import validate_core
from tests.support.scheduling import EFA, GPU, Cluster, hyperpod_nodes, workloads
from tests.support.template_helpers import manifest_objects

CHARTS = SHARED / "charts"
HYPERPOD_CHART = CHARTS / "hyperpod-dependencies-011ca92"
WEIGHTS = "s3://placement-weights/reference/"
VARIANTS = ["reference-p6-b200", "reference-p5en-keda", "reference-hyperpod-chart"]

pytestmark = pytest.mark.skipif(
    not CHARTS.is_dir(),
    reason=f"{CHARTS} (unpacked upstream Helm charts) sits beside the checkout only in CI and dev sessions",
)


def test_the_node_model_halves_the_cpus_without_multithreading(rendered):
    """p6-b200 with ThreadsPerCore 1: 96 vCPUs to the kubelet (not 192), minus kube-reserved."""
    cluster = rendered["reference-p6-b200"]["cluster"]
    b200 = [n for n in cluster.nodes if n.instance_type == "ml.p6-b200.48xlarge"]
    assert b200 and all(95 < n.capacity["cpu"] < 96 for n in b200)
    system = [n for n in cluster.nodes if n.instance_type == "ml.m5.4xlarge"]
    assert system and all(15 < n.capacity["cpu"] < 16 for n in system)  # 2 threads per core


@pytest.fixture(scope="module")
def helm(helm_binary) -> Path:
    return helm_binary


def _synth_variant(name: str, reference_assembly) -> tuple[dict, Path]:
    if name == "reference-p6-b200":  # the reference app's stack, synthesized once per session
        stack = reference_assembly.get_stack_by_name("ReferenceMoeHyperPod")
        return stack.template, Path(reference_assembly.directory)
    if name == "reference-hyperpod-chart":
        # as the README documents it: the reference app, its context key, cdk-nag's checks
        app = new_app(**{"llm-serving:hyperpod:chart-dir": str(HYPERPOD_CHART)})
        add_reference_stacks(app)
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        assembly = app.synth()
        return assembly.get_stack_by_name("ReferenceMoeHyperPod").template, Path(assembly.directory)
    app = new_app()
    settings = HyperPodSettings(
        weights_uri=WEIGHTS, gpu_instance_type="ml.p5en.48xlarge", max_replicas=2
    )
    HyperPodReferenceStack(app, "Placement", env=Environment(region="us-west-2"), settings=settings)
    assembly = app.synth()
    return assembly.get_stack_by_name("Placement").template, Path(assembly.directory)


def _grown(template: dict) -> dict:
    """``template`` with each autoscaled group at the nodes its NodePool's GPU limit allows."""
    import copy

    limits = {
        obj["metadata"]["name"]: int(obj["spec"]["limits"]["nvidia.com/gpu"])
        for obj in manifest_objects(template, "KarpenterNodePools")
        if obj["kind"] == "NodePool"
    }
    grown = copy.deepcopy(template)
    for resource in grown["Resources"].values():
        if resource["Type"] != "AWS::SageMaker::Cluster":
            continue
        for group in resource["Properties"]["InstanceGroups"]:
            if group["InstanceGroupName"] in limits:
                gpus = default_catalog().get(group["InstanceType"]).gpus
                group["InstanceCount"] = limits[group["InstanceGroupName"]] // gpus
    return grown


@pytest.fixture(scope="module")
def rendered(helm, reference_assembly) -> dict[str, dict[str, Any]]:
    """Per variant: the template, every object it deploys, and the placement of its pods."""
    found = {}
    for name in VARIANTS:
        template, assembly_dir = _synth_variant(name, reference_assembly)
        charts = render_template_charts(template, helm, CHARTS, assembly_dir)
        objects = [obj for chart in charts.values() for obj in chart] + manifest_objects(
            template, ""
        )
        cluster = Cluster(hyperpod_nodes(_grown(template)))
        placement = cluster.place(workloads(objects, namespace_of))
        found[name] = {
            "template": template,
            "charts": charts,
            "objects": objects,
            "cluster": cluster,
            "placement": placement,
        }
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_workload_places(rendered, variant):
    assert rendered[variant]["placement"].unplaced == {}


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_plugins_land_on_every_gpu_node(rendered, variant):
    cluster = rendered[variant]["cluster"]
    catalog = default_catalog()
    gpu_nodes = [n for n in cluster.nodes if n.instance_type in catalog]
    assert gpu_nodes
    for node in gpu_nodes:
        spec = catalog.get(node.instance_type)
        assert node.capacity.get(GPU) == spec.gpus, node.name
        assert node.capacity.get(EFA) == spec.efa_devices, node.name


@pytest.mark.parametrize("variant", VARIANTS)
def test_both_lws_pods_land_on_gpu_nodes_with_their_gpus_and_efa(rendered, variant):
    cluster, placement = rendered[variant]["cluster"], rendered[variant]["placement"]
    lws = [w for w in workloads(rendered[variant]["objects"]) if w.kind == "LeaderWorkerSet"]
    assert lws, "the stack deploys a LeaderWorkerSet"
    for workload in lws:
        owner = f"LeaderWorkerSet/{workload.namespace}/{workload.name}"
        nodes = placement.placed[owner]
        assert len(nodes) == len(workload.pods) >= 2  # leader and worker(s)
        assert len(set(nodes)) == len(nodes), "one pod per node"
        assert len({cluster.node(name).group for name in nodes}) == 1, "one GPU group"
        for pod, node_name in zip(workload.pods, nodes, strict=True):
            node = cluster.node(node_name)
            spec = default_catalog().get(node.instance_type)
            assert pod.requests[GPU] == spec.gpus
            assert pod.requests[EFA] == spec.efa_devices


@pytest.mark.parametrize("variant", VARIANTS)
def test_lws_pods_are_guaranteed_and_fit_next_to_the_daemons(rendered, variant):
    """CPU and memory requested (= limits, QoS Guaranteed); that they fit is the placement."""
    lws = [w for w in workloads(rendered[variant]["objects"]) if w.kind == "LeaderWorkerSet"]
    for workload in lws:
        for pod in workload.pods:
            assert pod.requests.get("cpu", 0) > 0 and pod.requests.get("memory", 0) > 0
            for container in pod.spec["containers"]:
                resources = container["resources"]
                assert resources["requests"] == resources["limits"], container["name"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_two_objects_share_kind_namespace_and_name(rendered, variant):
    keys = Counter(
        (obj["kind"], namespace_of(obj), obj["metadata"]["name"])
        for obj in rendered[variant]["objects"]
    )
    assert [key for key, count in keys.items() if count > 1] == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_plugins_land_while_deep_health_checks_run(rendered, variant):
    """Nodes carry node-health-status=Unschedulable:NoSchedule during deep health checks."""
    template = rendered[variant]["template"]
    cluster = Cluster(hyperpod_nodes(_grown(template), health_checking=True))
    daemons = [w for w in workloads(rendered[variant]["objects"], namespace_of) if w.daemon]
    cluster.place(daemons)
    for node in cluster.nodes:
        if node.instance_type in default_catalog():
            assert node.capacity.get(GPU) and node.capacity.get(EFA), node.name


def test_the_hyperpod_chart_path_installs_no_direct_device_plugins(rendered):
    charts = rendered["reference-hyperpod-chart"]["charts"]
    assert "hyperpod-dependencies" in charts
    assert not {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"} & set(charts)
    kinds = Counter(
        (obj["kind"], obj["metadata"]["name"]) for obj in charts["hyperpod-dependencies"]
    )
    assert kinds[("DaemonSet", "nvidia-device-plugin")] == 1
    assert kinds[("DaemonSet", "aws-efa-k8s-device-plugin")] == 1


def test_the_hyperpod_chart_needs_no_node_to_install(rendered):
    """Installed before the nodes and without --wait: no hook (Helm waits for hook Jobs)."""
    objects = rendered["reference-hyperpod-chart"]["charts"]["hyperpod-dependencies"]
    hooks = [
        (obj["kind"], obj["metadata"]["name"])
        for obj in objects
        if "helm.sh/hook" in (obj["metadata"].get("annotations") or {})
    ]
    assert hooks == []


def test_the_staged_hyperpod_chart_leaves_out_the_stale_archive(rendered):
    """The upstream chart ships health-monitoring-agent twice; Helm would pick one at random."""
    images = {
        container["image"]
        for obj in rendered["reference-hyperpod-chart"]["charts"]["hyperpod-dependencies"]
        if obj["kind"] == "DaemonSet" and "health-monitoring-agent" in obj["metadata"]["name"]
        for container in obj["spec"]["template"]["spec"]["containers"]
    }
    assert images and all("1.0.1892.0_1.0.424.0" in image for image in images)
    (install,) = [
        i
        for i in chart_installs(rendered["reference-hyperpod-chart"]["template"])
        if i.release == "hyperpod-dependencies"
    ]
    assert install.values["global"]["region"] == "us-west-2"


def test_a_long_release_name_without_override_collides(helm):
    """What the duplicate check catches: aws-cdk-lib's 53-character release name, no override."""
    chart = find_chart(CHARTS, "nvidia-device-plugin", "0.17.1")
    objects = helm_template(
        helm,
        chart,
        "hyperpodservingaddonsnvidiadeviceplugin1234567890abcd",
        "kube-system",
        {},
    )
    names = Counter(obj["metadata"]["name"] for obj in objects if obj["kind"] == "DaemonSet")
    assert max(names.values()) == 2


def test_the_charts_default_placement_lands_no_device_plugin(helm, rendered):
    """What the placement check catches: the published charts' default values on HyperPod."""
    template = rendered["reference-p6-b200"]["template"]
    objects = []
    for name, version in (
        ("nvidia-device-plugin", "0.17.1"),
        ("aws-efa-k8s-device-plugin", "v0.5.30"),
    ):
        objects += helm_template(helm, find_chart(CHARTS, name, version), name, "kube-system", {})
    cluster = Cluster(hyperpod_nodes(template))
    cluster.place(workloads(objects, namespace_of))
    assert not any(node.capacity.get(GPU) or node.capacity.get(EFA) for node in cluster.nodes)


def test_aws_chart_values_alone_land_no_efa_plugin_on_our_gpu_nodes(helm, rendered):
    """What our HyperPod-chart values fix: AWS's EFA values do not tolerate nvidia.com/gpu."""
    template = rendered["reference-p6-b200"]["template"]
    objects = helm_template(
        helm,
        HYPERPOD_CHART,
        "hyperpod-dependencies",
        "kube-system",
        {"global": {"region": "us-west-2"}},
    )
    cluster = Cluster(hyperpod_nodes(template))
    cluster.place([w for w in workloads(objects, namespace_of) if w.daemon])
    gpu_nodes = [node for node in cluster.nodes if node.instance_type in default_catalog()]
    assert all(node.capacity.get(GPU) == 8 for node in gpu_nodes)
    assert not any(node.capacity.get(EFA) for node in gpu_nodes)


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_device_plugins_match_the_kubernetes_schema(rendered, variant):
    """Our affinity and toleration values, as the charts render them, are valid DaemonSets."""
    plugins = [
        obj
        for objects in rendered[variant]["charts"].values()
        for obj in objects
        if obj["kind"] == "DaemonSet"
        and obj["metadata"]["name"] in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin")
    ]
    assert len(plugins) == 2
    for obj in plugins:
        validate_core(obj)


def test_cert_manager_places_on_the_system_nodes(rendered, helm):
    """The EKS add-on ``cert-manager`` (serving TLS, shared with the inference operator) is
    not a chart of the template, so the placement above does not see its pods. Stand-in: the
    upstream cert-manager chart at the add-on's version (v1.18.2, in the HyperPod chart's
    ``charts/``) with its default values (no tolerations, ``kubernetes.io/os: linux``), placed
    next to everything the reference stack runs. UNCONFIRMED: that the add-on's defaults equal
    the chart's; EKS does not publish the add-on's rendered manifests."""
    chart = HYPERPOD_CHART / "charts" / "cert-manager"
    objects = helm_template(helm, chart, "cert-manager", "cert-manager", {})
    variant = rendered["reference-p6-b200"]
    cluster = Cluster(hyperpod_nodes(variant["template"]))
    placement = cluster.place(workloads([*variant["objects"], *objects], namespace_of))
    assert placement.unplaced == {}
    cert_manager = [w for w in workloads(objects, namespace_of) if w.kind == "Deployment"]
    assert len(cert_manager) == 3  # controller, webhook, cainjector
    for workload in cert_manager:
        for node_name in placement.placed[f"Deployment/cert-manager/{workload.name}"]:
            assert cluster.node(node_name).instance_type not in default_catalog(), node_name
