"""What the cluster sets up for its nodes:

* every EKS add-on is created with ``ResolveConflicts: OVERWRITE`` (the cluster bootstraps the
  self-managed vpc-cni, kube-proxy and coredns);
* the Secrets Store CSI provider tolerates every taint of the GPU groups;
* a GPU subnet in a chosen zone is tagged for internal load balancers;
* the node role has what the VPC CNI needs on the node;
* without the HyperPod dependencies chart, groups run no deep health checks by default.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk import Stack
from aws_cdk import aws_s3 as s3

from cdk_llm_serving.hyperpod._facts import hyperpod_facts
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.constants import NODE_HEALTH_TAINT_KEY, NODE_HEALTH_TAINT_VALUE
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup, KubernetesTaint
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from tests.support.builders import new_stack
from tests.support.cfn_schemas import resource_schema
from tests.support.hyperpod import instance_groups
from tests.support.scheduling import tolerates
from tests.support.template_helpers import only_resource, resources_of_type

SECRETS_STORE_ADDON = "aws-secrets-store-csi-driver-provider"


def _template(stack: Stack) -> dict:
    from aws_cdk.assertions import Template

    return Template.from_stack(stack).to_json()


# -- ResolveConflicts on every add-on ---------------------------------------------------------


def _addons(template: dict) -> dict[str, dict]:
    return {
        props["Properties"]["AddonName"]: props["Properties"]
        for props in resources_of_type(template, "AWS::EKS::Addon").values()
    }


def test_every_addon_overwrites_the_self_managed_fields_it_replaces(
    hyperpod, inference_operator_template
):
    allowed = resource_schema("AWS::EKS::Addon")["properties"]["ResolveConflicts"]["enum"]
    assert "OVERWRITE" in allowed
    seen = {**_addons(hyperpod), **_addons(inference_operator_template)}
    # The cluster's own add-ons, the Secrets Store provider, cert-manager, the operator's.
    for name in ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", SECRETS_STORE_ADDON):
        assert name in seen, name
    assert {"cert-manager", "metrics-server", "amazon-sagemaker-hyperpod-inference"} <= set(seen)
    wrong = {name: p.get("ResolveConflicts") for name, p in seen.items()}
    assert {name: v for name, v in wrong.items() if v != "OVERWRITE"} == {}


# -- the Secrets Store provider on tainted GPU nodes ------------------------------------------


def _secrets_store_configuration(template: dict) -> dict:
    props = _addons(template)[SECRETS_STORE_ADDON]
    assert "ConfigurationValues" in props, "the provider add-on has no configuration"
    value = props["ConfigurationValues"]
    assert isinstance(value, str), value
    parsed: dict = json.loads(value)
    return parsed


def _group_taints(template: dict) -> dict[str, list[dict]]:
    _, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    return {
        group["InstanceGroupName"]: group.get("KubernetesConfig", {}).get("Taints", [])
        for group in cluster["Properties"]["InstanceGroups"]
    }


def test_the_secrets_store_provider_tolerates_every_gpu_taint_of_the_reference_cluster(hyperpod):
    config = _secrets_store_configuration(hyperpod)
    tolerations = config["tolerations"]
    taints = _group_taints(hyperpod)
    gpu_taints = [t for name, ts in taints.items() if name != "system" for t in ts]
    assert any(t["Key"] == "nvidia.com/gpu" for t in gpu_taints), gpu_taints
    gpu_taints = [{k.lower(): v for k, v in t.items()} for t in gpu_taints]
    health = {
        "key": NODE_HEALTH_TAINT_KEY,
        "value": NODE_HEALTH_TAINT_VALUE,
        "effect": "NoSchedule",
    }
    for taint in [*gpu_taints, health]:
        assert tolerates(tolerations, taint), taint
    # Only the taints of the groups it must run on: not every taint in the world.
    assert not tolerates(tolerations, {"key": "example.com/other", "effect": "NoSchedule"})


def test_the_tolerations_follow_the_groups_taints():
    stack = new_stack("Tainted")
    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu(
            "gpu",
            "ml.p5en.48xlarge",
            2,
            taints=(
                KubernetesTaint("nvidia.com/gpu", "NoSchedule"),
                KubernetesTaint("team", "NoExecute", "serving"),
            ),
        ),
    ]
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups
    )
    from cdk_llm_serving.hyperpod.serving_security import secrets_store_addon

    secrets_store_addon(stack, cluster)
    config = _secrets_store_configuration(_template(stack))
    assert tolerates(
        config["tolerations"], {"key": "team", "value": "serving", "effect": "NoExecute"}
    )
    assert tolerates(config["tolerations"], {"key": "nvidia.com/gpu", "effect": "NoSchedule"})


def test_the_secrets_store_configuration_uses_only_keys_of_the_addon_schema(hyperpod):
    facts = hyperpod_facts()["secrets_store_addon_configuration"]
    config = _secrets_store_configuration(hyperpod)
    assert set(config) <= set(facts["keys"])
    driver = config.get("secrets-store-csi-driver", {})
    assert set(driver) <= set(facts["driver_keys"])
    # The driver's own chart tolerates every taint by default (operator Exists, no key):
    # the add-on's schema offers no driver tolerations, so none are set.
    assert tolerates(facts["driver_default_tolerations"], {"key": "x", "effect": "NoExecute"})


# -- the GPU subnet in a chosen zone is one the load balancer controller may use --------------


@pytest.mark.parametrize("az_id", ["use1-az4"])
def test_a_gpu_subnet_in_a_chosen_zone_is_tagged_for_internal_load_balancers(az_id):
    stack = new_stack("Zoned")
    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=instance_groups(),
        gpu_availability_zone_id=az_id,
    )
    FsxModelStore(
        stack,
        "Store",
        cluster=cluster,
        weights_bucket=s3.Bucket.from_bucket_name(stack, "W", "weights-bucket"),
        weights_prefix="models/ds3",
    )
    subnets = resources_of_type(_template(stack), "AWS::EC2::Subnet")
    ((zoned),) = [v for v in subnets.values() if "AvailabilityZoneId" in v["Properties"]]
    tags = {t["Key"]: t["Value"] for t in zoned["Properties"]["Tags"]}
    assert tags["kubernetes.io/role/internal-elb"] == "1"
    # Like the private subnets aws-cdk-lib's Vpc tags for EKS.
    private = [
        {t["Key"]: t["Value"] for t in v["Properties"].get("Tags", [])}
        for v in subnets.values()
        if "AvailabilityZoneId" not in v["Properties"]
    ]
    assert any(t.get("kubernetes.io/role/internal-elb") == "1" for t in private)


# -- the execution role has what the VPC CNI needs on the node -------------------------------


def _execution_role_statements(template: dict) -> list[dict]:
    (policy,) = [
        p
        for key, p in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if "ExecutionRolePolicy" in key
    ]
    statements: list[dict] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _allowed(statements: list[dict], action: str) -> list[dict]:
    return [
        s
        for s in statements
        if s["Effect"] == "Allow"
        and action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]


def test_the_execution_role_has_the_vpc_cni_permissions_of_both_aws_references(hyperpod):
    """AmazonEKS_CNI_Policy's actions (AWS's CloudFormation reference attaches the policy, its
    Terraform reference writes them out); the VPC CNI on a HyperPod node runs with the node's
    role."""
    statements = _execution_role_statements(hyperpod)
    cni = [
        "ec2:AssignPrivateIpAddresses",
        "ec2:AttachNetworkInterface",
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeInstances",
        "ec2:DescribeTags",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeSubnets",
        "ec2:DetachNetworkInterface",
        "ec2:ModifyNetworkInterfaceAttribute",
        "ec2:UnassignPrivateIpAddresses",
        "ec2:CreateTags",
    ]
    missing = [action for action in cni if not _allowed(statements, action)]
    assert missing == []
    # Attach takes resource ARNs: only this account's instances and network interfaces.
    (attach,) = _allowed(statements, "ec2:AttachNetworkInterface")
    resources = json.dumps(attach["Resource"])
    assert ":instance/*" in resources and ":network-interface/*" in resources
    assert attach["Resource"] != "*"


# -- without the HyperPod dependencies chart, no deep health checks ---------------------------


def _gpu_group(template: dict, name: str = "gpu") -> dict:
    _, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    (group,) = [
        g for g in cluster["Properties"]["InstanceGroups"] if g["InstanceGroupName"] == name
    ]
    return group


def _addons_stack(
    groups: list[HyperPodInstanceGroup], chart: bool
) -> tuple[Stack, HyperPodEksCluster]:
    from cdk_llm_serving.hyperpod.addons import HelmChartSource, HyperPodServingAddons

    stack = new_stack("Charted" if chart else "Chartless")
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=groups
    )
    source = (
        HelmChartSource.from_repository("oci://example.com/charts/hyperpod-helm-chart", "0.1.0")
        if chart
        else None
    )
    HyperPodServingAddons(stack, "Addons", cluster=cluster, hyperpod_chart=source)
    return stack, cluster


def test_without_the_chart_gpu_groups_default_to_no_deep_health_checks_and_synth_says_so():
    from aws_cdk.assertions import Annotations, Match

    stack, cluster = _addons_stack(instance_groups(), chart=False)
    assert "OnStartDeepHealthChecks" not in _gpu_group(_template(stack))
    assert cluster.instance_groups[1].effective_health_checks == ()
    warnings = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("deep health checks are off")
    )
    assert warnings and "gpu" in json.dumps(warnings[0].entry.data)


def test_with_the_chart_the_default_deep_health_checks_stay():
    stack, _ = _addons_stack(instance_groups(), chart=True)
    checks = _gpu_group(_template(stack))["OnStartDeepHealthChecks"]
    assert checks == ["InstanceStress", "InstanceConnectivity"]


def test_explicit_deep_health_checks_without_the_chart_are_refused():
    from cdk_llm_serving import ConfigurationError

    groups = [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu(
            "gpu", "ml.p5en.48xlarge", 2, deep_health_checks=("InstanceStress",)
        ),
    ]
    with pytest.raises(ConfigurationError) as caught:
        _addons_stack(groups, chart=False)
    (problem,) = caught.value.problems
    assert problem.property == "hyperpod_chart"
    assert "'gpu'" in problem.allowed and "deep_health_checks" in problem.allowed


def test_the_reference_app_without_a_chart_runs_no_deep_health_checks(hyperpod):
    _, cluster = only_resource(hyperpod, "AWS::SageMaker::Cluster")
    for group in cluster["Properties"]["InstanceGroups"]:
        assert "OnStartDeepHealthChecks" not in group, group["InstanceGroupName"]
