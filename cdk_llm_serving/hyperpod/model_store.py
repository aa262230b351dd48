"""``FsxModelStore``: model weights on FSx for Lustre, linked to S3, mounted by Kubernetes pods.

An FSx for Lustre (PERSISTENT_2) file system in the GPU subnet, retained with its own security
group; a data repository association that imports the weights prefix lazily, on first read;
a static PersistentVolume and claim that serving pods mount read-only. The first start reads
every weight byte from S3 at the file system's throughput (storage TiB x MB/s per TiB), which
the leader's startup probe budgets for (``startup_timeout_seconds``). Decisions and figures:
``docs/design/multi-node-service.md``, "The FSx model store".
ASSUMED: FSx's "MB" is 10^6 bytes, and the first read proceeds at the baseline throughput
(burst credits only make it faster).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from aws_cdk import CfnDeletionPolicy, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .._cdk.validation import check_kubernetes_name, check_s3_prefix
from ..errors import Problems, checked_props
from ..planning.cold_start import ColdStart
from .interfaces import IHyperPodCluster

#: SSD PERSISTENT_2 capacity: 1200 GiB, 2400 GiB, then increments of 2400 GiB (botocore's
#: fsx model, CreateFileSystemRequest.StorageCapacity documentation).
_SMALL_CAPACITIES_GIB = (1200, 2400)
_CAPACITY_STEP_GIB = 2400
#: PERSISTENT_2 per-unit storage throughput options, MB/s per TiB (same guide).
_THROUGHPUT_OPTIONS = (125, 250, 500, 1000)


class FsxModelStore(Construct):
    """Weights from ``s3://<bucket>/<prefix>`` at ``/<mount_path>`` in pods that claim ``claim_name``.

    :param cluster: the HyperPod cluster (network, security group, EKS); ``IHyperPodCluster``.
    :param weights_bucket: the bucket holding the weights.
    :param weights_prefix: the prefix under it (the association links only that).
    :param storage_capacity_gib: 1200, 2400 or a multiple of 2400. Default: 4800 (room for a 2.4T model in NVFP4 and another copy).
    :param throughput_per_tib: MB/s per TiB (125, 250, 500, 1000). Default: 500.
    :param namespace: namespace of the PersistentVolumeClaim. Default: ``inference``.
    :param claim_name: the claim's name. Default: ``model-weights``.
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: IHyperPodCluster,
        weights_bucket: s3.IBucket,
        weights_prefix: str,
        storage_capacity_gib: int = 4800,
        throughput_per_tib: int = 500,
        namespace: str = "inference",
        claim_name: str = "model-weights",
    ) -> None:
        super().__init__(scope, id)
        self.namespace, self.claim_name = namespace, claim_name
        self.storage_capacity_gib, self.throughput_per_tib = (
            storage_capacity_gib,
            throughput_per_tib,
        )
        self._validate(weights_prefix)
        self.file_system = self._render_file_system(cluster)
        prefix = weights_prefix.strip("/")
        #: Where the weights appear on the file system (and under the volume's mount path).
        self.mount_path = association_path(weights_bucket.bucket_name, prefix)
        #: The data repository association; workloads reading the weights depend on it.
        self.association = self._render_association(weights_bucket, prefix)
        self.manifests = self.kubernetes_objects()
        self.manifest = cluster.eks_cluster.add_manifest("WeightsVolume", *self.manifests)
        self.manifest.node.add_dependency(
            cluster.fsx_csi_driver, cluster.kubernetes_namespace(namespace)
        )

    @property
    def throughput_bytes_per_second(self) -> float:
        """The file system's baseline throughput: storage (TiB) x MB/s per TiB (module doc)."""
        return self.storage_capacity_gib / 1024 * self.throughput_per_tib * 1e6

    def hydration_seconds(self, weight_bytes: float) -> float:
        """How long the first read of ``weight_bytes`` from S3 takes at that throughput (every
        reader of the store shares it)."""
        return weight_bytes / self.throughput_bytes_per_second

    def startup_timeout_seconds(self, cold_start: ColdStart, weight_bytes: float) -> int:
        """``cold_start``'s budget, or (first read of ``weight_bytes`` from S3 + engine start)
        x its safety factor, whichever is longer.

        The nodes of a replica read their shards at the same time, so the load takes the
        longer of the per-node read (``cold_start.load_seconds``) and the store's hydration
        of the whole model (``hydration_seconds``).
        """
        first_load = max(cold_start.load_seconds, self.hydration_seconds(weight_bytes))
        first_start = first_load + cold_start.engine_start_seconds
        return max(
            cold_start.startup_timeout_seconds, math.ceil(first_start * cold_start.safety_factor)
        )

    def _validate(self, weights_prefix: str) -> None:
        problems = Problems(f"FsxModelStore '{self.node.path}'")
        storage_capacity_gib, throughput_per_tib = (
            self.storage_capacity_gib,
            self.throughput_per_tib,
        )
        if not _valid_capacity(storage_capacity_gib):
            problems.add(
                "storage_capacity_gib",
                storage_capacity_gib,
                f"PERSISTENT_2 takes 1200 or 2400 GiB, or a multiple of {_CAPACITY_STEP_GIB} GiB",
            )
        if throughput_per_tib not in _THROUGHPUT_OPTIONS:
            problems.add(
                "throughput_per_tib",
                throughput_per_tib,
                f"must be one of {', '.join(map(str, _THROUGHPUT_OPTIONS))}",
            )
        if not weights_prefix.strip("/"):
            problems.add(
                "weights_prefix",
                weights_prefix,
                "must name a prefix: the association should not import a whole bucket",
            )
        check_s3_prefix(problems, "weights_prefix", weights_prefix)
        check_kubernetes_name(problems, "namespace", self.namespace, namespace=True)
        problems.raise_if_any()

    def _render_file_system(self, cluster: IHyperPodCluster) -> fsx.LustreFileSystem:
        """PERSISTENT_2 in the GPU subnet, reachable from the nodes, retained on deletion."""
        self.security_group = self._render_security_group(cluster)
        return fsx.LustreFileSystem(
            self,
            "FileSystem",
            vpc=cluster.vpc,
            vpc_subnet=cluster.gpu_subnets[0],
            security_group=self.security_group,
            storage_capacity_gib=self.storage_capacity_gib,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
                per_unit_storage_throughput=self.throughput_per_tib,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _render_security_group(self, cluster: IHyperPodCluster) -> ec2.SecurityGroup:
        """Lustre ports from the nodes and from itself (FSx for Lustre user guide, "File
        system access control with Amazon VPC": TCP 988 and 1018-1023); retained."""
        group = ec2.SecurityGroup(
            self,
            "FileSystemSecurityGroup",
            vpc=cluster.vpc,
            allow_all_outbound=True,
            description="FSx for Lustre model store: Lustre from the HyperPod nodes",
        )
        # From itself: aws-cdk-lib's LustreFileSystem adds TCP 988-1023 from its own group.
        nodes = cluster.node_security_group
        group.add_ingress_rule(nodes, ec2.Port.tcp(988), "FSx for Lustre from the nodes")
        group.add_ingress_rule(
            nodes, ec2.Port.tcp_range(1018, 1023), "FSx for Lustre from the nodes"
        )
        group.apply_removal_policy(RemovalPolicy.RETAIN)
        return group

    def _render_association(
        self, weights_bucket: s3.IBucket, prefix: str
    ) -> fsx.CfnDataRepositoryAssociation:
        """Imports ``s3://bucket/prefix/`` into ``mount_path`` lazily, following S3 changes.

        Kept on stack deletion with the file system; a replaced association is deleted.
        """
        association = fsx.CfnDataRepositoryAssociation(
            self,
            "WeightsAssociation",
            file_system_id=self.file_system.file_system_id,
            file_system_path=self.mount_path,
            data_repository_path=f"s3://{weights_bucket.bucket_name}/{prefix}/",
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=["NEW", "CHANGED", "DELETED"]
                )
            ),
        )
        association.cfn_options.deletion_policy = CfnDeletionPolicy.RETAIN
        association.cfn_options.update_replace_policy = CfnDeletionPolicy.DELETE
        return association

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Static PersistentVolume and its claim (read-only for serving); the namespace is the
        cluster's (``IHyperPodCluster.kubernetes_namespace``)."""
        volume_name = f"{self.claim_name}-fsx"
        return [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": volume_name},
                "spec": {
                    "capacity": {"storage": f"{self.storage_capacity_gib}Gi"},
                    "volumeMode": "Filesystem",
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "csi": {
                        "driver": "fsx.csi.aws.com",
                        "volumeHandle": self.file_system.file_system_id,
                        "volumeAttributes": {
                            "dnsname": self.file_system.dns_name,
                            "mountname": self.file_system.mount_name,
                        },
                    },
                },
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": self.claim_name, "namespace": self.namespace},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "volumeName": volume_name,
                    "resources": {"requests": {"storage": f"{self.storage_capacity_gib}Gi"}},
                },
            },
        ]


def association_path(bucket_name: str, prefix: str) -> str:
    """``/<bucket>/<prefix>-<8 hex of sha256(prefix)>``; the bucket may be a token."""
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:8]
    return f"/{bucket_name}/{prefix}-{digest}"


def _valid_capacity(gib: int) -> bool:
    return gib in _SMALL_CAPACITIES_GIB or (gib > 0 and gib % _CAPACITY_STEP_GIB == 0)
