"""cfn-lint over every synthesized template: no error, and no warning without a written reason."""

from __future__ import annotations

import json

from tests.support.linting import lint_template


def test_cfn_lint_finds_nothing_in_any_reference_template(reference_templates):
    for name, template in reference_templates.items():
        matches = lint_template(template)
        assert not matches, f"{name}:\n" + "\n".join(str(match) for match in matches)


def test_cfn_lint_catches_a_broken_endpoint_config(pool_template):
    """The check above can fail: a pool priority out of range is an error cfn-lint reports."""
    broken = json.loads(json.dumps(pool_template))
    for resource in broken["Resources"].values():
        if resource["Type"] == "AWS::SageMaker::EndpointConfig":
            resource["Properties"]["ProductionVariants"][0]["InstancePools"][0]["Priority"] = 9
    assert any(str(match.rule.id).startswith("E") for match in lint_template(broken))


def test_cfn_lint_finds_nothing_in_the_inference_operator_variant(inference_operator_template):
    matches = lint_template(inference_operator_template)
    assert not matches, "\n".join(str(match) for match in matches)
