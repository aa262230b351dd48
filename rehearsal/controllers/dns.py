"""Cluster DNS (CoreDNS) as the Kubernetes DNS specification defines its records.

kubernetes/dns ``docs/specification.md``: a Service with a cluster IP has an A record
``<service>.<ns>.svc.cluster.local`` for that IP (2.3.1); a headless Service
(``clusterIP: None``) has one per ready endpoint (2.4.1), and an endpoint whose pod sets
``hostname`` also gets ``<hostname>.<service>.<ns>.svc.cluster.local`` (2.4.1, "hostname");
not-ready endpoints count when the Service has ``publishNotReadyAddresses``. A pod is such a
named endpoint when its ``subdomain`` is the headless Service's name
(https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/#pod-s-hostname-and-subdomain-fields).
Pods resolve relative names through the search path ``<ns>.svc.cluster.local svc.cluster.local
cluster.local`` (same page, "Namespaces of Services" / ``ClusterFirst`` resolv.conf).
"""

from __future__ import annotations

from rehearsal.world import PodState, World

ZONE = "cluster.local"
SOURCE = "kubernetes/dns docs/specification.md 2.3.1 and 2.4.1; https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/"


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def records(world: World) -> dict[str, str]:
    """Every A record (fully qualified, no trailing dot): name -> address (pods' one each)."""
    found: dict[str, str] = {}
    for (_, namespace, name), service in world.of_kind("Service"):
        spec = service.get("spec") or {}
        if spec.get("clusterIP") != "None":
            continue
        publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
        for pod in world.pods.values():
            if pod.key[1] != namespace or not selects(spec.get("selector") or {}, pod.labels):
                continue
            if not pod.ip or not (pod.running or (publish_not_ready and pod.node)):
                continue
            hostname, subdomain = pod.spec.get("hostname"), pod.spec.get("subdomain")
            if hostname and subdomain == name:
                found[f"{hostname}.{name}.{namespace}.svc.{ZONE}"] = pod.ip
    return found


def resolve(world: World, name: str, pod: PodState) -> str | None:
    """``name`` as ``pod`` resolves it (search path first for names with fewer than 5 dots)."""
    table = records(world)
    namespace = pod.key[1]
    candidates = [f"{name}.{suffix}" for suffix in (f"{namespace}.svc.{ZONE}", f"svc.{ZONE}", ZONE)]
    for candidate in (*candidates, name) if name.count(".") < 5 else (name, *candidates):
        if candidate.rstrip(".") in table:
            return table[candidate.rstrip(".")]
    return None
