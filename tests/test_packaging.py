"""What an install brings: the base dependencies, the extras, their pins, the license."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cdk_llm_serving._extras import EXTRA_MODULES

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_base_install_brings_no_kubectl_layer():
    assert not [d for d in PROJECT["dependencies"] if "kubectl" in d]
    assert all("kubectl" in d for d in PROJECT["optional-dependencies"]["hyperpod"])


def test_requirements_pin_every_dependency_and_extra_within_its_range():
    """``make install`` (requirements.txt) installs everything any extra declares."""
    pins = _pins()
    declared = [*PROJECT["dependencies"]]
    for extra in PROJECT["optional-dependencies"].values():
        declared += [d for d in extra if not d.startswith(PROJECT["name"])]
    for text in declared:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in requirements.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (text, pins[name])


def test_each_extra_brings_the_modules_its_import_check_looks_for():
    """``_extras.EXTRA_MODULES`` names modules the extra's distributions really contain."""
    for extra, modules in EXTRA_MODULES.items():
        files = {
            str(file)
            for text in PROJECT["optional-dependencies"][extra]
            for file in distribution(Requirement(text).name).files or ()
        }
        for module in modules:
            assert f"{module.replace('.', '/')}/__init__.py" in files, (extra, module)


def test_without_the_hyperpod_extra_the_sagemaker_path_works_and_hyperpod_names_the_extra():
    script = """
import sys
for module in (
    "aws_cdk.lambda_layer_kubectl_v33",
    "aws_cdk.lambda_layer_kubectl_v34",
    "aws_cdk.lambda_layer_kubectl_v35",
):
    sys.modules[module] = None  # as if the hyperpod extra were not installed
import cdk_llm_serving
from cdk_llm_serving import ContainerImage, InstancePoolEndpoint, VllmPoolEndpoint
assert "InstancePoolEndpoint" in cdk_llm_serving.__all__
assert "HyperPodEksCluster" not in cdk_llm_serving.__all__
try:
    from cdk_llm_serving import HyperPodEksCluster
except ImportError as error:
    print(error)
"""
    shown = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert shown.stdout == (
        "cdk_llm_serving.hyperpod needs aws_cdk.lambda_layer_kubectl_v33, which the 'hyperpod' "
        "extra brings: pip install 'cdk-llm-serving[hyperpod]'\n"
    )


def test_license_file_is_the_apache_license_the_metadata_names():
    text = (ROOT / "LICENSE").read_text()
    assert PROJECT["license"] == {"text": "Apache-2.0"}
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
