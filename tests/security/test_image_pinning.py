"""Images by digest where given; a synth warning with an id for tag-only images."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk.assertions import Annotations, Match

from cdk_llm_serving import ConfigurationError, ContainerImage
from cdk_llm_serving.errors import Problems
from cdk_llm_serving.hyperpod import HyperPodServingAddons, PrefixRouting
from cdk_llm_serving.hyperpod.prefix_routing import PROXY_IMAGE, ROUTER_IMAGE
from cdk_llm_serving.model_sources import TAG_ONLY_IMAGE_WARNING
from tests.support.builders import IMAGE, new_stack, serving_model, template_of
from tests.support.helm import render_template_charts
from tests.support.hyperpod import deepseek_service, hyperpod_cluster, small_cluster
from tests.support.template_helpers import manifest_objects, resources_of_type

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


def _warning_text(stack) -> list[str]:
    return [str(w.entry.data) for w in _tag_only_warnings(stack)]


def test_the_warning_says_how_to_read_and_give_the_digest():
    """ECR: ``aws ecr describe-images`` with the image's registry, region, repository and
    tag; then the prop form that pins it."""
    stack = new_stack()
    serving_model(stack)
    (text,) = _warning_text(stack)
    assert (
        "aws ecr describe-images --registry-id 763104351884 --region us-east-1 "
        "--repository-name vllm --image-ids imageTag=server-sagemaker-cuda-v1 "
        "--query 'imageDetails[0].imageDigest' --output text"
    ) in text
    assert f"crane digest {IMAGE}" in text
    assert f"image = ContainerImage.from_ecr_uri('{IMAGE}@sha256:<digest>')" in text


def test_a_dlc_image_takes_a_digest_and_renders_it_unchanged():
    stack = new_stack()
    serving_model(stack, image=ContainerImage.from_dlc("vllm", "server-sagemaker-cuda-v1"))
    (text,) = _warning_text(stack)
    assert "--registry-id 763104351884 --region us-east-1 --repository-name vllm" in text
    assert (
        "image = ContainerImage.from_dlc('vllm', 'server-sagemaker-cuda-v1', "
        "digest='sha256:<digest>')"
    ) in text
    pinned = new_stack("Pinned")
    serving_model(
        pinned, image=ContainerImage.from_dlc("vllm", "server-sagemaker-cuda-v1", digest=DIGEST)
    )
    assert _tag_only_warnings(pinned) == []
    (model,) = resources_of_type(template_of(pinned), "AWS::SageMaker::Model").values()
    image = model["Properties"]["PrimaryContainer"]["Image"]
    assert image["Fn::Join"][1][-1] == f"/vllm:server-sagemaker-cuda-v1@{DIGEST}"


def test_a_public_image_gets_crane_and_buildx():
    stack = new_stack()
    cluster, addons, store = small_cluster(stack)
    deepseek_service(stack, cluster, addons, store, image="vllm/vllm-openai:v0.33.0")
    (text,) = _warning_text(stack)
    assert "crane digest vllm/vllm-openai:v0.33.0" in text
    assert "docker buildx imagetools inspect vllm/vllm-openai:v0.33.0" in text
    assert "image = vllm/vllm-openai:v0.33.0@sha256:<digest>" in text


def test_a_hyperpod_image_by_digest_is_rendered_unchanged():
    stack = new_stack()
    cluster, addons, store = small_cluster(stack)
    pinned = f"vllm/vllm-openai:v0.33.0@{DIGEST}"
    service = deepseek_service(stack, cluster, addons, store, image=pinned)
    template = service.lws["spec"]["leaderWorkerTemplate"]
    images = [
        container["image"]
        for role in ("leaderTemplate", "workerTemplate")
        for container in template.get(role, {}).get("spec", {}).get("containers", [])
    ]
    assert images and set(images) == {pinned}


def test_the_router_s_images_warn_by_tag_and_render_a_digest_unchanged():
    stack = new_stack("Routed")
    cluster, addons, store = small_cluster(stack, gpu_count=3)
    deepseek_service(stack, cluster, addons, store, replicas=2)
    texts = _warning_text(stack)
    assert any(f"routing.image = '{ROUTER_IMAGE}'" in t for t in texts)
    assert any(f"routing.proxy_image = '{PROXY_IMAGE}'" in t for t in texts)
    assert any(
        "routing = PrefixRouting(image='<repository>:<tag>@sha256:<digest>')" in t for t in texts
    )

    pinned = new_stack("Pinned")
    cluster, addons, store = small_cluster(pinned, gpu_count=3)
    router, proxy = f"{ROUTER_IMAGE}@{DIGEST}", f"{PROXY_IMAGE}@{DIGEST}"
    routing = PrefixRouting(image=router, proxy_image=proxy)
    deepseek_service(pinned, cluster, addons, store, replicas=2, routing=routing)
    assert not any("routing." in t for t in _warning_text(pinned))
    objects = manifest_objects(template_of(pinned), "ServingRouter")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert images == [router, proxy]


def test_helm_renders_the_pinned_chart_images_unchanged(helm_binary, shared_dir):
    """The real charts, rendered by the real helm with the values the template carries."""
    pins = {
        "lws": f"registry.k8s.io/lws/lws:v0.8.0@{DIGEST}",
        "nvidia-device-plugin": f"nvcr.io/nvidia/k8s-device-plugin:v0.17.1@{DIGEST}",
        "aws-efa-k8s-device-plugin": (
            f"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20@{DIGEST}"
        ),
        "keda": f"ghcr.io/kedacore/keda:2.17.2@{DIGEST}",
        "keda-metrics-apiserver": f"ghcr.io/kedacore/keda-metrics-apiserver:2.17.2@{DIGEST}",
        "keda-admission-webhooks": f"ghcr.io/kedacore/keda-admission-webhooks:2.17.2@{DIGEST}",
    }
    stack = new_stack()
    cluster = hyperpod_cluster(stack)
    addons = HyperPodServingAddons(stack, "Addons", cluster=cluster, chart_images=pins)
    addons.enable_keda()
    rendered = render_template_charts(template_of(stack), helm_binary, shared_dir / "charts")
    images = {
        container["image"]
        for objects in rendered.values()
        for obj in objects
        if obj["kind"] in ("Deployment", "DaemonSet")
        for container in obj["spec"]["template"]["spec"]["containers"]
    }
    assert set(pins.values()) <= images, images - set(pins.values())


def test_a_chart_image_must_carry_a_tag_and_a_digest():
    stack = new_stack()
    cluster = hyperpod_cluster(stack)
    with pytest.raises(ConfigurationError) as raised:
        HyperPodServingAddons(
            stack,
            "Addons",
            cluster=cluster,
            chart_images={
                "lws": "registry.k8s.io/lws/lws:v0.8.0",
                "keda": f"ghcr.io/kedacore/keda@{DIGEST}",
                "cert-manager": f"quay.io/jetstack/cert-manager-controller:v1.18.2@{DIGEST}",
            },
        )
    message = str(raised.value)
    assert "chart_images['lws']" in message and "chart_images['keda']" in message
    assert "<repository>:<tag>@sha256:<digest>" in message
    assert "chart_images['cert-manager']" in message and "one of nvidia-device-plugin" in message
