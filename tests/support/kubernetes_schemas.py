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


def undeclared_fields(value: Any, schema: dict, path: str = "") -> list[str]:
    """Paths in ``value`` that ``schema`` does not declare.

    A CRD's structural schema makes the API server prune unknown fields silently
    (kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
    #field-pruning), so a misspelt field would validate and then vanish: list them instead.
    Objects with ``x-kubernetes-preserve-unknown-fields`` or ``additionalProperties`` keep
    anything, and so does the root ``metadata`` (ObjectMeta, which the API server validates
    itself).
    """
    if isinstance(value, dict) and schema.get("type") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema:
            return []
        declared = schema.get("properties", {})
        found: list[str] = []
        for key, item in value.items():
            if not path and key == "metadata":
                continue
            if key not in declared:
                found.append(f"{path}.{key}")
            else:
                found += undeclared_fields(item, declared[key], f"{path}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [
            field
            for index, item in enumerate(value)
            for field in undeclared_fields(item, schema["items"], f"{path}[{index}]")
        ]
    return []
