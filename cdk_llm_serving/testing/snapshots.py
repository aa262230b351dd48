"""Template snapshots with syrupy (needs the ``testing`` extra):
``assert template_of(stack) == snapshot(extension_class=TemplateSnapshotExtension)``, one JSON
file per snapshot with asset hashes masked; ``pytest --snapshot-update`` writes it.
"""

from __future__ import annotations

from typing import Any

from .._extras import require_extra
from . import mask_asset_hashes

require_extra("testing", "syrupy", __name__)

from syrupy.extensions.json import JSONSnapshotExtension  # noqa: E402

__all__ = ["TemplateSnapshotExtension"]


class TemplateSnapshotExtension(JSONSnapshotExtension):
    """syrupy's JSON snapshots of CloudFormation templates, asset hashes masked."""

    def serialize(self, data: Any, **kwargs: Any) -> Any:
        return super().serialize(mask_asset_hashes(data), **kwargs)
