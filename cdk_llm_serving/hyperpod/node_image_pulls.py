"""The ECR repositories a HyperPod node's role may pull images from: the node's managed policy
grants no ECR action, so the node policy grants the pulls on these repositories only
(``assets/node_image_registries.json`` cites each), and each serving or mirrored chart image
(``HyperPodEksCluster.allow_image_pull``). Images outside ECR need no IAM
(docs/design/hyperpod-cluster.md, "Node role")."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TypedDict, cast

from .._partitions import partition_of_region
from ..model_sources import ECR_REGISTRY, ContainerImage

#: The pull actions that take a repository ARN.
PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
)


class _Registries(TypedDict):
    eks_addon_registries: dict[str, str]
    efa_device_plugin_repository: str
    load_balancer_controller_repository: str
    inference_operator_registries: dict[str, str]


@functools.cache
def _registries() -> _Registries:
    text = resources.files(__package__).joinpath("assets/node_image_registries.json").read_text()
    return cast(_Registries, json.loads(text))


def _arn(host: str, repository: str) -> str:
    match = ECR_REGISTRY.match(host)
    assert match, host  # the data file's hosts (test_node_image_pulls)
    region = match["region"]
    partition = partition_of_region(region) or "aws"
    return f"arn:{partition}:ecr:{region}:{match['account']}:repository/{repository}"


def addon_registry_arn(region: str) -> str | None:
    """Every repository of ``region``'s EKS add-on registry; ``None``: a Region AWS's table
    does not list."""
    host = _registries()["eks_addon_registries"].get(region)
    return _arn(host, "*") if host is not None else None


def inference_operator_registry_arn(region: str) -> str | None:
    """Every repository of the inference operator's registry in ``region``, if it has one."""
    host = _registries()["inference_operator_registries"].get(region)
    return _arn(host, "*") if host is not None else None


def efa_device_plugin_repository_arn() -> str:
    """The EFA device plugin chart's image repository (one, in us-west-2, for every Region)."""
    host, repository = _registries()["efa_device_plugin_repository"].split("/", 1)
    return _arn(host, repository)


def load_balancer_controller_repository_arn() -> str:
    """The repository aws-cdk-lib's ``AlbController`` pulls the controller's image from
    (us-west-2's add-on registry, whatever the stack's Region)."""
    host, repository = _registries()["load_balancer_controller_repository"].split("/", 1)
    return _arn(host, repository)


def repository_arn_of(image: str | ContainerImage, partition: str) -> str | None:
    """The ECR repository ARN of ``image``; ``None`` when it is not an ECR image URI that
    can be read at synth (``is_ecr_like`` tells those apart)."""
    source = image if isinstance(image, ContainerImage) else ContainerImage(image_uri=image)
    return source.resolve_repository_arn(partition)


def is_ecr_like(image: str | ContainerImage) -> bool:
    """Whether ``image`` may be in ECR although its repository cannot be read (a token)."""
    uri = image.image_uri if isinstance(image, ContainerImage) else image
    return ".dkr.ecr." in uri or "${Token[" in uri
