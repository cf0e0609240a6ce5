"""SSH settings of one static host, as Ansible connection variables and as an ``ssh`` argv.

One source for both: the preflight probe, Ansible and clusterforge's own node commands
(clusterforge/node/remote.py reads the same connection variables) reach a host the same way.

Host keys are always verified. ``known-hosts`` passes ``StrictHostKeyChecking=yes`` (ssh "will
never automatically add host keys ... and refuses to connect to hosts whose host key has
changed", ssh_config(5)); ``trust-on-first-use`` passes ``accept-new`` (OpenSSH 7.6+: records a
host never seen, still refuses a changed key). Ansible would defeat both: clusterforge runs it
with ``ANSIBLE_HOST_KEY_CHECKING=False`` (container nodes have no host keys), and then its ssh
plugin puts ``-o StrictHostKeyChecking=no`` on the command line before ``ansible_ssh_common_args``
(ansible-core 2.19 plugins/connection/ssh.py ``_build_command``), where ssh keeps the first value
it reads. So every static host also carries ``ansible_ssh_host_key_checking: true``, the
per-host variable of that same option, which outranks the environment.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.providers.static.inventory import InventoryHost
from clusterforge.spec.models import StaticSsh

REPO_ROOT = Path(__file__).resolve().parents[3]

# Options that would switch host-key checking off: refused in a user's ansible_ssh_common_args.
UNSAFE_OPTIONS = ("stricthostkeychecking=no", "stricthostkeychecking=off", "userknownhostsfile=/dev/null")

TRUE_WORDS = ("1", "true", "yes", "on")


def resolve_path(value: str) -> str:
    """A path from the spec or inventory: relative ones are relative to the repository root."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else REPO_ROOT / path)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in TRUE_WORDS


@dataclass(frozen=True)
class HostSsh:
    """The resolved settings of one host: the inventory's own, else the spec's defaults."""

    host: str  # inventory name
    address: str
    port: int
    user: str | None
    private_key: str | None
    become: bool
    jump_host: str | None
    host_keys: str  # "known-hosts" | "trust-on-first-use"
    known_hosts: str | None
    extra_args: tuple[str, ...] = ()  # the inventory's own ansible_ssh_common_args, checked

    @classmethod
    def resolve(cls, host: InventoryHost, defaults: StaticSsh) -> HostSsh:
        v = host.variables
        key = v.get("ansible_ssh_private_key_file") or defaults.private_key
        become = v.get("ansible_become")
        return cls(
            host=host.name,
            address=host.address if "ansible_host" not in v else str(v["ansible_host"]),
            port=int(v.get("ansible_port") or defaults.port),
            user=str(v.get("ansible_user") or defaults.user or "") or None,
            private_key=resolve_path(str(key)) if key else None,
            become=defaults.become if become is None else _truthy(become),
            jump_host=str(v.get("clusterforge_ssh_jump_host") or defaults.jump_host or "") or None,
            host_keys=defaults.host_keys,
            known_hosts=resolve_path(defaults.known_hosts) if defaults.known_hosts else None,
            extra_args=tuple(shlex.split(str(v.get("ansible_ssh_common_args") or ""))),
        )

    def unsafe_args(self) -> list[str]:
        """The inventory's own options that would accept any host key (never allowed)."""
        return [a for a in self.extra_args if a.replace(" ", "").lower().endswith(UNSAFE_OPTIONS)]

    def _key_options(self) -> list[str]:
        policy = "yes" if self.host_keys == "known-hosts" else "accept-new"
        out = ["-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={policy}"]
        if self.known_hosts:
            out += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        return out

    def _jump(self) -> list[str]:
        """A ProxyCommand, not ProxyJump: options on the command line do not reach the ssh that
        ProxyJump starts for the jump host, so its host key would be checked by other rules."""
        if not self.jump_host:
            return []
        target, _, port = self.jump_host.partition(":")
        user, _, host = target.rpartition("@")
        inner = ["ssh", *self._key_options()]
        if self.private_key:
            inner += ["-i", self.private_key]
        inner += ["-p", port or "22", *(["-l", user] if user else []), "-W", "%h:%p", host]
        return ["-o", f"ProxyCommand={shlex.join(inner)}"]

    def common_args(self) -> list[str]:
        """ssh options every connection to this host uses (Ansible's ansible_ssh_common_args)."""
        return [*self._key_options(), *self._jump(), *self.extra_args]

    def argv(self, connect_timeout_s: int = 10) -> list[str]:
        """``ssh ... host --``: append one remote shell line."""
        out = ["ssh", *self.common_args(), "-o", f"ConnectTimeout={connect_timeout_s}", "-p", str(self.port)]
        if self.private_key:
            out += ["-i", self.private_key]
        if self.user:
            out += ["-l", self.user]
        return [*out, self.address, "--"]

    def connection(self, python: str = "/usr/bin/python3") -> dict[str, str]:
        """Ansible connection variables (clusterforge/node/remote.py reads the same)."""
        conn = {
            "ansible_connection": "ssh",
            "ansible_host": self.address,
            "ansible_port": str(self.port),
            "ansible_ssh_common_args": shlex.join(self.common_args()),
            "ansible_ssh_host_key_checking": "true",
            "ansible_become": "true" if self.become else "false",
            "ansible_python_interpreter": python,
        }
        if self.user:
            conn["ansible_user"] = self.user
        if self.private_key:
            conn["ansible_ssh_private_key_file"] = self.private_key
        return conn

    def describe(self) -> str:
        """user@address:port, as a person would type it."""
        return f"{self.user + '@' if self.user else ''}{self.address}:{self.port}"
