"""What the rehearsal reports: a rule the deployment breaks, on which resource, from which source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``blocking``: the service would not answer (the rehearsal stops there); ``degrades``: it
#: answers, but something an operator relies on would not hold (e.g. an outage on update).
Severity = Literal["blocking", "degrades"]


@dataclass(frozen=True)
class Finding:
    """One broken rule.

    :param rule: a short stable id, e.g. ``scheduler.insufficient-cpu``.
    :param resource: the resource it concerns: a CloudFormation logical id and/or the Kubernetes
        object (``kind namespace/name``).
    :param message: what happens, with the figures (``requests cpu 172, node offers 95.4``).
    :param source: where the rule comes from: a controller's repository + file, or an AWS or
        Kubernetes documentation URL; ``ASSUMED: <reason>`` where no source settles it.
    """

    rule: str
    resource: str
    message: str
    source: str
    severity: Severity = "blocking"

    def __str__(self) -> str:
        return f"[{self.severity}] {self.rule} on {self.resource}: {self.message} (source: {self.source})"


class RehearsalStopped(Exception):
    """The rehearsal met a blocking finding: the deployment would not serve."""

    def __init__(self, finding: Finding, earlier: tuple[Finding, ...] = ()) -> None:
        super().__init__(str(finding))
        self.finding = finding
        self.earlier = earlier
