"""aws-cdk-lib's kubectl handler applying a ``Custom::AWSCDK-EKS-KubernetesResource`` manifest.

Handler (aws-cdk-lib ``custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py``,
shipped in the installed aws-cdk-lib): the manifest's objects are written in order to one file;
Create runs ``kubectl apply`` when ``Overwrite`` is true, else ``kubectl create --save-config``
(which fails on an object that already exists); Update runs ``kubectl apply`` (with ``--prune
-l <PruneLabel>``); Delete runs ``kubectl delete -f`` on the manifest, every object in it.

kubectl/API server rules played here: a kind the API server does not serve (no CRD yet) is
rejected (``no matches for kind``); a namespaced object needs its namespace to exist
(``NamespaceLifecycle`` admission: https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#namespacelifecycle),
a Namespace earlier in the same file counts.
"""

from __future__ import annotations

from typing import Any

from rehearsal.findings import Finding
from rehearsal.world import BUILTIN_KINDS, INITIAL_NAMESPACES, World, key_of

HANDLER_SOURCE = (
    "aws-cdk-lib custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py"
)
NAMESPACE_SOURCE = "https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#namespacelifecycle"


def namespace_exists(world: World, namespace: str) -> bool:
    return (
        not namespace
        or namespace in INITIAL_NAMESPACES
        or ("Namespace", "", namespace) in world.objects
    )


def apply(
    world: World, declared_by: str, objects: list[dict[str, Any]], *, overwrite: bool, resource: str
) -> list[Finding]:
    """Apply (or create) ``objects`` in order; the findings that make the resource fail."""
    found = []
    for obj in objects:
        key = key_of(obj)
        kind, namespace, name = key
        label = f"{kind} {namespace + '/' if namespace else ''}{name}"
        if kind not in BUILTIN_KINDS and kind not in world.crd_kinds:
            found.append(
                Finding(
                    "kubectl.no-such-kind",
                    resource,
                    f"{label}: no matches for kind {kind} ({obj.get('apiVersion')}): its CRD is not installed yet",
                    HANDLER_SOURCE,
                )
            )
            continue
        if not namespace_exists(world, namespace):
            found.append(
                Finding(
                    "kubectl.namespace-missing",
                    resource,
                    f"{label}: namespace {namespace} not found",
                    NAMESPACE_SOURCE,
                )
            )
            continue
        if key in world.objects and not overwrite:
            found.append(
                Finding(
                    "kubectl.already-exists",
                    resource,
                    f"{label} already exists (from {', '.join(world.declared_by.get(key, []))}) and Overwrite is off: kubectl create fails",
                    HANDLER_SOURCE,
                )
            )
            continue
        if key in world.objects:
            previous = world.objects[key]
            obj = {**obj, "status": previous.get("status", {})} if previous.get("status") else obj
        world.put(obj, declared_by)
    return found


def declared_twice(world: World) -> list[Finding]:
    """Objects two CloudFormation resources declare: deleting or replacing either deletes it
    (the handler's Delete runs ``kubectl delete -f`` on its whole manifest); for a Namespace,
    with everything in it."""
    found = []
    for key, owners in world.declared_by.items():
        resources = [o for o in owners if not o.startswith(("controller:", "addon:"))]
        if len(resources) > 1:
            kind, namespace, name = key
            extra = " and every object in it" if kind == "Namespace" else ""
            found.append(
                Finding(
                    "kubectl.declared-twice",
                    f"{kind} {namespace + '/' if namespace else ''}{name}",
                    f"declared by {', '.join(resources)}: deleting or replacing either deletes it{extra}",
                    HANDLER_SOURCE,
                    "degrades",
                )
            )
    return found
