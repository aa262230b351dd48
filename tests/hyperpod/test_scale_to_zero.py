"""Scale to zero (#30): an explicit opt-in, woken by the load balancer, with a bounded wake."""

from __future__ import annotations

import json

import jsonschema
import pytest
from aws_cdk import Duration

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.constants import KEDA_API_VERSION, KEDA_CHART
from cdk_llm_serving.hyperpod.replica_autoscaling import (
    WAKE_HEALTHY_THRESHOLD,
    WAKE_METRICS,
    ScaleToZero,
)
from stacks.reference_app import add_reference_stacks
from tests.support.app import new_app
from tests.support.hyperpod import chart_crd_schema, published_chart
from tests.support.kubernetes_schemas import concretize
from tests.support.linting import lint_template
from tests.support.template_helpers import manifest_objects, resources_of_type

_ZERO = {
    "llm-serving:reference-moe:max-replicas": "2",
    "llm-serving:reference-moe:scale-to-zero": "true",
}


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


def test_the_last_replica_may_go_and_the_load_balancer_wakes_it(zero_template):
    spec = _scaled_object(zero_template)["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 2)
    queue, *wake = spec["triggers"]
    assert queue["type"] == "prometheus"
    assert [t["metadata"]["metricName"] for t in wake] == list(WAKE_METRICS)
    (service,) = manifest_objects(zero_template, "ServingService")
    annotations = service["metadata"]["annotations"]
    # The NLB keeps the controller's own name (a name set later would be ignored).
    assert "service.beta.kubernetes.io/aws-load-balancer-name" not in annotations
    for trigger in wake:
        meta = trigger["metadata"]
        assert trigger["type"] == "aws-cloudwatch"
        assert (meta["namespace"], meta["dimensionName"]) == ("AWS/NetworkELB", "LoadBalancer")
        # net/k8s-<ns8>-<name8>-<hash>/<id>, hash and id read from the hostname at deploy time
        assert meta["dimensionValue"].startswith("net/k8s-inferenc-referenc-")
        assert meta["activationTargetMetricValue"] == "0"
        assert trigger["authenticationRef"] == queue["authenticationRef"]
    threshold = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold"
    assert annotations[threshold] == str(WAKE_HEALTHY_THRESHOLD)


def test_the_controller_s_default_name_is_what_its_source_builds():
    """kubernetes-sigs/aws-load-balancer-controller ``buildLoadBalancerName``:
    ``k8s-%.8s-%.8s-%.10s`` of the namespace's and name's alphanumerics."""
    from cdk_llm_serving.hyperpod.replica_autoscaling import default_load_balancer_prefix

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
    autoscaling = stack.autoscaling
    wake = autoscaling.wake
    assert wake.weights_and_engine >= stack.service.cold_start.total_seconds
    (output,) = [v for k, v in template["Outputs"].items() if "FirstRequestWaitSeconds" in k]
    assert output["Value"] == str(wake.total_seconds)
    assert autoscaling.first_request_wait.to_seconds() == wake.total_seconds
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
    broken["spec"]["triggers"][1]["metadata"]["activationTargetMetricValue"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), schema)


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


def _problems(**props) -> dict[str, str]:
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoscaling
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, small_cluster

    stack = new_stack("Zero")
    cluster, addons, store = small_cluster(stack, gpu_count=2)
    service = deepseek_service(stack, cluster, addons, store)
    observability = VllmObservability(stack, "Obs", service=service)
    with pytest.raises(ConfigurationError) as caught:
        VllmReplicaAutoscaling(
            stack, "Scale", service=service, observability=observability, **props
        )
    found: dict[str, str] = {}
    for problem in caught.value.problems:
        found[problem.property] = found.get(problem.property, "") + problem.allowed + "\n"
    return found


def test_min_zero_without_the_opt_in_is_refused():
    problems = _problems(min_replicas=0, max_replicas=2)
    assert set(problems) == {"min_replicas"}
    assert "scale_to_zero=ScaleToZero()" in problems["min_replicas"]


def test_scale_to_zero_on_fixed_nodes_with_a_replica_and_a_short_bound_is_refused_at_once():
    problems = _problems(
        min_replicas=1,
        max_replicas=2,
        scale_to_zero=ScaleToZero(max_first_request_wait=Duration.minutes(5)),
    )
    assert set(problems) == {"scale_to_zero", "scale_to_zero.max_first_request_wait"}
    assert "needs min_replicas=0" in problems["scale_to_zero"]
    assert "shrink to 0 nodes" in problems["scale_to_zero"]
    assert "must cover the wake from zero" in problems["scale_to_zero.max_first_request_wait"]


def test_scale_to_zero_without_the_load_balancer_controller_has_no_wake_signal():
    from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
    from cdk_llm_serving.hyperpod.cluster import HyperPodEksCluster
    from cdk_llm_serving.hyperpod.instance_group import HyperPodInstanceGroup
    from cdk_llm_serving.hyperpod.node_autoscaling import NodeAutoscaling
    from cdk_llm_serving.hyperpod.observability import VllmObservability
    from cdk_llm_serving.hyperpod.replica_autoscaling import VllmReplicaAutoscaling
    from tests.support.builders import new_stack
    from tests.support.hyperpod import deepseek_service, model_store

    stack = new_stack("ZeroNoLbc")
    cluster = HyperPodEksCluster(
        stack,
        "HyperPod",
        instance_groups=[
            HyperPodInstanceGroup.system(),
            HyperPodInstanceGroup.gpu("gpu", "ml.p5en.48xlarge", 0, max_count=3),
        ],
        kubernetes_version="1.35",
        node_autoscaling=NodeAutoscaling(),
    )
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster, load_balancer_controller=False)
    service = deepseek_service(stack, cluster, addons, model_store(stack, cluster))
    observability = VllmObservability(stack, "Obs", service=service)
    with pytest.raises(ConfigurationError) as caught:
        VllmReplicaAutoscaling(
            stack,
            "Scale",
            service=service,
            observability=observability,
            min_replicas=0,
            max_replicas=2,
            scale_to_zero=ScaleToZero(),
        )
    (problem,) = caught.value.problems
    assert problem.property == "scale_to_zero" and "Load Balancer Controller" in problem.allowed


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
    minutes = -(-scale_out_seconds(stack.autoscaling) // 60)
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
                                    "summary": yaml.safe_load(
                                        [t for k, t in _rules(template).items() if "Scaling" in k][
                                            0
                                        ]
                                    )["groups"][0]["rules"][-1]["annotations"]["summary"]
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


def test_the_wake_triggers_keep_keda_s_own_parsing_rules(zero_template):
    """kedacore/keda ``pkg/scalers/aws_cloudwatch_scaler.go``: ``targetMetricValue`` and
    ``minMetricValue`` are required, ``metricStatPeriod`` is 1, 5, 10, 30 or a multiple of 60,
    ``metricCollectionTime`` a multiple of it, ``metricStat`` a CloudWatch statistic."""
    import botocore.session

    statistics = (
        botocore.session.get_session().get_service_model("cloudwatch").shape_for("Statistic").enum
    )
    for trigger in _scaled_object(zero_template)["spec"]["triggers"][1:]:
        meta = trigger["metadata"]
        period, window = int(meta["metricStatPeriod"]), int(meta["metricCollectionTime"])
        assert period in (1, 5, 10, 30) or period % 60 == 0
        assert window > 0 and window % period == 0
        assert meta["metricStat"] in statistics
        assert float(meta["targetMetricValue"]) > float(meta["activationTargetMetricValue"])
        float(meta["minMetricValue"])
