"""CloudFormation's resource schemas as cfn-lint ships them (the real artifact, not our model)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def resource_schema(resource_type: str, region: str = "us-east-1") -> dict[str, Any]:
    """The provider schema of ``resource_type`` (e.g. ``AWS::SageMaker::Endpoint``)."""
    schemas = resources.files("cfnlint") / "data" / "schemas"
    providers = json.loads((schemas / "providers" / f"{region}.json").read_text())
    schema: dict[str, Any] = json.loads(
        (schemas / "resources" / f"{providers[resource_type]}.json").read_text()
    )
    return schema
