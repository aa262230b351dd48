"""One staging endpoint per copy of a ``VllmPoolEndpoint``, so each copy can be evaluated alone.

A pool endpoint chooses the pool per request: an eval sent to it may be answered by any copy.
``StagingEndpoints`` builds, for each pool of the endpoint, a one-pool ``InstancePoolEndpoint``
running that pool's own model (the same ``AWS::SageMaker::Model``: no model is duplicated) on
the pool's instance type, so ``cdk-llm-serving eval`` can target every copy
(``--base-url`` the copy's ``OpenAiBaseUrl`` output, ``--expect-copy`` its served name).

Cheap by construction: one instance per copy (``instance_count``), no enhanced or detailed
metrics (the staging copies are asked, not watched), and the endpoints go with the stack (CloudFormation's default ``DeletionPolicy`` is
``Delete``: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html);
deploy it in a staging stack, run the gate, then destroy the stack. Endpoint names are derived
from the construct path as every ``InstancePoolEndpoint``'s are.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput
from constructs import Construct

from ..errors import ConfigurationError, Problem
from .instance_pool import InstancePool
from .pool_endpoint import InstancePoolEndpoint
from .vllm_pool_endpoint import VllmPoolEndpoint, _construct_id

#: The most copies a staging set builds (a pool endpoint has at most 5 pools).
MAX_COPIES = 5


@dataclass(frozen=True)
class StagingCopy:
    """One copy's staging endpoint."""

    #: The copy's own served name (what its answers report as ``model``).
    served_model_name: str
    #: The name clients send (every copy serves it).
    client_model_name: str
    instance_type: str
    endpoint: InstancePoolEndpoint

    @property
    def openai_base_url(self) -> str:
        return self.endpoint.openai_base_url


class StagingEndpoints(Construct):
    """A one-pool endpoint per copy of ``source``, for per-copy evals (``cdk-llm-serving eval``).

    :param source: the pool endpoint whose copies to stage (its models are reused).
    :param instance_count: instances per staging endpoint (1-10). Default: 1.

    Each copy has two outputs, ``<Copy>BaseUrl`` (``eval --base-url``) and ``<Copy>Name``
    (``eval --expect-copy``). ``copies`` lists them in the source's pool order; the first is
    the reference copy (the most preferred pool's).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        source: VllmPoolEndpoint,
        instance_count: int = 1,
    ) -> None:
        super().__init__(scope, id)
        if (
            isinstance(instance_count, bool)
            or not isinstance(instance_count, int)
            or not 1 <= instance_count <= 10
        ):
            raise ConfigurationError(
                f"StagingEndpoints '{self.node.path}'",
                [Problem("instance_count", instance_count, "a whole number from 1 to 10")],
            )
        self.source = source
        self.copies: list[StagingCopy] = []
        primary = source.endpoint.model
        for pool in source.endpoint.pools:
            model = pool.model or primary
            assert model is not None  # a VllmPoolEndpoint gives every pool its model
            served = model.served_model_name
            instance_type = str(pool.instance_type)
            copy_id = _construct_id(f"{served}-{instance_type.removeprefix('ml.')}")
            endpoint = InstancePoolEndpoint(
                self,
                copy_id,
                model=model,
                pools=[InstancePool(pool.instance_type, max_concurrency=pool.max_concurrency)],
                initial_instance_count=instance_count,
                enhanced_metrics=False,
                detailed_observability=False,
                catalog=source.catalog,
            )
            CfnOutput(
                self,
                f"{copy_id}BaseUrl",
                value=endpoint.openai_base_url,
                description=f"eval --base-url for the copy {served} on {instance_type}",
            )
            CfnOutput(
                self,
                f"{copy_id}Name",
                value=served,
                description="eval --expect-copy (the copy's own served name)",
            )
            self.copies.append(
                StagingCopy(served, source.client_model_name, instance_type, endpoint)
            )
