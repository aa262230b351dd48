"""Builders for small HyperPod test stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from cdk_llm_serving.hyperpod._facts import chart_pins
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.constants import INSTANCE_TYPE_LABEL
from cdk_llm_serving.hyperpod.inference_endpoint import HyperPodInferenceEndpoint
from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
from cdk_llm_serving.hyperpod.interfaces import IHyperPodCluster
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.hyperpod.multi_node_service import VllmMultiNodeService
from cdk_llm_serving.model_sources import ModelData
from cdk_llm_serving.vllm import VllmConfig
from tests.support import yaml_files
from tests.support.helm import find_chart


def instance_groups(gpu_count: int = 2) -> list[HyperPodInstanceGroup]:
    """The default system group and one p5en GPU group named ``gpu``."""
    return [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", gpu_count),
    ]


def hyperpod_cluster(stack: Stack, gpu_count: int = 2) -> HyperPodEksCluster:
    """A new cluster with ``instance_groups(gpu_count)``."""
    return HyperPodEksCluster(
        stack, "HyperPod", kubernetes_version="1.33", instance_groups=instance_groups(gpu_count)
    )


def model_store(stack: Stack, cluster: IHyperPodCluster, **overrides: Any) -> FsxModelStore:
    """An FSx store for ``s3://weights-bucket/models/ds3``; ``overrides`` replace any prop."""
    props: dict[str, Any] = {
        "cluster": cluster,
        "weights_bucket": s3.Bucket.from_bucket_name(stack, "W", "weights-bucket"),
        "weights_prefix": "models/ds3",
        **overrides,
    }
    return FsxModelStore(stack, "Store", **props)


def small_cluster(
    stack: Stack, gpu_count: int = 2
) -> tuple[HyperPodEksCluster, HyperPodServingAddons, FsxModelStore]:
    """A system group, one p5en GPU group, the add-ons and an FSx store for ``models/ds3``."""
    cluster = hyperpod_cluster(stack, gpu_count)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    return cluster, addons, model_store(stack, cluster)


def deepseek_service(
    stack: Stack,
    cluster: IHyperPodCluster,
    addons: HyperPodServingAddons,
    store: FsxModelStore | None = None,
    *,
    id: str = "Serving",
    **overrides: Any,
) -> VllmMultiNodeService:
    """DeepSeek-V3 in FP8 (one p5en per replica) at 32k context; ``overrides`` replace any prop.
    The service runs on ``addons.cluster`` (``cluster`` is the same one, kept for the callers)."""
    props: dict[str, Any] = {
        "model": "deepseek-v3",
        "weight_format": "fp8",
        "config": VllmConfig(model="x", max_model_len=32768),
        "weights": store,
        **overrides,
    }
    assert addons.cluster is cluster
    return VllmMultiNodeService(stack, id, addons=addons, **props)


def imported_cluster(
    stack: Stack,
    gpu_count: int = 2,
    *,
    oidc_provider_arn: str | None = None,
    tiered_storage: Any = None,
) -> IHyperPodCluster:
    """An existing HyperPod cluster (VPC, node security group, EKS with a kubectl provider)."""
    oidc = (
        iam.OpenIdConnectProvider.from_open_id_connect_provider_arn(
            stack, "ExistingOidc", oidc_provider_arn
        )
        if oidc_provider_arn
        else None
    )
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "ExistingVpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
    )
    eks_cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "ExistingEks",
        cluster_name="existing-eks",
        vpc=vpc,
        open_id_connect_provider=oidc,
        kubectl_provider=eks.KubectlProvider.from_kubectl_provider_attributes(
            stack,
            "ExistingKubectl",
            service_token="arn:aws:lambda:us-east-1:111122223333:function:kubectl-provider",
            role=iam.Role.from_role_arn(
                stack, "ExistingKubectlRole", "arn:aws:iam::111122223333:role/kubectl-provider"
            ),
        ),
    )
    return HyperPodEksCluster.from_cluster_attributes(
        stack,
        "ExistingHyperPod",
        eks_cluster=eks_cluster,
        vpc=vpc,
        node_security_group=ec2.SecurityGroup.from_security_group_id(
            stack, "ExistingNodes", "sg-0123456789abcdef0"
        ),
        instance_groups=instance_groups(gpu_count),
        tiered_storage=tiered_storage,
    )


def published_chart(shared_dir: Path, name: str) -> Path:
    """The unpacked upstream chart (``<shared>/charts``) that ``assets/hyperpod.json`` pins as ``name``.

    Found by the ``name`` and ``version`` of its ``Chart.yaml`` (a leading ``v`` ignored), as
    ``charts/README.md`` describes; fails when no published chart matches the pin.
    """
    pin = chart_pins()[name]
    return find_chart(shared_dir / "charts", pin["chart"], pin["version"])


def chart_crd_schema(chart: Path, kind: str, version: str) -> dict:
    """The openAPIV3Schema of ``kind`` at ``version`` from a chart's CRD templates.

    Lines holding Helm template actions (the install switch, labels) are dropped; the schema
    itself is plain YAML in the published charts.
    """
    for path in sorted(chart.glob("templates/crds/*.yaml")):
        text = "\n".join(line for line in path.read_text().splitlines() if "{{" not in line)
        crd = yaml_files.load(text)
        if crd["spec"]["names"]["kind"] == kind:
            (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
            return dict(found["schema"]["openAPIV3Schema"])
    raise AssertionError(f"no CRD for {kind} in {chart}")


def single_node_groups() -> list[HyperPodInstanceGroup]:
    """A system group and two 8-GPU groups for single-node models: H200 (2 nodes), H100 (1)."""
    return [
        HyperPodInstanceGroup.system(),
        HyperPodInstanceGroup.gpu("h200", "ml.p5en.48xlarge", 2),
        HyperPodInstanceGroup.gpu("h100", "ml.p5.48xlarge", 1),
    ]


def gpt_oss_120b_endpoint(
    stack: Stack, addons: HyperPodServingAddons, *, id: str = "GptOss", **overrides: Any
) -> HyperPodInferenceEndpoint:
    """gpt-oss-120b (MXFP4) on H200, else H100, from S3; ``overrides`` replace any prop."""
    props: dict[str, Any] = {
        "model": "gpt-oss-120b",
        "weight_format": "mxfp4",
        "weights": ModelData.from_s3_uri("s3://weights-bucket/gpt-oss-120b/"),
        "config": VllmConfig(model="x", max_model_len=32768),
        "instance_types": ["ml.p5en.48xlarge", "ml.p5.48xlarge"],
        "image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v1",
        **overrides,
    }
    return HyperPodInferenceEndpoint(stack, id, addons=addons, **props)


def lws_crd_schema(shared_dir: Path) -> dict:
    """The openAPIV3Schema of LeaderWorkerSet v1 from the CRD in ``<shared>/schemas``."""
    crd = yaml_files.load_file(
        shared_dir / "schemas" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return dict(version["schema"]["openAPIV3Schema"])


def _tolerates(pod: dict, taints) -> bool:
    tolerations = pod["spec"].get("tolerations", [])
    return all(
        any(
            t["key"] == taint.key
            and t.get("effect") in (None, taint.effect)
            and (t["operator"] == "Exists" or t.get("value") == taint.value)
            for t in tolerations
        )
        for taint in taints
    )


def _matches(pod: dict, labels: dict[str, str]) -> bool:
    """The pod's ``nodeSelector`` and required node affinity both admit a node with ``labels``
    (the scheduler needs both: Kubernetes "Assign Pods to Nodes", nodeSelector and affinity)."""
    if any(labels.get(key) != value for key, value in pod["spec"].get("nodeSelector", {}).items()):
        return False
    affinity = pod["spec"].get("affinity", {}).get("nodeAffinity", {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(
        all(labels.get(e["key"]) in e["values"] for e in term["matchExpressions"])
        for term in required["nodeSelectorTerms"]
    )


def landing_groups(pod: dict, groups) -> list[str]:
    """Groups whose nodes (HyperPod's instance-type label, our labels, amd64 Linux) take the pod."""
    found = []
    for group in groups:
        labels = {
            INSTANCE_TYPE_LABEL: group.instance_type,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            **group.effective_labels,
        }
        if _matches(pod, labels) and _tolerates(pod, group.effective_taints):
            found.append(group.name)
    return found


_ROOT = Path(__file__).resolve().parents[2]


def pinned_vllm_metrics_source() -> str:
    """The pinned vLLM's metric registrations (loggers, NIXL stats) from ``.venv/vllm``; skips
    when that virtualenv is absent."""
    packages = sorted((_ROOT / ".venv" / "vllm" / "lib").glob("python3*/site-packages/vllm"))
    if not packages:
        pytest.skip("the vLLM virtualenv (.venv/vllm) is not installed")
    return "\n".join(
        path.read_text(errors="replace")
        for path in (
            packages[0] / "v1" / "metrics" / "loggers.py",
            packages[0] / "distributed/kv_transfer/kv_connector/v1/nixl/stats.py",
        )
    )
