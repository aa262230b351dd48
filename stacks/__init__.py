"""Reference stacks composed from the constructs."""

from .gpt_oss_pool_endpoint_stack import GptOssPoolEndpointStack
from .reference_app import add_reference_stacks

__all__ = ["GptOssPoolEndpointStack", "add_reference_stacks"]
