"""The command line checks its own arguments before it calls AWS (issue 31).

Without these checks a bad endpoint name, region or output path reached AWS (or boto3's
credential chain) first and came back as a credentials or service error that does not name
the argument. Each rule reads its limit from the artifact AWS ships rather than from a copy:

- **Region names**: a region must match one partition's ``regionRegex`` in botocore's
  ``data/partitions.json`` (what botocore itself uses to resolve an endpoint for a region it
  has no entry for), so a region newer than the installed botocore still passes while
  ``US-EAST-1`` or ``us-east-99x`` does not.
- **Names and ARNs**: the ``pattern`` and ``max`` of the shape each operation takes in
  botocore's ``sagemaker`` service model (``DescribeEndpoint.EndpointName``,
  ``DescribeAIRecommendationJob.AIRecommendationJobName``, ``RoleArn``). A shape's pattern is
  matched whole: the service model writes them without anchors.
- **Output paths**: a file the command writes must not be a directory, and its directory must
  exist (otherwise the command would do its AWS work and then fail to save it).
"""

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

__all__ = [
    "check_arguments",
    "check_output_path",
    "check_region",
    "check_sagemaker_name",
    "region_problem",
    "sagemaker_member_limits",
]

#: Argument (``argparse`` destination) -> its flag, for the messages.
_REGION_ARGUMENTS = {
    "region": "--region",
    "sagemaker_region": "--sagemaker-region",
    "price_region": "--price-region",
}
#: Output file arguments -> their flag.
_OUTPUT_ARGUMENTS = {"output": "--output", "save_prices": "--save-prices"}


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


def check_region(problems: Problems, flag: str, region: str | None) -> None:
    """Add a problem when ``region`` is given and is not a region name."""
    if region is None:
        return
    problem = region_problem(region)
    if problem:
        problems.add(flag, region, problem)


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
        check_region(problems, flag, getattr(args, dest, None))
    if args.command == "fleet":
        check_sagemaker_name(
            problems,
            "endpoint",
            args.endpoint,
            "DescribeEndpoint",
            "EndpointName",
            "an endpoint name",
        )
    if args.command == "recommend" and args.step in ("wait", "to-pools"):
        check_sagemaker_name(
            problems,
            "job",
            args.job,
            "DescribeAIRecommendationJob",
            "AIRecommendationJobName",
            "a recommendation job name",
        )
    for dest, flag in _OUTPUT_ARGUMENTS.items():
        check_output_path(problems, flag, getattr(args, dest, None))
    problems.raise_if_any()
