"""Serving on a HyperPod cluster created elsewhere, through IHyperPodCluster."""

from __future__ import annotations

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.interfaces import IHyperPodCluster
from cdk_llm_serving.hyperpod.observability import VllmObservability
from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import deepseek_service, imported_cluster, model_store
from tests.support.template_helpers import manifest_objects, resources_of_type


def test_a_service_deploys_onto_an_imported_cluster():
    stack = new_stack("Imported")
    cluster: IHyperPodCluster = imported_cluster(stack, gpu_count=2)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster, load_balancer_controller=False)
    service = deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    observability = VllmObservability(stack, "Obs", service=service)
    VllmReplicaAutoScaling(
        stack,
        "Scale",
        service=service,
        observability=observability,
    )
    template = template_of(stack)

    assert not resources_of_type(template, "AWS::SageMaker::Cluster")
    assert not resources_of_type(template, "AWS::EKS::Cluster")
    (lws,) = manifest_objects(template, "ServingLeaderWorkerSet")
    assert lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "ml.p5en.48xlarge",
        "cdk-llm-serving/group": "gpu",
    }
    (fs,) = resources_of_type(template, "AWS::FSx::FileSystem").values()
    assert fs["Properties"]["SubnetIds"] == ["subnet-0aaaaaaaaaaaaaaaa"]
    # The file system's own group admits Lustre from the imported nodes' group.
    (fs_group,) = fs["Properties"]["SecurityGroupIds"]
    sources = [
        r["Properties"].get("SourceSecurityGroupId")
        for r in resources_of_type(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == fs_group
    ]
    assert "sg-0123456789abcdef0" in sources
    manifests = resources_of_type(template, "Custom::AWSCDK-EKS-KubernetesResource")
    assert all(m["Properties"]["ClusterName"] == "existing-eks" for m in manifests.values())
    (scraper,) = resources_of_type(template, "AWS::APS::Scraper").values()
    assert scraper["Properties"]["Source"]["EksConfiguration"]["SubnetIds"] == [
        "subnet-0aaaaaaaaaaaaaaaa",
        "subnet-0bbbbbbbbbbbbbbbb",
    ]


def test_the_load_balancer_controller_needs_a_cluster_this_app_creates():
    stack = new_stack("ImportedAlb")
    cluster = imported_cluster(stack)
    with pytest.raises(ConfigurationError, match="load_balancer_controller"):
        HyperPodServingAddons(stack, "Addons", cluster=cluster)


def test_imported_instance_groups_are_validated():
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_eks_v2 as eks

    stack = new_stack("ImportedBad")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-1",
        availability_zones=["us-east-1a"],
        private_subnet_ids=["subnet-1"],
    )
    with pytest.raises(ConfigurationError, match="needs at least one GPU group"):
        HyperPodEksCluster.from_cluster_attributes(
            stack,
            "Existing",
            eks_cluster=eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="x"),
            vpc=vpc,
            node_security_group=ec2.SecurityGroup.from_security_group_id(stack, "Sg", "sg-1"),
            instance_groups=[HyperPodInstanceGroup.system()],
        )
