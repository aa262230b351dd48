"""Images by digest where given; a synth warning with an id for tag-only images."""

from __future__ import annotations

from aws_cdk import aws_ecr as ecr
from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import ContainerImage
from cdk_llm_serving.errors import Problems
from cdk_llm_serving.model_sources import TAG_ONLY_IMAGE_WARNING
from tests.support.builders import IMAGE, new_stack, serving_model
from tests.support.hyperpod import deepseek_service, small_cluster

DIGEST = "sha256:" + "ab" * 32
REPOSITORY = IMAGE.split(":")[0]


def _tag_only_warnings(stack) -> list:
    return Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp(r".*is pinned by tag only.*")
    )


def test_a_tag_only_sagemaker_image_warns_with_an_id():
    stack = new_stack()
    serving_model(stack)
    (warning,) = _tag_only_warnings(stack)
    assert TAG_ONLY_IMAGE_WARNING in str(warning.entry.data)
    assert IMAGE in str(warning.entry.data)


def test_an_image_by_digest_does_not_warn():
    for uri in (f"{REPOSITORY}@{DIGEST}", f"{IMAGE}@{DIGEST}"):
        stack = new_stack()
        image = ContainerImage.from_ecr_uri(uri)
        problems = Problems("image")
        image.validate(problems, "image")
        assert not problems, uri
        serving_model(stack, image=image)
        assert _tag_only_warnings(stack) == [], uri


def test_from_repository_takes_a_digest():
    stack = new_stack()
    repository = ecr.Repository.from_repository_name(stack, "Repo", "vllm")
    image = ContainerImage.from_repository(repository, digest=DIGEST)
    assert stack.resolve(image.image_uri)["Fn::Join"][1][-1].endswith(f"/vllm@{DIGEST}")
    serving_model(stack, image=image)
    assert _tag_only_warnings(stack) == []


def test_a_tag_only_hyperpod_image_warns_with_an_id():
    stack = new_stack()
    cluster, addons, store = small_cluster(stack)
    deepseek_service(stack, cluster, addons, store, image="vllm/vllm-openai:v0.33.0")
    deepseek_service(
        stack,
        cluster,
        addons,
        store,
        id="Pinned",
        name="pinned",
        image=f"vllm/vllm-openai:v0.33.0@{DIGEST}",
    )
    warnings = _tag_only_warnings(stack)
    assert [w.id for w in warnings] == ["/Test/Serving"]
