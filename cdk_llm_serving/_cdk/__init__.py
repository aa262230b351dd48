"""Private CDK plumbing shared by both serving paths: validation, service limits, nag, role grants.

Nothing here is public API: names may change between releases.
"""
