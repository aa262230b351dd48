"""Where a model's container image and weights come from (plain value types)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from aws_cdk import Annotations, Stack, Token
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.region_info import Fact, FactName
from constructs import IConstruct

from ._cdk.validation import is_unresolved
from .errors import Problems

__all__ = ["ContainerImage", "ModelData", "how_to_pin", "warn_if_tag_only"]

#: Warning id of an image referenced by a tag only (acknowledge it to accept a moving tag).
TAG_ONLY_IMAGE_WARNING = "cdk-llm-serving:imageTagOnly"
_DIGEST = re.compile(r"@sha256:[a-f0-9]{64}$")


def warn_if_tag_only(
    scope: IConstruct, prop: str, image_uri: str, *, pin: str | None = None
) -> None:
    """Warn (id ``cdk-llm-serving:imageTagOnly``) when ``image_uri`` names no digest: a tag can
    be moved (docs.aws.amazon.com/AmazonECR/latest/userguide/image-tag-mutability.html). The
    warning says how to pin: the command (``how_to_pin``) and the form ``prop`` takes, ``pin``."""
    if _DIGEST.search(image_uri) or (image_uri.endswith("}") and is_unresolved(image_uri)):
        return  # pinned, or its tag/digest is a deploy-time value we cannot judge
    Annotations.of(scope).add_warning_v2(
        TAG_ONLY_IMAGE_WARNING,
        f"{prop} = {image_uri!r} is pinned by tag only: the tag can be moved to another image. "
        + how_to_pin(image_uri)
        + f" Then give {pin or f'{prop} = {image_uri}@sha256:<digest>'!s}.",
    )


#: ``<registry>/<repository>:<tag>`` of an image reference (as distribution/reference reads it).
_REFERENCE = re.compile(
    r"^(?:(?P<registry>[^/]+)/)?(?P<repository>[^:@]+)(?::(?P<tag>[\w][\w.-]*))?$"
)
#: A private Amazon ECR registry host, ``<account>.dkr.ecr.<region>.<domain>`` (the domain
#: may be a deploy-time ``AWS::URLSuffix``): also read by ``hyperpod.node_image_pulls``.
ECR_REGISTRY = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.")


def how_to_pin(image_uri: str) -> str:
    """The command that prints the digest ``image_uri``'s tag names now: ``aws ecr
    describe-images`` for private Amazon ECR, else ``crane digest`` or ``docker buildx
    imagetools inspect`` (docs/design/errors-and-checks.md, "Images and weights")."""
    match = _REFERENCE.match(image_uri)
    registry, repository, tag = (
        (match["registry"] or "", match["repository"], match["tag"] or "latest")
        if match
        else ("", image_uri, "latest")
    )
    if registry and "." not in registry and ":" not in registry and registry != "localhost":
        registry, repository = "", f"{registry}/{repository}"  # docker.io/<user>/<name>
    ecr_registry = ECR_REGISTRY.match(registry)
    if ecr_registry:
        # A deploy-time registry domain (``AWS::URLSuffix``, a ``${Token[...]}``): no crane.
        other = "" if "${Token[" in image_uri else f" (or crane digest {image_uri} once logged in)"
        return (
            "Read the digest its tag names now: aws ecr describe-images "
            f"--registry-id {ecr_registry['account']} --region {ecr_registry['region']} "
            f"--repository-name {repository} --image-ids imageTag={tag} "
            f"--query 'imageDetails[0].imageDigest' --output text{other}."
        )
    return (
        f"Read the digest its tag names now: crane digest {image_uri} "
        f"(or docker buildx imagetools inspect {image_uri} --format '{{{{json .Manifest.Digest}}}}')."
    )


_ECR_IMAGE_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?"
    r"/(?P<repository>[a-z0-9][a-z0-9._/-]*)"
    r"(?::[\w][\w.-]{0,127}(?:@sha256:[a-f0-9]{64})?|@sha256:[a-f0-9]{64})$"
)
#: Archive names that would become an (empty) S3Prefix data source: ModelData serves files.
_ARCHIVES = (".tar.gz", ".tgz", ".tar")
_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<prefix>.*)$")
#: docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")
_BUCKET_NAME_LENGTH = range(3, 64)


@dataclass(frozen=True)
class ContainerImage:
    """An image in private Amazon ECR (where SageMaker hosting pulls from), with the repository
    the model's role may pull from: no other."""

    image_uri: str
    repository_arn: str | None = None
    #: For ``from_dlc``: the DLC repository and tag, resolved per stack by ``bind``.
    dlc: tuple[str, str] | None = None
    #: Whether the entrypoint splits a JSON array in an ``SM_VLLM_*`` value into arguments
    #: (``sagemaker.served_names``). Default: ``False`` (UNCONFIRMED which published tags
    #: carry it: docs/design/errors-and-checks.md; ``with_json_array_arguments`` declares it).
    json_array_arguments: bool = False
    #: How the tag-only warning tells to pin this image (``bind`` sets it for a DLC image).
    pin_form: str | None = None

    def with_json_array_arguments(self, enabled: bool = True) -> ContainerImage:
        """This image, declared to split JSON arrays in ``SM_VLLM_*`` values (see above)."""
        return replace(self, json_array_arguments=enabled)

    @classmethod
    def from_ecr_uri(cls, image_uri: str) -> ContainerImage:
        """``123456789012.dkr.ecr.us-east-1.amazonaws.com/repo:tag`` (or ``@sha256:…``)."""
        return cls(image_uri=image_uri)

    @classmethod
    def from_repository(
        cls, repository: ecr.IRepository, tag: str = "latest", digest: str | None = None
    ) -> ContainerImage:
        """An image of ``repository``: by ``digest`` (``sha256:…``) when given, else by ``tag``."""
        return cls(
            image_uri=(
                repository.repository_uri_for_digest(digest)
                if digest is not None
                else repository.repository_uri_for_tag(tag)
            ),
            repository_arn=repository.repository_arn,
        )

    def warn_if_tag_only(self, scope: IConstruct, prop: str) -> None:
        """A synth warning (``cdk-llm-serving:imageTagOnly``) unless the image is pinned by digest."""
        if self.pin_form is not None:
            pin = f"{prop} = {self.pin_form}"
        elif self.repository_arn is not None:
            pin = f"{prop} = ContainerImage.from_repository(repository, digest='sha256:<digest>')"
        else:
            pin = f"{prop} = ContainerImage.from_ecr_uri('{self.image_uri}@sha256:<digest>')"
        warn_if_tag_only(scope, prop, self.image_uri, pin=pin)

    @classmethod
    def from_dlc(cls, repository: str, tag: str, digest: str | None = None) -> ContainerImage:
        """An AWS Deep Learning Container, e.g. ``from_dlc("vllm", "server-sagemaker-cuda-v1")``:
        the account of the stack's region from aws-cdk-lib's region facts
        (``FactName.DLC_REPOSITORY_ACCOUNT``; a mapping for a stack without a region).
        ``digest`` (``sha256:…``) pins the image: ``<repository>:<tag>@sha256:…``."""
        pinned = tag if digest is None else f"{tag}@{digest}"
        return cls(image_uri=f"<dlc>/{repository}:{pinned}", dlc=(repository, pinned))

    def bind(self, scope: IConstruct) -> ContainerImage:
        """This image as ``scope``'s stack sees it: a DLC image gets its region's account."""
        if self.dlc is None:
            return self
        stack = Stack.of(scope)
        region = stack.region
        if (
            not Token.is_unresolved(region)
            and Fact.find(region, FactName.DLC_REPOSITORY_ACCOUNT) is None
        ):
            return self  # validate() reports the region
        account = stack.regional_fact(FactName.DLC_REPOSITORY_ACCOUNT)
        repository, tag = self.dlc
        return ContainerImage(
            image_uri=f"{account}.dkr.ecr.{region}.{stack.url_suffix}/{repository}:{tag}",
            repository_arn=f"arn:{stack.partition}:ecr:{region}:{account}:repository/{repository}",
            json_array_arguments=self.json_array_arguments,
            pin_form=f"ContainerImage.from_dlc({repository!r}, {tag!r}, digest='sha256:<digest>')",
        )

    def validate(self, problems: Problems, prop: str, *, region: str | None = None) -> None:
        """Shape of the URI; with a concrete stack ``region``, the image must live there
        (CreateModel pulls from the model's own region only)."""
        if self.dlc is not None:
            problems.add(
                prop,
                f"DLC {self.dlc[0]}:{self.dlc[1]} in {region}",
                "aws-cdk-lib knows no Deep Learning Containers account for this region; use from_ecr_uri",
            )
            return
        if self.repository_arn is not None:
            return
        # ``is_unresolved`` only of what would be refused (see ``_cdk.validation``).
        match = _ECR_IMAGE_URI.match(self.image_uri)
        if not match:
            if is_unresolved(self.image_uri):
                return
            problems.add(
                prop,
                self.image_uri,
                "must be a private Amazon ECR image URI: "
                "<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag> or @sha256:<digest>",
            )
        elif (
            region is not None
            and match["region"] != region
            and not is_unresolved(region)
            and not is_unresolved(self.image_uri)
        ):
            problems.add(
                prop,
                self.image_uri,
                f"the image is in {match['region']} but the stack deploys to {region}: SageMaker pulls images from the model's region only; copy it to {region} (or use from_dlc)",
            )

    def resolve_repository_arn(self, partition: str) -> str | None:
        if self.repository_arn is not None:
            return self.repository_arn
        match = _ECR_IMAGE_URI.match(self.image_uri)
        if not match:
            return None
        return f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repository']}"


@dataclass(frozen=True)
class ModelData:
    """Uncompressed model weights under one S3 prefix (SageMaker ``ModelDataSource``,
    ``CompressionType: None``): ``ServingModel(model_data=...)``,
    ``VllmPoolEndpoint(weights={format: ModelData})``. Read grants require the bucket to belong
    to ``bucket_account`` (default: the granting stack's account)."""

    bucket_name: str
    prefix: str
    encryption_key: kms.IKey | None = None
    bucket_account: str | None = None

    @classmethod
    def from_bucket(cls, bucket: s3.IBucket, prefix: str) -> ModelData:
        return cls(
            bucket_name=bucket.bucket_name,
            prefix=prefix,
            encryption_key=bucket.encryption_key,
            bucket_account=bucket.env.account,
        )

    @classmethod
    def from_s3_uri(
        cls,
        uri: str,
        encryption_key: kms.IKey | None = None,
        bucket_account: str | None = None,
    ) -> ModelData:
        """``s3://bucket/prefix/`` (an unparseable URI is reported by ``validate``);
        ``bucket_account``: the account that owns the bucket, when it is not the deploying one."""
        match = _S3_URI.match(uri)
        if not match:
            return cls(bucket_name="", prefix=uri, encryption_key=encryption_key)
        return cls(
            bucket_name=match["bucket"],
            prefix=match["prefix"],
            encryption_key=encryption_key,
            bucket_account=bucket_account,
        )

    @property
    def key_prefix(self) -> str:
        """The prefix with exactly one trailing slash, as ``S3Prefix`` data sources require."""
        return self.prefix.strip("/") + "/"

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket_name}/{self.key_prefix}"

    def validate(self, problems: Problems, prop: str) -> None:
        if not self.bucket_name:
            problems.add(prop, self.prefix, "must be an S3 URI of the form s3://<bucket>/<prefix>/")
            return
        # ``is_unresolved`` only of what would be refused (see ``_cdk.validation``).
        bucket = Problems("")
        _validate_bucket_name(bucket, f"{prop}.bucket_name", self.bucket_name)
        if bucket and not is_unresolved(self.bucket_name):
            problems.extend(bucket)
        if not self.prefix.strip("/") and not is_unresolved(self.prefix):
            problems.add(
                f"{prop}.prefix",
                self.prefix,
                "must name a key prefix: the model role is granted that prefix only, never a whole bucket",
            )
        if self.prefix.rstrip("/").endswith(_ARCHIVES) and not is_unresolved(self.prefix):
            problems.add(
                f"{prop}.prefix",
                self.prefix,
                "must be the folder of uncompressed weights, not an archive: the model reads "
                "every file under the prefix as is (S3Prefix, CompressionType None); unpack it",
            )


def _validate_bucket_name(problems: Problems, prop: str, name: str) -> None:
    """S3's naming rules, each broken rule named (see ``_BUCKET_NAME``)."""
    if len(name) not in _BUCKET_NAME_LENGTH:
        problems.add(prop, name, f"a bucket name must be 3 to 63 characters long, not {len(name)}")
    elif not _BUCKET_NAME.match(name):
        problems.add(
            prop,
            name,
            "a bucket name may hold only lowercase letters, digits, dots and hyphens, and must begin and end with a letter or digit",
        )
