"""cfn-lint and the library's cdk-nag packs on your stack (needs the ``testing`` extra):
``checked_template(stack)`` fails on any finding of either, as this library's own tests do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aws_cdk import App, IPolicyValidationPlugin, Stack, Token, Validations
from cdk_nag import AwsSolutionsChecks

from .._extras import require_extra
from . import template_of

require_extra("testing", "cfnlint", __name__)

from cfnlint.api import ManualArgs, lint  # noqa: E402

#: A cdk-nag rule pack class: called with the app, it gives a validation plugin.
NagPack = Callable[..., IPolicyValidationPlugin]

__all__ = [
    "ACCEPTED_CFN_LINT_WARNINGS",
    "NAG_PACKS",
    "NagPack",
    "add_nag_packs",
    "cfn_lint",
    "checked_template",
]

#: The cdk-nag rule packs the library's constructs are tested under.
NAG_PACKS: tuple[NagPack, ...] = (AwsSolutionsChecks,)

#: cfn-lint rules the library's templates are allowed to trigger, each with the reason.
ACCEPTED_CFN_LINT_WARNINGS: dict[str, str] = {
    "W3005": "aws-cdk-lib adds explicit DependsOn next to Ref/GetAtt on resources it generates "
    "(VPC subnets of the EKS cluster, Lambda roles of its providers): redundant, not wrong, and not ours to change.",
}


def add_nag_packs(app: App, packs: Sequence[NagPack] = NAG_PACKS) -> None:
    """Run ``packs`` on ``app`` at synthesis; an unacknowledged finding fails ``app.synth()``."""
    Validations.of(app).add_plugins(*(pack(app) for pack in packs))


def cfn_lint(
    template: Mapping[str, Any],
    *,
    regions: Sequence[str] = ("us-east-1",),
    ignore_checks: Iterable[str] = tuple(ACCEPTED_CFN_LINT_WARNINGS),
) -> list[Any]:
    """cfn-lint's findings (``cfnlint.match.Match``) on ``template``."""
    config = ManualArgs(regions=list(regions), ignore_checks=list(ignore_checks))
    return list(lint(json.dumps(template), config=config))


def checked_template(
    stack: Stack,
    *,
    nag_packs: Sequence[NagPack] = NAG_PACKS,
    ignore_checks: Iterable[str] = tuple(ACCEPTED_CFN_LINT_WARNINGS),
) -> dict[str, Any]:
    """``stack``'s template, once ``nag_packs`` and cfn-lint found nothing in it.

    Call it before the app is synthesized (the packs must be in place for synthesis).
    cfn-lint checks in the stack's region, or ``us-east-1`` for an environment-agnostic stack.
    """
    app = stack.node.root
    assert isinstance(app, App), f"{stack.node.path} is not inside an App"
    add_nag_packs(app, nag_packs)
    template = template_of(stack)
    region = "us-east-1" if Token.is_unresolved(stack.region) else stack.region
    findings = cfn_lint(template, regions=[region], ignore_checks=ignore_checks)
    if findings:
        raise AssertionError(
            f"cfn-lint on {stack.stack_name}:\n" + "\n".join(str(match) for match in findings)
        )
    return template
