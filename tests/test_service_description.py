"""Our read of botocore's SageMaker description agrees with botocore's own loader and model."""

from __future__ import annotations

import botocore.session

from cdk_llm_serving._cdk import service_limits
from cdk_llm_serving._cdk.service_limits import sagemaker_description


def _constraints(shape: object) -> tuple[object, ...]:
    metadata = getattr(shape, "metadata", {})
    enum = tuple(getattr(shape, "enum", None) or ())
    return (metadata.get("min"), metadata.get("max"), metadata.get("pattern"), enum)


def test_every_member_constraint_matches_botocores_service_model():
    """botocore's session (its loader: search path, newest API version, extras merged) and
    model (member references resolved) are the reference; the library reads the file itself."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    assert model.api_version == sagemaker_description()["metadata"]["apiVersion"]
    compared = 0
    for name in model.shape_names:
        shape = model.shape_for(name)
        members = getattr(shape, "members", {})
        for member, target in members.items():
            ours = service_limits._shape(name, member)
            assert (
                ours.get("min"),
                ours.get("max"),
                ours.get("pattern"),
                tuple(ours.get("enum") or ()),
            ) == _constraints(target), (name, member)
            compared += 1
    assert compared > 5000  # every structure's members, not a sample
