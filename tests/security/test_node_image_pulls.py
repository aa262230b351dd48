"""The HyperPod node role pulls from named ECR repositories only.

Before, ``ecr:BatchGetImage`` and the layer actions were on ``*``: any repository of any
account that shares with it. Read from the synthesized node policy; the registry table is
checked against the charts' own values (``../shared/charts``).
"""

from __future__ import annotations

import json
import re

from aws_cdk.region_info import RegionInfo

from cdk_llm_serving.hyperpod._facts import vllm_image_facts
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.chart_source import HelmChartSource
from cdk_llm_serving.hyperpod.node_image_pulls import (
    PULL_ACTIONS,
    _registries,
    addon_registry_arn,
    efa_device_plugin_repository_arn,
    inference_operator_registry_arn,
    load_balancer_controller_repository_arn,
)
from stacks import add_reference_stacks
from tests.support import yaml_files
from tests.support.app import new_app
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import deepseek_service, hyperpod_cluster, small_cluster
from tests.support.reference_variants import VARIANTS
from tests.support.template_helpers import actions_of, resources_of_type

_PULLS = set(PULL_ACTIONS)


def _node_pulls(template: dict) -> tuple[set[str], set[str]]:
    """(repositories the pull actions name, resources of ecr:GetAuthorizationToken)."""
    (policy,) = [
        p
        for key, p in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
        if key.startswith("HyperPodExecutionRolePolicy")
    ]
    pulls: set[str] = set()
    token: set[str] = set()
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        listed = statement["Resource"]
        listed = listed if isinstance(listed, list) else [listed]
        resources = {r if isinstance(r, str) else json.dumps(r) for r in listed}
        actions = set(actions_of(statement))
        if actions & _PULLS:
            assert actions & _PULLS == _PULLS, statement
            pulls |= resources
        if "ecr:GetAuthorizationToken" in actions:
            token |= resources
    return pulls, token


def test_the_reference_nodes_pull_from_exactly_the_repositories_they_use(reference_templates):
    """The Region's EKS add-on registry, the EFA device plugin's repository and the vLLM
    image's repository (AWS's DLC account for us-west-2, ``RegionInfo``)."""
    pulls, token = _node_pulls(reference_templates["ReferenceMoeHyperPod"])
    dlc = RegionInfo.get("us-west-2").dlc_repository_account
    assert pulls == {
        "arn:aws:ecr:us-west-2:602401143452:repository/*",
        "arn:aws:ecr:us-west-2:602401143452:repository/eks/aws-efa-k8s-device-plugin",
        "arn:aws:ecr:us-west-2:602401143452:repository/amazon/aws-load-balancer-controller",
        f"arn:aws:ecr:us-west-2:{dlc}:repository/{vllm_image_facts()['repository']}",
    }
    assert token == {"*"}


def test_an_image_in_another_account_adds_its_repository_and_nothing_else():
    stack = new_stack("OtherAccount")
    deepseek_service(
        stack,
        *small_cluster(stack),
        image="111122223333.dkr.ecr.us-east-1.amazonaws.com/team/vllm:0.32.0",
    )
    pulls, _ = _node_pulls(template_of(stack))
    assert "arn:aws:ecr:us-east-1:111122223333:repository/team/vllm" in pulls
    assert not any(":763104351884:" in arn for arn in pulls)  # the default image is not used
    assert "*" not in pulls


def test_an_image_outside_ecr_registers_nothing():
    stack = new_stack("Public")
    deepseek_service(stack, *small_cluster(stack), image="vllm/vllm-openai:v0.32.0")
    pulls, _ = _node_pulls(template_of(stack))
    assert pulls == {
        addon_registry_arn("us-east-1"),
        efa_device_plugin_repository_arn(),
        load_balancer_controller_repository_arn(),
    }


def _rendered_load_balancer_controller_repository(template: dict) -> str:
    """The image repository aws-cdk-lib's AlbController writes into its chart's values."""
    (chart,) = [
        chart
        for chart in resources_of_type(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if chart["Properties"].get("Chart") == "aws-load-balancer-controller"
    ]
    values = chart["Properties"]["Values"]
    text = "".join(part for part in values["Fn::Join"][1] if isinstance(part, str))
    match = re.search(r'"image":\{"repository":"([^"]+)"', text)
    assert match, text
    return match.group(1)


def test_the_nodes_pull_the_load_balancer_controller_from_where_its_chart_names_it():
    """Outside us-west-2 too (the stack here is in us-east-1): the controller's chart, as
    aws-cdk-lib renders it, names a us-west-2 repository the Region's add-on registry grant
    does not cover; the install waits for the pods, so a refused pull fails the deploy."""
    stack = new_stack("Elsewhere")
    small_cluster(stack)
    template = template_of(stack)
    host, repository = _rendered_load_balancer_controller_repository(template).split("/", 1)
    account, region = host.split(".")[0], host.split(".")[3]
    pulls, _ = _node_pulls(template)
    assert f"arn:aws:ecr:{region}:{account}:repository/{repository}" in pulls
    assert region != "us-east-1"  # what the Region's registry grant alone would miss


def test_a_chart_image_mirrored_to_ecr_is_pulled_from_its_repository():
    """``chart_images`` pinned to the user's own ECR mirror: the nodes may pull it."""
    stack = new_stack("Mirror")
    cluster = hyperpod_cluster(stack)
    mirror = "111122223333.dkr.ecr.us-east-1.amazonaws.com/mirror/lws"
    HyperPodServingAddons(
        stack,
        "Addons",
        cluster=cluster,
        chart_images={"lws": f"{mirror}:v0.8.0@sha256:{'a' * 64}"},
    )
    pulls, _ = _node_pulls(template_of(stack))
    assert "arn:aws:ecr:us-east-1:111122223333:repository/mirror/lws" in pulls
    assert "*" not in pulls


def test_with_the_hyperpod_chart_the_nodes_pull_from_any_repository():
    """Its agents' per-Region registries are not modelled (node_image_registries.json)."""
    stack = new_stack("WithChart")
    cluster = hyperpod_cluster(stack)
    HyperPodServingAddons(
        stack,
        "Addons",
        cluster=cluster,
        hyperpod_chart=HelmChartSource.from_repository(
            "oci://111122223333.dkr.ecr.us-east-1.amazonaws.com/charts/hyperpod-helm-chart", "0.1.0"
        ),
    )
    pulls, _ = _node_pulls(template_of(stack))
    assert "*" in pulls


def test_the_registry_table_matches_the_charts(shared_dir):
    """The EFA plugin's repository is the published chart's; the operator's registries are
    its chart's ``repositoryDomainMap``; every add-on registry parses to an ARN."""
    efa = yaml_files.load_file(shared_dir / "charts/aws-efa-k8s-device-plugin-v0.5.30/values.yaml")
    assert _registries()["efa_device_plugin_repository"] == efa["image"]["repository"]
    operator = yaml_files.load_file(
        shared_dir / "charts/hyperpod-dependencies-011ca92/charts/inference-operator/values.yaml"
    )
    assert (
        _registries()["inference_operator_registries"] == operator["image"]["repositoryDomainMap"]
    )
    for region in _registries()["eks_addon_registries"]:
        arn = addon_registry_arn(region)
        assert arn is not None and arn.endswith(":repository/*"), region
    assert addon_registry_arn("cn-north-1") == "arn:aws-cn:ecr:cn-north-1:918309763551:repository/*"


def test_the_inference_operator_adds_its_region_s_registry():
    """The operator variant: its registry in us-west-2 (the chart's map), and its worker's
    image repository (the SageMaker vLLM DLC, the same ``vllm`` repository)."""
    app = new_app(**VARIANTS["inference-operator"])
    add_reference_stacks(app)
    template = app.synth().get_stack_by_name("ReferenceMoeHyperPod").template
    pulls, _ = _node_pulls(template)
    operator = inference_operator_registry_arn("us-west-2")
    assert operator == "arn:aws:ecr:us-west-2:861276088053:repository/*"
    dlc = RegionInfo.get("us-west-2").dlc_repository_account
    assert pulls == {
        addon_registry_arn("us-west-2"),
        efa_device_plugin_repository_arn(),
        f"arn:aws:ecr:us-west-2:{dlc}:repository/vllm",
        load_balancer_controller_repository_arn(),
        operator,
    }
