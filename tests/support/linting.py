"""cfn-lint with the project's accepted warnings: ``cdk_llm_serving.testing.checks``, the helper
the package gives its users, so the project is tested the way it tells users to test."""

from __future__ import annotations

import functools
import json
from typing import Any

from cdk_llm_serving.testing.checks import ACCEPTED_CFN_LINT_WARNINGS, cfn_lint

#: Warnings we accept, each with the reason.
ACCEPTED_WARNINGS = ACCEPTED_CFN_LINT_WARNINGS


def lint_template(template: dict) -> list[Any]:
    """cfn-lint's matches for ``template``; each distinct template is linted once per session."""
    return list(_lint(json.dumps(template, sort_keys=True)))


@functools.cache
def _lint(body: str) -> tuple[Any, ...]:
    return tuple(cfn_lint(json.loads(body)))
