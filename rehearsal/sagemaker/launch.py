"""A copy's container start inside its namespaces: loopback up, ``/proc`` of the new PID
namespace, the read-only overlays (AWS's scripts over ``/usr/local/bin``, the model over
``/opt``), then the image's entrypoint ``exec``-ed with exactly the copy's environment.

Started by ``rehearsal.sagemaker.container.start`` as ``unshare --net --mount --pid --fork
--kill-child --propagation private python -m rehearsal.sagemaker.launch SPEC``. A read-only
overlay with two lower layers (no upper) shows the union of both, the first one winning
(https://docs.kernel.org/filesystems/overlayfs.html, "Multiple lower layers"). Standard library
only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    subprocess.run(["mount", "-t", "proc", "proc", "/proc"], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for upper, target in spec["overlays"]:
        subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={upper}:{target}", target],
            check=True,
        )
    os.chdir("/")
    argv = spec["argv"]
    sys.stdout.flush()
    os.execvpe(argv[0], argv, spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
