"""Secrets that belong to the cluster, not to the workstation that first ran `up`: the munge key.

Every munged of a cluster must share one key ("All munged daemons within a security realm must use
the same key", mungekey(8)). The slurm role installs the key from a file on the control machine
(``slurm_munge_key_file`` = ``<state>/<stack>/munge.key``). A CI runner or a new workstation has no
such file: without the key store below the role made a second key and installed it on the batch it
converged, whose slurmd could then no longer talk to the controller.

So the key lives with the cluster:
- AWS: an SSM SecureString ``/clusterforge/<stack>/munge-key`` (encrypted with the account's
  ``aws/ssm`` key), created once with ``Overwrite=False`` so two runners cannot both create one.
  The runner needs ``ssm:GetParameter`` (with decryption) and ``ssm:PutParameter`` on it.
- local and static stacks: the state folder itself (``None`` here: nothing to sync).

Before a converge the cluster's key is written to the local file (created 0600); after a converge
that made the first key, it is stored. The role does its part on the nodes: it never generates a key
while the controller holds the cluster's, and reads that one back when the local file is missing
(roles/slurm/tasks/munge.yml). ``KeyStore`` is the seam a shared state backend can implement.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from clusterforge.spec.models import AwsProvider, ClusterSpec

SSM_NAME = "/clusterforge/{stack}/munge-key"


class SecretError(Exception):
    """The cluster's key and the local one disagree, or the store cannot be read; says what to do."""


class KeyStore(Protocol):
    where: str

    def read(self) -> bytes | None: ...

    def create(self, value: bytes) -> bytes:
        """Store ``value`` unless a key is there already; returns the key that is stored."""
        ...


class SsmKeyStore:
    """The key as an SSM SecureString (base64: munge keys may be binary)."""

    def __init__(self, ssm: Any, stack: str) -> None:
        self.ssm = ssm
        self.name = SSM_NAME.format(stack=stack)
        self.where = f"SSM parameter {self.name}"

    def read(self) -> bytes | None:
        try:
            value = self.ssm.get_parameter(Name=self.name, WithDecryption=True)["Parameter"]["Value"]
        except self.ssm.exceptions.ParameterNotFound:
            return None
        return base64.b64decode(value)

    def create(self, value: bytes) -> bytes:
        try:
            self.ssm.put_parameter(
                Name=self.name,
                Value=base64.b64encode(value).decode(),
                Type="SecureString",
                Overwrite=False,
                Description="clusterforge: the cluster's munge key (base64); all munged share it",
            )
        except self.ssm.exceptions.ParameterAlreadyExists:
            stored = self.read()
            if stored is None:  # deleted between the two calls
                raise SecretError(f"{self.where} vanished while it was being created; run again") from None
            return stored
        return value


def key_store(spec: ClusterSpec, client: Callable[[str, str], Any] | None = None) -> KeyStore | None:
    """Where this stack's munge key lives beside the workstation: AWS stacks only."""
    provider = spec.provider
    if not isinstance(provider, AwsProvider):
        return None
    if client is None:
        import boto3

        def client(service: str, region: str) -> Any:
            return boto3.client(service, region_name=region)

    return SsmKeyStore(client("ssm", provider.region), spec.stack)


def _write_key(path: Path, value: bytes) -> None:
    """0600 from the start (the key is never readable by others, not even for a moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(value)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def before_converge(local: Path, store: KeyStore | None) -> str:
    """Make the local key file the cluster's before Ansible reads it; returns what was done."""
    if store is None:
        return ""
    stored = store.read()
    here = local.read_bytes() if local.exists() else None
    if stored is None:
        if here is None:
            return "no munge key yet: the converge reads the controller's or makes the cluster's first"
        store.create(here)
        return f"munge key: stored this stack's key in {store.where}"
    if here is None:
        _write_key(local, stored)
        return f"munge key: the cluster's, from {store.where}"
    if here != stored:
        raise SecretError(
            f"{local} is not the cluster's munge key ({store.where} holds another): a converge with it would "
            f"split the cluster's authentication. Delete {local} to use the cluster's, or, to rotate on purpose, "
            "delete the parameter first and converge every node at once"
        )
    return ""


def after_converge(local: Path, store: KeyStore | None) -> str:
    """Store the key a first converge made (or read from the controller); returns what was done."""
    if store is None or not local.exists() or store.read() is not None:
        return ""
    stored = store.create(local.read_bytes())
    if stored != local.read_bytes():
        raise SecretError(f"another runner stored a different munge key in {store.where} meanwhile")
    return f"munge key: stored in {store.where}"
