"""The shared client name without an S3 write: AWS's entrypoint splits a JSON array.

Runs the REAL ``sagemaker_args.py`` (aws/deep-learning-containers ``scripts/docker/vllm/``,
copied unmodified in ``../shared/aws-dlc-vllm``) on the container environment the template
carries, and reads the argv it hands to vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_llm_serving import ContainerImage, ModelData, VllmPool, VllmPoolEndpoint
from cdk_llm_serving.vllm import VllmConfig
from tests.support.builders import IMAGE, new_stack, template_of
from tests.support.template_helpers import resources_of_type

SHARED = Path(__file__).resolve().parents[3] / "shared" / "aws-dlc-vllm"
ARGS_SCRIPT = SHARED / "sagemaker_args.py"


def synthesized(image: ContainerImage) -> dict:
    stack = new_stack("JsonNames")
    VllmPoolEndpoint(
        stack,
        "Serving",
        image=image,
        model="gpt-oss-20b",
        config=VllmConfig(model="x", served_model_name="gpt-oss-20b", max_model_len=32768),
        weights={
            "bf16": ModelData.from_s3_uri("s3://read-only-weights/gpt-oss-20b/"),
            "int4": ModelData.from_s3_uri("s3://read-only-weights/gpt-oss-20b-int4/"),
        },
        pools=[VllmPool("ml.g6e.12xlarge"), VllmPool("ml.g6e.2xlarge")],
    )
    return template_of(stack)


def container_environments(template: dict) -> list[dict[str, str]]:
    models = resources_of_type(template, "AWS::SageMaker::Model").values()
    return [m["Properties"]["PrimaryContainer"]["Environment"] for m in models]


def entrypoint_argv(environment: dict[str, str], tmp_path: Path) -> list[str]:
    """What AWS's script emits (NUL-delimited) for this environment."""
    env = {"PATH": os.environ.get("PATH", ""), **environment}
    done = subprocess.run(
        [sys.executable, str(ARGS_SCRIPT)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return [token for token in done.stdout.decode().split("\0") if token]


@pytest.fixture(scope="module")
def json_array_template() -> dict:
    return synthesized(ContainerImage.from_ecr_uri(IMAGE).with_json_array_arguments())


def test_no_file_is_written_into_the_weights_prefix(json_array_template):
    body = json.dumps(json_array_template)
    assert "s3:PutObject" not in body and "putObject" not in body
    assert not resources_of_type(json_array_template, "Custom::AWS")
    for environment in container_environments(json_array_template):
        assert "SM_VLLM_CONFIG" not in environment


@pytest.mark.skipif(not ARGS_SCRIPT.is_file(), reason=f"AWS's script is not at {ARGS_SCRIPT}")
def test_aws_entrypoint_serves_the_copy_name_first_then_the_shared_name(
    json_array_template, tmp_path
):
    environments = container_environments(json_array_template)
    assert len(environments) == 2
    copies = set()
    for environment in environments:
        argv = entrypoint_argv(environment, tmp_path)
        at = argv.index("--served-model-name")
        copy, shared = argv[at + 1 : at + 3]
        assert shared == "gpt-oss-20b" and copy.startswith("gpt-oss-20b-")
        assert at + 3 == len(argv) or argv[at + 3].startswith("--")
        copies.add(copy)
    assert len(copies) == 2  # each copy names itself


def test_an_image_without_the_declaration_keeps_the_config_file():
    template = synthesized(ContainerImage.from_ecr_uri(IMAGE))
    for environment in container_environments(template):
        assert environment["SM_VLLM_CONFIG"].startswith("/opt/ml/model/cdk-llm-serving/")
        assert "SM_VLLM_SERVED_MODEL_NAME" not in environment
