"""One name for clients, one per copy in responses: a JSON array, or a vLLM config file.

vLLM serves every ``--served-model-name`` and reports the first in each response
(``vllm/entrypoints/openai/models/serving.py``), so every copy serves
``[<copy name>, <client name>]``. An image whose entrypoint splits JSON arrays
(``ContainerImage.json_array_arguments``; which tags do: UNCONFIRMED[json-array-entrypoint])
takes both in ``SM_VLLM_SERVED_MODEL_NAME``; older ones read a vLLM config file that a custom
resource writes under the weights prefix (``SM_VLLM_CONFIG``). The sources, the file's
lifecycle and its grants: docs/design/pool-endpoints.md, "Served names".
"""

from __future__ import annotations

import json
import re

from aws_cdk import Aspects, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

from .._cdk.nag import (
    AcknowledgeCdkInternals,
    acknowledge,
    acknowledge_cdk_internals,
    acknowledge_wildcard_resources,
)
from .._cdk.role_grants import resource_account_condition
from ..model_sources import ModelData

#: Where SageMaker mounts ModelDataSource files inside the container.
MODEL_DIR = "/opt/ml/model"
#: The SageMaker vLLM container variable that becomes ``--config``.
VLLM_CONFIG_VARIABLE = "SM_VLLM_CONFIG"
#: The SageMaker vLLM container variable that becomes ``--served-model-name``.
VLLM_SERVED_MODEL_NAME_VARIABLE = "SM_VLLM_SERVED_MODEL_NAME"
#: Carries the served names (JSON list, copy first) for operators: ``fleet`` reads it back.
#: Neither the container's entrypoint (``SM_VLLM_*`` only) nor vLLM (``VLLM_*``) reads it.
SERVED_NAMES_VARIABLE = "CDK_LLM_SERVING_SERVED_NAMES"
#: Folder of our config files under the weights prefix.
CONFIG_FOLDER = "cdk-llm-serving"
#: aws-cdk-lib's id of the singleton function behind every ``AwsCustomResource`` of a stack.
_AWS_CUSTOM_RESOURCE_PROVIDER = "AWS679f53fac002430cb0da5b7982bd2287"


def config_file_name(copy_name: str, owner: str) -> str:
    """``served-names-<copy>-<owner>.yaml``; vLLM loads only ``.yaml``/``.yml`` config files.

    ``owner`` (``owner_tag``) makes the key unique to one construct, so no two custom
    resources ever own the same object: another stack or endpoint serving the same weights,
    or a construct that moves (new logical id), writes its own file, and deleting one
    resource's file never removes a file another one wrote.
    """
    return f"served-names-{re.sub(r'[^A-Za-z0-9._-]', '-', copy_name)}-{owner}.yaml"


def owner_tag(scope: Construct) -> str:
    """Eight hex digits of the construct's address (a hash of its path: stable, unique per app)."""
    return scope.node.addr[2:10]


def served_names(copy_name: str, client_name: str) -> list[str]:
    """The copy's name first (responses carry it), then the shared name."""
    return [copy_name] if copy_name == client_name else [copy_name, client_name]


def served_names_environment(copy_name: str, client_name: str) -> dict[str, str]:
    """Both names in ``SM_VLLM_SERVED_MODEL_NAME`` as a JSON array (copy first), for images
    whose entrypoint splits it; ``SERVED_NAMES_VARIABLE`` as with the file."""
    names = json.dumps(served_names(copy_name, client_name))
    return {VLLM_SERVED_MODEL_NAME_VARIABLE: names, SERVED_NAMES_VARIABLE: names}


def served_names_yaml(copy_name: str, client_name: str) -> str:
    """The config file: ``served-model-name`` as a YAML list (JSON strings are YAML strings)."""
    names = served_names(copy_name, client_name)
    return "served-model-name:\n" + "".join(f"  - {json.dumps(name)}\n" for name in names)


class ServedNamesFile(Construct):
    """Puts one copy's vLLM config file under its weights prefix; ``environment`` points at it.

    :param model_data: the copy's weights (the file goes under ``<prefix>cdk-llm-serving/``).
    :param copy_name: the name responses carry.
    :param client_name: the name clients send to every copy.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        model_data: ModelData,
        copy_name: str,
        client_name: str,
    ) -> None:
        super().__init__(scope, id)
        owner = owner_tag(self)
        relative = f"{CONFIG_FOLDER}/{config_file_name(copy_name, owner)}"
        self.key = f"{model_data.key_prefix}{relative}"
        self.container_path = f"{MODEL_DIR}/{relative}"
        self.environment = {
            VLLM_CONFIG_VARIABLE: self.container_path,
            SERVED_NAMES_VARIABLE: json.dumps(served_names(copy_name, client_name)),
        }
        bucket_arn = f"arn:{Stack.of(self).partition}:s3:::{model_data.bucket_name}"
        own_file = f"{bucket_arn}/{self.key}"
        own_files = f"{bucket_arn}/*{CONFIG_FOLDER}/served-names-*-{owner}.yaml"
        location = {"Bucket": model_data.bucket_name, "Key": self.key}
        self.resource = cr.AwsCustomResource(
            self,
            "Put",
            on_create=self._put(location, copy_name, client_name),
            on_update=self._put(location, copy_name, client_name),
            on_delete=cr.AwsSdkCall(service="S3", action="deleteObject", parameters=location),
            policy=self._policy(model_data, own_file, own_files),
            install_latest_aws_sdk=False,
        )
        acknowledge(
            self.resource,
            "HIPAA.Security-IAMNoInlinePolicy",
            "aws-cdk-lib's AwsCustomResource keeps its grants (this construct's files) inline.",
        )
        acknowledge_wildcard_resources(
            self.resource,
            [own_files],
            "Deletes only this construct's own served-names files (its address is in the name) in "
            "the weights bucket: after the weights prefix or copy name changes, CloudFormation "
            "deletes the old file in cleanup, when this policy already names the new key.",
            actions=["s3:DeleteObject"],
        )
        if model_data.encryption_key is not None:
            model_data.encryption_key.grant_encrypt(self.resource)
        provider = Stack.of(self).node.try_find_child(_AWS_CUSTOM_RESOURCE_PROVIDER)
        if provider is not None and not any(
            isinstance(aspect, AcknowledgeCdkInternals) for aspect in Aspects.of(provider).all
        ):
            acknowledge_cdk_internals(
                provider,
                "aws-cdk-lib's AwsCustomResource function (basic execution role, its runtime); "
                "its only grants: put and delete of the stack's served-names files",
            )

    def _policy(
        self, model_data: ModelData, own_file: str, own_files: str
    ) -> cr.AwsCustomResourcePolicy:
        """Put this file, delete this construct's files: in the bucket owner's account only."""
        bucket_owner = resource_account_condition(
            model_data.bucket_account or Stack.of(self).account
        )
        return cr.AwsCustomResourcePolicy.from_statements(
            [
                iam.PolicyStatement(
                    actions=["s3:PutObject"], resources=[own_file], conditions=bucket_owner
                ),
                iam.PolicyStatement(
                    actions=["s3:DeleteObject"], resources=[own_files], conditions=bucket_owner
                ),
            ]
        )

    @staticmethod
    def _put(location: dict[str, str], copy_name: str, client_name: str) -> cr.AwsSdkCall:
        return cr.AwsSdkCall(
            service="S3",
            action="putObject",
            parameters={
                **location,
                "Body": served_names_yaml(copy_name, client_name),
                "ContentType": "application/yaml",
            },
            physical_resource_id=cr.PhysicalResourceId.of(location["Key"]),
        )
