"""Models of the controllers the deployment relies on: each rule a small function whose
docstring names its source (controller code, a Kubernetes or AWS page), or says ``ASSUMED:``.

Each module's ``reconcile(world) -> bool`` is level-triggered and idempotent, as Kubernetes
controllers are; ``CONTROLLERS`` is the order ``World.reconcile`` runs them in.
"""

from __future__ import annotations

from collections.abc import Callable

from rehearsal.controllers import (
    certmanager,
    inference_operator,
    karpenter,
    keda,
    lbc,
    lws,
    scheduler,
    volumes,
    workloads,
)
from rehearsal.world import World

CONTROLLERS: list[Callable[[World], bool]] = [
    workloads.reconcile,
    lws.reconcile,
    inference_operator.reconcile,
    scheduler.reconcile,
    karpenter.reconcile,
    volumes.reconcile,
    certmanager.reconcile,
    lbc.reconcile,
    keda.reconcile,
]
