"""Tag keys every resource carries, so a resource in the console says which stack made it."""

from __future__ import annotations

STACK = "clusterforge:stack"
POOL = "clusterforge:pool"
NODE = "clusterforge:node"
ROLE = "clusterforge:role"
CERTIFICATION = "clusterforge:certification"
MANAGED_BY = "clusterforge:managed-by"

# A node starts uncertified; the pipeline rewrites this tag with the verdict.
CERTIFICATION_PENDING = "pending"


def base_tags(stack: str) -> dict[str, str]:
    return {STACK: stack, MANAGED_BY: "clusterforge"}


def with_name(tags: dict[str, str], name: str, **extra: str) -> dict[str, str]:
    """``tags`` plus a Name tag (what the EC2 console shows) and any extra keys."""
    return {**tags, "Name": name, **extra}
