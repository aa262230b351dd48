"""Kubernetes' ``$(VAR)`` expansion, as the kubelet applies it to a container's ``env``,
``command`` and ``args`` before it starts the container.

Kubernetes API reference, Pod v1, Container "Entrypoint" (``command``, ``args``) and EnvVar
``value`` (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#entrypoint,
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#environment-variables):
"Variable references $(VAR_NAME) are expanded using the container's environment. If a variable
cannot be resolved, the reference in the input string will be unchanged. Double $$ are reduced
to a single $, which allows for escaping the $(VAR_NAME) syntax: i.e. "$$(VAR_NAME)" will
produce the string literal "$(VAR_NAME)". Escaped references will never be expanded, regardless
of whether the variable exists or not." An ``env`` value sees only the variables defined before
it ("the previously defined environment variables in the container"). The reference's leader
start script relies on this: its shell's ``$`` are written ``$$``.

(The same rule as ``tests/support/start_script.py``'s ``kubernetes_expand``, moved here so the
live run does not import from the tests.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$$`` reduced to ``$`` and each ``$(VAR)`` of ``env`` replaced (an
    undefined one left as written); what an expansion produces is not expanded again."""
    return _REFERENCE.sub(
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text
    )


def expand_env(env: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The container's variables, each value expanded with those defined before it."""
    seen: dict[str, str] = {}
    for name, value in env:
        seen[name] = expand(value, seen)
    return seen


def expand_argv(
    command: Sequence[str], args: Sequence[str], env: Mapping[str, str]
) -> tuple[str, ...]:
    """``command`` then ``args``, each expanded with the container's environment."""
    return tuple(expand(part, env) for part in (*command, *args))
