"""A thin wrapper around the container engine's CLI (podman, or docker where that is what the
user has): find it, run it with the project's configuration, and turn failures into errors that
name the command and say what to do.

This is the one way the project calls the engine (provider, transport to nodes, tests,
benchmarks): a bare ``podman`` would read the machine's own configuration (on a fresh Debian 12
its CNI backend, which cannot see the project's netavark networks). ``Engine.argv`` and
``Engine.environ`` serve callers that must start the process themselves (e.g. with a pipe);
tests/test_engine_calls.py fails when any other file starts the engine directly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Literal

from clusterforge.providers.base import ProviderError
from clusterforge.providers.local import config

EngineName = Literal["podman", "docker"]

INSTALL_HINT = "install podman (apt-get install podman runc) or docker"


class EngineError(ProviderError):
    """An engine command failed; carries the command, exit status and stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str, hint: str = ""):
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        message = f"`{' '.join(argv)}` failed (exit {returncode}): {tail or '(no output)'}"
        if hint:
            message += f"\n  fix: {hint}"
        super().__init__(message)


class EngineNotFound(ProviderError):
    """No usable container engine; the message says what to install or start."""


def _hint(stderr: str, name: str) -> str:
    text = stderr.lower()
    if "permission denied" in text and name == "docker":
        return "add your user to the docker group (usermod -aG docker $USER) and log in again, or run as root"
    if "permission denied" in text or "newuidmap" in text or "subuid" in text:
        return "run as root, or set up rootless podman (apt-get install uidmap; entries in /etc/subuid and /etc/subgid)"
    if "rlimit" in text:
        return f"the project's containers.conf sets lower ulimits; check CONTAINERS_CONF points at {config.engine_dir()}"
    if "no space left" in text:
        return "free disk space where the engine keeps its storage (see `podman info` graphRoot)"
    if "cannot connect to the docker daemon" in text:
        return (
            "start the docker daemon (systemctl start docker) or install podman (apt-get install podman runc)"
        )
    return ""


@dataclass
class Engine:
    """One container engine CLI. ``env`` is added to the caller's environment for every call."""

    name: EngineName
    binary: str
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 600.0

    def environ(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def argv(self, *args: str) -> list[str]:
        """The command line for ``<engine> ARGS``; run it with ``env=self.environ()``."""
        return [self.binary, *args]

    def run(
        self,
        *args: str,
        check: bool = True,
        input: bytes | None = None,  # noqa: A002 - subprocess.run's own name for it
        stdin: Any = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``<engine> ARGS``; raise ``EngineError`` (with a fix where one is known) on failure."""
        argv = [self.binary, *args]
        try:
            proc = subprocess.run(
                argv,
                input=input.decode() if input is not None else None,
                stdin=stdin,
                capture_output=True,
                text=True,
                env=self.environ(),
                timeout=timeout or self.timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise EngineError([self.name, *args], -1, f"timed out after {exc.timeout:.0f} s") from exc
        if check and proc.returncode != 0:
            raise EngineError([self.name, *args], proc.returncode, proc.stderr, _hint(proc.stderr, self.name))
        return proc

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start ``<engine> ARGS`` without waiting (stdout/stderr piped, text); for a process
        that must run beside another (a server and its client in two containers)."""
        return subprocess.Popen(
            self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.environ()
        )

    def json(self, *args: str) -> Any:
        out = self.run(*args).stdout.strip()
        return json.loads(out) if out else []

    # --- queries used by the provider -----------------------------------------------------

    def image_exists(self, tag: str) -> bool:
        return self.run("image", "inspect", tag, check=False).returncode == 0

    def container_ids(self, labels: dict[str, str]) -> list[str]:
        filters = [arg for k, v in labels.items() for arg in ("--filter", f"label={k}={v}")]
        out = self.run("ps", "-a", "-q", "--no-trunc", *filters).stdout
        return [line for line in out.split() if line]

    def inspect_containers(self, ids: list[str]) -> list[dict[str, Any]]:
        return self.json("container", "inspect", *ids) if ids else []

    def network_names(self, labels: dict[str, str]) -> list[str]:
        filters = [arg for k, v in labels.items() for arg in ("--filter", f"label={k}={v}")]
        out = self.run("network", "ls", "--format", "{{.Name}}", *filters).stdout
        return [line for line in out.split() if line]

    def volume_names(self, labels: dict[str, str]) -> list[str]:
        filters = [arg for k, v in labels.items() for arg in ("--filter", f"label={k}={v}")]
        out = self.run("volume", "ls", "-q", *filters).stdout
        return [line for line in out.split() if line]

    def exec(self, container: str, *argv: str, check: bool = True, timeout: float | None = None) -> str:
        """Run ``argv`` in a running container; return its stdout."""
        return self.run("exec", container, *argv, check=check, timeout=timeout).stdout


def _podman(binary: str) -> Engine:
    env = config.write_podman_config()
    return Engine("podman", binary, env)


def engine_for(name: EngineName, binary: str | None = None) -> Engine:
    """The named engine with the project's configuration, for callers that already know which
    one a node uses (its Ansible connection); ``binary`` defaults to the one on PATH."""
    path = binary or shutil.which(name) or name
    return _podman(path) if name == "podman" else Engine("docker", path)


def _docker_reachable(binary: str) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            [binary, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr


def detect_engine(preference: str = "auto", path: str | None = None) -> Engine:
    """podman first, then docker (only when its daemon answers); or the one the spec names.

    ``path`` replaces $PATH for the look-up (tests use it to simulate a machine without engines).
    """
    podman = shutil.which("podman", path=path)
    docker = shutil.which("docker", path=path)
    if preference in ("auto", "podman") and podman:
        return _podman(podman)
    if preference == "podman":
        raise EngineNotFound("provider.engine: podman: podman is not installed: apt-get install podman runc")
    if docker:
        ok, stderr = _docker_reachable(docker)
        if ok:
            return Engine("docker", docker)
        hint = _hint(stderr, "docker") or "start the docker daemon"
        if preference == "docker":
            raise EngineNotFound(
                f"provider.engine: docker: docker is installed but not usable: {stderr.strip()}; {hint}"
            )
        raise EngineNotFound(
            f"no usable container engine: podman is not installed and docker's daemon does not answer "
            f"({stderr.strip().splitlines()[-1] if stderr.strip() else 'no output'}); {INSTALL_HINT}, or {hint}"
        )
    if preference == "docker":
        raise EngineNotFound(
            "provider.engine: docker: docker is not installed; install docker, or set engine: podman"
        )
    raise EngineNotFound(f"no container engine found (looked for podman and docker on PATH): {INSTALL_HINT}")
