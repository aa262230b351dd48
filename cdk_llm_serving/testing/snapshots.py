"""Template snapshots with syrupy (needs the ``testing`` extra).

``assert template_of(stack) == snapshot(extension_class=TemplateSnapshotExtension)`` keeps
one JSON file per snapshot under ``__snapshots__/``, with asset hashes masked so an edited
asset does not churn it; ``pytest --snapshot-update`` writes it, and a later change of the
template fails the test until you read the diff and update it.
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
