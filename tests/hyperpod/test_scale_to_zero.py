"""Scale to zero: an explicit opt-in, woken by a client's connection through the wake
proxy (the reference) or on a schedule, with a bounded wake."""

from __future__ import annotations

import json
import math
import re

import jsonschema
import pytest
from aws_cdk import Duration

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.constants import (
    KEDA_API_VERSION,
    KEDA_CHART,
    REQUESTS_RUNNING_RULE,
    ROLE_LABEL,
    SYSTEM_NODE_ROLE,
    VLLM_API_PORT,
)
from cdk_llm_serving.hyperpod.replica_autoscaling import (
    WAKE_HEALTHY_THRESHOLD,
    ScaleToZero,
    WakeOnConnect,
    WakeSchedule,
    default_load_balancer_prefix,
)
from cdk_llm_serving.hyperpod.wake_proxy import WAKE_PROXY_HEALTH_PORT, WAKE_PROXY_PORT
from stacks.reference_app import add_reference_stacks
from tests.support.app import new_app
from tests.support.hyperpod import chart_crd_schema, published_chart
from tests.support.kubernetes_schemas import concretize, validate_core
from tests.support.linting import lint_template
from tests.support.network_policy import Endpoint, allowed
from tests.support.template_helpers import manifest_objects, resources_of_type

_ZERO = {
    "llm-serving:reference-moe:max-replicas": "2",
    "llm-serving:reference-moe:scale-to-zero": "true",
}
_SCHEDULE = WakeSchedule(start="0 6 * * 1-5", end="0 20 * * 1-5", timezone="UTC")
_PREFIX = "service.beta.kubernetes.io/aws-load-balancer"


@pytest.fixture(scope="module")
def zero_app():
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    app = new_app(**_ZERO)
    stacks = add_reference_stacks(app)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # a finding fails synth
    return app.synth().get_stack_by_name("ReferenceMoeHyperPod").template, stacks[1]


@pytest.fixture(scope="module")
def zero_template(zero_app) -> dict:
    return zero_app[0]


def _scaled_object(template: dict) -> dict:
    (scaled,) = [
        o
        for o in manifest_objects(template, "ReplicaAutoscalingScaledObject")
        if o["kind"] == "ScaledObject"
    ]
    return scaled


def _wake_objects(template: dict) -> dict[tuple[str, str], dict]:
    return {
        (o["kind"], o["metadata"]["name"]): o
        for o in manifest_objects(template, "ReplicaAutoscalingWakeProxy")
    }


def test_the_last_replica_may_go_and_a_connection_wakes_it(zero_template):
    spec = _scaled_object(zero_template)["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 2)
    queue, wake, running = spec["triggers"]
    assert queue["type"] == "prometheus" and running["type"] == "prometheus"
    meta = wake["metadata"]
    assert wake["type"] == "aws-cloudwatch"
    assert (meta["namespace"], meta["metricName"], meta["dimensionName"]) == (
        "AWS/NetworkELB",
        "NewFlowCount",
        "LoadBalancer",
    )
    # net/k8s-<ns8>-<name8>-<hash>/<id>, hash and id read from the hostname at deploy time
    assert meta["dimensionValue"].startswith("net/k8s-inferenc-referenc-")
    assert meta["activationTargetMetricValue"] == "0"
    assert wake["authenticationRef"] == queue["authenticationRef"]
    (service,) = manifest_objects(zero_template, "ServingService")
    annotations = service["metadata"]["annotations"]
    # The NLB keeps the controller's own name (a name set later would be ignored).
    assert f"{_PREFIX}-name" not in annotations
    assert annotations[f"{_PREFIX}-healthcheck-healthy-threshold"] == str(WAKE_HEALTHY_THRESHOLD)


def test_the_load_balancer_targets_the_always_on_wake_proxy(zero_template):
    """At zero replicas the NLB keeps registered, healthy targets: the proxy's pods, checked
    over TCP on their health port; the proxy passes TCP to a ClusterIP on the leaders."""
    (service,) = manifest_objects(zero_template, "ServingService")
    (lws,) = manifest_objects(zero_template, "ServingLeaderWorkerSet")
    objects = _wake_objects(zero_template)
    deployment = objects[("Deployment", "reference-moe-nvfp4-wake")]
    proxy_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] == proxy_labels
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [WAKE_PROXY_PORT]
    annotations = service["metadata"]["annotations"]
    assert annotations[f"{_PREFIX}-healthcheck-protocol"] == "TCP"
    assert annotations[f"{_PREFIX}-healthcheck-port"] == str(WAKE_PROXY_HEALTH_PORT)
    assert f"{_PREFIX}-healthcheck-path" not in annotations
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["nodeSelector"] == {ROLE_LABEL: SYSTEM_NODE_ROLE}
    assert pod["automountServiceAccountToken"] is False
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template.get("leaderTemplate") or template["workerTemplate"]
    leaders = objects[("Service", "reference-moe-nvfp4-leaders")]
    assert leaders["spec"]["type"] == "ClusterIP"
    assert all(leader["metadata"]["labels"][k] == v for k, v in leaders["spec"]["selector"].items())
    assert [p["port"] for p in leaders["spec"]["ports"]] == [VLLM_API_PORT]
    assert ("PodDisruptionBudget", "reference-moe-nvfp4-wake") in objects
    for obj in objects.values():
        validate_core(obj)


def test_the_leaders_accept_the_proxy_and_the_proxy_the_vpc(zero_template):
    policies = [
        o
        for o in [
            *manifest_objects(zero_template, "ServingNetworkPolicies"),
            *_wake_objects(zero_template).values(),
        ]
        if o["kind"] == "NetworkPolicy"
    ]
    # The VPC's CIDR is a deploy-time value: the reference VPC's, for the semantics.
    policies = json.loads(json.dumps(policies).replace('"deploy-time-value"', '"10.0.0.0/16"'))
    (lws,) = manifest_objects(zero_template, "ServingLeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    leader_labels = (template.get("leaderTemplate") or template["workerTemplate"])["metadata"][
        "labels"
    ]
    proxy_labels = _wake_objects(zero_template)[("Deployment", "reference-moe-nvfp4-wake")]["spec"][
        "template"
    ]["metadata"]["labels"]
    namespace = lws["metadata"]["namespace"]
    leader = Endpoint("10.0.5.5", leader_labels, namespace)
    # A pod address outside the VPC's CIDR (custom networking): only the pod selector admits it.
    proxy = Endpoint("100.64.0.6", proxy_labels, namespace)
    outside = Endpoint("192.0.2.1")
    assert allowed(policies, proxy, leader, VLLM_API_PORT)
    assert not allowed(policies, proxy, leader, 22)
    assert not allowed(policies, proxy, Endpoint("169.254.169.254"), 80)
    # EKS's policy controller admits the ClusterIP only for an egress selector equal to the
    # Service's selector, on the pods' port (aws/amazon-network-policy-controller-k8s #194).
    leaders_service = _wake_objects(zero_template)[("Service", "reference-moe-nvfp4-leaders")]
    (proxy_policy,) = [p for p in policies if p["metadata"]["name"] == "reference-moe-nvfp4-wake"]
    assert {
        "to": [{"podSelector": {"matchLabels": leaders_service["spec"]["selector"]}}]
    }.items() <= (proxy_policy["spec"]["egress"][0].items())
    assert leaders_service["spec"]["ports"][0]["targetPort"] == VLLM_API_PORT
    vpc = Endpoint("10.0.9.9")
    assert allowed(policies, vpc, proxy, WAKE_PROXY_PORT)
    assert allowed(policies, vpc, proxy, WAKE_PROXY_HEALTH_PORT)
    assert not allowed(policies, outside, proxy, WAKE_PROXY_PORT)


def test_the_controller_s_default_name_is_what_its_source_builds():
    """kubernetes-sigs/aws-load-balancer-controller ``buildLoadBalancerName``:
    ``k8s-%.8s-%.8s-%.10s`` of the namespace's and name's alphanumerics."""
    assert default_load_balancer_prefix("inference", "reference-moe-nvfp4-api") == (
        "k8s-inferenc-referenc-"
    )
    assert default_load_balancer_prefix("a-b", "x.y-z") == "k8s-ab-xyz-"


def test_the_dimension_is_cut_from_the_load_balancer_hostname(zero_template):
    """The ScaledObject's manifest splits the Service's hostname after the name's known prefix,
    then on ``.`` and ``-`` (hash, id)."""
    text = json.dumps(
        [
            v
            for k, v in resources_of_type(
                zero_template, "Custom::AWSCDK-EKS-KubernetesResource"
            ).items()
            if k.startswith("ReplicaAutoscalingScaledObject")
        ]
    )
    assert '"k8s-inferenc-referenc-"' in text and '"Fn::Split": [".", ' in text
    assert '"Fn::Split": ["-", ' in text
    assert "ServingLoadBalancerHostname" in text


def test_the_first_request_wait_is_the_wake_and_idle_covers_it(zero_app):
    template, stack = zero_app
    auto_scaling = stack.auto_scaling
    wake = auto_scaling.wake
    assert wake.detection == 60 + 60 + 30  # ELB's period, its landing (ASSUMED), KEDA's poll
    assert wake.weights_and_engine >= stack.service.cold_start.total_seconds
    (output,) = [v for k, v in template["Outputs"].items() if "FirstRequestWaitSeconds" in k]
    assert output["Value"] == str(wake.total_seconds)
    assert "Retry budget" in output["Description"]
    assert auto_scaling.first_request_wait.to_seconds() == wake.total_seconds
    # The reference wakes in under the default bound of an hour (nodes dominate).
    assert 1800 < wake.total_seconds <= 3600
    assert _scaled_object(template)["spec"]["cooldownPeriod"] == wake.total_seconds


def test_keda_may_read_cloudwatch_and_nothing_more(zero_template):
    statements = [
        s
        for p in resources_of_type(zero_template, "AWS::IAM::ManagedPolicy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "cloudwatch" in json.dumps(s["Action"])
    ]
    assert statements == [
        {"Action": "cloudwatch:GetMetricData", "Effect": "Allow", "Resource": "*"}
    ]


def test_the_wake_triggers_match_keda_s_crd(zero_template, shared_dir):
    chart = published_chart(shared_dir, KEDA_CHART)
    schema = chart_crd_schema(chart, "ScaledObject", KEDA_API_VERSION.split("/")[1])
    scaled = _scaled_object(zero_template)
    jsonschema.validate(concretize(scaled), schema)
    broken = json.loads(json.dumps(scaled))
    broken["spec"]["triggers"][1]["metadata"]["metricStatPeriod"] = 60  # a string map
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), schema)


def test_the_wake_trigger_keeps_keda_s_own_parsing_rules(zero_template):
    """kedacore/keda ``pkg/scalers/aws_cloudwatch_scaler.go``: ``targetMetricValue`` and
    ``minMetricValue`` are required, ``metricStatPeriod`` is 1, 5, 10, 30 or a multiple of 60,
    ``metricCollectionTime`` a multiple of it, ``metricStat`` a CloudWatch statistic."""
    import botocore.session

    statistics = (
        botocore.session.get_session().get_service_model("cloudwatch").shape_for("Statistic").enum
    )
    for trigger in _scaled_object(zero_template)["spec"]["triggers"]:
        if trigger["type"] != "aws-cloudwatch":
            continue
        meta = trigger["metadata"]
        period, window = int(meta["metricStatPeriod"]), int(meta["metricCollectionTime"])
        assert period in (1, 5, 10, 30) or period % 60 == 0
        assert window > 0 and window % period == 0
        assert meta["metricStat"] in statistics
        assert float(meta["targetMetricValue"]) > float(meta["activationTargetMetricValue"])
        float(meta["minMetricValue"])


def test_the_healthy_threshold_is_one_the_elb_api_takes():
    import botocore.session

    shape = (
        botocore.session.get_session()
        .get_service_model("elbv2")
        .shape_for("HealthCheckThresholdCount")
    )
    assert shape.metadata["min"] <= WAKE_HEALTHY_THRESHOLD <= shape.metadata["max"]
    assert WAKE_HEALTHY_THRESHOLD == shape.metadata["min"]  # the fastest the NLB allows


def test_zero_template_passes_cfn_lint(zero_template):
    matches = lint_template(zero_template)
    assert not matches, "\n".join(map(str, matches))


def _scaling(*, lbc: bool = True, fixed_nodes: bool = False, **props):
    """A VllmReplicaAutoScaling on a p5en group that node autoscaling grows from 0 (or, with
    ``fixed_nodes``, on 2 fixed nodes)."""
    from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoScaling
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, model_store, small_cluster

    routing = props.pop("routing", None)
    stack = new_stack("ZeroScaling")
    if fixed_nodes:
        cluster, addons, store = small_cluster(stack, gpu_count=2)
    else:
        cluster = _growing_cluster(stack)
        addons = HyperPodServingAddons(
            stack, "Addons", cluster=cluster, load_balancer_controller=lbc
        )
        store = model_store(stack, cluster)
    service = deepseek_service(stack, cluster, addons, store, routing=routing)
    observability = VllmObservability(stack, "Obs", service=service)
    return VllmReplicaAutoScaling(
        stack, "Scale", service=service, observability=observability, **props
    )


def _growing_cluster(stack):
    from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
    from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
    from cdk_llm_serving.hyperpod.node_autoscaling import NodeAutoScaling

    return HyperPodEksCluster(
        stack,
        "HyperPod",
        instance_groups=[
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", 0, max_count=3),
        ],
        kubernetes_version="1.35",
        node_auto_scaling=NodeAutoScaling(),
    )


def _refused(**props) -> dict[str, str]:
    with pytest.raises(ConfigurationError) as caught:
        _scaling(**props)
    found: dict[str, str] = {}
    for problem in caught.value.problems:
        found[problem.property] = found.get(problem.property, "") + problem.allowed + "\n"
    return found


def test_a_wake_schedule_still_wakes_on_keda_s_cron_without_a_proxy():
    scaling = _scaling(min_replicas=0, max_replicas=2, scale_to_zero=ScaleToZero(wake=_SCHEDULE))
    (_, scaled) = scaling.keda_objects()
    assert scaled["spec"]["triggers"][1] == {
        "type": "cron",
        "metadata": {
            "timezone": "UTC",
            "start": _SCHEDULE.start,
            "end": _SCHEDULE.end,
            "desiredReplicas": "1",
        },
    }
    assert scaling.wake is not None and scaling.wake.detection == 30  # KEDA's poll alone
    assert scaling.wake_proxy is None and scaling.wake_policy is None
    service = scaling.service.service
    assert service["spec"]["selector"] == scaling.service.workload.leader_labels()
    annotations = service["metadata"]["annotations"]
    assert annotations[f"{_PREFIX}-healthcheck-healthy-threshold"] == str(WAKE_HEALTHY_THRESHOLD)


def test_min_zero_without_the_opt_in_is_refused():
    problems = _refused(min_replicas=0, max_replicas=2)
    assert set(problems) == {"min_replicas"}
    assert "scale_to_zero=ScaleToZero(wake=...)" in problems["min_replicas"]


def test_scale_to_zero_without_a_wake_is_refused():
    """at zero nothing scraped reports, so the opt-in needs a wake."""
    problems = _refused(min_replicas=0, max_replicas=2, scale_to_zero=ScaleToZero())
    assert set(problems) == {"scale_to_zero.wake"}
    assert "WakeOnConnect() or WakeSchedule" in problems["scale_to_zero.wake"]


def test_wake_on_connect_without_the_load_balancer_controller_is_refused():
    problems = _refused(
        lbc=False, min_replicas=0, max_replicas=2, scale_to_zero=ScaleToZero(wake=WakeOnConnect())
    )
    assert set(problems) == {"scale_to_zero.wake"}
    assert "AWS Load Balancer Controller" in problems["scale_to_zero.wake"]


def test_wake_on_connect_with_prefix_routing_is_refused():
    """The router is already the NLB's always-on target: refused, with the way out named."""
    problems = _refused(
        routing=True,
        min_replicas=0,
        max_replicas=2,
        scale_to_zero=ScaleToZero(wake=WakeOnConnect()),
    )
    assert set(problems) == {"scale_to_zero.wake"}
    assert "cannot be combined with routing" in problems["scale_to_zero.wake"]
    assert "WakeSchedule" in problems["scale_to_zero.wake"]


def test_a_wake_schedule_keda_would_refuse_is_refused():
    """KEDA's cron scaler: 5-field cron, start and end apart, an IANA time zone."""
    problems = _refused(
        min_replicas=0,
        max_replicas=2,
        scale_to_zero=ScaleToZero(
            wake=WakeSchedule(start="0 6 * *", end="0 6 * *", timezone="Mars/Olympus")
        ),
    )
    assert {
        "scale_to_zero.wake.start",
        "scale_to_zero.wake.end",
        "scale_to_zero.wake.timezone",
    } <= set(problems)
    assert "5 fields" in problems["scale_to_zero.wake.start"]
    assert "not the same as start" in problems["scale_to_zero.wake.end"]


def test_scale_to_zero_on_fixed_nodes_with_a_replica_and_a_short_bound_is_refused_at_once():
    problems = _refused(
        fixed_nodes=True,
        min_replicas=1,
        max_replicas=2,
        scale_to_zero=ScaleToZero(wake=_SCHEDULE, max_first_request_wait=Duration.minutes(5)),
    )
    assert set(problems) == {"scale_to_zero", "scale_to_zero.max_first_request_wait"}
    assert "needs min_replicas=0" in problems["scale_to_zero"]
    assert "shrink to 0 nodes" in problems["scale_to_zero"]
    assert "must cover the wake from zero" in problems["scale_to_zero.max_first_request_wait"]


def test_the_p5en_variant_names_its_group_after_the_gpu_it_holds():
    """Review finding M6: the p5en variant's group held H200s but was named gpu-b200."""
    from stacks.hyperpod_reference_stack import HyperPodReferenceStack

    names = {}
    for instance_type in ("ml.p6-b200.48xlarge", "ml.p5en.48xlarge"):
        app = new_app(**{"llm-serving:reference-moe:gpu-instance-type": instance_type})
        (stack,) = [s for s in add_reference_stacks(app) if isinstance(s, HyperPodReferenceStack)]
        names[instance_type] = [g.name for g in stack.cluster.gpu_groups]
    assert names == {"ml.p6-b200.48xlarge": ["gpu-b200"], "ml.p5en.48xlarge": ["gpu-h200"]}


# -- scaling panels and the pending-replica alarm -------------------------------------------


def _rules(template: dict) -> dict[str, str]:
    return {
        key: str(value["Properties"]["Data"])
        for key, value in resources_of_type(template, "AWS::APS::RuleGroupsNamespace").items()
    }


def test_the_dashboard_draws_serving_asked_for_and_pending_replicas(zero_template):
    from cdk_llm_serving.hyperpod.node_panels import (
        DESIRED_REPLICAS_RULE,
        PENDING_ALERT,
        PENDING_REPLICAS_RULE,
        SERVING_REPLICAS_RULE,
    )
    from tests.support.template_helpers import flatten

    body = "".join(
        flatten(d["Properties"]["DashboardBody"])
        for d in resources_of_type(zero_template, "AWS::CloudWatch::Dashboard").values()
    )
    for rule in (
        SERVING_REPLICAS_RULE,
        DESIRED_REPLICAS_RULE,
        PENDING_REPLICAS_RULE,
        PENDING_ALERT,
    ):
        assert rule in body, rule
    (scaling,) = [text for key, text in _rules(zero_template).items() if "Scaling" in key]
    assert f"alert: {PENDING_ALERT}" in scaling


@pytest.mark.skipif(
    __import__("shutil").which("promtool") is None, reason="no promtool on PATH (make promtool)"
)
def test_promtool_fires_the_pending_alarm_only_after_a_scale_out_s_time(zero_app, tmp_path):
    """One replica serves, 20 requests wait (8 per replica): KEDA asks for 2 (the maximum), one
    pends. The alarm waits a scale-out's time (the reference: ~53 min) before it fires."""
    import subprocess

    import yaml

    from cdk_llm_serving.hyperpod.node_panels import (
        PENDING_ALERT,
        PENDING_REPLICAS_RULE,
        scale_out_seconds,
    )

    template, stack = zero_app
    files = []
    for index, text in enumerate(_rules(template).values()):
        (tmp_path / f"rules{index}.yaml").write_text(text)
        files.append(f"rules{index}.yaml")
    checked = subprocess.run(
        ["promtool", "check", "rules", *files], capture_output=True, text=True, cwd=tmp_path
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    minutes = -(-scale_out_seconds(stack.auto_scaling) // 60)
    assert 30 < minutes < 60
    tests = {
        "rule_files": files,
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'up{job="vllm",pod="leader-0"}', "values": "1x120"},
                    {"series": 'vllm:num_requests_waiting{pod="leader-0"}', "values": "20x120"},
                ],
                "promql_expr_test": [
                    {
                        "expr": PENDING_REPLICAS_RULE,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": PENDING_REPLICAS_RULE, "value": 1}],
                    }
                ],
                "alert_rule_test": [
                    {"eval_time": f"{minutes - 5}m", "alertname": PENDING_ALERT, "exp_alerts": []},
                    {
                        "eval_time": f"{minutes + 5}m",
                        "alertname": PENDING_ALERT,
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "service": "reference-moe-nvfp4",
                                },
                                "exp_annotations": {
                                    "summary": next(
                                        r["annotations"]["summary"]
                                        for r in yaml.safe_load(
                                            [
                                                t
                                                for k, t in _rules(template).items()
                                                if "Scaling" in k
                                            ][0]
                                        )["groups"][0]["rules"]
                                        if r.get("alert") == PENDING_ALERT
                                    )
                                },
                            }
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- nodes per group, scale events and the wake alarm ---------------------------------------

needs_promtool = pytest.mark.skipif(
    __import__("shutil").which("promtool") is None, reason="no promtool on PATH (make promtool)"
)


def _scrape_jobs(template: dict) -> dict[str, dict]:
    import base64

    import yaml

    (scraper,) = resources_of_type(template, "AWS::APS::Scraper").values()
    blob = scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"]
    document = yaml.safe_load(base64.b64decode(blob))
    return {job["job_name"]: job for job in document["scrape_configs"]}


def test_the_scraper_counts_the_group_s_nodes_through_the_api_server(zero_template):
    """AWS's default managed-collector ``cadvisor`` job: role node, the API server's address,
    the node's proxy path, the collector's token; kept to the service's group, labelled by it,
    the kubelet's own series dropped (``up`` stays)."""
    from cdk_llm_serving.hyperpod.constants import GROUP_LABEL, prometheus_node_label

    job = _scrape_jobs(zero_template)["kubelet"]
    assert job["kubernetes_sd_configs"] == [{"role": "node"}]
    relabel = job["relabel_configs"]
    group = prometheus_node_label(GROUP_LABEL)
    assert group == "__meta_kubernetes_node_label_cdk_llm_serving_group"
    assert {"source_labels": [group], "regex": "gpu-b200", "action": "keep"} in relabel
    assert {"source_labels": [group], "target_label": "group"} in relabel
    assert {"target_label": "__address__", "replacement": "kubernetes.default.svc:443"} in relabel
    (path,) = [r for r in relabel if r.get("target_label") == "__metrics_path__"]
    assert path["replacement"] == "/api/v1/nodes/$1/proxy/metrics"
    assert job["authorization"]["credentials_file"].endswith("serviceaccount/token")
    assert job["metric_relabel_configs"] == [
        {"source_labels": ["__name__"], "regex": ".+", "action": "drop"}
    ]


def test_the_scraper_s_rbac_may_read_through_the_node_proxy(zero_template):
    """The kubelet job reads ``/api/v1/nodes/<node>/proxy/...``: ``nodes/proxy`` get."""
    rules = [
        rule
        for o in manifest_objects(zero_template, "ServingAddonsScraperRbac")
        if o["kind"] == "ClusterRole"
        for rule in o["rules"]
    ]
    assert any("nodes/proxy" in r.get("resources", []) and "get" in r["verbs"] for r in rules)


def test_the_keda_operator_s_metrics_port_is_what_the_scrape_job_keeps(
    zero_template, helm_binary, shared_dir
):
    """The KEDA chart as the stack installs it (``prometheus.operator.enabled``), rendered by
    helm: the operator's pods carry the ``app`` label the job keeps and a ``metrics`` port,
    8080, KEDA's documented one; the job reads the ScaledObject's namespace."""
    from tests.support.helm import render_template_charts

    job = _scrape_jobs(zero_template)["keda-operator"]
    keep = {
        r["source_labels"][0]: r["regex"] for r in job["relabel_configs"] if r["action"] == "keep"
    }
    charts = render_template_charts(zero_template, helm_binary, shared_dir / "charts")
    (operator,) = [
        o
        for objects in charts.values()
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "keda-operator"
    ]
    pod = operator["spec"]["template"]
    assert pod["metadata"]["labels"]["app"] == keep["__meta_kubernetes_pod_label_app"]
    ports = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"]}
    assert ports[keep["__meta_kubernetes_pod_container_port_name"]] == 8080
    args = pod["spec"]["containers"][0]["args"]
    assert "--enable-prometheus-metrics=true" in args
    assert job["kubernetes_sd_configs"][0]["namespaces"]["names"] == [
        operator["metadata"]["namespace"]
    ]


def _promtool_test(template: dict, tmp_path, tests: list[dict]) -> None:
    import subprocess

    import yaml

    files = []
    for index, text in enumerate(_rules(template).values()):
        (tmp_path / f"rules{index}.yaml").write_text(text)
        files.append(f"rules{index}.yaml")
    document = {"rule_files": files, "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(document))
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_counts_the_group_s_nodes_and_its_scale_events(zero_template, tmp_path):
    """Two nodes come at 10 min (a wake), one leaves at 40, the other at 50 (scale-in to 0):
    the count is 2, 1, then 0 with the group's name: 3 changes in the hour; the leader served
    from 20 to 40 min: 2 changes of the serving replicas."""
    from cdk_llm_serving.hyperpod.node_panels import (
        GROUP_NODES_RULE,
        NODE_CHANGES_RULE,
        REPLICA_CHANGES_RULE,
    )

    up = 'up{job="kubelet",group="gpu-b200",node="%s"}'
    _promtool_test(
        zero_template,
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    # a target that leaves gets a staleness marker at the next scrape
                    {"series": up % "a", "values": "_x10 1x30 stale"},
                    {"series": up % "b", "values": "_x10 1x40 stale"},
                    {"series": 'up{job="vllm",pod="leader-0"}', "values": "_x20 1x20 stale"},
                ],
                "promql_expr_test": [
                    {
                        "expr": GROUP_NODES_RULE,
                        "eval_time": t,
                        "exp_samples": [
                            {"labels": f'{GROUP_NODES_RULE}{{group="gpu-b200"}}', "value": v}
                        ],
                    }
                    for t, v in (("5m", 0), ("20m", 2), ("45m", 1), ("58m", 0))
                ]
                + [
                    {
                        "expr": NODE_CHANGES_RULE,
                        "eval_time": "58m",
                        "exp_samples": [
                            {"labels": f'{NODE_CHANGES_RULE}{{group="gpu-b200"}}', "value": 3}
                        ],
                    },
                    {
                        "expr": REPLICA_CHANGES_RULE,
                        "eval_time": "58m",
                        "exp_samples": [{"labels": REPLICA_CHANGES_RULE, "value": 2}],
                    },
                ],
            }
        ],
    )


@needs_promtool
def test_promtool_fires_the_wake_alarm_only_for_demand_without_a_replica(zero_app, tmp_path):
    """KEDA's cron trigger active (the window opened) and no leader answering for longer than
    the wake (the reference: ~53 min) fires it; a replica that serves in time, or no demand,
    does not."""
    from cdk_llm_serving.hyperpod.node_panels import WAKE_ALERT

    template, stack = zero_app
    minutes = -(-stack.auto_scaling.wake.total_seconds // 60)
    assert 45 < minutes < 60
    # the label names of kedacore/keda pkg/metricscollector/prommetrics.go; scaler and metric
    # values are illustrative (the rule reads namespace and scaledObject only)
    active = (
        'keda_scaler_active{job="keda-operator",namespace="inference",'
        'scaledObject="reference-moe-nvfp4",scaler="cronScaler",triggerIndex="1",'
        'metric="s1-cron",type="scaledobject"}'
    )
    labels = {"severity": "warning", "service": "reference-moe-nvfp4"}

    def case(series: list[dict], fires: bool) -> dict:
        return {
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": f"{minutes - 5}m", "alertname": WAKE_ALERT, "exp_alerts": []},
                {
                    "eval_time": f"{minutes + 5}m",
                    "alertname": WAKE_ALERT,
                    "exp_alerts": [{"exp_labels": labels}] if fires else [],
                },
            ],
        }

    (rules,) = [text for key, text in _rules(template).items() if "Scaling" in key]
    summary = next(
        r["annotations"]["summary"]
        for r in __import__("yaml").safe_load(rules)["groups"][0]["rules"]
        if r.get("alert") == WAKE_ALERT
    )
    woken = case([{"series": active, "values": "1x120"}], fires=True)
    woken["alert_rule_test"][1]["exp_alerts"][0]["exp_annotations"] = {"summary": summary}
    _promtool_test(
        template,
        tmp_path,
        [
            woken,
            case(
                [
                    {"series": active, "values": "1x120"},
                    {"series": 'up{job="vllm",pod="leader-0"}', "values": "_x40 1x80"},
                ],
                fires=False,
            ),
            case([{"series": active, "values": "0x120"}], fires=False),
        ],
    )


def test_a_running_request_keeps_the_last_replica(zero_template):
    """A client sending request after request over kept-alive connections makes no new flow
    and queues nothing: the running-requests trigger keeps the service active (KEDA:
    active while the value is above ``activationThreshold``), and asks for one replica at
    most (``ceil(running / threshold)``), for either wake."""
    triggers = _scaled_object(zero_template)["spec"]["triggers"]
    (running,) = [
        t
        for t in triggers
        if t["type"] == "prometheus" and t["metadata"]["query"] != "vllm:requests_waiting"
    ]
    meta = running["metadata"]
    assert meta["query"] == REQUESTS_RUNNING_RULE and meta["activationThreshold"] == "0"
    most_running = 4096 * 2  # an illustrative busy fleet of 2 replicas
    assert math.ceil(most_running / float(meta["threshold"])) == 1
    (queue,) = [t for t in triggers if t["metadata"].get("query") == "vllm:requests_waiting"]
    assert {
        k: v for k, v in meta.items() if k not in ("query", "threshold", "activationThreshold")
    } == {k: v for k, v in queue["metadata"].items() if k not in ("query", "threshold")}
    rules = json.dumps(resources_of_type(zero_template, "AWS::APS::RuleGroupsNamespace"))
    assert f"record: {REQUESTS_RUNNING_RULE}" in rules  # the workspace records it
    scheduled = _scaling(min_replicas=0, max_replicas=2, scale_to_zero=ScaleToZero(wake=_SCHEDULE))
    (_, scaled) = scheduled.keda_objects()
    assert [t["type"] for t in scaled["spec"]["triggers"]] == ["prometheus", "cron", "prometheus"]


def test_the_proxy_outlasts_the_longest_request_within_the_nlb_s_idle_timeout(zero_template):
    """nginx closes a connection silent for ``proxy_timeout``: a non-streamed request at
    ``longest_request`` (300 s, the default) must not be cut by it, and the NLB's TCP idle
    timeout (350 s) must not cut it first."""
    (config_map,) = [o for o in _wake_objects(zero_template).values() if o["kind"] == "ConfigMap"]
    (config,) = config_map["data"].values()
    seconds = int(re.search(r"proxy_timeout (\d+)s;", config).group(1))
    assert 300 < seconds < 350
