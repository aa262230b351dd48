"""Kubernetes NetworkPolicy semantics, enough to ask "is this connection allowed?".

Rules (https://kubernetes.io/docs/concepts/services-networking/network-policies/): a pod
selected by no policy of a direction allows everything in that direction; a selected pod
allows what the union of its policies' rules allows. A rule's peers match by ``podSelector``
(same namespace) or ``ipBlock`` (``cidr`` minus ``except``); a rule without ``ports`` allows
every port. Only ``matchLabels`` selectors and numeric ports are modelled.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Endpoint:
    """A pod (labels, namespace) or an address outside any pod (labels empty)."""

    ip: str
    labels: dict[str, str] = field(default_factory=dict)
    namespace: str | None = None


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    wanted = selector.get("matchLabels", {})
    return bool(labels) and all(labels.get(k) == v for k, v in wanted.items())


def _peer_matches(peer: dict, other: Endpoint, namespace: str) -> bool:
    if "podSelector" in peer:
        return other.namespace == namespace and _selects(peer["podSelector"], other.labels)
    block = peer["ipBlock"]
    address = ipaddress.ip_address(other.ip)
    inside = address in ipaddress.ip_network(block["cidr"])
    return inside and not any(address in ipaddress.ip_network(e) for e in block.get("except", []))


def _rule_allows(rule: dict, peers_key: str, other: Endpoint, port: int, namespace: str) -> bool:
    ports = rule.get("ports")
    if ports and port not in [p["port"] for p in ports]:
        return False
    return any(_peer_matches(peer, other, namespace) for peer in rule.get(peers_key, []))


def _direction_allows(
    policies: list[dict], pod: Endpoint, other: Endpoint, port: int, direction: str
) -> bool:
    key, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and _selects(p["spec"]["podSelector"], pod.labels)
        and direction in p["spec"]["policyTypes"]
    ]
    if not selecting:
        return True
    namespace = pod.namespace or ""
    return any(
        _rule_allows(rule, peers, other, port, namespace)
        for policy in selecting
        for rule in policy["spec"].get(key, [])
    )


def allowed(policies: list[dict], source: Endpoint, target: Endpoint, port: int) -> bool:
    """``source`` may open ``target:port``: the source's egress and the target's ingress agree."""
    egress = not source.labels or _direction_allows(policies, source, target, port, "Egress")
    ingress = not target.labels or _direction_allows(policies, target, source, port, "Ingress")
    return egress and ingress
