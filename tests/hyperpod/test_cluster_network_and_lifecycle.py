"""The cluster's network and lifecycle: EFA egress, Pod Identity, the nodes-ready wait, the GPU zone,
a ``cdk destroy`` that completes, the association's path, and ``on_create.sh``."""

from __future__ import annotations

import copy
import ipaddress
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from aws_cdk import Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod._facts import hyperpod_facts
from cdk_llm_serving.hyperpod.availability_zones import az_id_problem, region_prefix
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.hyperpod.node_readiness import wait_budget
from tests.support.builders import new_stack
from tests.support.cfn_schemas import resource_schema
from tests.support.hyperpod import imported_cluster, instance_groups
from tests.support.linting import lint_template
from tests.support.template_helpers import (
    actions_of,
    only_resource,
    policy_statements,
    resources_of_type,
)

ON_CREATE = (
    Path(__file__).parents[2]
    / "cdk_llm_serving"
    / "hyperpod"
    / "assets"
    / "lifecycle"
    / "on_create.sh"
)


@pytest.fixture(scope="session")
def hyperpod_template(reference_templates) -> dict:
    return reference_templates["ReferenceMoeHyperPod"]


def _template(stack: Stack) -> dict:
    from aws_cdk.assertions import Template

    return Template.from_stack(stack).to_json()


def _ref_id(value: object) -> str | None:
    """The logical id a ``Ref`` / ``Fn::GetAtt`` points at."""
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return None


# -- network and identity ---------------------------------------------------------------


def test_node_security_group_sends_all_traffic_to_itself(hyperpod_template):
    egress = [
        r["Properties"]
        for r in resources_of_type(hyperpod_template, "AWS::EC2::SecurityGroupEgress").values()
    ]
    self_egress = [
        r
        for r in egress
        if r["IpProtocol"] == "-1"
        and _ref_id(r.get("DestinationSecurityGroupId")) == _ref_id(r["GroupId"])
    ]
    assert len(self_egress) == 1
    _, cluster = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    (node_group,) = cluster["Properties"]["VpcConfig"]["SecurityGroupIds"]
    assert _ref_id(self_egress[0]["GroupId"]) == _ref_id(node_group)


def test_node_role_may_assume_roles_for_pod_identity_on_its_cluster_only(hyperpod_template):
    _, cluster = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    role_id = cluster["Properties"]["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]
    eks_id, _ = only_resource(hyperpod_template, "AWS::EKS::Cluster")
    (statement,) = [
        s
        for s in policy_statements(hyperpod_template, role_id)
        if "eks-auth:AssumeRoleForPodIdentity" in actions_of(s)
    ]
    assert statement["Resource"] == {"Fn::GetAtt": [eks_id, "Arn"]}


# -- nodes ready --------------------------------------------------------------------------


def test_nodes_ready_waits_for_every_group_in_chained_stages(hyperpod_template):
    resources = hyperpod_template["Resources"]
    stages = resources_of_type(hyperpod_template, "Custom::HyperPodNodesReady")
    _, cluster = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    groups = {
        g["InstanceGroupName"]: str(g["InstanceCount"])
        for g in cluster["Properties"]["InstanceGroups"]
    }
    assert all(s["Properties"]["InstanceGroups"] == groups for s in stages.values())
    finals = [k for k, s in stages.items() if s["Properties"]["Final"] == "true"]
    assert len(finals) == 1
    # A chain: every stage but the first waits for exactly one other stage.
    firsts = [k for k, s in stages.items() if not set(s.get("DependsOn", [])) & set(stages)]
    assert len(firsts) == 1
    total = sum(int(s["Properties"]["DeadlineSeconds"]) for s in stages.values())
    # Without the HyperPod dependencies chart the reference app runs no deep health checks,
    # and the derived budget is that of groups without them.
    groups_objects = [
        HyperPodInstanceGroup.system(instance_type="ml.m5.4xlarge", count=2),
        HyperPodInstanceGroup.gpu("gpu-b200", "ml.p6-b200.48xlarge", 2, deep_health_checks=()),
    ]
    budget = wait_budget(groups_objects).to_seconds()
    assert budget <= total < budget + len(stages) * 60
    for stage in stages.values():
        assert int(stage["Properties"]["DeadlineSeconds"]) <= 50 * 60
        assert stage["Properties"]["ServiceTimeout"] in ("3600", 3600)
    assert all(k in resources for k in finals)


def test_the_wait_grows_with_the_group_and_can_be_set():
    small = wait_budget([HyperPodInstanceGroup.gpu("g", "ml.p5en.48xlarge", 2)])
    large = wait_budget([HyperPodInstanceGroup.gpu("g", "ml.p5en.48xlarge", 64)])
    unchecked = wait_budget(
        [HyperPodInstanceGroup.gpu("g", "ml.p5en.48xlarge", 2, deep_health_checks=())]
    )
    assert unchecked.to_minutes() < small.to_minutes() < large.to_minutes()
    stack = new_stack()
    HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=instance_groups(),
        nodes_ready_timeout=Duration.hours(3),
    )
    stages = resources_of_type(_template(stack), "Custom::HyperPodNodesReady").values()
    assert len(stages) == 4  # 180 min in stages of at most 50
    assert sum(int(s["Properties"]["DeadlineSeconds"]) for s in stages) >= 3 * 3600


def test_the_wait_is_the_slowest_groups_and_grows_with_each_check():
    """Groups provision in parallel: the budget is the slowest group's, each deep health check
    adds its own time, a group without checks adds nothing."""

    def gpu(checks: tuple[str, ...], count: int = 2) -> HyperPodInstanceGroup:
        return HyperPodInstanceGroup.gpu("g", "ml.p5en.48xlarge", count, deep_health_checks=checks)

    both = wait_budget([gpu(("InstanceStress", "InstanceConnectivity"))])
    stress = wait_budget([gpu(("InstanceStress",))])
    connectivity = wait_budget([gpu(("InstanceConnectivity",))])
    none = wait_budget([gpu(())])
    assert none.to_minutes() < connectivity.to_minutes() < stress.to_minutes() < both.to_minutes()
    assert both.to_minutes() == stress.to_minutes() + connectivity.to_minutes() - none.to_minutes()
    with_system = wait_budget([HyperPodInstanceGroup.system(), gpu(("InstanceStress",))])
    assert with_system.to_minutes() == stress.to_minutes()
    # A large group without checks can be the slowest one.
    big = wait_budget([gpu(()), HyperPodInstanceGroup.system(count=200)])
    assert big.to_minutes() > none.to_minutes()


def test_a_wait_under_a_minute_is_refused():
    with pytest.raises(ConfigurationError) as caught:
        HyperPodEksCluster(
            new_stack(),
            "HyperPod",
            kubernetes_version="1.33",
            instance_groups=instance_groups(),
            nodes_ready_timeout=Duration.seconds(30),
        )
    assert [p.property for p in caught.value.problems] == ["timeout"]


def _needs(template: dict, logical_id: str) -> set[str]:
    """Everything ``logical_id`` waits for: DependsOn and references, transitively."""
    resources, seen, todo = template["Resources"], set(), [logical_id]
    while todo:
        resource = resources[todo.pop()]
        direct = set(resource.get("DependsOn", [])) | _references(resource.get("Properties", {}))
        for other in direct & set(resources) - seen:
            seen.add(other)
            todo.append(other)
    return seen


def test_a_chart_can_install_before_the_hyperpod_cluster():
    """AWS's HyperPod dependencies chart must be installed before the cluster: a chart the
    cluster depends on synthesizes (no cycle) and waits for neither the cluster nor its nodes."""
    stack = new_stack()
    cluster = HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=instance_groups()
    )
    chart = eks.HelmChart(
        stack,
        "Dependencies",
        cluster=cluster.eks_cluster,
        chart="hyperpod-helm-chart",
        repository="oci://111122223333.dkr.ecr.us-east-1.amazonaws.com/hyperpod",
        version="0.1.0",
        namespace="kube-system",
        wait=False,
    )
    cluster.cfn_cluster.node.add_dependency(chart)
    template = _template(stack)
    (chart_id,) = resources_of_type(template, "Custom::AWSCDK-EKS-HelmChart")
    cluster_id, _ = only_resource(template, "AWS::SageMaker::Cluster")
    stages = set(resources_of_type(template, "Custom::HyperPodNodesReady"))
    assert chart_id in _needs(template, cluster_id)
    assert not (_needs(template, chart_id) & {cluster_id, *stages})


_KUBERNETES_TYPES = (
    "Custom::AWSCDK-EKS-KubernetesResource",
    "Custom::AWSCDK-EKS-HelmChart",
    "Custom::AWSCDK-EKS-KubernetesObjectValue",
    "AWS::EKS::Addon",
)


def test_everything_applied_in_the_cluster_waits_for_the_nodes(hyperpod_template):
    """Every manifest, chart and add-on waits for the last nodes-ready stage, except the
    add-ons nodes need to join (hyperpod.json ``addons_before_nodes``), which the
    HyperPod cluster itself waits for."""
    resources = hyperpod_template["Resources"]
    (final,) = [
        key
        for key, stage in resources_of_type(hyperpod_template, "Custom::HyperPodNodesReady").items()
        if stage["Properties"]["Final"] == "true"
    ]
    cluster_id, _ = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    before = set(hyperpod_facts()["addons_before_nodes"])
    early = sorted(
        key
        for key, resource in resources.items()
        if resource["Type"] in _KUBERNETES_TYPES
        and resource["Properties"].get("AddonName") not in before
        and final not in _needs(hyperpod_template, key)
    )
    assert early == []
    addons = resources_of_type(hyperpod_template, "AWS::EKS::Addon")
    first = {k for k, a in addons.items() if a["Properties"]["AddonName"] in before}
    assert len(first) == len(before) >= 3 and first <= _needs(hyperpod_template, cluster_id)


def test_the_wait_handler_may_only_read_this_clusters_status_and_nodes(hyperpod_template):
    cluster_id, _ = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    roles = [
        key
        for key, role in resources_of_type(hyperpod_template, "AWS::IAM::Role").items()
        if "NodesReadyHandlerRole" in key
    ]
    (role_id,) = roles
    statements = policy_statements(hyperpod_template, role_id)
    sagemaker = [s for s in statements if any(a.startswith("sagemaker:") for a in actions_of(s))]
    reads = ["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"]
    assert [sorted(actions_of(s)) for s in sagemaker] == [reads]
    assert sagemaker[0]["Resource"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
    others = {a for s in statements for a in actions_of(s)} - set(reads)
    assert others == {"logs:CreateLogStream", "logs:PutLogEvents"}


# -- GPU Availability Zone ------------------------------------------------------------------


def _zoned_stack(**kwargs) -> tuple[Stack, HyperPodEksCluster]:
    stack = new_stack("Zoned")
    kwargs.setdefault("kubernetes_version", "1.33")
    cluster = HyperPodEksCluster(stack, "HyperPod", instance_groups=instance_groups(), **kwargs)
    FsxModelStore(
        stack,
        "Store",
        cluster=cluster,
        weights_bucket=s3.Bucket.from_bucket_name(stack, "W", "weights-bucket"),
        weights_prefix="models/ds3",
    )
    return stack, cluster


def test_gpu_subnet_and_file_system_sit_in_the_chosen_zone():
    stack, _ = _zoned_stack(gpu_availability_zone_id="use1-az4")
    template = _template(stack)
    subnets = resources_of_type(template, "AWS::EC2::Subnet")
    zoned = {k: v for k, v in subnets.items() if "AvailabilityZoneId" in v["Properties"]}
    ((subnet_id, subnet),) = zoned.items()
    props = subnet["Properties"]
    assert props["AvailabilityZoneId"] == "use1-az4" and "AvailabilityZone" not in props
    assert props["MapPublicIpOnLaunch"] is False
    schema = resource_schema("AWS::EC2::Subnet")
    assert "AvailabilityZoneId" in schema["properties"]
    block = ipaddress.IPv4Network(props["CidrBlock"])
    others = [
        ipaddress.IPv4Network(v["Properties"]["CidrBlock"])
        for k, v in subnets.items()
        if k != subnet_id
    ]
    assert not any(block.overlaps(other) for other in others)
    _, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert groups["gpu"]["OverrideVpcConfig"]["Subnets"] == [{"Ref": subnet_id}]
    assert "OverrideVpcConfig" not in groups["system"]
    _, fs = only_resource(template, "AWS::FSx::FileSystem")
    assert fs["Properties"]["SubnetIds"] == [{"Ref": subnet_id}]
    routes = [
        (k, v)
        for k, v in resources_of_type(template, "AWS::EC2::SubnetRouteTableAssociation").items()
        if v["Properties"]["SubnetId"] == {"Ref": subnet_id}
    ]
    ((routes_id, _),) = routes
    assert routes_id in cluster["DependsOn"]
    assert lint_template(template) == []


@pytest.mark.parametrize(
    ("az_id", "why"),
    [
        ("us-east-1a", "must be an Availability Zone ID"),
        ("usw2-az2", "not an Availability Zone ID of us-east-1"),
    ],
)
def test_a_zone_id_of_another_region_or_a_zone_name_is_refused(az_id, why):
    with pytest.raises(ConfigurationError) as caught:
        _zoned_stack(gpu_availability_zone_id=az_id)
    (problem,) = caught.value.problems
    assert problem.property == "gpu_availability_zone_id" and why in str(problem)


def _on_imported_vpc(route_tables: bool, **kwargs) -> Stack:
    from aws_cdk import aws_ec2 as ec2

    stack = new_stack()
    tables = ["rtb-0aaaaaaaaaaaaaaaa", "rtb-0bbbbbbbbbbbbbbbb"] if route_tables else None
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
        private_subnet_route_table_ids=tables,
    )
    HyperPodEksCluster(
        stack,
        "HyperPod",
        instance_groups=instance_groups(),
        kubernetes_version="1.33",
        vpc=vpc,
        gpu_availability_zone_id="use1-az4",
        **kwargs,
    )
    return stack


def test_an_imported_vpc_needs_the_gpu_subnet_cidr_and_route_tables():
    with pytest.raises(ConfigurationError) as caught:
        _on_imported_vpc(route_tables=True)
    assert [p.property for p in caught.value.problems] == ["gpu_subnet_cidr"]
    with pytest.raises(ConfigurationError) as caught:
        _on_imported_vpc(route_tables=False, gpu_subnet_cidr="10.9.0.0/20")
    assert [p.property for p in caught.value.problems] == ["vpc"]
    template = _template(_on_imported_vpc(route_tables=True, gpu_subnet_cidr="10.9.0.0/20"))
    (subnet,) = resources_of_type(template, "AWS::EC2::Subnet").values()
    assert subnet["Properties"]["CidrBlock"] == "10.9.0.0/20"
    assert "DeletionPolicy" not in subnet  # not ours to keep: the VPC is the user's
    (routes,) = resources_of_type(template, "AWS::EC2::SubnetRouteTableAssociation").values()
    assert routes["Properties"]["RouteTableId"] == "rtb-0aaaaaaaaaaaaaaaa"


@pytest.mark.parametrize(
    ("region", "prefix"),
    [
        ("us-east-1", "use1"),
        ("us-west-2", "usw2"),
        ("eu-central-2", "euc2"),
        ("ap-southeast-1", "apse1"),
        ("ap-northeast-3", "apne3"),
        ("us-gov-west-1", "usgw1"),
    ],
)
def test_region_prefixes_follow_aws_examples(region, prefix):
    assert region_prefix(region) == prefix
    assert az_id_problem(f"{prefix}-az1", region) is None


def test_a_zone_id_is_only_checked_for_format_when_the_region_is_unknown():
    assert az_id_problem("usw2-az2", None) is None
    assert az_id_problem("usw2-az2", "xx-unknownland-1") is None
    assert az_id_problem("usw2-az22", None) is not None


# -- destroy ---------------------------------------------------------------------------------


def _retained(template: dict, logical_id: str) -> bool:
    return template["Resources"][logical_id].get("DeletionPolicy") == "Retain"


def test_destroy_completes_with_the_file_system_kept(hyperpod_template):
    """Everything a retained file system's network interfaces hold is retained with it."""
    resources = hyperpod_template["Resources"]
    (fs_id, fs) = only_resource(hyperpod_template, "AWS::FSx::FileSystem")
    assert _retained(hyperpod_template, fs_id)
    held = [
        _ref_id(v) for v in fs["Properties"]["SubnetIds"] + fs["Properties"]["SecurityGroupIds"]
    ]
    assert held and all(h is not None for h in held)
    for logical_id in held:
        assert _retained(hyperpod_template, logical_id), logical_id
        vpc = _ref_id(resources[logical_id]["Properties"]["VpcId"])
        assert vpc is not None and _retained(hyperpod_template, vpc), (logical_id, vpc)
    # The nodes' group, which the stack deletes, is not among them.
    _, cluster = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    (node_group,) = cluster["Properties"]["VpcConfig"]["SecurityGroupIds"]
    assert _ref_id(node_group) not in held


def _references(value: object) -> set[str]:
    """Every logical id ``value`` points at (``Ref`` / ``Fn::GetAtt``, at any depth)."""
    found = {ref} if (ref := _ref_id(value)) is not None else set()
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict | list):
        for child in children:
            found |= _references(child)
    return found


def retained_network_holding_deleted(template: dict) -> dict[str, list[str]]:
    """Retained EC2/FSx resources that point at a resource the stack deletes.

    EC2 refuses to delete a security group another group's rule still names, and a subnet
    or group a retained interface still uses (``DependencyViolation``): what the retained
    network names must stay with it. Rules on a retained group that name a deleted group
    must be their own ``AWS::EC2::SecurityGroupIngress`` resources, deleted with the stack.
    """
    resources = template["Resources"]
    held: dict[str, list[str]] = {}
    for logical_id, resource in resources.items():
        if not _retained(template, logical_id):
            continue
        if not resource["Type"].startswith(("AWS::EC2::", "AWS::FSx::")):
            continue
        deleted = sorted(
            ref
            for ref in _references(resource.get("Properties", {}))
            if ref in resources and not _retained(template, ref)
        )
        if deleted:
            held[logical_id] = deleted
    return held


def test_the_retained_network_names_nothing_the_stack_deletes(hyperpod_template):
    assert retained_network_holding_deleted(hyperpod_template) == {}


def test_an_inline_rule_to_the_nodes_on_the_retained_group_would_be_found(hyperpod_template):
    template = copy.deepcopy(hyperpod_template)
    _, fs = only_resource(template, "AWS::FSx::FileSystem")
    (fs_group,) = [_ref_id(v) for v in fs["Properties"]["SecurityGroupIds"]]
    _, cluster = only_resource(template, "AWS::SageMaker::Cluster")
    (node_group,) = cluster["Properties"]["VpcConfig"]["SecurityGroupIds"]
    template["Resources"][fs_group]["Properties"]["SecurityGroupIngress"] = [
        {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "SourceSecurityGroupId": node_group}
    ]
    assert retained_network_holding_deleted(template) == {fs_group: [_ref_id(node_group)]}


def test_file_system_group_admits_lustre_from_the_nodes(hyperpod_template):
    _, fs = only_resource(hyperpod_template, "AWS::FSx::FileSystem")
    (fs_group,) = [_ref_id(v) for v in fs["Properties"]["SecurityGroupIds"]]
    _, cluster = only_resource(hyperpod_template, "AWS::SageMaker::Cluster")
    (node_group,) = cluster["Properties"]["VpcConfig"]["SecurityGroupIds"]
    open_ports: dict[str | None, set[int]] = {}
    for rule in resources_of_type(hyperpod_template, "AWS::EC2::SecurityGroupIngress").values():
        props = rule["Properties"]
        if _ref_id(props["GroupId"]) == fs_group and props["IpProtocol"] == "tcp":
            ports = range(props["FromPort"], props["ToPort"] + 1)
            open_ports.setdefault(_ref_id(props["SourceSecurityGroupId"]), set()).update(ports)
    lustre = {988, *range(1018, 1024)}
    assert lustre <= open_ports[_ref_id(node_group)] and lustre <= open_ports[fs_group]


# -- the data repository association -----------------------------------------------------------


def _association(bucket: str, prefix: str) -> dict:
    stack = new_stack()
    cluster = imported_cluster(stack)
    FsxModelStore(
        stack,
        "Store",
        cluster=cluster,
        weights_bucket=s3.Bucket.from_bucket_name(stack, "W", bucket),
        weights_prefix=prefix,
    )
    _, association = only_resource(_template(stack), "AWS::FSx::DataRepositoryAssociation")
    return association


def _overlap(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def test_association_path_changes_with_any_change_of_its_source():
    base = _association("weights-bucket", "models/ds3")
    pattern = resource_schema("AWS::FSx::DataRepositoryAssociation")["properties"][
        "FileSystemPath"
    ]["pattern"]
    paths = [base["Properties"]["FileSystemPath"]]
    for bucket, prefix in [("other-bucket", "models/ds3"), ("weights-bucket", "models")]:
        paths.append(_association(bucket, prefix)["Properties"]["FileSystemPath"])
    for path in paths:
        assert re.fullmatch(pattern, path) and path.startswith("/")
    old = paths[0]
    assert all(new != old and not _overlap(new, old) for new in paths[1:])
    assert base["DeletionPolicy"] == "Retain" and base["UpdateReplacePolicy"] == "Delete"


def test_serving_waits_for_the_association(hyperpod_template):
    dra_id, _ = only_resource(hyperpod_template, "AWS::FSx::DataRepositoryAssociation")
    workloads = [
        k
        for k in resources_of_type(hyperpod_template, "Custom::AWSCDK-EKS-KubernetesResource")
        if "LeaderWorkerSet" in k
    ]
    assert workloads
    for key in workloads:
        assert dra_id in hyperpod_template["Resources"][key]["DependsOn"], key


# -- on_create.sh -------------------------------------------------------------------------------
#
# The script runs for real in a sandbox: a fake root (LIFECYCLE_ROOT) and a PATH of real tools
# plus shims for what only a node has (mountpoint, systemctl) and for sleep (instant, counted).

_AL2023_CONFIG = """version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
# from-nodeadm

[grpc]
address = "/run/containerd/containerd.sock"
"""


def test_on_create_is_valid_bash_and_starts_no_service():
    subprocess.run(["bash", "-n", str(ON_CREATE)], check=True)
    text = ON_CREATE.read_text()
    assert not re.search(r"systemctl\s+(start|restart|stop)\b", text)


def _fake_node(
    tmp_path: Path,
    active: str = "",
    mounted: tuple[str, ...] = ("/opt/sagemaker",),
    mounted_after: int = 0,
    os_version: str = "2023",
    nvme_devices: bool = False,
) -> tuple[Path, dict[str, str]]:
    """A fake root whose ``mounted`` volumes show up after ``mounted_after`` polls, a PATH
    without rsync, shims that record systemctl calls and sleeps."""
    root = tmp_path / "root"
    for path in ("opt/sagemaker", "opt/dlami/nvme"):
        (root / path).mkdir(parents=True)
    (root / "var" / "lib" / "containerd" / "io.containerd.content.v1").mkdir(parents=True)
    (root / "var" / "lib" / "containerd" / "io.containerd.content.v1" / "blob").write_text("x")
    (root / "var" / "lib" / "kubelet" / "pods").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "os-release").write_text(f'NAME="Amazon Linux"\nVERSION_ID="{os_version}"\n')
    (root / "etc" / "containerd").mkdir()
    (root / "etc" / "containerd" / "config.toml").write_text(_AL2023_CONFIG)
    (root / "etc" / "eks" / "containerd").mkdir(parents=True)
    (root / "etc" / "eks" / "containerd" / "containerd-config.toml").write_text(
        'version = 2\nroot = "/var/lib/containerd"\n'
    )
    if nvme_devices:
        (root / "dev" / "disk" / "by-id").mkdir(parents=True)
        (root / "dev" / "disk" / "by-id" / "nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1").touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = "awk bash cat cp date df dirname hostname ln mkdir mv rm sync tail tee tr ls"
    for tool in tools.split():
        found = shutil.which(tool)
        assert found, tool
        os.symlink(found, bin_dir / tool)
    calls = tmp_path / "calls"
    patterns = " ".join(f'"*{path}"' for path in mounted)
    (bin_dir / "mountpoint").write_text(
        "#!/bin/bash\n"
        f'n=$(cat "{tmp_path}/polls" 2>/dev/null || echo 0); echo $((n + 1)) > "{tmp_path}/polls"\n'
        f"(( n >= {mounted_after} )) || exit 1\n"
        f'for p in {patterns}; do [[ "$2" == $p ]] && exit 0; done; exit 1\n'
    )
    (bin_dir / "systemctl").write_text(
        f'#!/bin/bash\necho "systemctl $*" >> "{calls}"\n'
        f'[[ "$1" != is-active ]] || [[ " {active} " == *" $3 "* ]]\n'
    )
    (bin_dir / "sleep").write_text(f'#!/bin/bash\necho "sleep $*" >> "{calls}"\n')
    for shim in ("mountpoint", "systemctl", "sleep"):
        (bin_dir / shim).chmod(0o755)
    env = {"PATH": str(bin_dir), "LIFECYCLE_ROOT": str(root), "HOME": str(tmp_path)}
    return root, env


def _run_on_create(env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("bash") or "bash", str(ON_CREATE)],
        env=env,
        capture_output=True,
        text=True,
        check=check,
    )


def _marker(root: Path) -> dict[str, str]:
    text = (root / "var" / "lib" / "cdk-llm-serving" / "container-storage").read_text()
    return dict(line.split("=", 1) for line in text.splitlines())


def _calls(tmp_path: Path) -> list[str]:
    calls = tmp_path / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_on_create_sets_containerd_root_in_its_configuration_on_al2023(tmp_path):
    root, env = _fake_node(tmp_path)
    result = _run_on_create(env)
    containerd = root / "var" / "lib" / "containerd"
    assert containerd.is_dir() and not containerd.is_symlink()  # no symlink: the config says
    config = (root / "opt" / "sagemaker" / "containerd-config.toml").read_text()
    assert 'root = "/opt/sagemaker/containerd"' in config
    assert 'root = "/var/lib/containerd"' not in config
    assert 'address = "/run/containerd/containerd.sock"' in config
    # Written whole with AWS's settings (the NVIDIA runtime the GPU pods need), not a copy.
    assert 'default_runtime_name = "nvidia"' in config
    assert "from-nodeadm" not in config
    drop_in = root / "etc/systemd/system/containerd.service.d/50-cdk-llm-serving-root.conf"
    lines = drop_in.read_text().splitlines()
    assert lines == [
        "[Service]",
        "ExecStart=",
        "ExecStart=/usr/bin/containerd --config /opt/sagemaker/containerd-config.toml",
    ]
    assert "systemctl daemon-reload" in _calls(tmp_path)
    blob = root / "opt" / "sagemaker" / "containerd" / "io.containerd.content.v1" / "blob"
    assert blob.read_text() == "x"  # what containerd held is copied to its new root
    assert _marker(root) == {
        "outcome": "ebs",
        "volume": "/opt/sagemaker",
        "containerd_root": "/opt/sagemaker/containerd",
        "kubelet_dir": "/opt/sagemaker/kubelet",
    }
    assert "containerd root = /opt/sagemaker/containerd" in result.stdout


def test_on_create_writes_a_whole_configuration_before_nodeadm_wrote_one(tmp_path):
    """AWS's script always writes containerd's whole configuration on Amazon Linux 2023, and so
    does ours: the node does not fail for a file nodeadm writes later."""
    root, env = _fake_node(tmp_path)
    (root / "etc" / "containerd" / "config.toml").unlink()
    result = _run_on_create(env)
    config = (root / "opt" / "sagemaker" / "containerd-config.toml").read_text()
    assert 'root = "/opt/sagemaker/containerd"' in config
    assert 'default_runtime_name = "nvidia"' in config
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in config
    assert _marker(root)["containerd_root"] == "/opt/sagemaker/containerd"
    assert "containerd root = /opt/sagemaker/containerd" in result.stdout


def test_on_create_sets_the_root_in_the_eks_template_on_al2(tmp_path):
    root, env = _fake_node(
        tmp_path, os_version="2", mounted=("/opt/dlami/nvme",), nvme_devices=True
    )
    _run_on_create(env)
    template = (root / "etc/eks/containerd/containerd-config.toml").read_text()
    assert template.splitlines() == ["version = 2", 'root = "/opt/dlami/nvme/containerd"']
    assert not (root / "etc/systemd/system/containerd.service.d").exists()
    assert _marker(root)["outcome"] == "nvme"


def test_on_create_moves_the_kubelet_directory_without_rsync(tmp_path):
    root, env = _fake_node(tmp_path)
    result = _run_on_create(env)
    link = root / "var" / "lib" / "kubelet"
    assert link.is_symlink() and link.resolve() == (root / "opt" / "sagemaker" / "kubelet")
    assert f"moved {link} -> {root}/opt/sagemaker/kubelet" in result.stdout
    assert (root / "opt" / "sagemaker" / "kubelet" / "pods").is_dir()


def test_on_create_links_a_directory_that_does_not_exist_yet(tmp_path):
    root, env = _fake_node(tmp_path)
    shutil.rmtree(root / "var" / "lib" / "kubelet")
    result = _run_on_create(env)
    kubelet = root / "var" / "lib" / "kubelet"
    assert kubelet.is_symlink()
    assert f"linked {kubelet} -> {root}/opt/sagemaker/kubelet" in result.stdout
    assert f"moved {kubelet}" not in result.stdout


def test_on_create_leaves_a_running_kubelets_directory_and_says_so(tmp_path):
    root, env = _fake_node(tmp_path, active="kubelet containerd")
    result = _run_on_create(env)
    kubelet = root / "var" / "lib" / "kubelet"
    assert kubelet.is_dir() and not kubelet.is_symlink()
    assert "kubelet is running" in result.stdout
    assert "containerd is running: its new root applies from its next start" in result.stdout
    assert _marker(root)["kubelet_dir"] == "/var/lib/kubelet"


def test_on_create_waits_for_the_volume_to_be_mounted(tmp_path):
    root, env = _fake_node(tmp_path, mounted_after=3)
    result = _run_on_create(env)
    assert result.stdout.count("waiting for /opt/sagemaker to be mounted") == 3
    assert _calls(tmp_path).count("sleep 5") == 3
    assert _marker(root)["outcome"] == "ebs"


def test_on_create_waits_for_nvme_where_the_instance_has_it(tmp_path):
    root, env = _fake_node(
        tmp_path, mounted=("/opt/sagemaker", "/opt/dlami/nvme"), mounted_after=2, nvme_devices=True
    )
    result = _run_on_create(env)
    assert "data volume expected at /opt/dlami/nvme" in result.stdout
    assert _marker(root)["containerd_root"] == "/opt/dlami/nvme/containerd"


def test_on_create_fails_loudly_without_a_data_volume(tmp_path):
    root, env = _fake_node(tmp_path, mounted=())
    result = _run_on_create(env, check=False)
    assert result.returncode == 1
    sleeps = [call for call in _calls(tmp_path) if call.startswith("sleep")]
    assert sleeps[:12] == ["sleep 5"] * 12  # 60 s of waiting, as AWS's script waits
    assert sleeps[12:] == ["sleep 60"]  # then time for the log to be uploaded
    assert "ERROR: no data volume mounted after 60 s" in result.stdout
    assert _marker(root)["outcome"] == "failed"
    assert not (root / "etc/systemd/system/containerd.service.d").exists()
    assert (root / "var/lib/kubelet").is_dir() and not (root / "var/lib/kubelet").is_symlink()


def test_on_create_says_when_nvme_does_not_appear_and_ebs_is_used(tmp_path):
    root, env = _fake_node(tmp_path, mounted=("/opt/sagemaker",), nvme_devices=True)
    result = _run_on_create(env)
    assert "WARNING: /opt/dlami/nvme not mounted after 60 s" in result.stdout
    assert _marker(root)["outcome"] == "fallback"
    assert _marker(root)["containerd_root"] == "/opt/sagemaker/containerd"


@pytest.mark.parametrize("os_version", ["22.04", ""])
def test_on_create_fails_on_an_os_whose_containerd_it_cannot_configure(tmp_path, os_version):
    root, env = _fake_node(tmp_path, os_version=os_version)
    result = _run_on_create(env, check=False)
    assert result.returncode == 1
    assert "cannot set containerd's root" in result.stdout
    assert _marker(root)["outcome"] == "failed"


# -- the lifecycle bucket and the add-on pins -----------------------------------------------------


def _lifecycle_bucket(template: dict) -> tuple[str, dict]:
    (found,) = [
        item
        for item in resources_of_type(template, "AWS::S3::Bucket").items()
        if "LifecycleScripts" in item[0]
    ]
    return found


def test_only_the_deployment_may_write_the_lifecycle_script(hyperpod_template):
    bucket_id, _ = _lifecycle_bucket(hyperpod_template)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources_of_type(hyperpod_template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    (deny,) = [s for s in policy if s.get("Sid") == "OnlyTheDeploymentWritesLifecycleScripts"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert {"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"} <= set(actions_of(deny))
    (exempt,) = deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]["Fn::GetAtt"][:1]
    deployments = resources_of_type(hyperpod_template, "AWS::Lambda::Function")
    handler = next(v for k, v in deployments.items() if k.startswith("CustomCDKBucketDeployment"))
    assert handler["Properties"]["Role"] == {"Fn::GetAtt": [exempt, "Arn"]}


def test_lifecycle_bucket_access_is_logged_to_a_retained_encrypted_bucket(hyperpod_template):
    _, bucket = _lifecycle_bucket(hyperpod_template)
    logging = bucket["Properties"]["LoggingConfiguration"]
    logs_id = _ref_id(logging["DestinationBucketName"])
    logs = hyperpod_template["Resources"][logs_id]
    assert logs["DeletionPolicy"] == "Retain" and logs["UpdateReplacePolicy"] == "Retain"
    (rule,) = logs["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert logs["Properties"]["PublicAccessBlockConfiguration"]["BlockPublicPolicy"] is True


@pytest.mark.parametrize("version", ["1.33", "1.34", "1.35"])
def test_every_eks_addon_is_pinned_for_the_cluster_version(hyperpod_template, version):
    from cdk_llm_serving.hyperpod._facts import hyperpod_facts

    templates = [hyperpod_template]
    if version != "1.35":  # the reference app's version
        stack = new_stack(f"Pins{version.replace('.', '')}")
        HyperPodEksCluster(
            stack, "HyperPod", instance_groups=instance_groups(), kubernetes_version=version
        )
        templates = [_template(stack)]
    for template in templates:
        addons = resources_of_type(template, "AWS::EKS::Addon")
        assert addons
        for key, addon in addons.items():
            props = addon["Properties"]
            assert props.get("AddonVersion"), key
            assert re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", props["AddonVersion"]), key
            if props["AddonName"] == "kube-proxy":
                # kube-proxy follows the Kubernetes minor version.
                assert props["AddonVersion"].startswith(f"v{version}."), key
    pins = hyperpod_facts()["addon_versions"]
    facts = hyperpod_facts()
    listed = set(facts["addons_before_nodes"]) | set(facts["addons_after_nodes"])
    assert listed <= set(pins[version])


def test_a_gpu_subnet_cidr_must_be_free_in_our_vpc():
    with pytest.raises(ConfigurationError) as caught:
        _zoned_stack(gpu_availability_zone_id="use1-az4", gpu_subnet_cidr="10.0.0.0/24")
    assert [p.property for p in caught.value.problems] == ["gpu_subnet_cidr"]
    stack, _ = _zoned_stack(gpu_availability_zone_id="use1-az4", gpu_subnet_cidr="10.0.250.0/24")
    subnets = resources_of_type(_template(stack), "AWS::EC2::Subnet").values()
    assert any(s["Properties"]["CidrBlock"] == "10.0.250.0/24" for s in subnets)


def test_association_path_follows_a_bucket_made_in_the_same_app():
    stack = new_stack()
    bucket = s3.Bucket(stack, "Weights")
    FsxModelStore(
        stack,
        "Store",
        cluster=imported_cluster(stack),
        weights_bucket=bucket,
        weights_prefix="models/ds3",
    )
    _, association = only_resource(_template(stack), "AWS::FSx::DataRepositoryAssociation")
    separator, parts = association["Properties"]["FileSystemPath"]["Fn::Join"]
    bucket_id, _ = only_resource(_template(stack), "AWS::S3::Bucket")
    assert separator == "" and {"Ref": bucket_id} in parts
    assert parts[0] == "/" and re.fullmatch(r"/models/ds3-[0-9a-f]{8}", parts[-1])


def test_lifecycle_logs_work_without_the_cdk_json_feature_flags():
    """An app without our cdk.json (no serverAccessLogsUseBucketPolicy flag) still synthesizes."""
    from aws_cdk import App

    stack = Stack(App(), "Bare")
    HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=instance_groups()
    )
    _, bucket = _lifecycle_bucket(_template(stack))
    assert "LoggingConfiguration" in bucket["Properties"]
