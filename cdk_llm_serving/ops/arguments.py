"""The command line's checks of names, regions and output paths, before any AWS call; each
limit is read from what botocore ships (docs/design/cli.md, "Argument checks")."""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
from typing import Any

from botocore.loaders import Loader
from botocore.model import ServiceModel

from .._partitions import known_regions, partition_of_region
from ..errors import Problems
from .smoke import base_url_problem

#: Argument (``argparse`` destination) -> its flag, for the messages.
_REGION_ARGUMENTS = {
    "region": "--region",
    "sagemaker_region": "--sagemaker-region",
    "price_region": "--price-region",
}
#: Output file arguments -> their flag.
_OUTPUT_ARGUMENTS = {"output": "--output", "save_prices": "--save-prices"}
#: Positional names -> the botocore shape they must fit (operation, member, what they name).
_NAME_ARGUMENTS = {
    "endpoint": ("DescribeEndpoint", "EndpointName", "an endpoint name"),
    "job": ("DescribeAIRecommendationJob", "AIRecommendationJobName", "a recommendation job name"),
}


def region_problem(region: str) -> str | None:
    """Why ``region`` is not an AWS region name (``None`` when it is one)."""
    if partition_of_region(region) is not None:
        return None
    known = known_regions()
    close = difflib.get_close_matches(region.lower(), known, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (
        "not an AWS region name (like us-east-1; the regions of botocore's partitions.json: "
        f"{', '.join(known[:4])}, ...){hint}"
    )


@functools.cache
def _sagemaker_model() -> ServiceModel:
    return ServiceModel(Loader().load_service_model("sagemaker", "service-2"), "sagemaker")


@functools.cache
def sagemaker_member_limits(operation: str, member: str) -> tuple[str, int, int]:
    """(pattern, min, max) of ``member`` of ``operation``'s input in botocore's sagemaker model."""
    shape = _sagemaker_model().operation_model(operation).input_shape.members[member]
    metadata: dict[str, Any] = shape.metadata
    return metadata["pattern"], int(metadata.get("min", 0)), int(metadata["max"])


def check_sagemaker_name(
    problems: Problems, flag: str, value: str | None, operation: str, member: str, what: str
) -> bool:
    """Add a problem when ``value`` does not fit ``operation``'s ``member`` (botocore's model);
    whether it fits (``None``, not given, fits)."""
    if value is None:
        return True
    pattern, minimum, maximum = sagemaker_member_limits(operation, member)
    where = f"{operation}.{member}, botocore's model"
    if len(value) > maximum or (len(value) < minimum and re.fullmatch(pattern, value)):
        allowed = f"{what} is {max(minimum, 1)} to {maximum} characters ({where}), got {len(value)}"
    elif not re.fullmatch(pattern, value):
        allowed = f"{what} must match {pattern} ({where})"
    else:
        return True
    problems.add(flag, value, allowed)
    return False


def check_output_path(problems: Problems, flag: str, path: str | None) -> None:
    """Add a problem when ``path`` names a directory or a file in a directory that is missing."""
    if path is None:
        return
    if os.path.isdir(path):
        problems.add(flag, path, "is a directory; give the file to write")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        problems.add(flag, path, f"its directory {parent} does not exist")


def check_arguments(args: argparse.Namespace) -> None:
    """Every problem of the parsed arguments at once, as one ``ConfigurationError``, before
    any AWS call or credential lookup."""
    problems = Problems("command line")
    for dest, flag in _REGION_ARGUMENTS.items():
        region = getattr(args, dest, None)
        if region is not None and (problem := region_problem(region)):
            problems.add(flag, region, problem)
    for dest, (operation, member, what) in _NAME_ARGUMENTS.items():
        check_sagemaker_name(problems, dest, getattr(args, dest, None), operation, member, what)
    for dest, flag in _OUTPUT_ARGUMENTS.items():
        check_output_path(problems, flag, getattr(args, dest, None))
    base_url = getattr(args, "base_url", None)
    if base_url is not None and (problem := base_url_problem(base_url)):
        problems.add("--base-url", base_url, problem)
    problems.raise_if_any()
