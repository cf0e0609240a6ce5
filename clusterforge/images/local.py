"""The local provider's part of a bake: a builder container, committed into a node image.

The builder is a node container like the others (same base image, network, mounts, systemd),
named ``<stack>-bake-<pool>`` and labelled with the stack, so `invoke down` removes one a failed
bake left. It is stopped before the commit (systemd's state is not taken mid-write); volumes
(the shared folder, the apt cache, the mounted torch) are never part of a committed image.
Every engine call goes through the project's engine wrapper.
"""

from __future__ import annotations

from clusterforge.images.digest import SoftwareDigest
from clusterforge.providers.base import Node, ProviderError
from clusterforge.providers.local import LocalProvider
from clusterforge.providers.local import nodes as nodes_mod
from clusterforge.providers.local.engine import Engine
from clusterforge.spec.models import ClusterSpec

REPOSITORY = "clusterforge-baked"
LABEL_DIGEST = "clusterforge.software_digest"
LABEL_POOL = "clusterforge.baked_pool"


def image_tag(engine: Engine, spec: ClusterSpec, pool: str, software: SoftwareDigest) -> str:
    repo = f"localhost/{REPOSITORY}" if engine.name == "podman" else REPOSITORY
    return f"{repo}:{spec.stack}-{pool}-{software.digest[:12]}"


class LocalBuilder:
    kind = "local"

    def __init__(self, provider: LocalProvider | None = None):
        self.provider = provider or LocalProvider()

    def engine(self, spec: ClusterSpec) -> Engine:
        return self.provider.engine(spec)

    def base(self, spec: ClusterSpec) -> str:
        return self.provider.image(spec)  # builds the base node image when missing

    def existing(self, spec: ClusterSpec, pool: str, software: SoftwareDigest) -> str | None:
        tag = image_tag(self.engine(spec), spec, pool, software)
        return tag if self.engine(spec).image_exists(tag) else None

    def start(self, spec: ClusterSpec, pool: str, base: str, progress: object) -> Node:
        engine = self.engine(spec)
        p = spec.pool(pool)
        node = nodes_mod.NodeDef(f"{pool}-bake", p.name, p.role, p.instance_type, f"{spec.stack}-bake-{pool}")
        engine.run("rm", "-f", node.container, check=False)  # a failed bake's leftover
        nodes_mod.ensure_network(engine, spec)
        nodes_mod.ensure_volumes(engine, spec, self.provider.apt_cache)
        address = next(nodes_mod.free_addresses(spec, nodes_mod.taken_addresses(engine, spec)), "")
        if not address:
            raise ProviderError(
                f"provider.network_cidr: {getattr(spec.provider, 'network_cidr', '')} has no free address for the builder"
            )
        engine.run(*nodes_mod.run_argv(engine, spec, node, base, self.provider.apt_cache, address, {}))
        nodes_mod.wait_booted(engine, node.container)
        info = engine.inspect_containers([node.container])[0]
        return Node(
            name=node.name,
            address=address,
            pool=p.name,
            role=p.role,
            instance_type=p.instance_type,
            connection=nodes_mod.connection_vars(engine, node.container),
            provider_id=str(info.get("Id", "")),
        )

    def register(self, spec: ClusterSpec, pool: str, node: Node, software: SoftwareDigest) -> str:
        engine = self.engine(spec)
        container = node.connection["ansible_host"]
        tag = image_tag(engine, spec, pool, software)
        # Stopped first: a commit of a running systemd takes files mid-write (journal, dbus).
        engine.run("stop", "-t", "20", container)
        engine.run(
            "commit",
            "--change",
            'CMD ["/sbin/init"]',
            "--change",
            "STOPSIGNAL SIGRTMIN+3",
            "--change",
            f"LABEL {LABEL_DIGEST}={software.digest}",
            "--change",
            f"LABEL {LABEL_POOL}={spec.stack}/{pool}",
            # No --message: podman refuses it for its default OCI format ("messages are only compatible
            # with the docker image format"), and a bake failed on it here; the labels say what it is.
            container,
            tag,
            timeout=1800,
        )
        return tag

    def discard(self, spec: ClusterSpec, node: Node) -> None:
        self.engine(spec).run("rm", "-f", "-t", "0", node.connection["ansible_host"], check=False)
