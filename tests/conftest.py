"""Session-wide fixtures: each reference stack is synthesized once per test session."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# jsii runs the CDK on the first `node` on PATH: use the virtualenv's supported Node.js.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

import pytest  # noqa: E402
from aws_cdk import App, DefaultStackSynthesizer, Validations  # noqa: E402
from aws_cdk import cx_api  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def project_context() -> dict:
    """The feature flags and settings of cdk.json, so tests synthesize what `cdk synth` does."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def new_app(**context: object) -> App:
    """An app like the reference one, minus what makes snapshots unstable."""
    return App(
        context={**project_context(), **context},
        analytics_reporting=False,
        default_stack_synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
    )


@pytest.fixture(scope="session")
def reference_assembly() -> cx_api.CloudAssembly:
    from cdk_nag import AwsSolutionsChecks

    from cdk_llm_serving.stacks import add_reference_stacks

    app = new_app()
    add_reference_stacks(app)
    # cdk-nag runs as a validation plugin: any unacknowledged finding fails this synth.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app.synth()


@pytest.fixture(scope="session")
def reference_templates(reference_assembly: cx_api.CloudAssembly) -> dict[str, dict]:
    return {stack.stack_name: stack.template for stack in reference_assembly.stacks}


@pytest.fixture(scope="session")
def pool_template(reference_templates: dict[str, dict]) -> dict:
    return reference_templates["GptOss20bPoolEndpoint"]


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} (the team's shared facts and schemas) sits beside the checkout only in CI and dev sessions")
    return SHARED
