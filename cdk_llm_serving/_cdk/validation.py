"""Checks shared by the constructs; each adds to a ``Problems`` instead of raising.

A deploy-time value (a token) passes every check; each check asks ``is_unresolved`` (a jsii
call) only of a value it would refuse (docs/design/errors-and-checks.md, "Tokens").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from aws_cdk import Duration, Token
from aws_cdk import aws_ec2 as ec2

from ..errors import Problems, check_choice
from .service_limits import Limits


def is_unresolved(value: object) -> bool:
    """Whether ``value`` is a deploy-time value (a token), which no check can read at synth.

    Only strings and numbers are asked (a jsii call): a token is encoded as one of those
    (https://docs.aws.amazon.com/cdk/v2/guide/tokens.html); a list's items are asked where read.
    """
    if isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        return bool(Token.is_unresolved(value))
    return False


def seconds_of(value: Duration | int | None) -> int | None:
    """Whole seconds of a ``Duration`` (aws-cdk-lib refuses a fraction); an ``int`` or
    ``None`` as given."""
    return whole_seconds(value) if isinstance(value, Duration) else value


def whole_seconds(value: Duration) -> int:
    """Whole seconds of a ``Duration``: aws-cdk-lib refuses a fraction of a second."""
    return int(value.to_seconds())


def check_range(
    problems: Problems, prop: str, value: int | float | None, limits: Limits, unit: str = ""
) -> None:
    """``value`` must lie in the shape's [min, max]; ``None`` means "not set"."""
    if value is None:
        return
    low, high = limits.minimum, limits.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        if is_unresolved(value):  # asked only of a value it would refuse
            return
        suffix = f" {unit}" if unit else ""
        if high is None:
            problems.add(prop, value, f"must be at least {low}{suffix}")
        else:
            problems.add(prop, value, f"must be between {low} and {high}{suffix}")


def check_at_least(problems: Problems, prop: str, value: int | None, minimum: int) -> None:
    check_range(problems, prop, value, Limits(minimum, None, None, ()))


def check_name(problems: Problems, prop: str, value: str | None, limits: Limits, what: str) -> None:
    """A SageMaker name: length bounds and the service's regex, matched in full."""
    if value is None:
        return
    maximum = limits.maximum or 63
    pattern = limits.pattern or ""
    bad = not value or len(value) > maximum or not re.fullmatch(pattern, value)
    if bad and not is_unresolved(value):
        problems.add(
            prop,
            value,
            f"{what} must be 1-{maximum} characters matching {pattern!r} "
            "(letters, digits and hyphens; no leading or trailing hyphen)",
        )


def check_one_of(
    problems: Problems, prop: str, value: str | None, allowed: Iterable[str] | Limits, what: str
) -> None:
    """``value`` must be one of ``allowed``; the message names the closest matches, or, given
    ``Limits``, says when the API accepts the value but CloudFormation's schema does not."""
    if value is None:
        return
    options = list(allowed.enum if isinstance(allowed, Limits) else allowed)
    if value in options or is_unresolved(value):
        return
    if isinstance(allowed, Limits) and value in allowed.cloudformation_refuses:
        problems.add(
            prop,
            value,
            f"{what} must be one of {', '.join(options)}: the SageMaker API accepts {value} "
            f"but CloudFormation's {allowed.cloudformation_resource} schema does not, so the "
            "template would be refused (cfn-lint E3030)",
        )
        return
    check_choice(problems, prop, value, options, what)


#: Object names are RFC 1035 labels, namespaces RFC 1123 labels (may start with a digit):
#: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
_RFC1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_RFC1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
KUBERNETES_LABEL_MAX = 63


def check_kubernetes_name(
    problems: Problems, prop: str, value: str | None, *, namespace: bool = False
) -> None:
    """A Kubernetes object name (RFC 1035 label) or namespace (RFC 1123 label)."""
    if value is None:
        return
    pattern, first = (
        (_RFC1123_LABEL, "a letter or digit") if namespace else (_RFC1035_LABEL, "a letter")
    )
    bad = len(value) > KUBERNETES_LABEL_MAX or not pattern.fullmatch(value)
    if bad and not is_unresolved(value):
        what = "namespace" if namespace else "object name"
        problems.add(
            prop,
            value,
            f"a Kubernetes {what} must be 1-{KUBERNETES_LABEL_MAX} lower-case letters, digits "
            f"and '-', starting with {first} and ending with a letter or digit"
            + (f"; e.g. {kubernetes_name(value)!r}" if kubernetes_name(value) else ""),
        )


def kubernetes_name(text: str, max_length: int = KUBERNETES_LABEL_MAX) -> str:
    """A valid object name derived from ``text`` (``org/Model_v2`` -> ``org-model-v2``);
    empty when ``text`` holds no letter or digit."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    name = name.lstrip("-0123456789")
    return name[:max_length].rstrip("-")


#: Suffixes of single files that hold weights or archives (a prefix never ends in one).
_OBJECT_SUFFIXES = (
    ".tar.gz",
    ".tgz",
    ".tar",
    ".zip",
    ".gz",
    ".safetensors",
    ".bin",
    ".gguf",
    ".pt",
    ".pth",
    ".json",
)


def check_s3_prefix(problems: Problems, prop: str, prefix: str | None) -> None:
    """A key prefix under a bucket: not a whole ``s3://`` URI, not one object's key (an
    ``S3Prefix`` data source takes every object under it, and does not unpack a tarball)."""
    if prefix is None:
        return
    whole_uri = prefix.startswith(("s3://", "s3a://", "https://"))
    one_object = prefix.rstrip("/").lower().endswith(_OBJECT_SUFFIXES) and not prefix.endswith("/")
    if not (whole_uri or one_object) or is_unresolved(prefix):
        return
    if whole_uri:
        problems.add(
            prop,
            prefix,
            "give the key prefix under the bucket (e.g. 'models/llama/'), not a whole URI",
        )
    else:
        problems.add(
            prop,
            prefix,
            "names one object, but a prefix is expected: give the folder the weights' files "
            "are under (uncompressed; a model.tar.gz is not unpacked)",
        )


def check_subnets(
    problems: Problems, prop: str, vpc: ec2.IVpc, selection: Mapping[str, Any]
) -> None:
    """The VPC has the subnets ``selection`` asks for (default: private with egress), named
    by property, before aws-cdk-lib's ``select_subnets`` throws naming none."""
    try:
        found = vpc.select_subnets(**selection).subnets
    except RuntimeError as error:  # jsii raises the library's error as a RuntimeError
        reason = str(error).split(": ", 1)[-1].splitlines()[0]
        problems.add(
            prop,
            _describe(selection),
            f"the VPC has no such subnets ({reason}); select subnets it has, "
            "e.g. SubnetSelection(subnet_type=SubnetType.PRIVATE_ISOLATED)",
        )
        return
    if not found:
        problems.add(prop, _describe(selection), "selects no subnet of the VPC")


def _describe(selection: Mapping[str, Any]) -> str:
    if not selection:
        return "default (PRIVATE_WITH_EGRESS)"
    return ", ".join(f"{key}={getattr(value, 'name', value)}" for key, value in selection.items())


def check_eks_vpc(problems: Problems, prop: str, vpc: ec2.IVpc) -> None:
    """Private subnets with egress in at least two Availability Zones, as EKS requires
    ("subnets in at least two different Availability Zones",
    https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html)."""
    selection: dict[str, Any] = {"subnet_type": ec2.SubnetType.PRIVATE_WITH_EGRESS}
    before = len(problems)
    check_subnets(problems, prop, vpc, selection)
    if len(problems) > before:
        return
    # Unresolved zones (Fn::GetAZs) still differ per zone: the same zone is the same token.
    zones = {subnet.availability_zone for subnet in vpc.select_subnets(**selection).subnets}
    if len(zones) < 2:
        problems.add(
            prop,
            f"private subnets in {len(zones)} Availability Zone(s)",
            "EKS needs subnets in at least two Availability Zones",
        )


def check_pattern(
    problems: Problems, prop: str, value: str | None, limits: Limits, what: str
) -> None:
    """``value`` within the shape's length bounds and matching its pattern in full."""
    if value is None:
        return
    low, high = limits.minimum or 0, limits.maximum
    pattern = limits.pattern or ".*"
    if (
        len(value) < low
        or (high is not None and len(value) > high)
        or not re.fullmatch(pattern, value)
    ) and not is_unresolved(value):
        problems.add(prop, value, f"{what} must match {pattern!r} ({low}-{high} characters)")
