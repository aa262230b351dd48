"""Checks of an Availability Zone ID (``use1-az4``) against a Region, at synth time.

An AZ ID is the Region code's first three letters (one per direction of a compound one:
``apse1``), its number, ``-az`` and a number
(https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html);
which IDs exist only EC2 knows, and it refuses an unknown one at deploy."""

from __future__ import annotations

import re

AZ_ID_PATTERN = r"^[a-z]{3,4}[0-9]-az[0-9]$"

_DIRECTIONS = {
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
    "central": "c",
    "northeast": "ne",
    "northwest": "nw",
    "southeast": "se",
    "southwest": "sw",
    "gov": "g",
    "iso": "i",
}


def region_prefix(region: str) -> str | None:
    """``use1`` for ``us-east-1``; ``None`` for a Region code of a shape we cannot map."""
    parts = region.split("-")
    if len(parts) < 3 or not parts[-1].isdigit():
        return None
    letters = [_DIRECTIONS.get(part) for part in parts[1:-1]]
    if any(letter is None for letter in letters):
        return None
    return parts[0] + "".join(letter for letter in letters if letter) + parts[-1]


def az_id_problem(az_id: str, region: str | None) -> str | None:
    """Why ``az_id`` cannot be an Availability Zone ID of ``region`` (``None``: it can)."""
    if not re.fullmatch(AZ_ID_PATTERN, az_id):
        return f"must be an Availability Zone ID matching {AZ_ID_PATTERN} (e.g. usw2-az2)"
    prefix = region_prefix(region) if region else None
    if prefix is not None and not az_id.startswith(f"{prefix}-az"):
        return f"is not an Availability Zone ID of {region} (those start with {prefix}-az)"
    return None
