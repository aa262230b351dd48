"""The compliance findings that remain on the reference stacks, each acknowledged with its reason.

cdk-nag's ``HIPAASecurityChecks``, ``NIST80053R5Checks`` and ``PCIDSS321Checks`` run beside
``AwsSolutionsChecks`` and the statement-bound ``WildcardStatements`` (``app.py``, the test
suite). The three compliance packs share the rules found here (the same cdk-nag rule
functions): each reason is acknowledged once, under every pack that applies the rule
(``_cdk/nag.py`` ``compliance_rule_ids``). Findings on resources aws-cdk-lib generates are
acknowledged where the constructs acknowledge their AwsSolutions findings; these are the
reference's own.
"""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import App, IPolicyValidationPlugin
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks, PCIDSS321Checks
from constructs import IConstruct

from cdk_llm_serving._cdk.nag import WildcardStatements, acknowledge

from .gpt_oss_pool_endpoint_stack import GptOssPoolEndpointStack
from .hyperpod_reference_stack import HyperPodReferenceStack

#: The cdk-nag packs the reference app and the test suite run.
REFERENCE_NAG_PACKS: tuple[Callable[[App], IPolicyValidationPlugin], ...] = (
    AwsSolutionsChecks,
    HIPAASecurityChecks,
    NIST80053R5Checks,
    PCIDSS321Checks,
    # Statement-bound wildcard acknowledgements: cdk-nag's IAM5 names a finding by
    # resource only, so one reasoned ``*`` would hide any new one.
    WildcardStatements,
)


def compliance_checks(app: App) -> list[IPolicyValidationPlugin]:
    """``REFERENCE_NAG_PACKS`` for ``app``: AwsSolutions, HIPAA, NIST 800-53 R5, PCI DSS 3.2.1, wildcard statements."""
    return [pack(app) for pack in REFERENCE_NAG_PACKS]


def _acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """``HIPAA.Security-<rule>``, and the NIST 800-53 R5 / PCI DSS 3.2.1 packs' same rule."""
    acknowledge(scope, f"HIPAA.Security-{rule}", reason)


def acknowledge_pool_stack(stack: GptOssPoolEndpointStack) -> None:
    _acknowledge(
        stack.endpoint.cfn_endpoint_config,
        "SageMakerEndpointConfigurationKMSKeyConfigured",
        "Every pool's instance type (g6e, g6) has local NVMe storage, which a hardware module "
        "encrypts and for which SageMaker refuses a KmsKeyId "
        "(docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html, KmsKeyId).",
    )


def acknowledge_hyperpod_stack(stack: HyperPodReferenceStack) -> None:
    cluster = stack.cluster
    _acknowledge(
        cluster.vpc,
        "VPCNoUnrestrictedRouteToIGW",
        "Only the public subnets route to the internet gateway, for the NAT gateway; "
        "nodes, pods and the load balancer sit in the private subnets.",
    )
    for scope in (cluster.node_security_group, cluster.eks_cluster):
        _acknowledge(
            scope,
            "EC2RestrictedCommonPorts",
            "The all-traffic rules admit only the cluster's own security groups (EFA and "
            "the EKS control plane need them), never a CIDR range: nothing is unrestricted.",
        )
    _acknowledge(
        cluster.vpc.node.find_child("FlowLog"),
        "IAMNoInlinePolicy",
        "aws-cdk-lib's flow-log role: its inline policy writes only to the flow-log group.",
    )
    _acknowledge(
        cluster.node.find_child("FlowLogs"),
        "CloudWatchLogGroupEncrypted",
        "VPC flow-log records (addresses, ports, byte counts) hold no request content; "
        "CloudWatch Logs encrypts them at rest with its own keys.",
    )
    _acknowledge_api_key(stack)
    _acknowledge_inference_operator(stack)
    bucket = cluster.lifecycle_bucket
    for rule, reason in (
        (
            "S3BucketReplicationEnabled",
            "Holds only the lifecycle script, which every deploy uploads again from source.",
        ),
        (
            "S3DefaultEncryptionKMS",
            "Holds only the lifecycle script (public project source, no data): SSE-S3 suffices.",
        ),
    ):
        _acknowledge(bucket, rule, reason)
    access_logs = cluster.node.find_child("LifecycleAccessLogs")
    _acknowledge(
        access_logs,
        "S3BucketReplicationEnabled",
        "Access logs of the lifecycle bucket: an audit trail of one script's reads and writes.",
    )
    _acknowledge(
        access_logs,
        "S3DefaultEncryptionKMS",
        "S3 server access logging accepts only SSE-S3 on its target bucket "
        "(S3 user guide, 'Enabling Amazon S3 server access logging').",
    )


def _acknowledge_api_key(stack: HyperPodReferenceStack) -> None:
    """The vLLM API key's secret and the pods' read of it."""
    service = stack.service
    if service.api_key is None:
        return
    _acknowledge(
        service.api_key,
        "SecretsManagerRotationEnabled",
        "vLLM reads its API key once at start: rotation is a new value plus a restart of the "
        "leader pods, as the README describes; an automatic rotation would lock clients out.",
    )
    _acknowledge(
        service.node.find_child("WeightsRole"),
        "IAMNoInlinePolicy",
        "Secrets Manager's grant_read of the one API-key secret (and its key, if any).",
    )


def _acknowledge_inference_operator(stack: HyperPodReferenceStack) -> None:
    """The opt-in inference-operator variant's certificate bucket and its access logs."""
    if stack.single_node is None:
        return
    operator = stack.single_node.operator
    _acknowledge(
        operator.tls_bucket,
        "S3BucketReplicationEnabled",
        "Holds only the TLS certificates the inference operator generates for its endpoints; "
        "the operator writes them again when an endpoint is deployed.",
    )
    _acknowledge(
        operator.tls_bucket,
        "S3DefaultEncryptionKMS",
        "Holds only the operator's TLS certificates, read and written by its execution role "
        "alone. The reference endpoint configures no dataCapture (which would default to this "
        "bucket's /data-capture/ prefix: sagemaker-hyperpod-model-deployment-data-capture); "
        "point a data capture at a bucket of your own with a KMS key.",
    )
    _acknowledge(
        operator.tls_access_logs,
        "S3BucketReplicationEnabled",
        "Access logs of the certificate bucket: an audit trail of the operator's reads and writes.",
    )
    _acknowledge(
        operator.tls_access_logs,
        "S3DefaultEncryptionKMS",
        "S3 server access logging accepts only SSE-S3 on its target bucket "
        "(S3 user guide, 'Enabling Amazon S3 server access logging').",
    )
