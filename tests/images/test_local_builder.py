"""The local part of a bake, at the engine wrapper's seam: the image is committed from the stopped
builder with the node image's CMD/STOPSIGNAL and the digest as a label, tagged by stack, pool and
digest; an existing tag is reused; the builder is removed whatever happened."""

from __future__ import annotations

import subprocess
from typing import Any

from clusterforge.images.digest import SoftwareDigest
from clusterforge.images.local import LABEL_DIGEST, LocalBuilder, image_tag
from clusterforge.providers.base import Node
from clusterforge.providers.local import LocalProvider
from clusterforge.providers.local.engine import Engine
from clusterforge.spec.loader import REPO_ROOT, load_spec

DIGEST = SoftwareDigest("0123456789abcdef")


class RecordingEngine(Engine):
    """The engine wrapper with every call recorded and answered (``images`` exist)."""

    def __init__(self, images: set[str] | None = None) -> None:
        super().__init__("podman", "/usr/bin/podman")
        self.calls: list[tuple[str, ...]] = []
        self.images = images or set()

    def run(self, *args: str, check: bool = True, **_kw: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if args[0] == "commit" and "--message" in args and not {"-f", "--format"} & set(args):
            # podman's rule: its default image format (OCI) has no commit message
            err = "Error: messages are only compatible with the docker image format (-f docker)"
            if check:
                raise AssertionError(f"podman commit exits 125: {err}")
            return subprocess.CompletedProcess(list(args), 125, "", err)
        rc = 0 if args[:2] != ("image", "inspect") or args[2] in self.images else 1
        return subprocess.CompletedProcess(list(args), rc, "", "")  # nothing is started


def _setup(images: set[str] | None = None) -> tuple[RecordingEngine, LocalBuilder, Any]:
    engine = RecordingEngine(images)
    spec = load_spec(REPO_ROOT / "stacks" / "local.yaml")[0]
    return engine, LocalBuilder(LocalProvider(engine)), spec


def test_tag_names_stack_pool_and_digest() -> None:
    engine, _, spec = _setup()
    assert image_tag(engine, spec, "node", DIGEST) == "localhost/clusterforge-baked:local-node-0123456789ab"


def test_register_commits_the_stopped_builder_with_the_digest_label() -> None:
    engine, builder, spec = _setup()
    node = Node("node-bake", "10.89.42.10", "node", "gpu", "local", {"ansible_host": "local-bake-node"})
    tag = builder.register(spec, "node", node, DIGEST)
    stop, commit = engine.calls
    assert stop[:1] == ("stop",) and stop[-1] == "local-bake-node"
    assert commit[0] == "commit" and commit[-2:] == ("local-bake-node", tag)
    changes = [commit[i + 1] for i, a in enumerate(commit) if a == "--change"]
    assert changes[:2] == ['CMD ["/sbin/init"]', "STOPSIGNAL SIGRTMIN+3"]
    assert f"LABEL {LABEL_DIGEST}={DIGEST.digest}" in changes


def test_an_image_with_the_same_digest_is_reused_and_the_builder_always_removed() -> None:
    tag = "localhost/clusterforge-baked:local-node-0123456789ab"
    engine, builder, spec = _setup({tag})
    assert builder.existing(spec, "node", DIGEST) == tag
    assert builder.existing(spec, "node", SoftwareDigest("f" * 16)) is None
    builder.discard(spec, Node("node-bake", "", "node", "gpu", "local", {"ansible_host": "local-bake-node"}))
    assert engine.calls[-1] == ("rm", "-f", "-t", "0", "local-bake-node")
