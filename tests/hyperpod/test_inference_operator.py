"""HyperPodInferenceOperator: the EKS add-on, its dependencies and least-privilege roles, once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod.addons import HyperPodServingAddons
from cdk_llm_serving.hyperpod.inference_operator import (
    HyperPodInferenceOperator,
    inference_operator_facts,
)
from tests.support import yaml_files
from tests.support.builders import new_stack
from tests.support.hyperpod import imported_cluster
from tests.support.template_helpers import (
    actions_of,
    flatten,
    policy_statements,
    resources_of_type,
)

FACTS = inference_operator_facts()


@pytest.fixture
def operator_chart(shared_dir: Path) -> Path:
    return shared_dir / "charts" / "hyperpod-dependencies-011ca92" / "charts" / "inference-operator"


@pytest.fixture
def migration_script(operator_chart: Path) -> str:
    return (operator_chart / "migration" / "helm_to_addon.sh").read_text()


def _addons(template: dict) -> dict[str, dict]:
    return {
        r["Properties"]["AddonName"]: {"id": k, **r}
        for k, r in resources_of_type(template, "AWS::EKS::Addon").items()
    }


def _role(template: dict, part: str) -> tuple[str, dict]:
    (found,) = [
        (k, r)
        for k, r in resources_of_type(template, "AWS::IAM::Role").items()
        if part in k and "InferenceOperator" in k
    ]
    return found


def _trust_subjects(template: dict, role: dict) -> list[str]:
    """The service accounts an IRSA trust names (its CfnJson conditions, resolved)."""
    subjects = []
    for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
        if statement["Action"] != "sts:AssumeRoleWithWebIdentity":
            continue
        json_id = statement["Condition"]["StringEquals"]["Fn::GetAtt"][0]
        value = template["Resources"][json_id]["Properties"]["Value"]
        text = flatten(value, "ISSUER")
        subjects += re.findall(r'"ISSUER:sub":"([^"]+)"', text)
        assert '"ISSUER:aud":"sts.amazonaws.com"' in text
    return subjects


# -- the reference variant ------------------------------------------------------------------


def test_the_add_on_and_its_dependencies_are_installed_once(inference_operator_template):
    addons = _addons(inference_operator_template)
    for name, version in FACTS["dependencies"].items():
        assert addons[name]["Properties"]["AddonVersion"] == version
    operator = addons[FACTS["addon"]["name"]]
    assert operator["Properties"]["AddonVersion"] == FACTS["addon"]["version"]
    depends = set(operator["DependsOn"])
    for name in (*FACTS["dependencies"], "aws-fsx-csi-driver"):
        assert addons[name]["id"] in depends
    # The operator's chart issues cert-manager certificates: it waits for the webhook too.
    waits = [
        logical_id
        for logical_id, resource in inference_operator_template["Resources"].items()
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesObjectValue"
        and resource["Properties"].get("ObjectName") == "cert-manager-webhook"
    ]
    assert len(waits) == 1 and waits[0] in depends
    keda_charts = [
        k
        for k, r in resources_of_type(
            inference_operator_template, "Custom::AWSCDK-EKS-HelmChart"
        ).items()
        if r["Properties"].get("Chart") == "keda"
    ]
    assert len(keda_charts) == 1 and keda_charts[0] in depends


def test_configuration_turns_off_the_add_ons_own_alb_and_keda(inference_operator_template):
    operator = _addons(inference_operator_template)[FACTS["addon"]["name"]]
    values = json.loads(flatten(operator["Properties"]["ConfigurationValues"], "X"))
    assert values == {
        "executionRoleArn": "X",
        "tlsCertificateS3Bucket": "X",
        "hyperpodClusterArn": "X",
        "alb": {"enabled": False},
        "keda": {"enabled": False},
    }


def test_execution_role_is_least_privilege_and_trusts_the_operator(inference_operator_template):
    template = inference_operator_template
    role_id, role = _role(template, "ExecutionRole")
    assert role["Properties"]["RoleName"].startswith(FACTS["execution_role_prefix"] + "-")
    assert len(role["Properties"]["RoleName"]) <= 64
    namespace, account = FACTS["namespace"], FACTS["operator_service_account"]
    assert _trust_subjects(template, role) == [f"system:serviceaccount:{namespace}:{account}"]
    services = [
        s
        for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        if "Service" in s["Principal"]
    ]
    assert [s["Principal"]["Service"] for s in services] == ["sagemaker.amazonaws.com"]
    assert "aws:SourceAccount" in services[0]["Condition"]["StringEquals"]
    (managed,) = role["Properties"]["ManagedPolicyArns"]
    assert flatten(managed).endswith(":iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess")
    (statement,) = policy_statements(template, role_id)
    assert sorted(actions_of(statement)) == [
        "s3:DeleteObject",
        "s3:GetObject",
        "s3:PutObject",
        "s3:PutObjectTagging",
    ]
    assert "TlsCertificates" in json.dumps(statement["Resource"])


def test_s3_csi_role_reads_only_the_endpoints_weights(inference_operator_template):
    template = inference_operator_template
    role_id, role = _role(template, "S3CsiDriverRole")
    assert _trust_subjects(template, role) == [
        f"system:serviceaccount:{FACTS['s3_csi_namespace']}:{FACTS['s3_csi_service_account']}"
    ]
    resources: dict[str, list[str]] = {}
    for statement in policy_statements(template, role_id):
        listed = statement["Resource"]
        listed = listed if isinstance(listed, list) else [listed]
        for action in actions_of(statement):
            resources.setdefault(action, []).extend(flatten(r) for r in listed)
    # Both endpoints' weights (gpt-oss-120b and Llama 3.3 70B), nothing else.
    assert sorted(r.rpartition(":s3:::")[2] for r in resources["s3:GetObject"]) == [
        "cdk-llm-serving-placeholder-weights/gpt-oss-120b/*",
        "cdk-llm-serving-placeholder-weights/llama-3.3-70b/*",
    ]
    assert set(resources) == {"s3:GetObject", "s3:ListBucket"}
    s3_csi = _addons(template)["aws-mountpoint-s3-csi-driver"]
    assert s3_csi["Properties"]["ServiceAccountRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_the_s3_csi_driver_runs_on_the_tainted_gpu_nodes_the_workers_mount_on(
    inference_operator_template,
):
    """The operator's workers mount their S3 weights on GPU nodes tainted nvidia.com/gpu; the
    driver's node DaemonSet must run there (its chart tolerates no such taint by default)."""
    template = inference_operator_template
    s3_csi = _addons(template)["aws-mountpoint-s3-csi-driver"]
    configuration = json.loads(s3_csi["Properties"]["ConfigurationValues"])
    assert configuration == {"node": {"tolerateAllTaints": True}}
    taints = {
        taint["Key"]
        for group in resources_of_type(template, "AWS::SageMaker::Cluster").popitem()[1][
            "Properties"
        ]["InstanceGroups"]
        for taint in (group.get("KubernetesConfig") or {}).get("Taints", [])
    }
    assert "nvidia.com/gpu" in taints  # what the driver must tolerate


def test_keda_operator_may_read_cloudwatch_for_the_endpoints_trigger(inference_operator_template):
    template = inference_operator_template
    (keda_role,) = [
        k for k in resources_of_type(template, "AWS::IAM::Role") if "KedaQueryRole" in k
    ]
    actions = {a for s in policy_statements(template, keda_role) for a in actions_of(s)}
    assert "cloudwatch:GetMetricData" in actions


# -- once per cluster, imported clusters ----------------------------------------------------


OIDC = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"


def test_of_returns_the_same_installation():
    stack = new_stack()
    cluster = imported_cluster(stack, oidc_provider_arn=OIDC)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster, load_balancer_controller=False)
    arn = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abc123"
    first = HyperPodInferenceOperator.of(addons, hyperpod_cluster_arn=arn)
    assert HyperPodInferenceOperator.of(addons) is first
    assert first.hyperpod_cluster_arn == arn


def test_imported_cluster_needs_the_hyperpod_cluster_arn():
    stack = new_stack()
    addons = HyperPodServingAddons(
        stack, "Addons", cluster=imported_cluster(stack), load_balancer_controller=False
    )
    with pytest.raises(ConfigurationError) as raised:
        HyperPodInferenceOperator.of(addons)
    assert "hyperpod_cluster_arn" in str(raised.value)
    assert "open_id_connect_provider" in str(raised.value)


# -- facts against AWS's chart and migration script -----------------------------------------


def test_names_match_awss_chart_and_migration_script(operator_chart, migration_script):
    values = yaml_files.load_file(operator_chart / "values.yaml")
    assert f"{values['shortPrefix']}-system" == FACTS["namespace"]
    assert (
        f"system:serviceaccount:{FACTS['namespace']}:{FACTS['operator_service_account']}"
        in migration_script
    )
    assert (
        f"system:serviceaccount:{FACTS['s3_csi_namespace']}:{FACTS['s3_csi_service_account']}"
        in migration_script
    )
    validation = (operator_chart / "templates" / "_validateRequiredValues.tpl").read_text()
    assert f'hasPrefix "{FACTS["execution_role_prefix"]}"' in validation
    assert f"policy/{FACTS['execution_role_managed_policy']}" in migration_script


def test_versions_and_configuration_keys_match_the_migration_script(migration_script):
    installs = dict(
        re.findall(
            r"--addon-name (\S+)\s*\\\s*(?:--service-account-role-arn \S+\s*\\\s*)?--addon-version (\S+)",
            migration_script,
        )
    )
    assert installs[FACTS["addon"]["name"]] == FACTS["addon"]["version"]
    for name, version in FACTS["dependencies"].items():
        assert installs[name] == version
    config = re.search(r"ADDON_CONFIG=\$\(cat <<EOF\n(.*?)\nEOF", migration_script, re.S)
    assert config is not None
    keys = set(json.loads(re.sub(r'"\$[A-Z_]+"', '""', config.group(1))))
    assert {
        "executionRoleArn",
        "tlsCertificateS3Bucket",
        "hyperpodClusterArn",
        "alb",
        "keda",
    } <= keys


def test_controller_pod_is_the_charts(operator_chart):
    values = yaml_files.load_file(operator_chart / "values.yaml")
    stack = new_stack()
    addons = HyperPodServingAddons(
        stack,
        "Addons",
        cluster=imported_cluster(stack, oidc_provider_arn=OIDC),
        load_balancer_controller=False,
    )
    pod = HyperPodInferenceOperator.of(
        addons, hyperpod_cluster_arn="arn:aws:sagemaker:us-east-1:111122223333:cluster/abc123"
    ).controller_pod_template()
    assert pod["spec"]["affinity"] == values["affinity"]
    assert pod["spec"]["tolerations"] == values["tolerations"]
