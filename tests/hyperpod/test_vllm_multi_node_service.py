"""Multi-node vLLM on HyperPod: the LeaderWorkerSet, its pods, the Service, and rejections."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.cx_api import SynthesisMessageLevel
from constructs import Construct

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
from cdk_llm_serving.hyperpod.model_store import FsxModelStore
from cdk_llm_serving.hyperpod.multi_node_service import Exposure, ServiceFront
from cdk_llm_serving.planning.cold_start import estimate_cold_start
from cdk_llm_serving.planning.sizing import plan
from cdk_llm_serving.vllm import MtpSpeculation, VllmConfig
from cdk_llm_serving.vllm.multinode import leader_command, worker_command
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import (
    deepseek_service,
    hyperpod_cluster,
    instance_groups,
    lws_crd_schema,
    model_store,
    small_cluster,
)
from tests.support.kubernetes_schemas import concretize, validate_core
from tests.support.template_helpers import manifest_objects, resources_of_type


@pytest.fixture(scope="session")
def lws(reference_templates) -> dict:
    (obj,) = manifest_objects(reference_templates["ReferenceMoeHyperPod"], "ServingLeaderWorkerSet")
    return obj


@pytest.fixture(scope="session")
def service(reference_templates) -> dict:
    (obj,) = manifest_objects(reference_templates["ReferenceMoeHyperPod"], "ServingService")
    return obj


@pytest.fixture
def lws_schema(shared_dir: Path) -> dict:
    return lws_crd_schema(shared_dir)


def test_leader_worker_set_matches_the_crd_schema(lws, lws_schema):
    jsonschema.validate(concretize(lws), lws_schema)


def test_the_crd_check_can_fail(lws, lws_schema):
    broken = json.loads(json.dumps(lws))
    broken["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Sometimes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), lws_schema)


def test_pod_templates_and_service_match_kubernetes_schemas(lws, service):
    template = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": role.lower(), **template[role]["metadata"]},
            "spec": template[role]["spec"],
        }
        validate_core(pod)
    validate_core(service)


def vllm_args(container: dict) -> list[str]:
    """The ``vllm`` arguments of a container, inside the API-key shell wrapper or not."""
    if container["command"] == ["/bin/sh", "-c"]:
        assert container["args"][1] == "vllm"
        return container["args"][2:]
    return container["args"]


def test_group_size_and_parallelism_come_from_the_plan(lws):
    """The MoE runs data parallel across the 2 nodes (TP 8 per node, experts over all 16 GPUs)."""
    expected = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == expected.nodes == 2
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    args = vllm_args(template["leaderTemplate"]["spec"]["containers"][0])
    assert args[args.index("--tensor-parallel-size") + 1] == "8"
    assert args[args.index("--data-parallel-size") + 1] == "2"
    assert "--pipeline-parallel-size" not in args
    assert "--enable-expert-parallel" in args
    # The planner's figures describe this layout (one source of truth).
    assert (expected.tensor_parallel, expected.data_parallel) == (8, 2)
    assert expected.pipeline_parallel == 1 and expected.expert_parallel


def emitted_layout(service) -> tuple[int | None, int | None, int | None, bool | None]:
    """(tensor, pipeline, data, expert) of the service's vLLM configuration, unset = None."""
    config = service.config
    return (
        config.tensor_parallel_size,
        config.pipeline_parallel_size,
        config.data_parallel_size,
        config.enable_expert_parallel,
    )


@pytest.mark.parametrize(
    ("model", "weight_format", "layout"),
    [
        ("deepseek-v3", "fp8", (8, None, 2, True)),  # MoE: data x expert across nodes
        ("llama-3.1-405b", "bf16", (8, 2, None, False)),  # dense: tensor x pipeline
    ],
)
def test_nodes_above_the_plan_follow_the_planner_layout_rule(model, weight_format, layout):
    stack = new_stack("SvcLayout")
    service = deepseek_service(
        stack,
        *small_cluster(stack),
        model=model,
        weight_format=weight_format,
        nodes_per_replica=2,
    )
    assert service.plan is not None and service.plan.nodes == 1
    assert emitted_layout(service) == layout
    planned = service.layout
    pipeline, data = planned.pipeline_parallel, planned.data_parallel
    assert (planned.tensor_parallel, pipeline if pipeline > 1 else None) == layout[:2]
    assert (data if data > 1 else None, planned.expert_parallel) == layout[2:]


def test_service_plan_is_the_layout_it_runs():
    """When the replica spans the plan's nodes, the plan's parallelism is what vLLM gets."""
    stack = new_stack("SvcPlanned")
    service = deepseek_service(stack, *small_cluster(stack))
    planned = service.plan
    assert planned is not None and service.layout == planned.layout
    tensor, pipeline, _, expert = emitted_layout(service)
    assert (tensor, pipeline or 1, expert) == (
        planned.tensor_parallel,
        planned.pipeline_parallel,
        planned.expert_parallel,
    )


def test_command_line_carries_nvfp4_mtp_reasoning_and_tools(lws):
    args = vllm_args(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0])
    assert args[args.index("--quantization") + 1] == "modelopt_fp4"
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "method": "mtp",
        "num_speculative_tokens": 1,
    }
    assert args[args.index("--reasoning-parser") + 1] == "qwen3"
    assert (
        "--enable-auto-tool-choice" in args
        and args[args.index("--tool-call-parser") + 1] == "qwen3_coder"
    )
    assert "--enable-reasoning" not in args


def test_native_multi_node_start(lws):
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = vllm_args(template["leaderTemplate"]["spec"]["containers"][0])
    worker = vllm_args(template["workerTemplate"]["spec"]["containers"][0])
    assert "--headless" not in leader and "--data-parallel-start-rank" not in leader
    assert (
        worker[worker.index("--data-parallel-start-rank") + 1] == "$(LWS_WORKER_INDEX)"
        and "--headless" in worker
    )
    for args in (leader, worker):
        assert args[args.index("--data-parallel-address") + 1] == "$(LWS_LEADER_ADDRESS)"
        assert args[args.index("--data-parallel-size-local") + 1] == "1"
        assert "--nnodes" not in args


def test_pods_take_whole_nodes_with_efa_shm_weights_and_probes(lws):
    template = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        spec = template[role]["spec"]
        (container,) = spec["containers"]
        # Guaranteed: 96 vCPUs (192 with multithreading, off: ThreadsPerCore 1) / 2048 GiB
        # less 10% headroom for the node's daemons.
        assert (
            container["resources"]["requests"]
            == container["resources"]["limits"]
            == {
                "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": "8",
                "cpu": "86",
                "memory": "1843Gi",
            }
        )
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
        assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]
        assert spec["nodeSelector"]["node.kubernetes.io/instance-type"] == "ml.p6-b200.48xlarge"
        assert "FI_EFA_USE_DEVICE_RDMA" not in {e["name"] for e in container["env"]}
        assert {"name": "FI_EFA_FORK_SAFE", "value": "1"} in container["env"]
        assert spec["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        assert spec["terminationGracePeriodSeconds"] == 120
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    expected = plan("reference-2.4t-a95b", "nvfp4", "ml.p6-b200.48xlarge", max_context=131072)
    budget = estimate_cold_start(expected.weight_bytes, "fsx_lustre", 2).startup_timeout_seconds
    assert (
        leader["startupProbe"]["failureThreshold"] * leader["startupProbe"]["periodSeconds"]
        >= budget
    )
    assert leader["readinessProbe"]["httpGet"]["path"] == "/health"


def _startup_budget_seconds(lws: dict) -> int:
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template.get("leaderTemplate") or template["workerTemplate"]  # one node: the leader
    probe = leader["spec"]["containers"][0]["startupProbe"]
    return int(probe["failureThreshold"] * probe["periodSeconds"])


def test_the_startup_probe_waits_for_the_first_read_from_s3():
    """The association imports metadata only: the first start reads every weight byte from S3
    at the file system's throughput (storage TiB x MB/s per TiB), not 1 GB/s per node."""
    stack = new_stack("Hydration")
    cluster = hyperpod_cluster(stack, gpu_count=2)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    store = FsxModelStore(
        stack,
        "Store",
        cluster=cluster,
        weights_bucket=s3.Bucket.from_bucket_name(stack, "W", "weights-bucket"),
        weights_prefix="models/ds3",
        storage_capacity_gib=2400,
        throughput_per_tib=125,
    )
    service = deepseek_service(stack, cluster, addons, store)
    assert service.plan is not None
    weight_bytes = service.plan.weight_bytes  # DeepSeek-V3 FP8, about 0.7 TB
    throughput = 2400 / 1024 * 125e6  # 293 MB/s
    assert store.throughput_bytes_per_second == throughput
    first_read = weight_bytes / throughput
    assert first_read > 2000  # over half an hour at 125 MB/s/TiB on 2.4 TiB
    # The budget: (first read + engine start) x the safety factor.
    assert _startup_budget_seconds(service.lws) >= 2 * (first_read + 180)


def test_the_reference_budget_covers_its_first_read(lws):
    """1.41 TB on 4800 GiB at 500 MB/s/TiB (2.34 GB/s): 10 min to hydrate, within the budget."""
    hydration = 1.4075e12 / (4800 / 1024 * 500e6)
    assert 590 < hydration < 610
    assert _startup_budget_seconds(lws) >= 2 * (hydration + 180)


def test_internal_load_balancer_by_default(service, reference_templates):
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["selector"]["cdk-llm-serving/role"] == "leader"
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": 8000, "protocol": "TCP"}
    ]
    # Only the VPC reaches the load balancer by default.
    (source,) = service["spec"]["loadBalancerSourceRanges"]  # a token: the VPC's CIDR
    resources = reference_templates["ReferenceMoeHyperPod"]["Resources"]
    (manifest,) = [v for k, v in resources.items() if k.startswith("ServingService")]
    parts = manifest["Properties"]["Manifest"]["Fn::Join"][1]
    (at,) = [i for i, p in enumerate(parts) if isinstance(p, dict)]
    assert parts[at]["Fn::GetAtt"][0].startswith("HyperPodVpc")
    assert parts[at]["Fn::GetAtt"][1] == "CidrBlock"
    assert parts[at - 1].endswith('"loadBalancerSourceRanges":["')


def test_the_load_balancer_s_service_leaves_the_lws_name_to_its_headless_service(
    lws, service, reference_templates
):
    """LWS creates its headless Service ``<lws>`` only when no Service of that name exists
    (kubernetes-sigs/lws ``CreateHeadlessServiceIfNotExists``); ``LWS_LEADER_ADDRESS``
    (``<lws>-<group>.<lws>.<namespace>``) resolves only through it."""
    name = lws["metadata"]["name"]
    assert service["metadata"]["name"] == f"{name}-api"
    objects = manifest_objects(reference_templates["ReferenceMoeHyperPod"], "")
    services = [o["metadata"]["name"] for o in objects if o["kind"] == "Service"]
    assert name not in services
    # The load balancer's hostname is read from that Service.
    resources = reference_templates["ReferenceMoeHyperPod"]["Resources"]
    (hostname,) = [v for k, v in resources.items() if k.startswith("ServingLoadBalancerHostname")]
    assert hostname["Properties"]["ObjectName"] == f"{name}-api"
    assert hostname["Properties"]["ObjectType"] == "service"


def test_a_name_too_long_for_the_api_service_is_refused():
    assert service_problems(name="a" * 60) == [
        "name: at most 59 characters, so that the load balancer's Service '<name>-api' is a "
        "Service name (at most 63)"
    ]
    stack = new_stack("LongServed")
    long_name = "m" * 63
    built = deepseek_service(
        stack,
        *small_cluster(stack),
        config=VllmConfig(model="x", max_model_len=32768, served_model_name=long_name),
    )
    assert built.name == "m" * 59 and built.service_name == f"{'m' * 59}-api"


SUBNETS = "service.beta.kubernetes.io/aws-load-balancer-subnets"


def _zoned_service(**exposure) -> tuple[dict, dict, list[str]]:
    """A service on a cluster whose GPU groups sit in their own AZ: (Service, template,
    warnings)."""
    stack = new_stack("ZonedLb" + str(len(exposure)))
    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        kubernetes_version="1.33",
        instance_groups=instance_groups(),
        gpu_availability_zone_id="use1-az4",
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    deepseek_service(stack, cluster, addons, model_store(stack, cluster), **exposure)
    template = template_of(stack)
    (manifest,) = manifest_objects(template, "ServingService")
    warnings = [
        str(message.entry.data)
        for message in stack.node.root.synth().get_stack_by_name(stack.stack_name).messages
        if message.level == SynthesisMessageLevel.WARNING
    ]
    return manifest, template, warnings


def test_with_a_gpu_zone_the_load_balancer_is_placed_in_the_gpu_subnet():
    """An NLB routes only to targets in its zones: the leaders' subnet is named on the Service."""
    manifest, template, _ = _zoned_service()
    zoned = [
        key
        for key, subnet in resources_of_type(template, "AWS::EC2::Subnet").items()
        if "AvailabilityZoneId" in subnet["Properties"]
    ]
    assert manifest["metadata"]["annotations"][SUBNETS] == "deploy-time-value"  # a subnet ID
    (resource,) = [v for k, v in template["Resources"].items() if k.startswith("ServingService")]
    parts = resource["Properties"]["Manifest"]["Fn::Join"][1]
    (at,) = [i for i, part in enumerate(parts) if part == {"Ref": zoned[0]}]
    assert parts[at - 1].endswith(f'"{SUBNETS}":"') and parts[at + 1].startswith('"')


def test_without_a_gpu_zone_the_controller_discovers_the_subnets(service):
    assert SUBNETS not in service["metadata"]["annotations"]


def test_a_public_exposure_in_a_gpu_zone_keeps_discovery_and_warns():
    exposure = Exposure(
        public=True,
        certificate_arn="arn:aws:acm:us-east-1:111122223333:certificate/abc",
        source_ranges=("203.0.113.0/24",),
    )
    manifest, _, warnings = _zoned_service(exposure=exposure)
    assert SUBNETS not in manifest["metadata"]["annotations"]
    assert any(
        "publicLoadBalancerGpuZone" in w or "internet-facing load balancer" in w for w in warnings
    )


def test_base_url_output_and_deploy_order(reference_templates):
    template = reference_templates["ReferenceMoeHyperPod"]
    (output,) = [v for k, v in template["Outputs"].items() if k.startswith("ServingBaseUrl")]
    parts = output["Value"]["Fn::Join"][1]
    assert parts[0] == "https://" and parts[-1] == "/v1"
    resources = template["Resources"]
    (lws_key,) = [k for k in resources if k.startswith("ServingLeaderWorkerSet")]
    (lws_chart,) = [
        k
        for k, v in resources.items()
        if v["Type"] == "Custom::AWSCDK-EKS-HelmChart" and v["Properties"]["Chart"] == "lws"
    ]
    assert lws_chart in resources[lws_key]["DependsOn"]


def service_problems(config=None, **kwargs) -> list[str]:
    stack = new_stack("Svc")
    if config is not None:
        kwargs["config"] = config
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(stack, *small_cluster(stack), **kwargs)
    return [f"{p.property}: {p.allowed}" for p in caught.value.problems]


def test_rejections():
    assert service_problems(gpu_group="nope")[0].startswith("gpu_group: must name a GPU group")
    assert service_problems(replicas=3)[0].startswith(
        "replicas: 3 x 1 nodes exceed GPU group 'gpu' (2 nodes)"
    )
    problems = service_problems(
        config=VllmConfig(
            model="x",
            max_model_len=32768,
            enable_auto_tool_choice=True,
            extra_flags={"enable-reasoning": True},
        )
    )
    assert problems[0].startswith("config.enable_auto_tool_choice") and problems[1].startswith(
        "config.extra_flags['enable-reasoning']"
    )
    problems = service_problems(
        config=VllmConfig(
            model="x", max_model_len=32768, speculative=MtpSpeculation(), extra_flags={"nnodes": 4}
        )
    )
    assert problems == [
        "config.extra_flags['nnodes']: set per pod by the multi-node launcher (vllm.multinode)"
    ]


def test_planner_refusal_is_reported():
    from cdk_llm_serving.planning.models import ModelSpec

    huge = ModelSpec(
        name="huge",
        total_params_b=40000,
        active_params_b=400,
        layers=200,
        attention_heads=128,
        kv_heads=8,
        head_dim=128,
        max_context=8192,
    )
    stack = new_stack("Svc2")
    with pytest.raises(ConfigurationError) as caught:
        deepseek_service(
            stack,
            *small_cluster(stack),
            model=huge,
            weight_format="bf16",
            config=VllmConfig(model="x"),
        )
    assert (
        caught.value.problems[0].property == "model"
        and "does not fit up to 16 nodes" in caught.value.problems[0].allowed
    )


def test_public_tls_exposure_and_ray_startup():
    stack = new_stack("Svc3")
    service = deepseek_service(
        stack,
        *small_cluster(stack),
        startup="ray",
        exposure=Exposure(
            public=True,
            certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abc",
            source_ranges=("203.0.113.0/24",),
        ),
    )
    assert service.service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    annotations = service.service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443"
    assert service.service["spec"]["ports"][0]["port"] == 443 and service.base_url.startswith(
        "https://"
    )
    template = service.lws["spec"]["leaderWorkerTemplate"]
    assert (
        template["size"] == 1 and "leaderTemplate" not in template
    )  # DeepSeek-V3 FP8 fits one p5en
    container = template["workerTemplate"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"] and container["args"][0].endswith(
        'exec vllm "$$@" --middleware cdk_llm_serving_route_guard.RouteGuard'
        " --config /dev/shm/vllm-api-keys.yaml"
    )  # one node: no Ray, vLLM itself after writing the route guard and the API keys


def test_ray_commands_for_a_multi_node_group():
    config = VllmConfig(model="/models/m", tensor_parallel_size=8, pipeline_parallel_size=2)
    leader, worker = leader_command(config, 2, "ray"), worker_command(config, 2, "ray")
    assert leader.command == ["/bin/sh", "-c"] and leader.args[0].startswith(
        "ray start --head --port=6379 && exec vllm serve /models/m"
    )
    assert "--distributed-executor-backend ray" in leader.args[0]
    assert worker.args == ["exec ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]


def test_streaming_weights_from_s3_with_a_pod_identity(lws_schema):
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    from cdk_llm_serving.model_sources import ModelData
    from tests.support.builders import template_of
    from tests.support.linting import lint_template
    from tests.support.template_helpers import actions_of, policy_statements

    stack = new_stack("Stream")
    cluster = hyperpod_cluster(stack)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster)
    service = deepseek_service(
        stack,
        cluster,
        addons,
        weights=ModelData.from_s3_uri("s3://weights-bucket/deepseek-v3/"),
    )
    spec = service.lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    args = vllm_args(spec["containers"][0])
    assert (
        args[1] == "s3://weights-bucket/deepseek-v3/"
        and args[args.index("--load-format") + 1] == "runai_streamer"
    )
    assert spec["serviceAccountName"] == service.service_account and [
        v["name"] for v in spec["volumes"]
    ] == ["dshm", "tls", "api-key"]
    jsonschema.validate(concretize(service.lws), lws_schema)
    validate_core({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})

    app = stack.node.root
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    template = template_of(stack)  # cdk-nag runs here: an unacknowledged finding fails
    (association,) = [
        v["Properties"]
        for v in resources_of_type(template, "AWS::EKS::PodIdentityAssociation").values()
    ]
    assert (
        association["ServiceAccount"] == service.service_account
        and association["Namespace"] == "inference"
    )
    statements = policy_statements(template, association["RoleArn"]["Fn::GetAtt"][0])
    assert {a for s in statements for a in actions_of(s)} == {
        "s3:GetObject",
        "s3:ListBucket",
        "secretsmanager:GetSecretValue",
        "secretsmanager:DescribeSecret",
    }
    assert not lint_template(template)


def test_weights_are_required():
    stack = new_stack("Neither")
    cluster, addons, _ = small_cluster(stack)
    with pytest.raises(
        ConfigurationError, match=r"weights = None: must be FsxModelStore \| ModelData"
    ):
        deepseek_service(stack, cluster, addons, config=VllmConfig(model="x"))


def test_the_planners_batch_reaches_vllm_as_max_num_seqs(lws):
    """The planner's latency figures hold at its chosen batch per engine; without the flag vLLM
    batches up to its own default (1024 on B200), past them. Leader and
    workers run the same engine settings."""
    templates = lws["spec"]["leaderWorkerTemplate"]
    found = set()
    for role in ("leaderTemplate", "workerTemplate"):
        (container,) = [c for c in templates[role]["spec"]["containers"] if c["name"] == "vllm"]
        text = " ".join(container.get("command", []) + container.get("args", []))
        found.update(re.findall(r"--max-num-seqs[ =](\d+)", text))
    (value,) = found
    assert 1 <= int(value) < 1024


# -- what other constructs may change, through the service's own methods ----------------------


def test_an_autoscaler_takes_the_replica_count_and_the_pods_drain():
    stack = new_stack("HandedOver")
    cluster, addons, store = small_cluster(stack)
    built = deepseek_service(stack, cluster, addons, store)
    assert built.lws["spec"]["replicas"] == 1
    owner = Construct(stack, "Autoscaler")  # stands for VllmReplicaAutoScaling
    built.hand_replicas_to(owner, max_replicas=1)
    assert "replicas" not in built.lws["spec"] and built.replicas_owner is owner
    template = built.lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert template["terminationGracePeriodSeconds"] == 340
    assert template["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 310}}}
    assert built.scale_target == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": built.name,
    }


def test_a_second_front_and_a_threshold_the_nlb_refuses_are_configuration_errors():
    stack = new_stack("Fronts")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    routed = deepseek_service(stack, cluster, addons, store, replicas=2)
    assert routed.workload.front is not None  # the router, by default at two replicas
    with pytest.raises(ConfigurationError, match="one front per service"):
        routed.add_front(ServiceFront((("app", "other"),), 8443), routed.service_resource)
    with pytest.raises(ConfigurationError, match="2 to 10"):
        routed.set_healthy_threshold(1)
