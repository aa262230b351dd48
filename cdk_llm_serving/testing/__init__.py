"""Test your own stacks the way this library tests its own: ``new_app``, ``template_of``,
``mask_asset_hashes``; with the ``testing`` extra, ``testing.checks`` (cfn-lint and the cdk-nag
packs) and ``testing.snapshots`` (syrupy template snapshots).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, DefaultStackSynthesizer, Stack, Stage

from ..errors import ConfigurationError, Problem

__all__ = ["ASSET_HASH_MARKER", "mask_asset_hashes", "new_app", "read_context", "template_of"]

#: What ``mask_asset_hashes`` puts in place of a hash.
ASSET_HASH_MARKER = "<asset-hash>"
#: Asset hashes are SHA-256 hex digests (aws-cdk-lib ``AssetStaging``).
_ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def read_context(cdk_json: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``context`` of a ``cdk.json`` (feature flags and settings): what ``cdk synth`` passes."""
    context = json.loads(Path(cdk_json).read_text()).get("context", {})
    if not isinstance(context, dict):
        raise ConfigurationError(
            str(cdk_json), [Problem("context", type(context).__name__, "must be an object")]
        )
    return context


def new_app(
    cdk_json: str | os.PathLike[str] | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
) -> App:
    """An ``App`` for tests: ``cdk_json``'s context, then ``context`` on top.

    Version metadata (``AWS::CDK::Metadata``) and the bootstrap-version rule are left out:
    both change with the CDK version, not with your code, and would churn every snapshot.
    """
    return App(
        context={**(read_context(cdk_json) if cdk_json else {}), **(context or {})},
        outdir=outdir,
        analytics_reporting=False,
        default_stack_synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
    )


def template_of(stack: Stack) -> dict[str, Any]:
    """Synthesize ``stack``'s app (validation plugins included) and return its template."""
    stage = Stage.of(stack)
    assert stage is not None, f"{stack.node.path} is not inside an App"
    template: dict[str, Any] = stage.synth().get_stack_artifact(stack.artifact_id).template
    return template


def mask_asset_hashes(value: Any) -> Any:
    """``value`` with every 64-hex-digit asset hash (in keys and strings) replaced by a marker."""
    if isinstance(value, str):
        return _ASSET_HASH.sub(ASSET_HASH_MARKER, value)
    if isinstance(value, list):
        return [mask_asset_hashes(item) for item in value]
    if isinstance(value, dict):
        return {mask_asset_hashes(key): mask_asset_hashes(item) for key, item in value.items()}
    return value
