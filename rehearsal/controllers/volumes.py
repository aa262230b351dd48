"""The kubelet mounts a bound pod's volumes before it starts its containers; a volume that
cannot mount keeps the pod in ``ContainerCreating``.

* CSI volumes (inline ``csi`` or a PersistentVolume's ``spec.csi``): the kubelet calls the
  driver's node plugin on that node, registered by the driver's DaemonSet pod there
  (https://kubernetes-csi.github.io/docs/deploying.html: "the node plugin ... deployed on every
  node via a DaemonSet"); with no such pod the mount fails (``driver name ... not found in the
  list of registered CSI drivers``).
* Secrets Store CSI: the driver asks the provider named by the SecretProviderClass over a socket
  on the same node, so the provider's DaemonSet pod must run there too
  (https://secrets-store-csi-driver.sigs.k8s.io/concepts.html#provider-for-the-secrets-store-csi-driver;
  aws/secrets-store-csi-driver-provider-aws issue 267: ``error connecting to provider "aws"``
  on tainted nodes). The AWS provider with ``usePodIdentity: "true"`` authenticates as the pod's
  service account through an EKS Pod Identity association
  (https://docs.aws.amazon.com/secretsmanager/latest/userguide/ascp-pod-identity-integration.html);
  each object lands as a file named by its ``objectAlias``, else its ``objectName``
  (aws/secrets-store-csi-driver-provider-aws README, "objectAlias").
* Secret volumes: the Secret must exist unless the volume is ``optional``; ``items`` pick keys
  and name the files (https://kubernetes.io/docs/concepts/storage/volumes/#secret).
* PersistentVolumeClaims: the claim must exist and be bound to its ``volumeName``.
* A LeaderWorkerSet's pod names a ServiceAccount that must exist (the leader's and the
  workers' differ): the ServiceAccount admission controller rejects the pod
  otherwise (``SERVICE_ACCOUNT_SOURCE``); played here, before the volumes.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from rehearsal.findings import Finding
from rehearsal.world import PodState, World

SECRETS_STORE_DRIVER = "secrets-store.csi.k8s.io"
#: Annotation the rehearsal puts on a modelled DaemonSet: the CSI driver it registers.
CSI_DRIVER_ANNOTATION = "rehearsal.cdk-llm-serving/csi-driver"
#: Annotation on a modelled DaemonSet: the Secrets Store provider it is.
PROVIDER_ANNOTATION = "rehearsal.cdk-llm-serving/secrets-store-provider"
CSI_SOURCE = "https://kubernetes-csi.github.io/docs/deploying.html (node plugin: a DaemonSet pod on each node)"
PROVIDER_SOURCE = (
    "https://secrets-store-csi-driver.sigs.k8s.io/concepts.html (provider on the same node); "
    "aws/secrets-store-csi-driver-provider-aws issue 267"
)


#: The ServiceAccount admission controller "ensures that the ServiceAccount referenced by the
#: pod exists, and otherwise rejects it".
SERVICE_ACCOUNT_SOURCE = "https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#serviceaccount-admission-controller"


def _daemon_on(world: World, node: str, annotation: str, value: str) -> bool:
    for key, obj in world.of_kind("DaemonSet"):
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if annotations.get(annotation) == value:
            if any(p.node == node and p.running for p in world.pods_of(key)):
                return True
    return False


def _has_daemon(world: World, annotation: str, value: str) -> bool:
    return any(
        ((obj.get("metadata") or {}).get("annotations") or {}).get(annotation) == value
        for _, obj in world.of_kind("DaemonSet")
    )


def admission_problem(world: World, pod: PodState) -> Finding | None:
    """Why the API server rejects a LeaderWorkerSet pod before any volume mounts: the
    ServiceAccount admission controller refuses a pod whose account does not exist
    (``SERVICE_ACCOUNT_SOURCE``). Played for the serving pods, whose accounts the library
    names (the leader's and the workers')."""
    account = pod.spec.get("serviceAccountName")
    namespace = pod.key[1]
    if (
        pod.owner[0] != "LeaderWorkerSet"
        or account in (None, "default")
        or world.get("ServiceAccount", namespace, str(account)) is not None
    ):
        return None
    return _pod_finding(
        pod,
        "pod.service-account-missing",
        f"ServiceAccount {namespace}/{account} does not exist: the pod is rejected",
        SERVICE_ACCOUNT_SOURCE,
    )


def _pod_finding(pod: PodState, rule: str, message: str, source: str) -> Finding:
    return Finding(rule, f"Pod {pod.key[1]}/{pod.key[2]}", message, source)


def mount(
    world: World, pod: PodState, *, strict: bool = True
) -> tuple[dict[str, dict[str, bytes]], Finding | None]:
    """What each of the pod's volumes holds, or the first that cannot mount. ``strict=False``
    (keep-going mode, after the finding is reported) skips the node-plugin checks."""
    namespace, node = pod.key[1], str(pod.node)
    volumes: dict[str, dict[str, bytes]] = {}
    rejected = admission_problem(world, pod)
    if rejected is not None:
        return volumes, rejected
    for volume in pod.spec.get("volumes") or []:
        name = volume["name"]
        if "emptyDir" in volume:
            volumes[name] = {}
        elif "secret" in volume:
            secret = world.get("Secret", namespace, volume["secret"]["secretName"])
            if secret is None and volume["secret"].get("optional"):
                volumes[name] = {}  # "optional": the volume mounts empty
                continue
            if secret is None:
                return volumes, _pod_finding(
                    pod, "volume.secret-missing",
                    f"volume {name}: Secret {volume['secret']['secretName']} does not exist",
                    "https://kubernetes.io/docs/concepts/storage/volumes/#secret",
                )  # fmt: skip
            data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
            items = volume["secret"].get("items")
            volumes[name] = (
                {i["path"]: data[i["key"]] for i in items if i["key"] in data} if items else data
            )
        elif "configMap" in volume:
            config = world.get("ConfigMap", namespace, volume["configMap"]["name"]) or {}
            volumes[name] = {k: str(v).encode() for k, v in (config.get("data") or {}).items()}
        elif "persistentVolumeClaim" in volume:
            claim_name = volume["persistentVolumeClaim"]["claimName"]
            claim = world.get("PersistentVolumeClaim", namespace, claim_name)
            if claim is None:
                return volumes, _pod_finding(
                    pod, "volume.claim-missing", f"volume {name}: claim {claim_name} does not exist",
                    "https://kubernetes.io/docs/concepts/storage/persistent-volumes/#persistentvolumeclaims",
                )  # fmt: skip
            pv = world.get("PersistentVolume", "", str((claim.get("spec") or {}).get("volumeName")))
            driver = ((pv or {}).get("spec") or {}).get("csi", {}).get("driver")
            if strict and driver and not _daemon_on(world, node, CSI_DRIVER_ANNOTATION, driver):
                return volumes, _pod_finding(
                    pod, "csi.driver-not-on-node",
                    f"volume {name}: CSI driver {driver} has no node plugin on {node}"
                    + ("" if _has_daemon(world, CSI_DRIVER_ANNOTATION, driver) else " (not installed)"),
                    CSI_SOURCE,
                )  # fmt: skip
            volumes[name] = {}
        elif "csi" in volume:
            driver = volume["csi"]["driver"]
            if strict and not _daemon_on(world, node, CSI_DRIVER_ANNOTATION, driver):
                return volumes, _pod_finding(
                    pod, "csi.driver-not-on-node",
                    f"volume {name}: CSI driver {driver} has no node plugin on {node}", CSI_SOURCE,
                )  # fmt: skip
            if driver == SECRETS_STORE_DRIVER:
                files, problem = _secrets_store(world, pod, name, volume["csi"], strict)
                if problem is not None:
                    return volumes, problem
                volumes[name] = files
            else:
                volumes[name] = {}
        else:
            volumes[name] = {}
    mounts: dict[str, dict[str, bytes]] = {}
    for container in pod.spec.get("containers") or []:
        for mount_ in container.get("volumeMounts") or []:
            mounts[mount_["mountPath"]] = volumes.get(mount_["name"], {})
    return mounts, None


def _secrets_store(
    world: World, pod: PodState, name: str, csi: dict[str, Any], strict: bool
) -> tuple[dict[str, bytes], Finding | None]:
    namespace, node = pod.key[1], str(pod.node)
    class_name = (csi.get("volumeAttributes") or {}).get("secretProviderClass")
    spc = world.get("SecretProviderClass", namespace, str(class_name))
    if spc is None:
        return {}, _pod_finding(
            pod, "csi.secret-provider-class-missing",
            f"volume {name}: SecretProviderClass {class_name} does not exist in {namespace}",
            "https://secrets-store-csi-driver.sigs.k8s.io/getting-started/usage.html",
        )  # fmt: skip
    provider = spc["spec"]["provider"]
    if strict and not _daemon_on(world, node, PROVIDER_ANNOTATION, provider):
        return {}, _pod_finding(
            pod, "csi.provider-not-on-node",
            f"volume {name}: no Secrets Store provider {provider!r} pod on {node} (its DaemonSet "
            f"does not tolerate the node's taints {[t['key'] for t in world.node(node).taints]}): "
            f'the mount fails with error connecting to provider "{provider}"',
            PROVIDER_SOURCE,
        )  # fmt: skip
    parameters = spc["spec"].get("parameters") or {}
    if strict and str(parameters.get("usePodIdentity")).lower() == "true":
        account = pod.spec.get("serviceAccountName", "default")
        if (namespace, account) not in world.facts.get("pod_identity", set()):
            return {}, _pod_finding(
                pod, "csi.pod-identity-missing",
                f"volume {name}: usePodIdentity, but no Pod Identity association for {namespace}/{account}",
                "https://docs.aws.amazon.com/secretsmanager/latest/userguide/ascp-pod-identity-integration.html",
            )  # fmt: skip
    files = {}
    for entry in yaml.safe_load(parameters.get("objects") or "[]") or []:
        object_name = str(entry["objectName"])
        value = world.secret_values.get(object_name)
        if value is None:
            return {}, _pod_finding(
                pod, "csi.secret-not-found",
                f"volume {name}: the provider finds no secret {object_name}",
                "aws/secrets-store-csi-driver-provider-aws README (objectName: the secret's name or ARN)",
            )  # fmt: skip
        files[str(entry.get("objectAlias") or object_name.rpartition("/")[2])] = value.encode()
    return files, None


def reconcile(world: World) -> bool:
    """Start bound pods whose volumes mount; the others keep their reason."""
    changed = False
    for pod in world.pods.values():
        if pod.node is None or pod.started:
            continue
        files, problem = mount(world, pod)
        if problem is None:
            pod.files, pod.started, pod.problem = files, True, None
            changed = True
        else:
            pod.problem = problem
    return changed
