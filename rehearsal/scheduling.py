"""A model of a HyperPod cluster's nodes and of Kubernetes' scheduling rules, to place workloads.

Nodes come from the template's ``AWS::SageMaker::Cluster`` instance groups:

* labels: the group's ``KubernetesConfig.Labels`` plus what HyperPod sets on every node:
  ``node.kubernetes.io/instance-type`` with the ``ml.`` name (AWS's HyperPod chart selects
  nodes by those names, aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/values.yaml),
  ``sagemaker.amazonaws.com/node-health-status=Schedulable`` once health checks passed
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html),
  and the kubelet's well-known ``kubernetes.io/os``/``arch``/``hostname``
  (https://kubernetes.io/docs/reference/labels-annotations-taints/);
* taints: the group's ``KubernetesConfig.Taints``; with ``health_checking=True`` also
  ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule``, which nodes carry
  while deep health checks run (AWS's chart readme asks every plugin to tolerate it);
* capacity: vCPUs (``VCPUS`` below) and memory (the planner catalog's ``host_memory_gib``, or
  ``VCPUS``' table for CPU types), minus what the EKS AMI reserves for the kubelet
  (awslabs/amazon-eks-ami bootstrap.sh ``get_cpu_millicores_to_reserve``: 6 % of the first
  core, 1 % of the second, 0.5 % of the next two, 0.25 % of the rest;
  ``get_memory_mebibytes_to_reserve``: 11 MiB x max pods + 255 MiB; eviction threshold 100 MiB);
* ``nvidia.com/gpu`` (catalog ``gpus``) and ``vpc.amazonaws.com/efa`` (catalog ``efa_devices``)
  are allocatable only on nodes where the matching device-plugin pod lands (``DEVICE_PLUGINS``).

Scheduling (https://kubernetes.io/docs/concepts/scheduling-eviction/): a pod fits a node when
every ``nodeSelector`` label matches, one ``requiredDuringScheduling`` node-selector term
matches, every ``NoSchedule``/``NoExecute`` taint is tolerated, and its requests (the sum of its
containers', or an init container's if larger; a limit stands in for a missing request) fit
what is left of the node's allocatable. DaemonSets run one pod on every node whose labels and
taints admit it (placed before anything else; one whose requests do not fit there is
unplaced). Other pods are placed first-fit; a LeaderWorkerSet replica is one leader pod plus
``size - 1`` workers. Not modelled: EKS add-on pods (VPC CNI, kube-proxy, CoreDNS, Pod
Identity agent, FSx CSI driver), pod (anti-)affinity and topology spread.

Reusable: ``workloads(objects)`` reads Deployments, StatefulSets, Jobs, Pods, DaemonSets and
LeaderWorkerSets from any manifest list; after ``Cluster.place``, ``Cluster.place_pod`` places
more pods on what is left (e.g. the inference operator's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cdk_llm_serving.planning.catalog import Catalog, default_catalog

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
HEALTH = "sagemaker.amazonaws.com/node-health-status"

#: vCPUs and memory (GiB) per instance type, from the Amazon EC2 instance type specifications
#: (https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html and /ac.html). GPU types take
#: their memory from the planner catalog; CPU types' memory is listed here.
VCPUS: dict[str, tuple[int, float | None]] = {
    "ml.m5.large": (2, 8),
    "ml.m5.xlarge": (4, 16),
    "ml.m5.2xlarge": (8, 32),
    "ml.m5.4xlarge": (16, 64),
    "ml.m5.8xlarge": (32, 128),
    "ml.m5.12xlarge": (48, 192),
    "ml.m5.24xlarge": (96, 384),
    "ml.c5.4xlarge": (16, 32),
    "ml.p5.48xlarge": (192, None),
    "ml.p5e.48xlarge": (192, None),
    "ml.p5en.48xlarge": (192, None),
    "ml.p6-b200.48xlarge": (192, None),
    "ml.p6-b300.48xlarge": (192, None),
    "ml.p4d.24xlarge": (96, None),
    "ml.p4de.24xlarge": (96, None),
    "ml.g6e.4xlarge": (16, None),
    "ml.g6e.12xlarge": (48, None),
    "ml.g6e.48xlarge": (192, None),
}
#: Pods per node the kubelet reserves memory for (Kubernetes' default ``maxPods``).
MAX_PODS = 110


@dataclass(frozen=True)
class DevicePlugin:
    """A DaemonSet whose pod makes a node advertise an extended resource."""

    image_part: str
    resource: str
    not_command: str = "\0"


#: The device plugins: NVIDIA's (not its MPS control daemon, same image) and AWS's EFA plugin.
DEVICE_PLUGINS = (
    DevicePlugin("k8s-device-plugin", GPU, not_command="mps-control-daemon"),
    DevicePlugin("aws-efa-k8s-device-plugin", EFA),
)


def quantity(value: Any) -> float:
    """A Kubernetes quantity (``500m``, ``20Mi``, ``1Gi``, ``2``) as a float (bytes, cores)."""
    text = str(value)
    units = {
        "m": 1e-3,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "k": 1e3,
        "K": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
    }
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", text)
    assert match, f"not a quantity: {value!r}"
    number, unit = match.groups()
    return float(number) * units.get(unit, 1.0)


@dataclass
class Node:
    name: str
    group: str
    instance_type: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    capacity: dict[str, float]
    used: dict[str, float] = field(default_factory=dict)
    pods: list[str] = field(default_factory=list)

    def free(self, resource: str) -> float:
        return self.capacity.get(resource, 0.0) - self.used.get(resource, 0.0)


@dataclass(frozen=True)
class Pod:
    """One pod to place: its owner (kind/namespace/name) and its scheduling-relevant spec."""

    owner: str
    name: str
    spec: Mapping[str, Any]
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def requests(self) -> dict[str, float]:
        return pod_requests(self.spec)


def _reserved_millicores(vcpus: int) -> float:
    ranges = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, vcpus * 1000, 25)]
    total = vcpus * 1000
    return sum(
        (min(total, end) - start) * pct / 10000 for start, end, pct in ranges if total > start
    )


#: Types whose listed vCPUs are one per core already, so ThreadsPerCore 1 halves nothing.
#: ASSUMED: Arm (NVIDIA Grace) hosts run one thread per core, as the EC2 CPU-options table lists
#: for Arm types (cpu-options-supported-instances-values.html); HyperPod gives no CPU figures.
ONE_THREAD_PER_CORE = frozenset({"ml.p6e-gb200.36xlarge"})


def allocatable(
    instance_type: str, threads_per_core: int, catalog: Catalog | None = None
) -> dict[str, float]:
    """CPU (cores), memory (bytes) and pods a node of this type offers to pods.

    ``ThreadsPerCore: 1`` turns SMT off: the node has half the type's vCPUs (the CloudFormation
    schema of ``AWS::SageMaker::Cluster`` ``ThreadsPerCore``; EC2 "CPU options": 2 threads per
    core on these types). Then kube-reserved as amazon-eks-ami reserves it."""
    catalog = catalog or default_catalog()
    if instance_type not in VCPUS:
        raise KeyError(f"add {instance_type}'s vCPUs (and memory) to rehearsal.scheduling.VCPUS")
    vcpus, memory_gib = VCPUS[instance_type]
    halved = threads_per_core == 1 and instance_type not in ONE_THREAD_PER_CORE
    online = vcpus // 2 if halved else vcpus
    if memory_gib is None:
        memory_gib = catalog.get(instance_type).host_memory_gib
    # amazon-eks-ami get_memory_mebibytes_to_reserve: 11 MiB x max pods + 255 MiB; eviction 100 MiB.
    reserved_memory = (11 * MAX_PODS + 255 + 100) * 2**20
    return {
        "cpu": online - _reserved_millicores(online) / 1000,
        "memory": memory_gib * 2**30 - reserved_memory,
        "pods": float(MAX_PODS),
    }


def hyperpod_nodes(
    template: dict[str, Any], catalog: Catalog | None = None, *, health_checking: bool = False
) -> list[Node]:
    """One ``Node`` per instance of every group of the template's HyperPod cluster(s)."""
    catalog = catalog or default_catalog()
    nodes = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::SageMaker::Cluster":
            continue
        for group in resource["Properties"]["InstanceGroups"]:
            config = group.get("KubernetesConfig", {})
            taints = [
                {k.lower(): v for k, v in taint.items()} for taint in config.get("Taints", [])
            ]
            if health_checking:
                taints.append({"key": HEALTH, "value": "Unschedulable", "effect": "NoSchedule"})
            for index in range(group["InstanceCount"]):
                name = f"{group['InstanceGroupName']}-{index}"
                labels = {
                    **config.get("Labels", {}),
                    INSTANCE_TYPE: group["InstanceType"],
                    HEALTH: "Unschedulable" if health_checking else "Schedulable",
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name,
                }
                nodes.append(
                    Node(
                        name=name,
                        group=group["InstanceGroupName"],
                        instance_type=group["InstanceType"],
                        labels=labels,
                        taints=taints,
                        # ASSUMED: a group without ThreadsPerCore runs 2 threads per core.
                        capacity=allocatable(
                            group["InstanceType"], int(group.get("ThreadsPerCore", 2)), catalog
                        ),
                    )
                )
    return nodes


# -- Kubernetes' rules -----------------------------------------------------------------------


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression["key"], expression["operator"]
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if key not in labels:
            return False
        diff = int(labels[key]) - int(values[0])
        return diff > 0 if operator == "Gt" else diff < 0
    raise AssertionError(f"unknown node-selector operator {operator}")


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A node-selector term: all its expressions match (matchFields ignored: none used)."""
    return all(_expression_matches(e, labels) for e in term.get("matchExpressions") or [])


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """Kubernetes' toleration match (an empty key with Exists tolerates every taint)."""
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint["effect"]:
            continue
        key, operator = toleration.get("key", ""), toleration.get("operator", "Equal")
        if operator == "Exists" and (not key or key == taint["key"]):
            return True
        if operator == "Equal" and key == taint["key"]:
            if str(toleration.get("value", "")) == str(taint.get("value") or ""):
                return True
    return False


def why_not(spec: Mapping[str, Any], node: Node) -> str | None:
    """Why a pod with this spec cannot run on ``node`` ignoring resources; ``None`` if it can."""
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != str(value):
            return f"nodeSelector {key}={value}"
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    if required and not any(_term_matches(term, node.labels) for term in required):
        return "required node affinity"
    for taint in node.taints:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(
            spec.get("tolerations") or [], taint
        ):
            return f"untolerated taint {taint['key']}={taint.get('value')}:{taint['effect']}"
    return None


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """Effective requests: containers summed, an init container's if larger, limits as default."""

    def of(container: Mapping[str, Any]) -> dict[str, float]:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {name: quantity(value) for name, value in merged.items()}

    total: dict[str, float] = {"pods": 1.0}
    for container in spec.get("containers") or []:
        for name, value in of(container).items():
            total[name] = total.get(name, 0.0) + value
    for container in spec.get("initContainers") or []:
        for name, value in of(container).items():
            total[name] = max(total.get(name, 0.0), value)
    return total


# -- workloads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    pods: tuple[Pod, ...]
    daemon: bool = False


def _template_pod(owner: str, name: str, template: Mapping[str, Any]) -> Pod:
    return Pod(
        owner=owner,
        name=name,
        spec=template.get("spec") or {},
        labels=(template.get("metadata") or {}).get("labels") or {},
    )


def _leader_worker_pods(owner: str, spec: Mapping[str, Any]) -> list[Pod]:
    lws = spec["leaderWorkerTemplate"]
    size = int(lws.get("size", 1))
    worker = lws["workerTemplate"]
    leader = lws.get("leaderTemplate") or worker
    pods = []
    for replica in range(int(spec.get("replicas", 1))):
        pods.append(_template_pod(owner, f"{owner}-{replica}", leader))
        pods += [
            _template_pod(owner, f"{owner}-{replica}-{index}", worker) for index in range(1, size)
        ]
    return pods


def workloads(objects: Iterable[Mapping[str, Any]], namespace_of: Any = None) -> list[Workload]:
    """The pod-creating objects among ``objects`` (``namespace_of(obj)`` names their namespace)."""
    found = []
    for obj in objects:
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        namespace = namespace_of(obj) if namespace_of else meta.get("namespace", "default")
        owner = f"{kind}/{namespace}/{meta.get('name')}"
        spec = obj.get("spec") or {}
        if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
            count = int(spec.get("replicas", 1))
            pods = [_template_pod(owner, f"{owner}-{i}", spec["template"]) for i in range(count)]
        elif kind == "Job":
            count = int(spec.get("parallelism", 1))
            pods = [_template_pod(owner, f"{owner}-{i}", spec["template"]) for i in range(count)]
        elif kind == "Pod":
            pods = [_template_pod(owner, owner, obj)]
        elif kind == "DaemonSet":
            pods = [_template_pod(owner, owner, spec["template"])]
        elif kind == "LeaderWorkerSet":
            pods = _leader_worker_pods(owner, spec)
        else:
            continue
        found.append(
            Workload(kind, namespace, str(meta.get("name")), tuple(pods), kind == "DaemonSet")
        )
    return found


# -- placing -----------------------------------------------------------------------------------


@dataclass
class Placement:
    """Where each pod went, and why the ones that did not place could not."""

    placed: dict[str, list[str]] = field(default_factory=dict)
    unplaced: dict[str, str] = field(default_factory=dict)


class Cluster:
    """Nodes plus the pods placed on them so far."""

    def __init__(self, nodes: list[Node], catalog: Catalog | None = None) -> None:
        self.nodes = nodes
        self.catalog = catalog or default_catalog()

    def _advertise(self, pod: Pod, node: Node) -> None:
        """A device-plugin pod on ``node``: its resource becomes allocatable there."""
        for plugin in DEVICE_PLUGINS:
            for container in pod.spec.get("containers") or []:
                command = " ".join(
                    [*(container.get("command") or []), *(container.get("args") or [])]
                )
                if plugin.image_part in str(container.get("image")) and (
                    plugin.not_command not in command
                ):
                    spec = self.catalog.get(node.instance_type)
                    count = spec.gpus if plugin.resource == GPU else (spec.efa_devices or 0)
                    node.capacity[plugin.resource] = float(count)

    def _run_daemon(self, workload: Workload, placement: Placement) -> None:
        (pod,) = workload.pods
        owner = f"{workload.kind}/{workload.namespace}/{workload.name}"
        placement.placed[owner] = []
        for node in self.nodes:
            if why_not(pod.spec, node) is not None:
                continue  # the DaemonSet runs no pod there
            reason = self._fits(pod, node)
            if reason is not None:
                placement.unplaced[f"{pod.name}@{node.name}"] = reason
                continue
            for name, value in pod.requests.items():
                node.used[name] = node.used.get(name, 0.0) + value
            node.pods.append(pod.name)
            placement.placed[owner].append(node.name)
            self._advertise(pod, node)

    def _fits(self, pod: Pod, node: Node) -> str | None:
        reason = why_not(pod.spec, node)
        if reason is not None:
            return reason
        for name, value in pod.requests.items():
            if value > node.free(name) + 1e-9:
                return f"insufficient {name} (requests {value:g}, free {node.free(name):g})"
        return None

    def place_pod(self, pod: Pod, placement: Placement) -> str | None:
        """First fit; the node's name, or ``None`` with the reasons recorded."""
        reasons = {}
        for node in self.nodes:
            reason = self._fits(pod, node)
            if reason is None:
                for name, value in pod.requests.items():
                    node.used[name] = node.used.get(name, 0.0) + value
                node.pods.append(pod.name)
                placement.placed.setdefault(pod.owner, []).append(node.name)
                return node.name
            reasons[node.name] = reason
        placement.unplaced[pod.name] = "; ".join(f"{n}: {r}" for n, r in reasons.items())
        return None

    def place(self, items: Iterable[Workload]) -> Placement:
        """DaemonSets first (they make device resources allocatable), then every other pod."""
        items = list(items)
        placement = Placement()
        for workload in items:
            if workload.daemon:
                self._run_daemon(workload, placement)
        for workload in items:
            if not workload.daemon:
                for pod in workload.pods:
                    self.place_pod(pod, placement)
        return placement

    def node(self, name: str) -> Node:
        (found,) = [node for node in self.nodes if node.name == name]
        return found
