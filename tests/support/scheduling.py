"""Moved to ``rehearsal.scheduling`` (the deploy rehearsal's scheduler); re-exported for tests."""

from rehearsal.scheduling import *  # noqa: F403
from rehearsal.scheduling import (  # noqa: F401
    DEVICE_PLUGINS,
    EFA,
    GPU,
    HEALTH,
    INSTANCE_TYPE,
    MAX_PODS,
    VCPUS,
    Cluster,
    DevicePlugin,
    Node,
    Placement,
    Pod,
    Workload,
    hyperpod_nodes,
    pod_requests,
    quantity,
    tolerates,
    why_not,
    workloads,
)
