"""Static preflight: every host reached over SSH, sudo, a supported OS and the declared hardware,
all checked before anything changes on any host; each failure one line naming the host and the fix.

One read-only SSH call per host (``facts.PROBE``), run concurrently; the runner is injected
(``(argv, stdin) -> (rc, stdout, stderr)``) so tests use a fake ``ssh``. ssh's failures are told
apart by the messages OpenSSH prints: ``Permission denied (publickey)`` (sshconnect2.c, no
authentication method left), ``Host key verification failed.`` with ``No <type> host key is known
for ...`` (unknown key) or ``REMOTE HOST IDENTIFICATION HAS CHANGED`` (changed key, sshconnect.c),
and the connect errors (``Connection refused``, ``Connection timed out``, ``No route to host``,
``Could not resolve hostname``); ssh exits 255 on any of them (ssh(1) EXIT STATUS).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.providers.base import Node, Problem
from clusterforge.providers.static.facts import PROBE, PROBE_VERSION, mismatches, parse_facts
from clusterforge.providers.static.inventory import InventoryHost
from clusterforge.providers.static.ssh import HostSsh, resolve_path
from clusterforge.spec.models import ClusterSpec, StaticProvider

Runner = Callable[[list[str], str], tuple[int, str, str]]

SSH_TIMEOUT_S = 60.0
_UNREACHABLE = (
    "connection refused",
    "connection timed out",
    "operation timed out",
    "no route to host",
    "could not resolve hostname",
    "network is unreachable",
    "connection closed by",
    "connection reset by",
)


def run_ssh(argv: list[str], stdin: str) -> tuple[int, str, str]:
    """The real runner: the probe goes on stdin to ``sh -s`` (no quoting through ssh's shell line)."""
    try:
        proc = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=SSH_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"no answer within {SSH_TIMEOUT_S:g} s"
    except FileNotFoundError:
        return 127, "", "ssh: not found (install the OpenSSH client on this machine)"
    return proc.returncode, proc.stdout, proc.stderr


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def ssh_problem(ssh: HostSsh, rc: int, stderr: str) -> Problem:
    """The one-line reason an SSH call to ``ssh`` failed, and what to do about it."""
    low = stderr.lower()
    where = ssh.describe()
    kh = ssh.known_hosts or "~/.ssh/known_hosts"
    if "remote host identification has changed" in low or "has changed and you have requested strict" in low:
        return Problem("error", "static-host-key-changed", (
            f"{ssh.host}: the host key of {where} differs from the one in {kh}: if the host was reinstalled, "
            f"check its new fingerprint and replace the entry (ssh-keygen -R {ssh.address} -f {kh}); "
            "otherwise someone may be in between: do not go on"
        ))  # fmt: skip
    if "host key verification failed" in low:
        return Problem("error", "static-host-key-unknown", (
            f"{ssh.host}: no host key for {where} in {kh} (host_keys: {ssh.host_keys}): add it after checking "
            f"its fingerprint (ssh-keyscan -p {ssh.port} {ssh.address} >> {kh}), or set "
            "provider.ssh.host_keys: trust-on-first-use"
        ))  # fmt: skip
    if "permission denied" in low:
        key = ssh.private_key or "ssh's default keys"
        return Problem("error", "static-ssh-key", (
            f"{ssh.host}: {where} refused the key ({_last_line(stderr)}): add the public half of {key} to "
            f"~{ssh.user or ''}/.ssh/authorized_keys there, or set ansible_ssh_private_key_file / provider.ssh.private_key"
        ))  # fmt: skip
    if rc == 124 or any(word in low for word in _UNREACHABLE):
        why = "no answer" if rc == 124 else _last_line(stderr)
        return Problem("error", "static-unreachable", (
            f"{ssh.host}: cannot reach {where} over SSH ({why}): check ansible_host/ansible_port in the "
            "inventory, that sshd runs there and that no firewall is in between"
        ))  # fmt: skip
    return Problem(
        "error", "static-ssh-failed", f"{ssh.host}: ssh to {where} failed (exit {rc}: {_last_line(stderr)})"
    )


def check_host(
    node: Node,
    ssh: HostSsh,
    hw: HardwareCatalog,
    supported_os: Sequence[str],
    runner: Runner,
    expected_os: str = "",
) -> list[Problem]:
    """Everything about one host, from one SSH call; ``expected_os``: the spec's software.os_image."""
    rc, out, err = runner([*ssh.argv(), "sh -s"], PROBE)
    if rc != 0 or f"probe={PROBE_VERSION}" not in out:
        if rc == 0:
            return [Problem("error", "static-ssh-failed", (
                f"{node.name}: {ssh.describe()} answered but did not run the probe (stdout: {_last_line(out)}); "
                "is the login shell a POSIX sh?"
            ))]  # fmt: skip
        return [ssh_problem(ssh, rc, err)]
    facts = parse_facts(out)
    problems: list[Problem] = []
    if ssh.become and not facts.become_ok:
        detail = facts.become.removeprefix("fail").strip() or "sudo -n true failed"
        problems.append(Problem("error", "static-no-sudo", (
            f"{node.name}: {facts.user or ssh.user} cannot sudo without a password ({detail}): add "
            f"'{facts.user or ssh.user} ALL=(ALL) NOPASSWD: ALL' in /etc/sudoers.d/ there, or connect as root"
        )))  # fmt: skip
    if facts.os not in supported_os:
        problems.append(Problem("error", "static-os", (
            f"{node.name}: runs {facts.os}, which the roles do not support for static stacks "
            f"(supported: {', '.join(supported_os)}); reinstall it or leave it out of the inventory"
        )))  # fmt: skip
    elif expected_os and facts.os != expected_os:
        problems.append(Problem("error", "static-os", (
            f"{node.name}: runs {facts.os} but software.os_image is {expected_os} (the roles install for that "
            "one); set software.os_image to what the hosts run, or reinstall this host"
        )))  # fmt: skip
    declared = hw[node.instance_type]
    for diff in mismatches(facts, declared):
        problems.append(Problem("error", "static-hardware", (
            f"{node.name}: declared {node.instance_type}, {diff}: fix clusterforge_instance_type / the pool's "
            "instance_type, or repair the host"
        )))  # fmt: skip
    return problems


def local_problems(
    spec: ClusterSpec, hosts: Sequence[HostSsh], inventory: Path, rendered: Path
) -> list[Problem]:
    """What is wrong before any host is contacted: files, unsafe options, the inventory's place."""
    assert isinstance(spec.provider, StaticProvider)
    out: list[Problem] = []
    if inventory.resolve() == rendered.resolve():
        out.append(Problem("error", "static-inventory-place", (
            f"provider.inventory {inventory} is where clusterforge renders this stack's inventory (it would be "
            "overwritten): move it, e.g. to inventories/<site>/hosts.yml"
        )))  # fmt: skip
    defaults = spec.provider.ssh
    if (
        defaults.host_keys == "known-hosts"
        and defaults.known_hosts
        and not Path(resolve_path(defaults.known_hosts)).is_file()
    ):
        out.append(Problem("error", "static-known-hosts", (
            f"provider.ssh.known_hosts {defaults.known_hosts}: no such file; write the hosts' keys there "
            "(ssh-keyscan, after checking fingerprints) or set host_keys: trust-on-first-use"
        )))  # fmt: skip
    for ssh in hosts:
        if ssh.private_key and not Path(ssh.private_key).is_file():
            out.append(Problem("error", "static-ssh-key", (
                f"{ssh.host}: private key {ssh.private_key} does not exist; fix ansible_ssh_private_key_file "
                "or provider.ssh.private_key"
            )))  # fmt: skip
        unsafe = ssh.unsafe_args()
        if unsafe:
            out.append(Problem("error", "static-ssh-unsafe", (
                f"{ssh.host}: ansible_ssh_common_args has {' '.join(unsafe)}, which accepts any host key; remove it "
                "(use provider.ssh.host_keys: trust-on-first-use for new hosts)"
            )))  # fmt: skip
    return out


def run_preflight(
    spec: ClusterSpec,
    nodes: Sequence[Node],
    ssh_of: dict[str, HostSsh],
    hw: HardwareCatalog,
    supported_os: Sequence[str],
    runner: Runner = run_ssh,
    workers: int = 32,
) -> list[Problem]:
    """The per-host checks, concurrently; problems come back in inventory order."""
    if not nodes:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(nodes))) as pool:
        os_image = spec.software.os_image
        futures = [
            pool.submit(_checked, n, ssh_of[n.name], hw, supported_os, runner, os_image) for n in nodes
        ]
        return [p for f in futures for p in f.result()]


def _checked(
    node: Node, ssh: HostSsh, hw: HardwareCatalog, supported_os: Sequence[str], runner: Runner, os_image: str
) -> list[Problem]:
    """A check that crashed is an error for its host, never a crash of preflight (fail closed)."""
    try:
        return check_host(node, ssh, hw, supported_os, runner, os_image)
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed
        return [Problem("error", "static-ssh-failed", f"{node.name}: preflight could not check it ({exc!r})")]


__all__ = [
    "InventoryHost",
    "Runner",
    "check_host",
    "local_problems",
    "run_preflight",
    "run_ssh",
    "ssh_problem",
]
