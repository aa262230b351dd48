"""Command line: names, regions and output paths are checked before any AWS call
(each case reached AWS or boto3's credential chain before, and failed with an error that did
not name the argument), against botocore's own data; and output piped to a reader that stops
early ends without a traceback. Runs the real command line in a subprocess with no AWS
configuration, so a case that is not caught here would fail with a region or credentials error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import botocore
import pytest

from cdk_llm_serving.errors import Problems
from cdk_llm_serving.ops.arguments import region_problem, sagemaker_member_limits
from cdk_llm_serving.ops.exit_codes import EXIT_OUTPUT_CLOSED, EXIT_USAGE
from tests.support.cli import PLAN, ROOT, cli, empty_aws_environment

ROLE = "arn:aws:iam::123456789012:role/Recommender"
START = [
    "recommend",
    "start",
    "--model-s3-uri",
    "s3://bucket/model/",
    "--output-s3-uri",
    "s3://bucket/out/",
    "--region",
    "us-west-2",
]

CASES = [
    ("endpoint name with a space", ["fleet", "my endpoint", "--region", "us-west-2"], "endpoint"),
    ("endpoint name of 64 characters", ["fleet", "e" * 64, "--region", "us-west-2"], "endpoint"),
    ("region in capitals", ["fleet", "ep", "--region", "US-WEST-2"], "--region"),
    ("region that is an availability zone", ["fleet", "ep", "--region", "us-west-2a"], "--region"),
    ("addons check in no region", ["addons", "check", "--region", "west"], "--region"),
    (
        "plan priced in no region",
        [*PLAN, "--region", "us_west_2"],
        "--region",
    ),
    (
        "smoke token for no region",
        ["smoke", "--base-url", "https://h/v1", "--model", "m", "--sagemaker-region", "oregon"],
        "--sagemaker-region",
    ),
    (
        "job name with an underscore",
        ["recommend", "wait", "my_job", "--region", "us-west-2"],
        "job",
    ),
    (
        "role name for a role ARN",
        [*START, "--name", "job", "--role-arn", "Recommender"],
        "role_arn",
    ),
    (
        "job name too long for its workload configuration",
        [*START, "--name", "j" * 55, "--role-arn", ROLE],
        "name",
    ),
    (
        "output that is a directory",
        ["recommend", "to-pools", "job", "--output", "{tmp}", "--region", "us-west-2"],
        "--output",
    ),
    (
        "output in a missing directory",
        [
            "recommend",
            "to-pools",
            "job",
            "--output",
            "{tmp}/no/pools.json",
            "--region",
            "us-west-2",
        ],
        "--output",
    ),
    (
        "saved prices into a directory",
        ["fleet", "ep", "--region", "us-west-2", "--live-prices", "--save-prices", "{tmp}"],
        "--save-prices",
    ),
]


@pytest.mark.parametrize(("kind", "argv", "prop"), CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_named_before_aws_is_called(kind, argv, prop, tmp_path):
    result = cli(*(a.replace("{tmp}", str(tmp_path)) for a in argv), home=tmp_path)
    assert result.returncode == EXIT_USAGE, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"; {prop} = " in lines[0], lines[0]
    # Nothing of boto3's: the argument failed before a region or credentials were looked up.
    assert "credentials" not in lines[0] and "specify a region" not in lines[0]


def test_every_problem_of_the_command_line_at_once(tmp_path):
    result = cli(
        "recommend",
        "to-pools",
        "bad_job",
        "--output",
        str(tmp_path),
        "--region",
        "EU",
        home=tmp_path,
    )
    assert result.returncode == EXIT_USAGE
    assert "3 problems" in result.stderr and "job = " in result.stderr


def test_json_names_each_problem(tmp_path):
    result = cli("fleet", "bad name", "--region", "moon", "--json", home=tmp_path)
    data = json.loads(result.stdout)
    assert {p["property"] for p in data["problems"]} == {"endpoint", "--region"}


def test_every_region_botocore_knows_is_a_region_name():
    """The rule refuses what no partition's pattern admits, and nothing botocore lists."""
    data = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())
    regions = [r for p in data["partitions"] for r in p["regions"] if not r.endswith("-global")]
    assert len(regions) > 30
    assert [r for r in regions if region_problem(r)] == []
    assert region_problem("us-east-1") is None and region_problem("eu-central-3") is None
    assert region_problem("us-east-1a") and region_problem("global")


def test_limits_are_read_from_botocores_sagemaker_model():
    pattern, minimum, maximum = sagemaker_member_limits("DescribeEndpoint", "EndpointName")
    assert (minimum, maximum) == (0, 63) and "a-zA-Z0-9" in pattern
    assert sagemaker_member_limits("CreateAIWorkloadConfig", "AIWorkloadConfigName")[2] == 63
    problems = Problems("x")
    from cdk_llm_serving.ops.arguments import check_sagemaker_name

    assert check_sagemaker_name(problems, "e", "a-b", "DescribeEndpoint", "EndpointName", "n")
    assert not check_sagemaker_name(problems, "e", "a-", "DescribeEndpoint", "EndpointName", "n")


def test_output_closed_by_its_reader_ends_without_a_traceback(tmp_path):
    """``| head``: the reader has gone before the table is written (its end of the pipe is
    closed first, so the write fails every time, not only when the output outgrows the pipe)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    argv = PLAN
    try:
        result = subprocess.run(
            [sys.executable, "-m", "cdk_llm_serving", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=empty_aws_environment(tmp_path),
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == EXIT_OUTPUT_CLOSED, result.stderr
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
