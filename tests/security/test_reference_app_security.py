"""The reference app: no placeholder bucket by accident, alarms that notify, history retained."""

from __future__ import annotations

import pytest
from aws_cdk import Stack, Validations
from aws_cdk import aws_logs as logs

from cdk_llm_serving import ConfigurationError
from stacks import add_reference_stacks
from stacks.hipaa_review import compliance_checks
from tests.support.app import new_app
from tests.support.template_helpers import resources_of_type

_WEIGHT_KEYS = (
    "llm-serving:gpt-oss-20b:weights-uri",
    "llm-serving:gpt-oss-20b:int4-weights-uri",
    "llm-serving:reference-moe:weights-uri",
)


def test_synth_refuses_placeholder_buckets_unless_allowed():
    app = new_app(**{"llm-serving:allow-placeholders": False})
    with pytest.raises(ConfigurationError) as error:
        add_reference_stacks(app)
    assert [p.property for p in error.value.problems] == list(_WEIGHT_KEYS)
    assert "llm-serving:allow-placeholders=true" in str(error.value)


def test_the_operator_variant_also_refuses_its_endpoints_placeholder_buckets():
    """Its gpt-oss-120b and Llama 3.3 70B weights are read only by that variant."""
    app = new_app(
        **{
            "llm-serving:allow-placeholders": False,
            "llm-serving:hyperpod:inference-operator": "true",
        }
    )
    with pytest.raises(ConfigurationError) as error:
        add_reference_stacks(app)
    assert [p.property for p in error.value.problems] == [
        *_WEIGHT_KEYS,
        "llm-serving:gpt-oss-120b:weights-uri",
        "llm-serving:llama-3.3-70b:weights-uri",
    ]


def test_own_buckets_need_no_allowance():
    own = {key: f"s3://my-weights-{i}/model/" for i, key in enumerate(_WEIGHT_KEYS)}
    app = new_app(**{"llm-serving:allow-placeholders": "false", **own})
    assert len(add_reference_stacks(app)) == 2


def test_make_synth_passes_the_allowance():
    from tests.support.app import ROOT

    synth = (ROOT / "Makefile").read_text().split("\nsynth:", 1)[1].split("\n\n", 1)[0]
    assert "-c llm-serving:allow-placeholders=true" in synth


def test_every_alarm_notifies_the_encrypted_topic(reference_templates):
    for template in reference_templates.values():
        topics = resources_of_type(template, "AWS::SNS::Topic")
        for key, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items():
            actions = alarm["Properties"].get("AlarmActions", [])
            targets = [a["Ref"] for a in actions if isinstance(a, dict) and "Ref" in a]
            assert targets and set(targets) <= set(topics), key
            for target in targets:
                assert "KmsMasterKeyId" in topics[target]["Properties"], target


def test_prometheus_workspace_and_alert_topics_are_retained(reference_templates):
    retained = ("AWS::APS::Workspace", "AWS::SNS::Topic", "AWS::KMS::Key")
    for template in reference_templates.values():
        for resource_type in retained:
            for key, resource in resources_of_type(template, resource_type).items():
                assert resource.get("DeletionPolicy") == "Retain", key
                assert resource.get("UpdateReplacePolicy") == "Retain", key
    hyperpod = reference_templates["ReferenceMoeHyperPod"]
    assert resources_of_type(hyperpod, "AWS::APS::Workspace")


def test_the_hipaa_pack_runs_beside_aws_solutions():
    """The packs the app and the suite use: an unencrypted log group fails HIPAA.Security."""
    app = new_app()
    stack = Stack(app, "Hipaa")
    logs.LogGroup(stack, "Logs")
    Validations.of(app).add_plugins(*compliance_checks(app))
    with pytest.raises(Exception, match=r"HIPAA\.Security-CloudWatchLogGroupEncrypted"):
        app.synth()
