"""The state the rehearsal plays into: the Kubernetes objects applied so far, the nodes, the
pods the controllers created and where the scheduler put them, the findings.

Controllers (``rehearsal.controllers``) are idempotent reconcile functions over this state, as
Kubernetes controllers are level-triggered: ``World.reconcile`` runs them until nothing changes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rehearsal.assembly import Assembly, Resolver
from rehearsal.findings import Finding, RehearsalStopped
from rehearsal.scheduling import Node

Key = tuple[str, str, str]  # (kind, namespace, name); namespace "" for cluster-scoped kinds

#: Kinds every cluster serves without a CRD (the built-in API groups the manifests use).
BUILTIN_KINDS = frozenset(
    {
        "Namespace", "ServiceAccount", "ConfigMap", "Secret", "Service", "Endpoints", "Pod",
        "PersistentVolume", "PersistentVolumeClaim", "LimitRange", "ResourceQuota",
        "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob",
        "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "NetworkPolicy",
        "Ingress", "IngressClass", "StorageClass", "CSIDriver", "PriorityClass",
        "PodDisruptionBudget", "HorizontalPodAutoscaler", "CustomResourceDefinition",
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService",
        "Lease", "RuntimeClass", "EndpointSlice", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)  # fmt: skip
#: Namespaces a new EKS cluster has (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces).
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def key_of(obj: dict[str, Any], default_namespace: str = "default") -> Key:
    from rehearsal.helm import CLUSTER_SCOPED

    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind"))
    namespace = "" if kind in CLUSTER_SCOPED else str(meta.get("namespace") or default_namespace)
    return (kind, namespace, str(meta.get("name")))


@dataclass
class PodState:
    """A pod a controller created: its object, and what the scheduler and kubelet made of it."""

    key: Key
    obj: dict[str, Any]
    owner: Key
    node: str | None = None
    #: Why it is not running: unschedulable, a volume that does not mount; ``None`` when it runs.
    problem: Finding | None = None
    ip: str = ""
    daemon: bool = False
    #: The kubelet mounted its volumes and started its containers.
    started: bool = False
    #: Mount path -> files, as the kubelet put them there (``rehearsal.controllers.volumes``).
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.obj.get("spec") or {})

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.obj.get("metadata") or {}).get("labels") or {})

    @property
    def running(self) -> bool:
        return self.node is not None and self.started and self.problem is None


@dataclass
class Addon:
    """An EKS add-on as created: name, version, its configuration values."""

    logical_id: str
    name: str
    version: str
    configuration: dict[str, Any]
    resolve_conflicts: str | None


@dataclass
class World:
    assembly: Assembly
    resolver: Resolver
    stop_at_blocking: bool = True
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    #: Which resources (logical id, or ``helm:<release>``, ``addon:<name>``) declared each object.
    declared_by: dict[Key, list[str]] = field(default_factory=dict)
    #: Kinds a CRD (or an add-on) made available.
    crd_kinds: set[str] = field(default_factory=set)
    nodes: list[Node] = field(default_factory=list)
    #: Each node's subnet id (where the VPC CNI gives its pods their addresses).
    node_subnets: dict[str, str] = field(default_factory=dict)
    pods: dict[Key, PodState] = field(default_factory=dict)
    addons: dict[str, Addon] = field(default_factory=dict)
    #: Secrets Manager values by ARN (generated as ``GenerateSecretString`` asks).
    secret_values: dict[str, str] = field(default_factory=dict)
    #: Resources played so far, in order.
    played: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: Controllers' reconcile functions, run in this order by ``reconcile``.
    controllers: list[Callable[[World], bool]] = field(default_factory=list)
    #: Free-form facts the controllers share (e.g. the issued certificates' PEM).
    facts: dict[str, Any] = field(default_factory=dict)
    current: str = ""

    # -- findings --------------------------------------------------------------------------

    def report(self, finding: Finding) -> None:
        """Record ``finding`` once; a blocking one stops the play unless told to keep going."""
        if any(f.rule == finding.rule and f.resource == finding.resource for f in self.findings):
            return
        self.findings.append(finding)
        if finding.severity == "blocking" and self.stop_at_blocking:
            earlier = tuple(f for f in self.findings if f is not finding)
            raise RehearsalStopped(finding, earlier)

    # -- objects ---------------------------------------------------------------------------

    def put(self, obj: dict[str, Any], declared_by: str, namespace: str = "default") -> Key:
        obj = copy.deepcopy(obj)  # the world's own copy: controllers write status into it
        key = key_of(obj, namespace)
        obj.setdefault("metadata", {})
        if key[1]:
            obj["metadata"]["namespace"] = key[1]
        self.objects[key] = obj
        owners = self.declared_by.setdefault(key, [])
        if declared_by not in owners:
            owners.append(declared_by)
        if obj.get("kind") == "CustomResourceDefinition":
            self.crd_kinds.add(str(obj["spec"]["names"]["kind"]))
        return key

    def of_kind(self, kind: str) -> Iterator[tuple[Key, dict[str, Any]]]:
        for key, obj in list(self.objects.items()):
            if key[0] == kind:
                yield key, obj

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def node(self, name: str) -> Node:
        (found,) = [n for n in self.nodes if n.name == name]
        return found

    def pods_of(self, owner: Key) -> list[PodState]:
        return [p for p in self.pods.values() if p.owner == owner]

    def controller_running(self, deployment_name_part: str, namespace: str | None = None) -> bool:
        """Whether a Deployment whose name contains ``deployment_name_part`` has a running pod."""
        for key, _ in self.of_kind("Deployment"):
            if deployment_name_part in key[2] and (namespace is None or key[1] == namespace):
                if any(p.running for p in self.pods_of(key)):
                    return True
        return False

    def reconcile(self, rounds: int = 8) -> None:
        """Run every controller until none changes anything (level-triggered, as Kubernetes)."""
        for _ in range(rounds):
            changed = False
            for controller in self.controllers:
                changed = controller(self) or changed
            if not changed:
                return
