"""The default vLLM image of the multi-node service and the EFA environment it needs.

AWS's vLLM container for EC2/EKS carries the EFA installer's libfabric and aws-ofi-nccl, so
NCCL between nodes runs over EFA; the upstream ``vllm/vllm-openai`` image carries neither,
and NCCL silently falls back to TCP sockets. Facts and sources: ``assets/vllm_image.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnMapping, Stack
from aws_cdk.region_info import FactName, RegionInfo
from constructs import Construct

from .._cdk.validation import is_unresolved
from ..errors import Problems
from ._facts import vllm_image_facts

#: Warning id: a multi-node service on EFA instances with an image not declared EFA-capable.
IMAGE_WITHOUT_EFA_WARNING = "cdk-llm-serving:vllmImageWithoutEfa"


@dataclass(frozen=True)
class ServingImage:
    """A vLLM image of your own for ``VllmMultiNodeService(image=)`` (a plain string is one
    without EFA).

    :param uri: the image reference (``<registry>/<repository>:<tag>@sha256:<digest>``).
    :param efa: the image carries libfabric and aws-ofi-nccl (NCCL over EFA). Default:
        ``False``; a multi-node service on EFA instances then gets a synth warning.
    """

    uri: str
    efa: bool = False


def efa_environment() -> dict[str, str]:
    """``FI_*`` variables that make NCCL's aws-ofi-nccl plugin use EFA (sources in the data file)."""
    return dict(vllm_image_facts()["efa_environment"])


def default_vllm_image(scope: Construct, problems: Problems, prop: str = "image") -> str:
    """AWS's EC2/EKS vLLM image in the stack's region, from the region's DLC account.

    The account comes from aws-cdk-lib's ``RegionInfo`` (``dlc_repository_account``); an
    environment-agnostic stack reads it from a mapping of every region CDK knows.
    """
    facts = vllm_image_facts()
    stack = Stack.of(scope)
    region, suffix = stack.region, stack.url_suffix
    if is_unresolved(region):
        accounts = RegionInfo.region_map(FactName.DLC_REPOSITORY_ACCOUNT)
        mapping = CfnMapping(
            stack,
            "VllmImageAccounts",
            mapping={name: {"account": account} for name, account in sorted(accounts.items())},
            lazy=True,
        )
        account = mapping.find_in_map(region, "account")
    else:
        info = RegionInfo.get(region)
        found, suffix = info.dlc_repository_account, info.domain_suffix or suffix
        if found is None:
            problems.add(
                prop,
                None,
                f"no AWS deep-learning container account is known for {region}; give an image",
            )
            return ""
        account = found
    return f"{account}.dkr.ecr.{region}.{suffix}/{facts['repository']}:{facts['tag']}"
