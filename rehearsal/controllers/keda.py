"""KEDA's ScaledObject and its scale target.

* ``spec.scaleTargetRef`` names ``apiVersion`` (default ``apps/v1``), ``kind`` (default
  ``Deployment``) and ``name`` of an object in the ScaledObject's namespace; for a custom
  resource KEDA scales through its ``/scale`` subresource, which the CRD must declare
  (https://keda.sh/docs/2.17/reference/scaledobject-spec/#scaletargetref, "the target resource
  must ... have a /scale subresource"). KEDA drives an HPA on that target.
* A manifest that sets ``spec.replicas`` on an autoscaled target resets the count to it on every
  apply: "any time a change to that object is applied, for example via kubectl apply -f ..., this
  will instruct Kubernetes to scale the current number of Pods to the value of the spec.replicas
  key" (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#migrating-deployments-and-statefulsets-to-horizontal-autoscaling);
  the kubectl handler re-applies the manifest on every stack update (aws-cdk-lib
  kubectl-handler ``apply/__init__.py``: Update runs ``kubectl apply``).
* Certificates: "The KEDA operator is responsible for generating certificates for all the
  services" with ``--enable-cert-rotation=true``, into the Secret ``--cert-secret-name``
  (``kedaorg-certs``) that the metrics server and webhooks mount
  (https://keda.sh/docs/2.17/operate/security/#use-your-own-tls-certificates).
"""

from __future__ import annotations

import base64
from typing import Any

from rehearsal.controllers import certmanager
from rehearsal.findings import Finding
from rehearsal.world import World

SOURCE = "https://keda.sh/docs/2.17/reference/scaledobject-spec/#scaletargetref"
PINNED_SOURCE = "https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#migrating-deployments-and-statefulsets-to-horizontal-autoscaling"
_SCALABLE_BUILTINS = ("Deployment", "StatefulSet", "ReplicaSet")


def _has_scale(world: World, kind: str) -> bool:
    if kind in _SCALABLE_BUILTINS:
        return True
    for _, crd in world.of_kind("CustomResourceDefinition"):
        spec = crd.get("spec") or {}
        if (spec.get("names") or {}).get("kind") != kind:
            continue
        return any(((v.get("subresources") or {}).get("scale")) for v in spec.get("versions") or [])
    return False


def check(world: World) -> list[Finding]:
    """Each ScaledObject: a target that exists and scales; not pinned by its own manifest."""
    found = []
    for (_, namespace, name), scaled in world.of_kind("ScaledObject"):
        ref: dict[str, Any] = (scaled.get("spec") or {}).get("scaleTargetRef") or {}
        kind = ref.get("kind", "Deployment")
        resource = f"ScaledObject {namespace}/{name}"
        target = world.get(kind, namespace, str(ref.get("name")))
        if target is None:
            found.append(
                Finding(
                    "keda.scale-target-missing",
                    resource,
                    f"no {kind} {namespace}/{ref.get('name')}",
                    SOURCE,
                    "degrades",
                )
            )
            continue
        if not _has_scale(world, kind):
            found.append(
                Finding(
                    "keda.no-scale-subresource",
                    resource,
                    f"{kind} has no /scale subresource",
                    SOURCE,
                    "degrades",
                )
            )
            continue
        declared = world.declared_by.get((kind, namespace, str(ref.get("name"))), [])
        manifest_owned = [
            d for d in declared if not d.startswith(("controller:", "helm:", "addon:"))
        ]
        if "replicas" in (target.get("spec") or {}) and manifest_owned:
            found.append(
                Finding(
                    "keda.replicas-pinned",
                    resource,
                    f"{kind} {namespace}/{ref.get('name')} sets spec.replicas "
                    f"{target['spec']['replicas']} in {manifest_owned[0]}: every stack update "
                    "re-applies it and undoes KEDA's scaling",
                    PINNED_SOURCE,
                    "degrades",
                )
            )
    return found


def reconcile(world: World) -> bool:
    """The operator's certificate Secret; scaling itself goes through the HPA KEDA creates, which
    the rehearsal does not play (it checks the target: ``check``)."""
    changed = False
    for key, _ in world.of_kind("Deployment"):
        for pod in world.pods_of(key):
            if not pod.running:
                continue
            for container in pod.spec.get("containers") or []:
                args = [str(a) for a in container.get("args") or []]
                if "--enable-cert-rotation=true" not in args:
                    continue
                name = next(
                    (a.split("=", 1)[1] for a in args if a.startswith("--cert-secret-name=")),
                    "kedaorg-certs",
                )
                if world.get("Secret", key[1], name) is None:
                    data = certmanager.issue({"commonName": "KEDA", "isCA": True}, None)
                    secret = {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": name, "namespace": key[1]},
                        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
                    }
                    world.put(secret, "controller:keda", key[1])
                    changed = True
    return changed


# -- scale to zero: the wake signal ----------------------------------------------------

#: KEDA polls each trigger every ``pollingInterval``, 30 s unless the ScaledObject sets it
#: (https://keda.sh/docs/2.17/reference/scaledobject-spec/#pollinginterval).
POLLING_INTERVAL = 30
WAKE_SOURCE = "https://keda.sh/docs/2.17/scalers/cron/; https://keda.sh/docs/2.17/scalers/aws-cloudwatch/; https://docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-cloudwatch-metrics.html"
_HEALTHY = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold"
_INTERVAL = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval"


def load_balancer_dimension(service: dict[str, Any] | None) -> str:
    """The ``LoadBalancer`` dimension of the Service's NLB: ``net/<name>/<id>`` of its hostname
    ``<name>-<id>.elb.<region>.amazonaws.com`` (ELB's CloudWatch metrics page, "Metric
    dimensions"); empty before the controller has created it."""
    ingress = (((service or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress")
    hostname = str((ingress or [{}])[0].get("hostname", ""))
    lb_name, _, lb_id = hostname.split(".", 1)[0].rpartition("-")
    return f"net/{lb_name}/{lb_id}" if lb_name else ""


def wake_signal(
    scaled: dict[str, Any], service: dict[str, Any] | None, targets: list[str]
) -> tuple[list[str], Finding | None]:
    """What wakes a ScaledObject at ``minReplicaCount`` 0: triggers that read something other
    than the replicas themselves. A ``prometheus`` trigger reads the workload's own series
    (none exist at 0 replicas). A ``cron`` trigger wakes at its start. An ``aws-cloudwatch``
    trigger on ``AWS/NetworkELB`` ``NewFlowCount`` counts flows "from clients to targets":
    it wakes only if it names the Service's NLB and the Service still has running targets
    (``targets``, the pods it selects at 0 replicas: the wake proxy's), since no NLB metric is
    documented to count a connection to an empty target group.
    Returns (what fires, in words) and a finding when nothing would."""
    spec = scaled.get("spec") or {}
    name = (scaled.get("metadata") or {}).get("name", "?")
    resource = f"ScaledObject {name}"
    expected = load_balancer_dimension(service)
    fires: list[str] = []
    for trigger in spec.get("triggers") or []:
        meta = trigger.get("metadata") or {}
        if trigger.get("type") == "cron":
            fires.append(
                f"cron {meta.get('start')} .. {meta.get('end')} ({meta.get('timezone')}): "
                f"{meta.get('desiredReplicas')} replica"
            )
        elif trigger.get("type") == "aws-cloudwatch":
            if meta.get("namespace") == "AWS/NetworkELB":
                if not targets:
                    return fires, Finding(
                        "keda.wake-on-empty-load-balancer",
                        resource,
                        f"the wake trigger reads AWS/NetworkELB {meta.get('metricName')}, but at 0 "
                        "replicas the Service selects no running pod: no AWS page documents that "
                        "a connection to an NLB whose target group has no target counts in it, "
                        "so the service may never wake",
                        WAKE_SOURCE,
                        "degrades",
                    )
                value = str(meta.get("dimensionValue", ""))
                if meta.get("dimensionName") == "LoadBalancer" and value != expected:
                    return fires, Finding(
                        "keda.wake-signal-elsewhere",
                        resource,
                        f"the wake trigger watches {value or 'no load balancer'}, not the "
                        f"Service's NLB ({expected or 'none yet'})",
                        WAKE_SOURCE,
                        "degrades",
                    )
            if str(meta.get("activationTargetMetricValue", "")) != "":
                fires.append(
                    f"{meta.get('namespace')} {meta.get('metricName')} > "
                    f"{meta.get('activationTargetMetricValue')} on {meta.get('dimensionValue')} "
                    f"(targets: {', '.join(targets) or '-'})"
                )
    if not fires:
        return fires, Finding(
            "keda.no-wake-signal",
            resource,
            "minReplicaCount 0 and every trigger reads the replicas' own metrics: at 0 "
            "replicas nothing reports, so the service never wakes",
            WAKE_SOURCE,
            "degrades",
        )
    return fires, None


def wake_detection_seconds(scaled: dict[str, Any]) -> int:
    """The shortest time from the wake (a cron window's start, a client's connection) to
    KEDA's activation: one polling interval, plus one metric period for an ``aws-cloudwatch``
    wake trigger (CloudWatch's own delivery delay comes on top)."""
    spec = scaled.get("spec") or {}
    polling = int(spec.get("pollingInterval", POLLING_INTERVAL))
    periods = [
        int((t.get("metadata") or {}).get("metricStatPeriod", 300))
        for t in spec.get("triggers") or []
        if t.get("type") == "aws-cloudwatch"
    ]
    crons = any(t.get("type") == "cron" for t in spec.get("triggers") or [])
    return (0 if crons or not periods else min(periods)) + polling


def health_check_seconds(service: dict[str, Any] | None) -> int:
    """How long the NLB takes to call a new target healthy: threshold x interval (the AWS
    Load Balancer Controller's defaults, 3 and 10 s, unless annotated)."""
    annotations = ((service or {}).get("metadata") or {}).get("annotations") or {}
    return int(annotations.get(_HEALTHY, 3)) * int(annotations.get(_INTERVAL, 10))
