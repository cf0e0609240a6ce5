"""The ``local`` provider: one systemd container per node on this machine (podman or docker).

provider = LocalProvider()
problems = provider.preflight(spec)     # before anything is created
nodes = provider.create(spec, progress) # builds the image once, starts the nodes
provider.destroy(spec)                  # exactly this stack's containers, network, volumes
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from clusterforge.providers.base import (
    DestroySummary,
    Node,
    PlannedNode,
    Problem,
    Progress,
    ProviderError,
    no_progress,
)
from clusterforge.providers.local import image as image_mod
from clusterforge.providers.local import nodes as nodes_mod
from clusterforge.providers.local.engine import Engine, detect_engine
from clusterforge.providers.local.preflight import FreeBytes, disk_free, run_preflight
from clusterforge.spec.models import ClusterSpec

__all__ = ["LocalProvider", "make_provider"]

IMAGE_PROGRESS = "image"  # the progress "node" name used for image build messages


class LocalProvider:
    """Implements ``clusterforge.providers.base.Provider`` with containers."""

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        apt_cache: bool = True,
        packages: tuple[str, ...] = image_mod.PACKAGES,
        free_bytes: FreeBytes = disk_free,
    ):
        self._engine = engine
        self.apt_cache = apt_cache
        self.packages = packages
        self.free_bytes = free_bytes

    def engine(self, spec: ClusterSpec) -> Engine:
        if self._engine is None:
            preference = spec.provider.engine if spec.provider.kind == "local" else "auto"
            self._engine = detect_engine(preference)
        return self._engine

    def preflight(self, spec: ClusterSpec) -> list[Problem]:
        return run_preflight(spec, engine=self._engine, free_bytes=self.free_bytes, packages=self.packages)

    def plan(self, spec: ClusterSpec) -> list[PlannedNode]:
        return nodes_mod.plan(self.engine(spec), spec)

    def image(self, spec: ClusterSpec, progress: Progress = no_progress) -> str:
        """The node image tag, built first if missing (minutes, once per machine and package list)."""
        suite = spec.provider.debian_suite if spec.provider.kind == "local" else "bookworm"
        engine = self.engine(spec)
        progress(IMAGE_PROGRESS, "checking node image")
        tag, built = image_mod.ensure_image(engine, suite, self.packages)
        progress(IMAGE_PROGRESS, f"{'built' if built else 'using'} {tag}")
        return tag

    @contextmanager
    def converging(
        self, spec: ClusterSpec, nodes: Iterable[str], note: Progress = no_progress
    ) -> Iterator[list[str]]:
        """While Ansible converges ``nodes``: the head nodes among them without their CPU cap
        (nodes.heads_uncapped says why); yields the heads lifted."""
        with nodes_mod.heads_uncapped(self.engine(spec), spec, nodes, note) as lifted:
            yield lifted

    def create(self, spec: ClusterSpec, progress: Progress = no_progress) -> list[Node]:
        errors = [p for p in self.preflight(spec) if p.level == "error"]
        if errors:
            raise ProviderError(
                "local provider preflight failed:\n" + "\n".join(f"  {p.render()}" for p in errors)
            )
        tag = self.image(spec, progress)
        baked = self.baked_images(spec, progress)
        return nodes_mod.create(
            self.engine(spec), spec, tag, progress, apt_cache=self.apt_cache, pool_images=baked
        )

    def baked_images(self, spec: ClusterSpec, progress: Progress = no_progress) -> dict[str, str]:
        """pool -> the baked image its nodes boot (pools with ``image: baked``; `invoke image.bake`)."""
        from clusterforge.images.boot import BakeNeeded, boot_images
        from clusterforge.images.record import ImageRecordError

        try:
            baked = boot_images(spec)
        except (BakeNeeded, ImageRecordError) as exc:
            raise ProviderError(str(exc)) from None
        engine = self.engine(spec)
        for pool, tag in sorted(baked.items()):
            if not engine.image_exists(tag):
                raise ProviderError(
                    f"node_pools[{pool}].image: baked, but the recorded image {tag} is not in {engine.name}'s "
                    f"storage (removed?): run `invoke image.bake --stack {spec.stack}` again"
                )
            progress(IMAGE_PROGRESS, f"pool {pool} boots baked {tag}")
        return baked

    def nodes(self, spec: ClusterSpec) -> list[Node]:
        return nodes_mod.nodes(self.engine(spec), spec)

    def destroy(self, spec: ClusterSpec) -> DestroySummary:
        return nodes_mod.destroy(self.engine(spec), spec.stack)

    def exec(
        self, spec: ClusterSpec, node: str, *argv: str, check: bool = True, timeout: float | None = None
    ) -> str:
        """Run ``argv`` on node ``node`` (e.g. "node-001"); return stdout."""
        return self.engine(spec).exec(f"{spec.stack}-{node}", *argv, check=check, timeout=timeout)


def make_provider(spec: ClusterSpec) -> LocalProvider:
    return LocalProvider()
