"""The AWS Load Balancer Controller provisioning a Service of ``type: LoadBalancer`` as an NLB.

* It acts on a Service with ``service.beta.kubernetes.io/aws-load-balancer-type: external``
  (or ``nlb-ip``) or ``loadBalancerClass: service.k8s.aws/nlb``, once its Deployment runs
  (https://kubernetes-sigs.github.io/aws-load-balancer-controller/v2.9/guide/service/nlb/).
* Subnets: ``service.beta.kubernetes.io/aws-load-balancer-subnets`` (IDs or Name tags), else
  discovery: the VPC's subnets tagged ``kubernetes.io/role/internal-elb`` (scheme internal) or
  ``kubernetes.io/role/elb`` (internet-facing), not tagged ``kubernetes.io/cluster/<other>``
  for another cluster, one per availability zone
  (https://kubernetes-sigs.github.io/aws-load-balancer-controller/v2.9/deploy/subnet_discovery/).
* With ``nlb-target-type: ip`` the pods' addresses are the targets; "If you register targets in
  an Availability Zone but do not enable the Availability Zone, these registered targets do not
  receive traffic" (https://docs.aws.amazon.com/elasticloadbalancing/latest/network/network-load-balancers.html#availability-zones).
  A pod's address comes from its node's subnet (the VPC CNI's default,
  https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html).
* Zones named by ID (``AvailabilityZoneId``) and by name (``Fn::GetAZs``) match only where the
  account's mapping says so (https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html):
  the rehearsal counts a target's zone as enabled only when some load balancer subnet is in it
  in every account.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from rehearsal.findings import Finding
from rehearsal.world import Key, World

PREFIX = "service.beta.kubernetes.io/aws-load-balancer-"
DISCOVERY_SOURCE = (
    "https://kubernetes-sigs.github.io/aws-load-balancer-controller/v2.9/deploy/subnet_discovery/"
)
READINESS_GATE_SOURCE = "https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/"
#: The namespace label the controller's webhook reads to inject the gate (the page above).
READINESS_GATE_LABEL = ("elbv2.k8s.aws/pod-readiness-gate-inject", "enabled")
AZ_SOURCE = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/network-load-balancers.html#availability-zones; "
    "https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html"
)


@dataclass(frozen=True)
class Subnet:
    logical_id: str
    id: str
    zone: str
    zone_id: str
    #: ``id`` when the template names the zone by ID, ``name`` when by name (``Fn::GetAZs``).
    named_by: str
    tags: dict[str, str]

    def same_zone_everywhere(self, other: Subnet) -> bool:
        """In the same zone in every account (both named by ID, or both by name)."""
        if self.named_by == other.named_by == "id":
            return self.zone_id == other.zone_id
        if self.named_by == other.named_by == "name":
            return self.zone == other.zone
        return False


def subnets(world: World) -> list[Subnet]:
    found = []
    for resource in world.assembly.of_type("AWS::EC2::Subnet"):
        props = world.resolver.properties(resource.logical_id)
        zone, zone_id = world.resolver.subnet_az(resource.logical_id)
        found.append(
            Subnet(
                resource.logical_id,
                str(world.resolver.ref(resource.logical_id)),
                zone,
                zone_id,
                "id" if "AvailabilityZoneId" in props else "name",
                {t["Key"]: str(t["Value"]) for t in props.get("Tags") or []},
            )
        )
    return found


def handled(service: dict[str, Any]) -> bool:
    spec = service.get("spec") or {}
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    return spec.get("type") == "LoadBalancer" and (
        annotations.get(PREFIX + "type") in ("external", "nlb-ip")
        or spec.get("loadBalancerClass") == "service.k8s.aws/nlb"
    )


def running(world: World) -> bool:
    return world.controller_running("aws-load-balancer-controller", "kube-system")


def choose_subnets(world: World, service: dict[str, Any], cluster_name: str) -> list[Subnet]:
    """The subnets the controller puts the load balancer in."""
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    every = subnets(world)
    named = annotations.get(PREFIX + "subnets")
    if named:
        wanted = [n.strip() for n in str(named).split(",") if n.strip()]
        return [s for s in every if s.id in wanted or s.tags.get("Name") in wanted]
    internal = annotations.get(PREFIX + "scheme", "internal") == "internal"
    role = "kubernetes.io/role/internal-elb" if internal else "kubernetes.io/role/elb"
    candidates = []
    for subnet in every:
        if subnet.tags.get(role) not in ("", "1"):
            continue
        clusters = [
            k.rpartition("/")[2] for k in subnet.tags if k.startswith("kubernetes.io/cluster/")
        ]
        if clusters and cluster_name not in clusters:
            continue
        candidates.append(subnet)
    # One per zone; zones named by ID and by name are kept apart (they are the same zone only in
    # some accounts, and then either subnet serves the zone).
    by_zone: dict[tuple[str, str], Subnet] = {}
    # ASSUMED: the lower subnet ID wins a zone (the controller's own tie-break is not documented).
    for subnet in sorted(candidates, key=lambda s: s.id):
        by_zone.setdefault(
            (subnet.named_by, subnet.zone_id if subnet.named_by == "id" else subnet.zone), subnet
        )
    return list(by_zone.values())


def hostname(world: World, key: Key, service: dict[str, Any] | None = None) -> str:
    """``<name>-<id>.elb.<region>.amazonaws.com``: the name the Service gives
    (``aws-load-balancer-name``,
    https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#load-balancer-name),
    else the controller's own ``k8s-<namespace>-<name>-<hash>``."""
    digest = hashlib.sha256("/".join(key).encode()).hexdigest()
    annotations = ((service or {}).get("metadata") or {}).get("annotations") or {}
    named = annotations.get("service.beta.kubernetes.io/aws-load-balancer-name")
    if named:
        return f"{named}-{digest[10:26]}.elb.{world.assembly.region}.amazonaws.com"
    # the controller keeps only the alphanumerics (``invalidLoadBalancerNamePattern``,
    # kubernetes-sigs/aws-load-balancer-controller pkg/service/model_build_load_balancer.go)
    namespace, name = (re.sub("[^0-9A-Za-z]", "", part) for part in key[1:3])
    return f"k8s-{namespace[:8]}-{name[:8]}-{digest[:10]}-{digest[10:26]}.elb.{world.assembly.region}.amazonaws.com"


def reconcile(world: World) -> bool:
    if not running(world):
        return False
    changed = False
    cluster_name = str(world.facts.get("eks_cluster_name", ""))
    for key, service in world.of_kind("Service"):
        if not handled(service) or (service.get("status") or {}).get("loadBalancer"):
            continue
        chosen = choose_subnets(world, service, cluster_name)
        world.facts.setdefault("load_balancer_subnets", {})[key] = chosen
        if not chosen:
            continue  # no load balancer: the hostname never appears
        service["status"] = {
            "loadBalancer": {"ingress": [{"hostname": hostname(world, key, service)}]}
        }
        changed = True
    return changed


def check(world: World, key: Key, selected_pods: list[Any]) -> Finding | None:
    """A Service the controller handles: a load balancer exists, and every target's zone is one of
    its zones."""
    service = world.objects[key]
    resource = f"Service {key[1]}/{key[2]}"
    if not running(world):
        return Finding(
            "lbc.not-running",
            resource,
            "no AWS Load Balancer Controller pod runs",
            DISCOVERY_SOURCE,
        )
    chosen = world.facts.get("load_balancer_subnets", {}).get(key)
    if not chosen:
        return Finding(
            "lbc.no-subnets", resource,
            "subnet discovery finds no subnet (tags kubernetes.io/role/internal-elb or elb) and the Service names none",
            DISCOVERY_SOURCE,
        )  # fmt: skip
    by_id = {s.id: s for s in subnets(world)}
    for pod in selected_pods:
        node_subnet = by_id.get(world.node_subnets.get(str(pod.node), ""))
        if node_subnet is None:
            continue
        if not any(node_subnet.same_zone_everywhere(s) for s in chosen):
            zones = ", ".join(f"{s.zone} ({s.logical_id})" for s in chosen)
            return Finding(
                "lbc.target-zone-not-enabled",
                resource,
                f"target pod {pod.key[2]} is in {node_subnet.zone_id} (subnet {node_subnet.logical_id}, "
                f"tags {sorted(node_subnet.tags)}); the load balancer's subnets are {zones}: "
                f"{node_subnet.zone_id} is one of them only in accounts whose zone names map so, and "
                "targets in a zone the load balancer does not enable receive no traffic",
                AZ_SOURCE,
            )
    del service
    return None


def readiness_gate(world: World, key: Key) -> Finding | None:
    """A load balancer with IP targets whose namespace lacks the readiness-gate label: a
    rollout counts a new pod available when its probe passes, while its NLB target is still
    ``initial``, and removes the old pod meanwhile (the controller's "Pod readiness gate" page)."""
    service = world.objects[key]
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    if annotations.get(f"{PREFIX}nlb-target-type") != "ip":
        return None
    namespace = world.get("Namespace", "", key[1]) or {}
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    if labels.get(READINESS_GATE_LABEL[0]) == READINESS_GATE_LABEL[1]:
        return None
    return Finding(
        "lbc.no-readiness-gate",
        f"Service {key[1]}/{key[2]}",
        f"namespace {key[1]} lacks {READINESS_GATE_LABEL[0]}={READINESS_GATE_LABEL[1]}: a "
        "rollout removes the old target before the new one is healthy in the load balancer",
        READINESS_GATE_SOURCE,
        severity="degrades",
    )
