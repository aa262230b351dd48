"""The assembly reader: CloudFormation's order and the intrinsic functions."""

from __future__ import annotations

import pytest

from rehearsal.assembly import Resolver, az_id, az_name
from tests.rehearsal.builders import assembly

RESOURCES = {
    "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
    "B": {
        "Type": "AWS::EC2::Subnet",
        "Properties": {
            "VpcId": {"Ref": "Vpc"},
            "AvailabilityZone": {"Fn::Select": [1, {"Fn::GetAZs": ""}]},
        },
    },
    "A": {
        "Type": "Custom::Thing",
        "DependsOn": ["B"],
        "Properties": {"Cidr": {"Fn::GetAtt": ["Vpc", "CidrBlock"]}},
    },
    "C": {
        "Type": "Custom::Thing",
        "Properties": {
            "Text": {"Fn::Sub": "${A.Value}-${AWS::Region}-${!literal}"},
            "Joined": {
                "Fn::Join": [
                    "/",
                    [{"Ref": "AWS::Partition"}, {"Fn::Select": [1, {"Fn::Split": [",", "x,y"]}]}],
                ]
            },
            "Chosen": {"Fn::If": ["IsAws", "yes", "no"]},
            "Dropped": {"Ref": "AWS::NoValue"},
        },
    },
}


def test_order_follows_depends_on_and_references(tmp_path):
    built = assembly(tmp_path, RESOURCES)
    order = built.order()
    assert order.index("Vpc") < order.index("B") < order.index("A") < order.index("C")
    assert built.dependencies("C") == {"A"}


def test_intrinsics_resolve_to_deterministic_stand_ins(tmp_path):
    built = assembly(tmp_path, RESOURCES)
    built.template["Conditions"] = {"IsAws": {"Fn::Equals": [{"Ref": "AWS::Partition"}, "aws"]}}
    resolver = Resolver(built, {("A", "Value"): "played"})
    props = resolver.properties("C")
    assert props == {"Text": "played-us-west-2-${literal}", "Joined": "aws/y", "Chosen": "yes"}
    assert resolver.properties("A") == {"Cidr": "10.0.0.0/16"}
    assert str(resolver.ref("B")).startswith("subnet-") and resolver.ref("B") == Resolver(
        built
    ).ref("B")
    assert resolver.subnet_az("B") == ("us-west-2b", "usw2-az2")


def test_a_cycle_is_refused(tmp_path):
    built = assembly(
        tmp_path, {"X": {"Type": "T", "DependsOn": ["Y"]}, "Y": {"Type": "T", "DependsOn": ["X"]}}
    )
    with pytest.raises(ValueError, match="cycle"):
        built.order()


def test_zone_names_and_ids_map_both_ways():
    assert az_id("us-west-2c") == "usw2-az3" and az_name("usw2-az3", "us-west-2") == "us-west-2c"


def test_variants_pass_their_context_and_allow_the_placeholders():
    from rehearsal.variants import VARIANTS

    assert VARIANTS["gpu-az"].cdk_args() == [
        "-c", "llm-serving:allow-placeholders=true", "-c", "llm-serving:hyperpod:gpu-az-id=usw2-az2",
    ]  # fmt: skip
    assert sorted(VARIANTS) == [
        "gpu-az",
        "inference-operator",
        "keda",
        "keda-routed",
        "keda-zero",
        "p5en",
        "reference",
    ]


def test_a_synth_failure_keeps_cdks_error_lines_and_their_construct_paths():
    from rehearsal.variants import _synth_message

    output = """npm warn Unknown user config
ERROR The IAM Group, User, or Role contains an inline policy - (HIPAA.Security)
   ReferenceMoeHyperPod/ServingAddons/KedaQueryRole/DefaultPolicy/Resource aws-cdk-lib.aws_iam.CfnPolicy
   Acknowledge with 'HIPAA.Security::HIPAA.Security-IAMNoInlinePolicy'

WARNING image is pinned by tag only (Annotation)
   GptOss20bPoolEndpoint/Serving constructs.Construct
Synthesis finished with errors"""
    assert _synth_message(output).splitlines() == [
        "ERROR The IAM Group, User, or Role contains an inline policy - (HIPAA.Security)",
        "ReferenceMoeHyperPod/ServingAddons/KedaQueryRole/DefaultPolicy/Resource aws-cdk-lib.aws_iam.CfnPolicy",
    ]


def test_every_assumed_rule_is_listed_for_the_readme(capsys):
    from rehearsal.__main__ import main
    from rehearsal.assumptions import PACKAGE, assumptions

    listed = assumptions()
    marks = sum(
        p.read_text().count("ASSUMED: ")
        for p in PACKAGE.rglob("*.py")
        if p.name != "assumptions.py"
    )
    assert len(listed) == marks - 1  # less the convention's own description (controllers/__init__)
    assert all(text.endswith(".") and len(text) > 20 for _, text in listed)
    assert main(["--assumptions"]) == 0
    assert capsys.readouterr().out.count("\n- ") + 1 == len(listed)
