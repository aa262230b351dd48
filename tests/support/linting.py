"""cfn-lint with the project's accepted warnings: no error, and no warning without a written reason."""

from __future__ import annotations

import functools
import json

from cfnlint.api import ManualArgs, lint

#: Warnings we accept, each with the reason.
ACCEPTED_WARNINGS: dict[str, str] = {
    "W3005": "aws-cdk-lib adds explicit DependsOn next to Ref/GetAtt on resources it generates "
    "(VPC subnets of the EKS cluster, Lambda roles of its providers): redundant, not wrong, and not ours to change.",
}


def lint_template(template: dict) -> list:
    """cfn-lint's matches for ``template``; each distinct template is linted once per session."""
    return list(_lint(json.dumps(template, sort_keys=True)))


@functools.cache
def _lint(body: str) -> tuple:
    config = ManualArgs(regions=["us-east-1"], ignore_checks=list(ACCEPTED_WARNINGS))
    return tuple(lint(body, config=config))
