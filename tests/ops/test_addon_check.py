"""``addons check``: the pinned EKS add-on versions against ``DescribeAddonVersions``, through
a real boto3 EKS client under botocore's Stubber (requests and responses validated against
botocore's EKS service model; there is no offline EKS), and the real command line in a
subprocess for the credential and region errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from cdk_llm_serving._addon_pins import every_addon_pin, hyperpod_facts
from cdk_llm_serving.ops.addon_check import where_to_override
from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.ops.exit_codes import (
    EXIT_ADDON_NOT_OFFERED,
    EXIT_NO_CREDENTIALS,
    EXIT_NO_REGION,
    EXIT_USAGE,
)
from tests.support.cli import cli
from tests.support.stubbed_aws import stubbed_client
from tests.support.template_helpers import resources_of_type


def addon_entry(name: str, versions: list[str], k8s: str, default: str | None) -> dict[str, Any]:
    """One ``addons[]`` item as EKS returns it (every member the model has that we read)."""
    return {
        "addonName": name,
        "type": "networking",
        "owner": "aws",
        "publisher": "eks",
        "addonVersions": [
            {
                "addonVersion": version,
                "architecture": ["amd64", "arm64"],
                "computeTypes": ["ec2"],
                "compatibilities": [
                    {
                        "clusterVersion": k8s,
                        "platformVersions": ["*"],
                        "defaultVersion": version == default,
                    }
                ],
                "requiresConfiguration": False,
                "requiresIamPermissions": False,
            }
            for version in versions
        ],
    }


@pytest.fixture
def eks():
    with stubbed_client("eks", "eu-west-1") as stubbed:
        yield stubbed


def stub_all_offered(stubber: Stubber, k8s: str, *, missing: str | None = None) -> None:
    """Each pinned add-on of ``k8s``, in the command's (sorted) order: the pin and a newer
    build are offered; ``missing`` is offered only in other versions."""
    for name, pinned in sorted(every_addon_pin(k8s).items()):
        versions = ["v9.9.9-eksbuild.1", "v9.10.0-eksbuild.1"] if name == missing else [pinned]
        if name != missing:
            versions.append("v9.10.0-eksbuild.2")
        stubber.add_response(
            "describe_addon_versions",
            {"addons": [addon_entry(name, versions, k8s, versions[0])]},
            {"addonName": name, "kubernetesVersion": k8s},
        )


def run(eks, capsys, *args: str) -> tuple[int, str, str]:
    client, _ = eks
    code = main(["addons", "check", *args], clients={"eks": client})
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_pin_offered_exits_0_and_reports_default_and_newest(eks, capsys):
    stub_all_offered(eks[1], "1.34")
    code, out, err = run(eks, capsys, "--kubernetes-version", "1.34", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["all_offered"] is True and report["region"] == "eu-west-1"
    rows = {row["addon"]: row for row in report["addons"]}
    assert rows.keys() == every_addon_pin("1.34").keys()
    pod_identity = rows["eks-pod-identity-agent"]
    assert pod_identity["pinned"] == pod_identity["default"] == "v1.3.8-eksbuild.2"
    # Numeric order: 9.10.0 is newer than 1.3.8 (and than 9.9.9 below).
    assert pod_identity["newest"] == "v9.10.0-eksbuild.2"


def test_a_pin_not_offered_has_its_own_exit_status(eks, capsys):
    stub_all_offered(eks[1], "1.33", missing="aws-mountpoint-s3-csi-driver")
    code, out, err = run(eks, capsys, "--kubernetes-version", "1.33")
    assert code == EXIT_ADDON_NOT_OFFERED == 13
    line = next(line for line in out.splitlines() if "aws-mountpoint-s3-csi-driver" in line)
    assert line.split() == [
        "1.33",
        "aws-mountpoint-s3-csi-driver",
        "v1.14.1-eksbuild.1",
        "NO",
        "v9.9.9-eksbuild.1",
        "v9.10.0-eksbuild.1",
    ]
    assert out.splitlines()[-1].startswith(
        "aws-mountpoint-s3-csi-driver v1.14.1-eksbuild.1 not offered on 1.33: no construct parameter"
    )
    assert err == ""


def test_pages_are_followed(eks, capsys):
    """``nextToken`` pages: the pinned version is only on the second page."""
    _, stubber = eks
    pins = sorted(every_addon_pin("1.34").items())
    for index, (name, pinned) in enumerate(pins):
        params = {"addonName": name, "kubernetesVersion": "1.34"}
        if index == 0:
            first = {"addons": [addon_entry(name, ["v0.0.1-eksbuild.1"], "1.34", None)]}
            stubber.add_response("describe_addon_versions", {**first, "nextToken": "t"}, params)
            params = {**params, "nextToken": "t"}
        stubber.add_response(
            "describe_addon_versions",
            {"addons": [addon_entry(name, [pinned], "1.34", None)]},
            params,
        )
    code, out, _ = run(eks, capsys, "--kubernetes-version", "1.34", "--json")
    first = next(row for row in json.loads(out)["addons"] if row["addon"] == pins[0][0])
    assert code == 0 and first["offered"] and first["default"] is None


def test_overrides_are_checked_instead_of_the_pins(eks, capsys):
    _, stubber = eks
    overrides = {"metrics-server": "v0.8.0-eksbuild.2", "vpc-cni": None}
    for name, pinned in sorted(every_addon_pin("1.33").items()):
        offered = [overrides.get(name, pinned) or "v1.0.0-eksbuild.1"]
        stubber.add_response(
            "describe_addon_versions",
            # An unpinned add-on is offered when EKS has a default for the version.
            {"addons": [addon_entry(name, offered, "1.33", offered[0])]},
            {"addonName": name, "kubernetesVersion": "1.33"},
        )
    code, out, _ = run(
        eks,
        capsys,
        "--kubernetes-version=1.33",
        "--addon-versions",
        "metrics-server=v0.8.0-eksbuild.2, vpc-cni=",
        "--json",
    )
    rows = {row["addon"]: row for row in json.loads(out)["addons"]}
    assert code == 0
    assert rows["metrics-server"]["pinned"] == "v0.8.0-eksbuild.2"
    assert rows["vpc-cni"]["pinned"] is None and rows["vpc-cni"]["offered"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubernetes-version", "1.29"], "--kubernetes-version = '1.29'"),
        (["--addon-versions", "kube-dns=v1"], "--addon-versions = 'kube-dns'"),
        (["--addon-versions", "vpc-cni"], "--addon-versions = 'vpc-cni'"),
    ],
)
def test_bad_input_is_one_error_line_before_any_call(eks, capsys, args, message):
    code, out, err = run(eks, capsys, *args)
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and err.startswith("error: addons check") and message in err


@pytest.mark.parametrize(
    ("args", "status"),
    [(["--region", "us-east-1"], EXIT_NO_CREDENTIALS), ([], EXIT_NO_REGION)],
)
def test_no_credentials_or_region_is_one_error_line(tmp_path, args, status):
    result = cli("addons", "check", "--kubernetes-version", "1.34", *args, home=tmp_path)
    assert result.returncode == status, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: cannot list EKS add-on versions")


def test_every_addon_in_the_reference_templates_is_checked(
    reference_templates, inference_operator_template
):
    """Each ``AWS::EKS::Addon`` the constructs synthesize (name and version) is in the
    command's list for its cluster's Kubernetes version: no add-on escapes the check."""
    templates = [reference_templates["ReferenceMoeHyperPod"], inference_operator_template]
    installed: set[tuple[str, str, str]] = set()
    for template in templates:
        (cluster,) = resources_of_type(template, "AWS::EKS::Cluster").values()
        k8s = cluster["Properties"]["Version"]
        for addon in resources_of_type(template, "AWS::EKS::Addon").values():
            properties = addon["Properties"]
            installed.add((k8s, properties["AddonName"], properties["AddonVersion"]))
    checked = {(k8s, name, v) for k8s, name, v in installed if every_addon_pin(k8s).get(name) == v}
    assert installed - checked == set()
    # The inference-operator variant installs all of them.
    assert {name for _, name, _ in installed} == set(every_addon_pin("1.33"))


@pytest.mark.parametrize("k8s", hyperpod_facts()["kubernetes_versions"])
def test_every_cluster_addon_is_pinned_for_every_supported_version(k8s):
    facts = hyperpod_facts()
    cluster_addons = {*facts["addons_before_nodes"], *facts["addons_after_nodes"]}
    assert cluster_addons <= set(every_addon_pin(k8s))
    assert all(every_addon_pin(k8s).values())


def test_the_secrets_store_provider_is_overridden_on_the_cluster():
    # VllmMultiNodeService installs it with the cluster's addon_versions (serving_security).
    assert where_to_override("aws-secrets-store-csi-driver-provider") == (
        "HyperPodEksCluster(addon_versions={...})"
    )
