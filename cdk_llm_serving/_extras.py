"""Optional dependencies (the package's extras): a clear error when one is not installed."""

from __future__ import annotations

import importlib.util

#: Extra -> the modules it brings (pyproject.toml ``[project.optional-dependencies]``).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "hyperpod": (
        "aws_cdk.lambda_layer_kubectl_v33",
        "aws_cdk.lambda_layer_kubectl_v34",
        "aws_cdk.lambda_layer_kubectl_v35",
    ),
    "testing": ("cfnlint", "syrupy"),
    "eval": ("jsonschema",),
}


class MissingExtraError(ImportError):
    """A part of the package was imported without the extra that brings its dependencies."""


def require_extra(extra: str, module: str, needed_by: str) -> None:
    """Raise ``MissingExtraError`` naming ``extra`` when ``module`` cannot be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        raise MissingExtraError(
            f"{needed_by} needs {module}, which the '{extra}' extra brings: "
            f"pip install 'cdk-llm-serving[{extra}]'",
            name=module,
        )
