"""Small crafted worlds for the rehearsal's rule tests: a minimal assembly, nodes, objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rehearsal.assembly import Assembly, Resolver
from rehearsal.controllers import CONTROLLERS
from rehearsal.scheduling import Node
from rehearsal.world import World

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def assembly(
    directory: Path, resources: dict[str, Any], stack: str = "ReferenceMoeHyperPod"
) -> Assembly:
    """A cloud assembly of one stack with these resources."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{stack}.template.json").write_text(json.dumps({"Resources": resources}))
    manifest = {
        "artifacts": {
            stack: {
                "type": "aws:cloudformation:stack",
                "environment": "aws://unknown-account/us-west-2",
                "properties": {"templateFile": f"{stack}.template.json"},
            }
        }
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return Assembly(directory, stack)


def world(directory: Path, resources: dict[str, Any] | None = None) -> World:
    built = assembly(directory, resources or {})
    w = World(built, Resolver(built), stop_at_blocking=False)
    w.controllers = list(CONTROLLERS)
    return w


def node(
    name: str, cpu: float = 16, taints: list[dict[str, str]] | None = None, **labels: str
) -> Node:
    return Node(
        name=name,
        group=name.rpartition("-")[0],
        instance_type="ml.m5.4xlarge",
        labels={"kubernetes.io/hostname": name, **labels},
        taints=list(taints or []),
        capacity={"cpu": cpu, "memory": 64 * 2**30, "pods": 110.0},
    )


def container(name: str = "app", cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": name, "resources": {"requests": {"cpu": cpu}}, **extra}


def deployment(
    name: str, namespace: str = "default", replicas: int = 1, **spec: Any
) -> dict[str, Any]:
    pod_spec = {"containers": [container()], **spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


def lws(
    name: str = "svc", namespace: str = "inference", size: int = 2, replicas: int = 1, **spec: Any
) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [container("vllm", env=[{"name": "A", "value": "1"}])], **spec},
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": size, "workerTemplate": template},
        },
    }


def lws_controller(w: World) -> None:
    """The LWS chart's CRD and controller Deployment, on the world's nodes."""
    w.put(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
            "spec": {
                "names": {"kind": "LeaderWorkerSet"},
                "versions": [
                    {
                        "name": "v1",
                        "subresources": {"scale": {"specReplicasPath": ".spec.replicas"}},
                    }
                ],
            },
        },
        "helm:lws",
    )
    w.put(deployment("lws-controller-manager", "lws-system"), "helm:lws")


def namespace(w: World, name: str) -> None:
    w.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, "test")
