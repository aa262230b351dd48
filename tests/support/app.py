"""The test app: the reference app's context, minus what makes snapshots unstable."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# jsii runs the CDK on the first `node` on PATH: use the virtualenv's supported Node.js.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

from aws_cdk import App, DefaultStackSynthesizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


def project_context() -> dict:
    """The feature flags and settings of cdk.json, so tests synthesize what `cdk synth` does."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def new_app(**context: object) -> App:
    """An app like the reference one, minus what makes snapshots unstable."""
    return App(
        # As `make synth`: the reference app's placeholder buckets are allowed for inspection.
        context={**project_context(), "llm-serving:allow-placeholders": True, **context},
        analytics_reporting=False,
        default_stack_synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
    )
