"""The backend a spec names (``state: {backend: ...}``); None for the local default."""

from __future__ import annotations

from pathlib import Path

from clusterforge.spec.models import ClusterSpec
from clusterforge.state.backend import Backend


def backend_for(spec: ClusterSpec) -> Backend | None:
    url = spec.state.backend
    if url == "local":
        return None
    if url.startswith("s3://"):
        from clusterforge.state.s3 import S3Backend

        region = spec.state.region or getattr(spec.provider, "region", None)
        return S3Backend(url, region)
    from clusterforge.state.fsdir import DirectoryBackend

    return DirectoryBackend(Path(url[len("file://") :] if url.startswith("file://") else url))


def spec_for_stack(stack: str) -> ClusterSpec | None:
    """The spec of ``stacks/<stack>.yaml`` when there is one (tasks that take a stack name only)."""
    from clusterforge.spec.loader import STACKS_DIR, load_spec

    path = STACKS_DIR / f"{stack}.yaml"
    if not path.exists():
        return None
    spec, _ = load_spec(path)
    return spec
