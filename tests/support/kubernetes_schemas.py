"""Validate rendered Kubernetes objects against real schemas (kubernetes-validate, CRDs)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

KUBERNETES_VERSION = "1.33"


def concretize(value: Any) -> Any:
    """Replace CloudFormation intrinsics (deploy-time values) by placeholder strings."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref")):
            return "deploy-time-value"
        return {key: concretize(item) for key, item in value.items()}
    if isinstance(value, list):
        return [concretize(item) for item in value]
    return value


def validate_core(obj: dict, version: str = KUBERNETES_VERSION) -> None:
    """Raises kubernetes_validate.ValidationError on a schema violation (strict: no unknown fields)."""
    kubernetes_validate.validate(concretize(obj), version, strict=True)
