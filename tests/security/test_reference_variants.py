"""The reference app's documented variants synthesize under the app's own cdk-nag packs.

Each variant is the README's context key on the reference app, synthesized as ``cdk synth``
does (``add_reference_stacks``) with ``REFERENCE_NAG_PACKS`` (AwsSolutions and HIPAA.Security)
as validation plugins: an unacknowledged finding fails ``app.synth()``.
"""

from __future__ import annotations

import pytest
from aws_cdk import cx_api

from cdk_llm_serving.testing.checks import add_nag_packs
from stacks import add_reference_stacks
from stacks.hipaa_review import REFERENCE_NAG_PACKS
from tests.support.app import new_app
from tests.support.reference_variants import VARIANTS
from tests.support.service_trusts import unexplained
from tests.support.template_helpers import resources_of_type


def _synth(context: dict[str, str]) -> cx_api.CloudAssembly:
    app = new_app(**context)
    add_reference_stacks(app)
    add_nag_packs(app, REFERENCE_NAG_PACKS)
    return app.synth()


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request) -> tuple[str, dict]:
    assembly = _synth(VARIANTS[request.param])
    return request.param, assembly.get_stack_by_name("ReferenceMoeHyperPod").template


def test_the_variant_synthesizes_under_the_app_s_packs(variant):
    """``app.synth()`` raised on any finding; the variant is what its key asks for."""
    name, template = variant
    (cluster,) = resources_of_type(template, "AWS::SageMaker::Cluster").values()
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    gpu_types = {g["InstanceType"] for g in groups.values() if g["InstanceType"] != "ml.m5.4xlarge"}
    if name == "p5en":
        assert gpu_types == {"ml.p5en.48xlarge"}
    elif name == "inference-operator":
        assert gpu_types == {
            "ml.p6-b200.48xlarge",
            "ml.p5en.48xlarge",
            "ml.p5.48xlarge",
            "ml.p4de.24xlarge",  # the P/D endpoint's gpu-pd group
        }
    else:
        assert gpu_types == {"ml.p6-b200.48xlarge"}
    scaled = resources_of_type(template, "Custom::AWSCDK-EKS-KubernetesResource")
    has_scaled_object = any("ScaledObject" in str(r["Properties"]) for r in scaled.values())
    assert has_scaled_object == name.startswith("keda")
    # The KEDA variant's GPU group may grow and shrink: cluster node autoscaling is on.
    auto_scaling = cluster["Properties"].get("AutoScaling")
    assert auto_scaling == (
        {"Mode": "Enable", "AutoScalerType": "Karpenter"} if name.startswith("keda") else None
    )
    assert ("ClusterRole" in cluster["Properties"]) == name.startswith("keda")


def test_every_service_trust_and_key_grant_is_bound_or_explained(variant):
    """Each role a service assumes and each key a service may use names this account's
    resources, or ``UNCONDITIONED`` cites why AWS supports no condition for it."""
    _, template = variant
    assert unexplained(template) == []
