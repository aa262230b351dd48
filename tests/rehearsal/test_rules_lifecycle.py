"""The lifecycle script played on a fake node whose volumes mount a check late."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from rehearsal.controllers import lifecycle

pytestmark = pytest.mark.skipif(
    lifecycle.sandbox() is None,
    reason="no mount namespace here: the rehearsal does not play lifecycle scripts",
)

CHECKS_ONCE = r"""#!/bin/bash
set -euo pipefail
ROOT="${LIFECYCLE_ROOT:-}"
if mountpoint -q "$ROOT/opt/dlami/nvme"; then
  mv "$ROOT/var/lib/containerd" "$ROOT/opt/dlami/nvme/containerd"
  ln -s "$ROOT/opt/dlami/nvme/containerd" "$ROOT/var/lib/containerd"
fi
echo done
"""
WAITS_AND_SETS_ROOT = r"""#!/bin/bash
set -euo pipefail
ROOT="${LIFECYCLE_ROOT:-}"
for i in $(seq 1 12); do mountpoint -q "$ROOT/opt/dlami/nvme" && break; sleep 5; done
mountpoint -q "$ROOT/opt/dlami/nvme" || { echo "no data volume after 60 s" >&2; exit 1; }
mkdir -p "$ROOT/opt/dlami/nvme/containerd"
printf 'version = 2\nroot = "/opt/dlami/nvme/containerd/data-root"\n' > "$ROOT/opt/dlami/nvme/containerd/config.toml"
"""


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "on_create.sh"
    path.write_text(text)
    return path


def test_a_script_that_checks_once_stays_on_the_root_volume_silently_and_links_containerd(tmp_path):
    rules = [f.rule for f in lifecycle.check(_script(tmp_path, CHECKS_ONCE), "Cluster")]
    assert rules == [
        "lifecycle.no-mount-wait",
        "lifecycle.silent-fallback",
        "lifecycle.containerd-root-not-set",
    ]


def test_a_script_that_waits_and_sets_containerds_root_passes(tmp_path):
    assert lifecycle.check(_script(tmp_path, WAITS_AND_SETS_ROOT), "Cluster") == []


def test_a_script_that_writes_outside_its_fake_root_cannot_touch_this_machine(tmp_path):
    escape = Path("/tmp") / f"rehearsal-escape-{uuid.uuid4().hex}"
    lifecycle.check(_script(tmp_path, f"#!/bin/bash\necho escaped > {escape}\n"), "Cluster")
    assert not escape.exists()
