"""KEDA scaling of LeaderWorkerSet replicas on queue depth, bounded by the GPU group."""

from __future__ import annotations

import json

import jsonschema
import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.constants import KEDA_API_VERSION, KEDA_CHART
from stacks.reference_app import add_reference_stacks
from tests.support.app import new_app
from tests.support.hyperpod import chart_crd_schema, published_chart
from tests.support.kubernetes_schemas import concretize
from tests.support.linting import lint_template
from tests.support.template_helpers import manifest_objects, only_resource, resources_of_type


@pytest.fixture(scope="module")
def scaled_hyperpod() -> dict:
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    app = new_app(**{"llm-serving:reference-moe:max-replicas": "3"})
    add_reference_stacks(app)
    Validations.of(app).add_plugins(
        AwsSolutionsChecks(app)
    )  # any unacknowledged finding fails synth
    return app.synth().get_stack_by_name("ReferenceMoeHyperPod").template


def test_gpu_group_grows_to_the_maximum_and_keda_scales_within_it(scaled_hyperpod):
    _, cluster = only_resource(scaled_hyperpod, "AWS::SageMaker::Cluster")
    (gpu,) = [
        g for g in cluster["Properties"]["InstanceGroups"] if g["InstanceGroupName"] == "gpu-b200"
    ]
    # The KEDA variant autoscales its nodes: the group starts empty (AWS's advice for
    # Karpenter), and its node pool may grow to 2 nodes per replica x (3 replicas + 1 surge).
    assert gpu["InstanceCount"] == 0
    assert cluster["Properties"]["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    pools = {
        obj["metadata"]["name"]: obj
        for obj in manifest_objects(scaled_hyperpod, "KarpenterNodePools")
        if obj["kind"] == "NodePool"
    }
    assert pools["gpu-b200"]["spec"]["limits"] == {"nvidia.com/gpu": str(8 * 8)}
    scaled = {
        obj["kind"]: obj
        for obj in manifest_objects(scaled_hyperpod, "ReplicaAutoscalingScaledObject")
    }
    spec = scaled["ScaledObject"]["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "reference-moe-nvfp4",
    }
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 3)
    (trigger,) = spec["triggers"]
    assert (
        trigger["type"] == "prometheus"
        and trigger["metadata"]["query"] == "vllm:requests_waiting"
        and trigger["metadata"]["threshold"] == "8"
    )
    assert scaled["TriggerAuthentication"]["spec"] == {"podIdentity": {"provider": "aws"}}


def test_keda_owns_the_replica_count_so_an_update_does_not_reset_it(
    scaled_hyperpod, reference_templates
):
    """KEDA's HPA sets ``spec.replicas`` through the scale subresource; a manifest that pins it
    would put it back at every stack update (the kubectl handler applies the manifest again).
    Autoscaled: the LeaderWorkerSet leaves ``replicas`` out (LWS defaults it to 1, KEDA's
    minimum here). Not autoscaled: it states the count."""
    (scaled,) = manifest_objects(scaled_hyperpod, "ServingLeaderWorkerSet")
    assert "replicas" not in scaled["spec"]
    (fixed,) = manifest_objects(
        reference_templates["ReferenceMoeHyperPod"], "ServingLeaderWorkerSet"
    )
    assert fixed["spec"]["replicas"] == 1


@pytest.fixture
def keda_schemas(shared_dir) -> dict[str, dict]:
    """KEDA's CRD schemas, from the chart version assets/hyperpod.json pins."""
    chart = published_chart(shared_dir, KEDA_CHART)
    version = KEDA_API_VERSION.split("/")[1]
    return {
        kind: chart_crd_schema(chart, kind, version)
        for kind in ("ScaledObject", "TriggerAuthentication")
    }


def test_keda_objects_match_the_charts_crds(scaled_hyperpod, keda_schemas):
    objects = manifest_objects(scaled_hyperpod, "ReplicaAutoscalingScaledObject")
    assert sorted(obj["kind"] for obj in objects) == ["ScaledObject", "TriggerAuthentication"]
    for obj in objects:
        assert obj["apiVersion"] == KEDA_API_VERSION
        jsonschema.validate(concretize(obj), keda_schemas[obj["kind"]])


def test_the_keda_crd_check_can_fail(scaled_hyperpod, keda_schemas):
    (auth,) = [
        obj
        for obj in manifest_objects(scaled_hyperpod, "ReplicaAutoscalingScaledObject")
        if obj["kind"] == "TriggerAuthentication"
    ]
    broken = json.loads(json.dumps(auth))
    broken["spec"]["podIdentity"]["provider"] = "amazon"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), keda_schemas["TriggerAuthentication"])


def test_keda_queries_only_its_workspace(scaled_hyperpod):
    (association,) = [  # the service's own (API key) is the other one
        v
        for v in resources_of_type(scaled_hyperpod, "AWS::EKS::PodIdentityAssociation").values()
        if v["Properties"]["Namespace"] == "keda"
    ]
    assert association["Properties"]["ServiceAccount"] == "keda-operator"
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    # A managed policy of its own, no inline one (HIPAA.Security IAMNoInlinePolicy).
    assert not [
        p
        for p in resources_of_type(scaled_hyperpod, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    (policy,) = [
        p
        for p in resources_of_type(scaled_hyperpod, "AWS::IAM::ManagedPolicy").values()
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
    ]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "aps:QueryMetrics" and "Fn::GetAtt" in statement["Resource"]
    charts = {
        v["Properties"]["Chart"]
        for v in resources_of_type(scaled_hyperpod, "Custom::AWSCDK-EKS-HelmChart").values()
    }
    assert "keda" in charts


def test_scaled_template_passes_cfn_lint(scaled_hyperpod):
    matches = lint_template(scaled_hyperpod)
    assert not matches, "\n".join(map(str, matches))


def test_replicas_are_bounded_by_the_gpu_group():
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("Keda")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    service = deepseek_service(stack, cluster, addons, store)
    observability = VllmObservability(stack, "Obs", service=service)
    with pytest.raises(ConfigurationError) as caught:
        VllmReplicaAutoScaling(
            stack,
            "Scale",
            service=service,
            observability=observability,
            min_replicas=0,
            max_replicas=3,
            waiting_requests_per_replica=0,
        )
    problems = {p.property: p.allowed for p in caught.value.problems}
    assert set(problems) == {"min_replicas", "max_replicas", "waiting_requests_per_replica"}
    assert "GPU group 'gpu' holds 2 nodes, 1 per replica" in problems["max_replicas"]


def test_observability_of_another_service_is_refused():
    """KEDA reads the queue depth the observability records: it must watch this service."""
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("Keda")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    first = deepseek_service(stack, cluster, addons, store, id="First", name="first", replicas=1)
    second = deepseek_service(stack, cluster, addons, store, id="Second", name="second", replicas=1)
    watching_second = VllmObservability(stack, "Obs", service=second)
    with pytest.raises(ConfigurationError) as caught:
        VllmReplicaAutoScaling(stack, "Scale", service=first, observability=watching_second)
    assert [p.property for p in caught.value.problems] == ["observability"]


def _warning_ids(stack) -> list[str]:
    from aws_cdk.assertions import Annotations as AssertAnnotations
    from aws_cdk.assertions import Match

    found = AssertAnnotations.from_stack(stack).find_warning("*", Match.any_value())
    return [str(entry.entry.data) for entry in found]


@pytest.mark.parametrize(("gpu_count", "warned"), [(2, True), (3, False)])
def test_a_rollout_at_the_maximum_that_has_no_room_to_surge_is_warned(gpu_count, warned):
    """One node per replica, max 2: the group needs 3 nodes for a rollout at 2 replicas to
    surge; with fewer, LWS's surge replica stays Pending until KEDA scales below the maximum."""
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("KedaRollout")
    cluster, addons, store = small_cluster(stack, gpu_count=gpu_count)
    service = deepseek_service(stack, cluster, addons, store)
    observability = VllmObservability(stack, "Obs", service=service)
    VllmReplicaAutoScaling(
        stack, "Scale", service=service, observability=observability, min_replicas=1, max_replicas=2
    )
    stalls = [w for w in _warning_ids(stack) if "has no room for the surge replica" in w]
    assert bool(stalls) is warned
    if warned:
        assert "give the group 3 nodes" in stalls[0]


def test_scale_in_holds_a_replica_as_long_as_one_takes_to_start(scaled_hyperpod):
    """KEDA's ``cooldownPeriod`` only delays scaling to 0; between replicas the HPA scales in
    after its 300 s default. The ScaledObject holds a replica for the planner's cold start (the
    reference: about 15 minutes) and removes one at a time (review finding M3)."""
    (scaled,) = [
        o
        for o in manifest_objects(scaled_hyperpod, "ReplicaAutoscalingScaledObject")
        if o["kind"] == "ScaledObject"
    ]
    assert scaled["spec"]["minReplicaCount"] >= 1  # so cooldownPeriod alone would do nothing
    down = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert 600 <= down["stabilizationWindowSeconds"] <= 1800
    assert down["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": down["stabilizationWindowSeconds"]}
    ]


def test_the_gpu_group_has_room_for_a_surge_at_the_maximum(scaled_hyperpod):
    """The LeaderWorkerSet rolls with a surge of one group: at the maximum its new group needs
    nodes beyond the maximum's, so the Karpenter pool's limit leaves room for one more replica
    (review finding M2: at exactly the maximum, a rollout at 3 replicas never finishes)."""
    pools = [
        o
        for o in manifest_objects(scaled_hyperpod, "KarpenterNodePools")
        if o["kind"] == "NodePool"
    ]
    assert pools, "no NodePool"
    assert pools[0]["spec"]["limits"]["nvidia.com/gpu"] == str((3 + 1) * 2 * 8)


def _resolved(value: object, attributes: dict[str, str]) -> str:
    """A manifest's ``Fn::Join`` with its references replaced as CloudFormation would."""
    if isinstance(value, str):
        return value
    assert isinstance(value, dict), value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_resolved(part, attributes) for part in parts)
    if "Ref" in value:
        return attributes[value["Ref"]]
    logical_id, attribute = value["Fn::GetAtt"]
    return attributes[attribute if attribute in attributes else f"{logical_id}.{attribute}"]


def test_keda_queries_the_workspace_at_amp_s_own_query_url(scaled_hyperpod):
    """KEDA's ``prometheus`` scaler appends ``/api/v1/query`` to ``serverAddress``
    (kedacore/keda ``pkg/scalers/prometheus_scaler.go``); the result must be AMP's query URL,
    ``PrometheusEndpoint`` (which ends in ``/``, CloudFormation's ``AWS::APS::Workspace``
    return values) plus ``api/v1/query``: the endpoint itself as ``serverAddress`` gave
    ``.../workspaces/<id>//api/v1/query``."""
    (manifest,) = [
        resource["Properties"]["Manifest"]
        for key, resource in resources_of_type(
            scaled_hyperpod, "Custom::AWSCDK-EKS-KubernetesResource"
        ).items()
        if "ReplicaAutoscalingScaledObject" in key
    ]
    workspace = "ws-0123abcd-4567-89ef-0123-456789abcdef"
    attributes = {
        "AWS::Region": "us-west-2",
        "AWS::URLSuffix": "amazonaws.com",
        "WorkspaceId": workspace,
        "PrometheusEndpoint": f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{workspace}/",
    }
    objects = json.loads(_resolved(manifest, attributes))
    (scaled,) = [obj for obj in objects if obj["kind"] == "ScaledObject"]
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]
    keda_url = f"{trigger['metadata']['serverAddress']}/api/v1/query"
    amp_url = attributes["PrometheusEndpoint"] + "api/v1/query"
    assert keda_url == amp_url
