"""The HyperPod EKS cluster: network, EKS, HyperPod, add-ons, FSx, order, validation."""

from __future__ import annotations

import json

import pytest
from aws_cdk import aws_s3 as s3

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup, KubernetesTaint
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.planning.sizing import plan
from tests.support.builders import new_stack
from tests.support.hyperpod import hyperpod_cluster
from tests.support.kubernetes_schemas import validate_core
from tests.support.template_helpers import (
    actions_of,
    manifest_objects,
    only_resource,
    policy_statements,
    resources_of_type,
)


@pytest.fixture(scope="session")
def hyperpod_template(reference_templates) -> dict:
    return reference_templates["ReferenceMoeHyperPod"]


def _cluster(template: dict) -> tuple[str, dict]:
    return only_resource(template, "AWS::SageMaker::Cluster")


def test_gpu_group_is_sized_by_the_planner(hyperpod_template):
    _, cluster = _cluster(hyperpod_template)
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    expected = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072).nodes
    assert expected == 2
    gpu = groups["gpu-b200"]
    assert (gpu["InstanceType"], gpu["InstanceCount"]) == ("ml.p6-b200.48xlarge", 2)
    # The reference app synthesizes without the HyperPod dependencies chart (no chart-dir):
    # its GPU group then runs no deep health checks (HyperPodServingAddons).
    assert "OnStartDeepHealthChecks" not in gpu
    assert gpu["ThreadsPerCore"] == 1
    assert gpu["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 1000}}]
    assert gpu["KubernetesConfig"]["Taints"] == [
        {"Key": "nvidia.com/gpu", "Value": "present", "Effect": "NoSchedule"}
    ]
    assert gpu["KubernetesConfig"]["Labels"]["cdk-llm-serving/role"] == "gpu"
    system = groups["system"]
    assert (
        system["InstanceType"] == "ml.m5.4xlarge"
        and "OnStartDeepHealthChecks" not in system
        and "Taints" not in system["KubernetesConfig"]
    )


def test_cluster_settings(hyperpod_template):
    _, cluster = _cluster(hyperpod_template)
    props = cluster["Properties"]
    assert props["NodeRecovery"] == "Automatic" and props["NodeProvisioningMode"] == "Continuous"
    eks_id, _ = only_resource(hyperpod_template, "AWS::EKS::Cluster")
    assert props["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_id, "Arn"]}}}
    for group in props["InstanceGroups"]:
        assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
        source = group["LifeCycleConfig"]["SourceS3Uri"]["Fn::Join"][1]
        assert source[0] == "s3://" and source[-1] == "/lifecycle/"


def test_gpu_groups_share_one_subnet(hyperpod_template):
    _, cluster = _cluster(hyperpod_template)
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert len(groups["gpu-b200"]["OverrideVpcConfig"]["Subnets"]) == 1
    assert "OverrideVpcConfig" not in groups["system"]
    assert len(cluster["Properties"]["VpcConfig"]["Subnets"]) == 2


def test_deploy_order(hyperpod_template):
    cluster_id, cluster = _cluster(hyperpod_template)
    resources = hyperpod_template["Resources"]
    depends = set(cluster["DependsOn"])
    upload = [k for k, v in resources.items() if v["Type"] == "Custom::CDKBucketDeployment"]
    assert upload and set(upload) <= depends
    addons = {
        v["Properties"]["AddonName"]: k
        for k, v in resources_of_type(hyperpod_template, "AWS::EKS::Addon").items()
    }
    assert {addons["vpc-cni"], addons["kube-proxy"], addons["eks-pod-identity-agent"]} <= depends
    stages = resources_of_type(hyperpod_template, "Custom::HyperPodNodesReady")
    last = next(k for k, v in stages.items() if v["Properties"]["Final"] == "true")
    assert all(
        v["Properties"]["ClusterName"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
        for v in stages.values()
    )
    for name in ("coredns", "aws-fsx-csi-driver"):
        assert last in resources[addons[name]]["DependsOn"], name
    for key, chart in resources_of_type(hyperpod_template, "Custom::AWSCDK-EKS-HelmChart").items():
        assert last in chart.get("DependsOn", []), key
    for key, manifest in resources_of_type(
        hyperpod_template, "Custom::AWSCDK-EKS-KubernetesResource"
    ).items():
        if "WeightsVolume" in key:
            assert addons["aws-fsx-csi-driver"] in manifest["DependsOn"]


def test_eks_is_private_logged_and_hyperpod_compatible(hyperpod_template):
    _, eks = only_resource(hyperpod_template, "AWS::EKS::Cluster")
    props = eks["Properties"]
    assert props["Version"] == "1.35"  # the reference app sets it explicitly
    assert (
        props["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
        and props["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    )
    assert props["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
    assert {entry["Type"] for entry in props["Logging"]["ClusterLogging"]["EnabledTypes"]} == {
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    }
    addons = {
        v["Properties"]["AddonName"]: v["Properties"]
        for v in resources_of_type(hyperpod_template, "AWS::EKS::Addon").values()
    }
    major, minor, patch = addons["vpc-cni"]["AddonVersion"].lstrip("v").split("-")[0].split(".")
    assert (int(major), int(minor), int(patch)) >= (1, 18, 3)


def test_node_security_group_allows_itself_and_fsx(hyperpod_template):
    ingress = [
        v["Properties"]
        for v in resources_of_type(hyperpod_template, "AWS::EC2::SecurityGroupIngress").values()
    ]
    self_rules = [
        r
        for r in ingress
        if r.get("SourceSecurityGroupId")
        == {"Fn::GetAtt": [r["GroupId"]["Fn::GetAtt"][0], "GroupId"]}
    ]
    ports = {(r["IpProtocol"], r.get("FromPort"), r.get("ToPort")) for r in self_rules}
    assert {("-1", None, None), ("tcp", 988, 988), ("tcp", 1018, 1023)} <= ports


def test_execution_role_and_lifecycle_bucket(hyperpod_template):
    cluster_id, cluster = _cluster(hyperpod_template)
    role_id = cluster["Properties"]["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]
    role = hyperpod_template["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "sagemaker.amazonaws.com"
    }
    assert any(
        "AmazonSageMakerClusterInstanceRolePolicy" in json.dumps(arn)
        for arn in role["ManagedPolicyArns"]
    )
    actions = {a for s in policy_statements(hyperpod_template, role_id) for a in actions_of(s)}
    assert {
        "ec2:CreateNetworkInterface",
        "ecr:BatchGetImage",
        "s3:GetObject",
        "s3:ListBucket",
    } <= actions
    (bucket_id, bucket), _ = sorted(
        resources_of_type(hyperpod_template, "AWS::S3::Bucket").items(),
        key=lambda item: "LifecycleScripts" not in item[0],
    )
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert "BucketEncryption" in bucket["Properties"]
    (policy,) = [
        p
        for p in resources_of_type(hyperpod_template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    assert any(
        s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}} and s["Effect"] == "Deny"
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )


def test_fsx_is_retained_and_linked_to_the_weights_prefix(hyperpod_template):
    _, fs = only_resource(hyperpod_template, "AWS::FSx::FileSystem")
    assert fs["DeletionPolicy"] == "Retain"
    assert fs["Properties"]["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    _, dra = only_resource(hyperpod_template, "AWS::FSx::DataRepositoryAssociation")
    assert (
        dra["Properties"]["DataRepositoryPath"]
        == "s3://cdk-llm-serving-placeholder-weights/reference-2.4t-a95b-nvfp4/"
    )
    assert dra["DeletionPolicy"] == "Retain"


def test_charts_are_pinned(hyperpod_template):
    charts = {
        v["Properties"]["Chart"]: v["Properties"]
        for v in resources_of_type(hyperpod_template, "Custom::AWSCDK-EKS-HelmChart").values()
    }
    assert charts["lws"]["Version"] == "0.8.0" and charts["lws"]["Repository"].startswith(
        "oci://registry.k8s.io/lws"
    )
    assert (
        charts["nvidia-device-plugin"]["Version"] and charts["aws-efa-k8s-device-plugin"]["Version"]
    )
    assert all(props.get("Version") for props in charts.values())


def test_missing_hyperpod_chart_is_a_synth_warning(reference_assembly):
    stack = reference_assembly.get_stack_by_name("ReferenceMoeHyperPod")
    from aws_cdk.cx_api import SynthesisMessageLevel

    found = [
        message.entry.data
        for message in stack.messages
        if message.level == SynthesisMessageLevel.WARNING
    ]
    assert any(
        "HyperPod dependencies Helm chart is required" in str(data)
        and "sagemaker-hyperpod-cli" in str(data)
        for data in found
    )


def test_weights_volume_manifests_match_kubernetes_schemas(hyperpod_template):
    parsed = manifest_objects(hyperpod_template, "WeightsVolume")
    assert [o["kind"] for o in parsed] == ["PersistentVolume", "PersistentVolumeClaim"]
    for obj in parsed:
        validate_core(obj, "1.35")  # the reference cluster's version


def test_a_broken_manifest_fails_schema_validation():
    import kubernetes_validate

    with pytest.raises(kubernetes_validate.ValidationError):
        validate_core(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "x"},
                "spec": {"accessModes": "ReadWriteMany"},
            }
        )


def cluster_problems(groups, **kwargs) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        kwargs.setdefault("kubernetes_version", "1.33")
        HyperPodEksCluster(new_stack("Hp"), "HyperPod", instance_groups=groups, **kwargs)
    return [p.property for p in caught.value.problems]


def test_bad_instance_groups_are_reported_together():
    groups = [
        HyperPodInstanceGroup.system(instance_type="ml.m5.4xlarge", count=2),
        HyperPodInstanceGroup.gpu(
            "gpu", "ml.p6-b200.48xlarg", 0, threads_per_core=3, ebs_volume_gb=20000
        ),
        HyperPodInstanceGroup.gpu(
            "gpu",
            "ml.p5.48xlarge",
            1,
            labels={"bad key!": "v"},
            taints=(KubernetesTaint("k", "Sometimes"),),
        ),  # type: ignore[arg-type]
        HyperPodInstanceGroup.gpu("-bad-", "ml.c5.4xlarge", 1, deep_health_checks=("Everything",)),
    ]
    assert cluster_problems(groups, kubernetes_version="1.27") == [
        "instance_groups[1].instance_type",
        "instance_groups[1].count",
        "instance_groups[1].threads_per_core",
        "instance_groups[1].ebs_volume_gb",
        "instance_groups[2].labels",
        "instance_groups[2].taints['k'].effect",
        "instance_groups[2].name",
        "instance_groups[3].name",
        "instance_groups[3].deep_health_checks",
        "instance_groups[3].instance_type",
        "kubernetes_version",
    ]


def test_at_least_one_gpu_group_and_one_system_group():
    assert cluster_problems([HyperPodInstanceGroup.system()]) == ["instance_groups"]
    assert cluster_problems([HyperPodInstanceGroup.gpu("gpu", "ml.p5.48xlarge", 2)]) == [
        "instance_groups"
    ]


def test_too_many_labels_and_bad_admin_arn():
    labels = {f"label-{i}": "v" for i in range(49)}
    problems = cluster_problems(
        [
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5.48xlarge", 2, labels=labels),
        ],
        admin_role_arns=["not-an-arn"],
    )
    assert problems == ["instance_groups[1].labels", "admin_role_arns[0]"]


def test_admin_roles_get_access_entries():
    stack = new_stack("Admins")
    HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=[
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5.48xlarge", 2),
        ],
        admin_role_arns=["arn:aws:iam::123456789012:role/platform-admin"],
    )
    from tests.support.builders import template_of

    entries = [
        v["Properties"]
        for v in resources_of_type(template_of(stack), "AWS::EKS::AccessEntry").values()
    ]
    admin = [
        e for e in entries if e["PrincipalArn"] == "arn:aws:iam::123456789012:role/platform-admin"
    ]
    assert admin and json.dumps(admin[0]["AccessPolicies"][0]["PolicyArn"]).endswith(
        'AmazonEKSClusterAdminPolicy"]]}'
    )


def test_an_imported_vpc_is_used_as_is():
    from aws_cdk import aws_ec2 as ec2

    from tests.support.builders import template_of

    stack = new_stack("Imported")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
    )
    HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        vpc=vpc,
        instance_groups=[
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5.48xlarge", 2),
        ],
    )
    template = template_of(stack)
    assert not resources_of_type(template, "AWS::EC2::VPC") and not resources_of_type(
        template, "AWS::EC2::NatGateway"
    )
    _, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    assert cluster["Properties"]["VpcConfig"]["Subnets"] == [
        "subnet-0aaaaaaaaaaaaaaa1",
        "subnet-0aaaaaaaaaaaaaaa2",
    ]
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert groups["gpu"]["OverrideVpcConfig"]["Subnets"] == ["subnet-0aaaaaaaaaaaaaaa1"]


@pytest.mark.parametrize(
    ("gib", "valid"), [(1200, True), (2400, True), (3600, False), (4800, True), (600, False)]
)
def test_fsx_capacity_follows_the_persistent_2_steps(gib, valid):
    """SSD PERSISTENT_2 takes 1200, 2400, then steps of 2400 GiB (botocore's fsx model)."""
    stack = new_stack("Fsx")
    cluster = hyperpod_cluster(stack)
    bucket = s3.Bucket.from_bucket_name(stack, "W", "weights-bucket")

    def build() -> None:
        FsxModelStore(
            stack,
            "Store",
            cluster=cluster,
            weights_bucket=bucket,
            weights_prefix="m",
            storage_capacity_gib=gib,
        )

    if valid:
        build()
    else:
        with pytest.raises(ConfigurationError, match="storage_capacity_gib"):
            build()
