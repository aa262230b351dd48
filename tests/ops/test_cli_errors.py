"""CLI: bad input is one ``error:`` line with a distinct documented exit status,
JSON under ``--json``, never a traceback nor Python's own wording. Runs the real command
line in a subprocess (what a user sees), with no AWS credentials or region."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_llm_serving.ops.exit_codes import (
    EXIT_NO_CREDENTIALS,
    EXIT_NO_REGION,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    MEANINGS,
)
from tests.support.cli import PLAN, cli

ROOT = Path(__file__).resolve().parents[2]
#: Starts a recommendation without touching AWS: only the spec is read before the call.
START = ["recommend", "start", "--region", "us-west-2"]


def spec(tmp_path: Path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


CASES = [
    (
        "missing --spec file",
        lambda t: [*START, "--spec", str(t / "nope.yaml")],
        EXIT_USAGE,
        "error: recommendation spec: 1 problem; --spec = ",
    ),
    (
        "unparsable --spec file",
        lambda t: [*START, "--spec", spec(t, "name: [unclosed")],
        EXIT_USAGE,
        "error: recommendation spec: 1 problem; --spec = ",
    ),
    (
        "--spec holding a list",
        lambda t: [*START, "--spec", spec(t, "- a\n- b\n")],
        EXIT_USAGE,
        "error: recommendation spec: 1 problem; --spec = ",
    ),
    (
        "--spec missing keys",
        lambda t: [*START, "--spec", spec(t, "name: job\n")],
        EXIT_USAGE,
        "error: recommendation spec: 3 problems; model_s3_uri = None: required (a flag or a key of --spec)",
    ),
    (
        "--spec with a misspelled key",
        lambda t: [*START, "--spec", spec(t, "nmae: job\n")],
        EXIT_USAGE,
        "error: recommendation spec: 5 problems; spec.nmae = 'job': not an option; did you mean 'name'?",
    ),
    (
        "--tokens-per-second 0",
        lambda t: [
            *PLAN,
            "--tokens-per-second",
            "0",
        ],
        EXIT_USAGE,
        "usage:",
    ),
    (
        "--itl-target-ms 0",
        lambda t: [
            *PLAN,
            "--itl-target-ms",
            "0",
        ],
        EXIT_USAGE,
        "usage:",
    ),
    (
        "malformed --base-url",
        lambda t: ["smoke", "--base-url", "localhost:8000/v1", "--model", "m"],
        EXIT_USAGE,
        "error: command line: 1 problem; --base-url = 'localhost:8000/v1': must be an http:// or https:// URL",
    ),
    (
        "--base-url with a bad port",
        lambda t: ["smoke", "--base-url", "http://lb:80a/v1", "--model", "m"],
        EXIT_USAGE,
        "error: command line: 1 problem; --base-url = 'http://lb:80a/v1': not a URL",
    ),
    (
        "unreachable endpoint",
        lambda t: [
            "smoke",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--timeout",
            "2",
        ],
        EXIT_UNREACHABLE,
        "error: cannot reach http://127.0.0.1:9/v1",
    ),
    (
        "no region",
        lambda t: ["fleet", "my-endpoint"],
        EXIT_NO_REGION,
        "error: cannot describe endpoint 'my-endpoint': You must specify a region.",
    ),
    (
        "no credentials",
        lambda t: ["fleet", "my-endpoint", "--region", "us-west-2"],
        EXIT_NO_CREDENTIALS,
        "error: cannot describe endpoint 'my-endpoint': Unable to locate credentials",
    ),
    (
        "plan: unreadable price file",
        lambda t: [
            *PLAN,
            "--prices",
            spec(t, "{not json"),
        ],
        EXIT_USAGE,
        "error: ",
    ),
]


@pytest.mark.parametrize(("kind", "argv", "code", "start"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_status(kind, argv, code, start, tmp_path):
    result = cli(*argv(tmp_path), home=tmp_path)
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and "__init__()" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if start != "usage:":
        assert len(lines) == 1 and lines[0].startswith(start), result.stderr
    else:  # argparse's own usage error: usage line, then one error line
        assert result.stderr.startswith("usage:") and "must be a positive number" in result.stderr


def test_errors_are_json_under_json(tmp_path):
    result = cli("smoke", "--base-url", "ftp://x/v1", "--model", "m", "--json", home=tmp_path)
    assert result.returncode == EXIT_USAGE
    data = json.loads(result.stdout)
    assert data["exit_code"] == EXIT_USAGE
    assert [(p["property"], p["value"]) for p in data["problems"]] == [("--base-url", "ftp://x/v1")]


def test_help_documents_every_exit_status(tmp_path):
    text = cli("--help", home=tmp_path).stdout
    for code, meaning in MEANINGS.items():
        assert f"{code:>2}  {meaning}" in text


def test_readme_documents_every_exit_status():
    readme = (ROOT / "README.md").read_text()
    for code, meaning in MEANINGS.items():
        assert f"| {code} | {meaning} |" in readme


def test_aws_errors_are_json_under_json(tmp_path):
    result = cli("fleet", "my-endpoint", "--json", home=tmp_path)
    assert result.returncode == EXIT_NO_REGION
    assert json.loads(result.stdout)["exit_code"] == EXIT_NO_REGION
