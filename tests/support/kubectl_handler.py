"""aws-cdk-lib's own kubectl handler (the Helm part), run on a template's chart resource.

The handler's source ships inside the installed aws-cdk-lib (``_jsii/aws-cdk-lib@*.jsii.tgz`` ->
``package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/helm/__init__.py``); it is
loaded as it is and run with its process calls recorded instead of executed (no AWS, no
cluster), so its own checks (e.g. that a chart asset comes without ``Chart``) judge our
resource properties, and the recorded ``helm`` command shows what it would install.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import tarfile
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

_HANDLER = "package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/helm/__init__.py"


def load_helm_handler(destination: Path) -> ModuleType:
    """The Helm handler module of the installed aws-cdk-lib, loaded from ``destination``."""
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    (jsii_tgz,) = sorted((package / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(jsii_tgz) as archive:
        member = archive.extractfile(_HANDLER)
        assert member is not None
        source = destination / "cdk_helm_handler.py"
        source.write_bytes(member.read())
    module_spec = importlib.util.spec_from_file_location("cdk_helm_handler", source)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    with warnings.catch_warnings():  # its regex literals lack the r prefix: not ours to fix
        warnings.simplefilter("ignore", DeprecationWarning)
        module_spec.loader.exec_module(module)
    return module


def _literal(value: Any) -> Any:
    """A deploy-time value as the handler would receive it (Fn::Sub text, Join parts, refs)."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        return value["Fn::Sub"]
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(
            p if isinstance(p, str) else "deploy-time-value" for p in value["Fn::Join"][1]
        )
    if isinstance(value, dict):
        return "deploy-time-value"
    return value


def run_create(handler: ModuleType, properties: dict[str, Any], chart_dir: str) -> list[list[str]]:
    """Send a Create event with ``properties``; the commands the handler runs.

    Downloading a chart asset or pulling an OCI chart is recorded, and yields ``chart_dir``.
    """
    commands: list[list[str]] = []

    def record(command: list[str], **_: Any) -> bytes:
        commands.append([str(part) for part in command])
        return b""

    def fetched(*args: Any) -> str:
        commands.append(["fetch", *map(str, args)])
        return chart_dir

    handler.subprocess = SimpleNamespace(  # type: ignore[attr-defined]
        check_call=record,
        check_output=record,
        CalledProcessError=subprocess.CalledProcessError,
        STDOUT=subprocess.STDOUT,
    )
    handler.get_chart_asset_from_url = fetched  # type: ignore[attr-defined]
    handler.get_chart_from_oci = fetched  # type: ignore[attr-defined]
    event = {
        "RequestType": "Create",
        "ResourceProperties": {key: _literal(value) for key, value in properties.items()},
    }
    handler.helm_handler(json.loads(json.dumps(event)), None)
    return commands
