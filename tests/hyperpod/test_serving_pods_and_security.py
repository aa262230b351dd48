"""The serving pods: image, Guaranteed resources, restricted security, rollout, API key,
NetworkPolicies and load-balancer exposure (issues 12 and 14)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from aws_cdk import App, Stack
from aws_cdk.cx_api import SynthesisMessageLevel

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod import HyperPodEksCluster, HyperPodServingAddons
from cdk_llm_serving.hyperpod.multi_node_service import Exposure, ServingImage
from cdk_llm_serving.hyperpod.pod_spec import guaranteed_cpu_memory, node_vcpus
from cdk_llm_serving.hyperpod.serving_security import API_KEY_FILE, IMDS_CIDR
from cdk_llm_serving.planning.catalog import default_catalog
from cdk_llm_serving.vllm import NgramSpeculation, VllmConfig
from cdk_llm_serving.vllm.multinode import API_KEYS_CONFIG
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import (
    deepseek_service,
    instance_groups,
    lws_crd_schema,
    model_store,
    small_cluster,
)
from tests.support.kubernetes_schemas import concretize, validate_core
from tests.support.network_policy import Endpoint, allowed
from tests.support.start_script import run_in_container
from tests.support.template_helpers import manifest_objects, resources_of_type

DLC_IMAGE = (
    "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:0.31.0-gpu-py312-cu130-ubuntu24.04-ec2"
)
ROLES = ("leaderTemplate", "workerTemplate")


@pytest.fixture
def lws_schema(shared_dir: Path) -> dict:
    return lws_crd_schema(shared_dir)


def pod_specs(lws: dict) -> dict[str, dict]:
    template = lws["spec"]["leaderWorkerTemplate"]
    return {role: template[role]["spec"] for role in ROLES if role in template}


def warnings_of(stack: Stack) -> list[str]:
    assembly = stack.node.root.synth()  # type: ignore[attr-defined]
    return [
        str(message.entry.data)
        for message in assembly.get_stack_by_name(stack.stack_name).messages
        if message.level == SynthesisMessageLevel.WARNING
    ]


# -- image -------------------------------------------------------------------------------


def test_default_image_is_awss_vllm_container_with_efa(lws):
    for spec in pod_specs(lws).values():
        (container,) = spec["containers"]
        assert container["image"] == DLC_IMAGE
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_FORK_SAFE"] == "1"
        # Unset: libfabric uses RDMA where the device has it; "1" aborts where it has not.
        assert "FI_EFA_USE_DEVICE_RDMA" not in env


def test_environment_agnostic_stack_finds_the_dlc_account_by_region():
    stack = Stack(App(), "Agnostic")
    cluster, addons, store = small_cluster(stack)
    deepseek_service(stack, cluster, addons, store)
    template = template_of(stack)
    accounts = template["Mappings"]["VllmImageAccounts"]
    assert accounts["us-west-2"] == {"account": "763104351884"}
    (lws,) = [
        r
        for k, r in resources_of_type(template, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if k.startswith("ServingLeaderWorkerSet")
    ]
    assert "Fn::FindInMap" in json.dumps(lws["Properties"]["Manifest"])


def test_image_without_efa_on_a_multi_node_efa_service_warns():
    def warnings(**image) -> list[str]:
        stack = new_stack("Efa" + str(len(image)))
        cluster, addons, store = small_cluster(stack)
        deepseek_service(stack, cluster, addons, store, nodes_per_replica=2, **image)
        return [w for w in warnings_of(stack) if "vllmImageWithoutEfa" in w]

    assert warnings(image="vllm/vllm-openai:v0.33.0")
    assert not warnings(image=ServingImage("registry.example.com/vllm-efa:1", efa=True))
    assert not warnings()


# -- resources and security --------------------------------------------------------------


def test_pods_are_guaranteed_with_headroom_for_the_node():
    g5 = guaranteed_cpu_memory(default_catalog().get("ml.g5.xlarge"), threads_per_core=2)
    assert g5 == {"cpu": "2", "memory": "12Gi"}  # 4 vCPUs / 16 GiB, minimum headroom 2 / 4
    p5en = default_catalog().get("ml.p5en.48xlarge")
    assert guaranteed_cpu_memory(p5en, threads_per_core=2) == {"cpu": "172", "memory": "1843Gi"}
    # Multithreading off: 96 vCPUs, 10 kept back.
    assert guaranteed_cpu_memory(p5en, threads_per_core=1) == {"cpu": "86", "memory": "1843Gi"}


def test_an_arm_host_keeps_its_vcpus_with_one_thread_per_core():
    gb200 = default_catalog().get("ml.p6e-gb200.36xlarge")
    assert node_vcpus(gb200, 1) == node_vcpus(gb200, 2) == 144


def test_lws_pods_request_what_a_one_thread_per_core_node_offers(lws):
    """The GPU group runs with ThreadsPerCore 1: the pods ask for 90 % of half the vCPUs."""
    for spec in pod_specs(lws).values():
        (container,) = spec["containers"]
        assert container["resources"]["requests"]["cpu"] == "86", container["name"]


def test_pods_are_restricted_and_keep_only_ipc_lock(lws):
    for role, spec in pod_specs(lws).items():
        (container,) = spec["containers"]
        resources = container["resources"]
        assert resources["requests"] == resources["limits"] and {"cpu", "memory"} <= set(
            resources["requests"]
        ), role
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert spec["automountServiceAccountToken"] is False and spec["hostNetwork"] is False
        validate_core({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})


# -- rollout -----------------------------------------------------------------------------


def test_rollout_surges_when_the_group_has_room(lws_schema):
    stack = new_stack("Surge")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    service = deepseek_service(stack, cluster, addons, store)  # 1 node per replica, 1 replica
    strategy = service.lws["spec"]["rolloutStrategy"]
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
    }
    jsonschema.validate(concretize(service.lws), lws_schema)
    assert not [w for w in warnings_of(stack) if "rolloutWithoutSurge" in w]


def test_rollout_without_room_replaces_one_replica_at_a_time_and_warns(lws, lws_schema):
    # The reference group holds exactly one 2-node replica.
    assert lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxSurge": 0,
        "maxUnavailable": 1,
    }
    broken = json.loads(json.dumps(lws))
    broken["spec"]["rolloutStrategy"]["type"] = "Recreate"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), lws_schema)
    stack = new_stack("NoSurge")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    deepseek_service(stack, cluster, addons, store, replicas=2)
    assert [w for w in warnings_of(stack) if "rolloutWithoutSurge" in w] == []  # 2 replicas
    stack = new_stack("NoSurge1")
    cluster, addons, store = small_cluster(stack, gpu_count=1)
    deepseek_service(stack, cluster, addons, store)
    assert [w for w in warnings_of(stack) if "rolloutWithoutSurge" in w]


def test_the_outage_warning_gives_its_length_and_the_way_out():
    stack = new_stack("NoSurgeFigures")
    cluster, addons, store = small_cluster(stack, gpu_count=1)
    service = deepseek_service(stack, cluster, addons, store)
    (warning,) = [w for w in warnings_of(stack) if "rolloutWithoutSurge" in w]
    minutes = round((service.cold_start.total_seconds + 120) / 60)
    assert f"about {minutes} minutes" in warning
    assert "count=2" in warning and "maxSurge" in warning


# -- API key -----------------------------------------------------------------------------


def test_leader_reads_the_api_key_from_a_csi_mounted_secret(hyperpod, lws):
    specs = pod_specs(lws)
    leader, worker = specs["leaderTemplate"], specs["workerTemplate"]
    (volume,) = [v for v in leader["volumes"] if v["name"] == "api-key"]
    assert volume["csi"]["driver"] == "secrets-store.csi.k8s.io"
    provider_class = volume["csi"]["volumeAttributes"]["secretProviderClass"]
    (container,) = leader["containers"]
    assert f"f={API_KEY_FILE};" in container["args"][0]
    assert container["args"][0].endswith(f"--config {API_KEYS_CONFIG}")
    assert "api-key" not in [v["name"] for v in worker["volumes"]]  # headless: no API

    (spc,) = manifest_objects(hyperpod, "ServingApiKeyProvider")
    assert spc["kind"] == "SecretProviderClass" and spc["metadata"]["name"] == provider_class
    assert spc["spec"]["provider"] == "aws"
    assert spc["spec"]["parameters"]["usePodIdentity"] == "true"
    (obj,) = yaml.safe_load(spc["spec"]["parameters"]["objects"])
    assert obj["objectType"] == "secretsmanager" and obj["objectAlias"] == "api-key"

    (secret_key, secret), *_ = resources_of_type(hyperpod, "AWS::SecretsManager::Secret").items()
    assert "GenerateSecretString" in secret["Properties"]
    assert "SecretString" not in secret["Properties"]  # the value never enters the template
    (output,) = [
        v for k, v in hyperpod["Outputs"].items() if k.startswith("ServingApiKeySecretArn")
    ]
    assert output["Value"] == {"Ref": secret_key}
    resources = hyperpod["Resources"]
    (spc_key,) = [k for k in resources if k.startswith("ServingApiKeyProvider")]
    assert secret_key in json.dumps(resources[spc_key]["Properties"]["Manifest"])
    addons = [
        k
        for k, v in resources_of_type(hyperpod, "AWS::EKS::Addon").items()
        if v["Properties"]["AddonName"] == "aws-secrets-store-csi-driver-provider"
    ]
    assert len(addons) == 1 and addons[0] in resources[spc_key]["DependsOn"]


def test_the_leaders_keys_stay_in_memory_and_off_its_command_line(lws, tmp_path):
    """The leader's own start (from the template) with a rotation's two keys: vLLM gets both
    through its --config file, written to the Memory volume at /dev/shm, and no key in argv."""
    leader = pod_specs(lws)["leaderTemplate"]
    (container,) = leader["containers"]
    (shm,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (volume,) = [v for v in leader["volumes"] if v["name"] == shm["name"]]
    assert volume["emptyDir"]["medium"] == "Memory"
    assert API_KEYS_CONFIG.startswith("/dev/shm/")
    key_file, config = tmp_path / "api-key", tmp_path / "vllm-api-keys.yaml"
    key_file.write_text("old-key\nnew-key\n")
    script = container["args"][0].replace(API_KEY_FILE, str(key_file))
    script = script.replace(API_KEYS_CONFIG, str(config))
    out = run_in_container(container["command"], [script, *container["args"][1:]], tmp_path)
    assert out.startswith("rc=0\narg=serve\n")
    argv = out.split("\napi-key:")[0]
    assert "old-key" not in argv and "new-key" not in argv
    assert yaml.safe_load(config.read_text()) == {"api-key": ["old-key", "new-key"]}


def test_the_csi_driver_is_installed_once_per_cluster():
    stack = new_stack("TwoKeys")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    deepseek_service(stack, cluster, addons, store, id="A", name="a")
    deepseek_service(stack, cluster, addons, store, id="B", name="b")
    template = template_of(stack)
    names = [
        v["Properties"]["AddonName"]
        for v in resources_of_type(template, "AWS::EKS::Addon").values()
    ]
    assert names.count("aws-secrets-store-csi-driver-provider") == 1
    assert len(resources_of_type(template, "AWS::SecretsManager::Secret")) == 2


def test_the_csi_provider_takes_the_clusters_addon_version_override():
    stack = new_stack("ProviderOverride")
    provider = "aws-secrets-store-csi-driver-provider"
    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=instance_groups(2),
        addon_versions={provider: "v9.9.9-eksbuild.1"},
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    versions = [
        v["Properties"].get("AddonVersion")
        for v in resources_of_type(template_of(stack), "AWS::EKS::Addon").values()
        if v["Properties"]["AddonName"] == provider
    ]
    assert versions == ["v9.9.9-eksbuild.1"]


def test_vpc_cni_enforces_network_policies(hyperpod):
    (cni,) = [
        v["Properties"]
        for v in resources_of_type(hyperpod, "AWS::EKS::Addon").values()
        if v["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert json.loads(cni["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}


# -- NetworkPolicies ---------------------------------------------------------------------


def test_network_policies_isolate_the_group_and_block_imds(hyperpod, lws):
    policies = {
        p["metadata"]["name"]: p for p in manifest_objects(hyperpod, "ServingNetworkPolicies")
    }
    for policy in policies.values():
        validate_core(policy)
    name = lws["metadata"]["name"]
    group, api = policies[f"{name}-group"]["spec"], policies[f"{name}-api"]["spec"]
    leader_labels = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
    group_labels = {k: v for k, v in leader_labels.items() if k != "cdk-llm-serving/role"}
    assert group["podSelector"] == {"matchLabels": group_labels}
    assert group["ingress"] == [{"from": [{"podSelector": {"matchLabels": group_labels}}]}]
    assert {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [IMDS_CIDR]}}]} in group["egress"]
    assert all(  # no egress rule reaches the metadata service
        "ipBlock" not in peer or IMDS_CIDR in peer["ipBlock"].get("except", [])
        for rule in group["egress"]
        for peer in rule["to"]
    )
    assert api["podSelector"] == {"matchLabels": leader_labels}
    (rule,) = api["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert [list(peer) for peer in rule["from"]] == [["ipBlock"]]  # the VPC's CIDR
    resources = hyperpod["Resources"]
    (lws_key,) = [k for k in resources if k.startswith("ServingLeaderWorkerSet")]
    (np_key,) = [k for k in resources if k.startswith("ServingNetworkPolicies")]
    assert np_key in resources[lws_key]["DependsOn"]  # isolated before the pods start


# -- exposure ----------------------------------------------------------------------------


def exposure_problems(**kwargs) -> list[str]:
    stack = new_stack("Expose")
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, *small_cluster(stack), **kwargs)
    return [p.property for p in caught.value.problems]


def test_public_exposure_needs_certificate_source_ranges_and_key():
    assert exposure_problems(exposure=Exposure(public=True)) == [
        "exposure.certificate_arn",
        "exposure.source_ranges",
    ]
    assert exposure_problems(
        exposure=Exposure(
            public=True,
            certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/c",
            source_ranges=("1.2.3.0/24",),
        ),
        api_key=False,
    ) == ["api_key"]
    assert exposure_problems(exposure=Exposure(source_ranges=("10.0.0.0/33",))) == [
        "exposure.source_ranges[0]"
    ]


def test_without_authentication_there_is_no_key_anywhere():
    stack = new_stack("NoAuth")
    service = deepseek_service(
        stack,
        *small_cluster(stack),
        api_key=False,
        config=VllmConfig(model="x", max_model_len=32768),
    )
    spec = service.lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    (container,) = spec["containers"]
    start = " ".join([*container["command"], *container["args"]])
    assert service.api_key is None and API_KEYS_CONFIG not in start and "--config" not in start
    assert "--middleware cdk_llm_serving_route_guard.RouteGuard" in start  # routes closed anyway
    assert not resources_of_type(template_of(stack), "AWS::SecretsManager::Secret")


def test_a_moe_across_nodes_cannot_start_with_ray():
    stack = new_stack("RayDp")
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, *small_cluster(stack), nodes_per_replica=2, startup="ray")
    assert [(p.property, p.allowed) for p in caught.value.problems] == [
        ("startup", "the data-parallel layout starts natively")
    ]


def test_network_policies_allow_the_group_and_the_vpc_and_nothing_else(hyperpod, lws):
    policies = manifest_objects(hyperpod, "ServingNetworkPolicies")
    vpc_cidr = "10.0.0.0/16"  # the reference VPC's CIDR (the template's token)
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            for peer in rule["from"]:
                if peer.get("ipBlock", {}).get("cidr") == "deploy-time-value":
                    peer["ipBlock"]["cidr"] = vpc_cidr
    template = lws["spec"]["leaderWorkerTemplate"]
    namespace = lws["metadata"]["namespace"]
    leader = Endpoint("10.0.1.10", template["leaderTemplate"]["metadata"]["labels"], namespace)
    worker = Endpoint("10.0.1.11", template["workerTemplate"]["metadata"]["labels"], namespace)
    stranger = Endpoint("10.0.2.20", {"app.kubernetes.io/name": "other"}, namespace)
    nlb, internet = Endpoint("10.0.0.5"), Endpoint("203.0.113.7")
    imds, pod_identity, s3 = (
        Endpoint("169.254.169.254"),
        Endpoint("169.254.170.23"),
        Endpoint("52.218.1.1"),
    )

    for port in (29500, 6379, 13345, 45123):  # torch.distributed, Ray, DP RPC, NCCL
        assert allowed(policies, worker, leader, port) and allowed(policies, leader, worker, port)
        assert not allowed(policies, stranger, leader, port)
        assert not allowed(policies, nlb, worker, port)
    assert allowed(policies, nlb, leader, 8000) and not allowed(policies, internet, leader, 8000)
    assert not allowed(policies, nlb, worker, 8000)
    for pod in (leader, worker):
        assert not allowed(policies, pod, imds, 80)
        assert allowed(policies, pod, pod_identity, 80) and allowed(policies, pod, s3, 443)


def test_speculation_with_pipeline_parallelism_warns():
    """A dense model across nodes keeps pipeline parallelism; speculation on top warns."""
    stack = new_stack("SpecPp")
    service = deepseek_service(
        stack,
        *small_cluster(stack),
        model="llama-3.1-405b",
        weight_format="fp8",
        nodes_per_replica=2,
        config=VllmConfig(model="x", max_model_len=32768, speculative=NgramSpeculation()),
    )
    assert service.config.pipeline_parallel_size == 2 and service.config.data_parallel_size is None
    assert [w for w in warnings_of(stack) if "speculationWithPipeline" in w]
    stack = new_stack("SpecDp")  # the MoE runs data parallel: no warning
    deepseek_service(
        stack,
        *small_cluster(stack),
        nodes_per_replica=2,
        config=VllmConfig(model="x", max_model_len=32768, speculative=NgramSpeculation()),
    )
    assert not [w for w in warnings_of(stack) if "speculationWithPipeline" in w]


def test_identity_manifest_matches_kubernetes_schemas(hyperpod, lws):
    """The leader's and the workers' own service accounts, neither with a token."""
    accounts = manifest_objects(hyperpod, "ServingWeightsIdentity")  # the store owns the namespace
    for account in accounts:
        validate_core(account)
        assert (
            account["kind"] == "ServiceAccount" and account["automountServiceAccountToken"] is False
        )
    names = {spec["serviceAccountName"] for spec in pod_specs(lws).values()}
    assert names == {account["metadata"]["name"] for account in accounts} and len(names) == 2
    assert pod_specs(lws)["workerTemplate"]["serviceAccountName"].endswith("-vllm-worker")
