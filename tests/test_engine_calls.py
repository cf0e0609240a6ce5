"""Every container-engine call goes through clusterforge/providers/local/engine.py.

A bare ``podman`` reads the machine's own configuration instead of the project's: on a fresh
Debian 12 its CNI backend cannot see the netavark networks the provider makes, and the old
``tests/fixtures/nvidia_repo.py:podman_gateway`` failed there with exit 125 while CI on a
used machine passed. This test reads every Python file, shell script and Ansible YAML file of
the project and fails on any that starts ``podman``/``docker`` itself.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = {
    ROOT / "clusterforge/providers/local/engine.py",
    ROOT / "clusterforge/providers/local/config.py",
    Path(__file__).resolve(),  # this scan names the engines itself
}
ENGINES = ("podman", "docker")
SKIP_DIRS = {".git", ".venv", "node_modules", ".clusterforge", "__pycache__", ".pytest_cache", "inventories"}
RUNNERS = {
    "run", "Popen", "call", "check_call", "check_output", "system", "popen", "getoutput",
    "getstatusoutput", "create_subprocess_exec", "create_subprocess_shell", "spawnlp", "execvp", "execlp",
}  # fmt: skip


def _is_engine(value: object) -> bool:
    return isinstance(value, str) and (value in ENGINES or value.endswith(("/podman", "/docker")))


def _starts_engine_command(value: object) -> bool:
    return isinstance(value, str) and value.lstrip().split(" ", 1)[0] in ENGINES and " " in value.strip()


def python_findings(source: str, name: str = "<string>") -> list[str]:
    """Places in Python ``source`` that start the engine without the wrapper."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and _is_engine(first.value):
                found.append(f"{name}:{node.lineno}: argv starting with {first.value!r}")
        if isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            args = node.args
            if (
                fname in RUNNERS
                and args
                and isinstance(args[0], ast.Constant)
                and _starts_engine_command(args[0].value)
            ):
                found.append(f"{name}:{node.lineno}: shell command {args[0].value!r}")
            # conn.get("ansible_podman_executable", "podman"): a bare engine as the fallback binary
            if (
                fname == "get"
                and len(args) == 2
                and isinstance(args[1], ast.Constant)
                and _is_engine(args[1].value)
            ):
                found.append(f"{name}:{node.lineno}: bare {args[1].value!r} as the binary")
    return found


_SHELL_CMD = re.compile(r"(?:^|[;&|(`]|\$\(|\bthen\b|\bdo\b|\bsudo\b|\bexec\b|\btime\b)\s*(podman|docker)\b")
_ANSIBLE_CMD = re.compile(r"\b(?:command|shell|cmd|argv|executable)\s*:\s*[\[\"'>|-]*\s*(podman|docker)\b")


def shell_findings(text: str, name: str = "<string>") -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        match = _SHELL_CMD.search(code)
        if match:
            found.append(f"{name}:{number}: runs {match.group(1)}: {line.strip()}")
    return found


def yaml_findings(text: str, name: str = "<string>") -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        match = _ANSIBLE_CMD.search(code) or (
            re.match(r"\s*-\s*(podman|docker)\s*$", code) and re.match(r"\s*-\s*(\w+)", code)
        )
        if match:
            found.append(f"{name}:{number}: runs {match.group(1)}: {line.strip()}")
    return found


def project_files() -> list[Path]:
    files = []
    # os.walk, pruning SKIP_DIRS: .venv and .clusterforge hold ~70,000 files not worth visiting.
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in names:
            path = Path(folder) / name
            if path in WRAPPER or not path.is_file():
                continue
            if path.suffix in (".py", ".sh", ".yml", ".yaml") or path == ROOT / ".ci" / "run":
                files.append(path)
    return sorted(files)


def findings_in(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    name = str(path.relative_to(ROOT))
    if path.suffix == ".py":
        return python_findings(text, name)
    if path.suffix in (".yml", ".yaml"):
        return yaml_findings(text, name)
    return shell_findings(text, name)


def test_no_file_outside_the_wrapper_starts_the_engine() -> None:
    files = project_files()
    assert len(files) > 100, "the scan found too few files: is ROOT right?"
    found = [f for path in files for f in findings_in(path)]
    assert not found, "start the engine through clusterforge.providers.local.engine:\n" + "\n".join(found)


# The code this test exists for, as it was (tests/fixtures/nvidia_repo.py, and certify/remote.py).
OLD_PODMAN_GATEWAY = """
def podman_gateway(network: str) -> str:
    out = subprocess.run(
        ["podman", "network", "inspect", network, "--format", "{{range .Subnets}}{{.Gateway}} {{end}}"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    return out[0]
"""
OLD_REMOTE_PREFIX = 'prefix = [conn.get("ansible_podman_executable", "podman"), "exec", host]'


@pytest.mark.parametrize(
    ("finder", "source"),
    [
        (python_findings, OLD_PODMAN_GATEWAY),
        (python_findings, OLD_REMOTE_PREFIX),
        (python_findings, 'subprocess.run("podman ps -a", shell=True)'),
        (python_findings, 'subprocess.run(["/usr/bin/docker", "ps"])'),
        (shell_findings, "podman network ls\n"),
        (shell_findings, "ids=$(podman ps -q)\n"),
        (shell_findings, "if true; then sudo docker info; fi\n"),
        (yaml_findings, "- name: list\n  ansible.builtin.command: podman ps\n"),
        (yaml_findings, "  ansible.builtin.command:\n    argv:\n      - podman\n      - ps\n"),
    ],
)
def test_the_scan_catches_direct_engine_calls(finder, source) -> None:  # type: ignore[no-untyped-def]
    assert finder(source), source


@pytest.mark.parametrize(
    ("finder", "source"),
    [
        (python_findings, 'engine.run("network", "inspect", name)'),
        (python_findings, 'if engine.name == "podman": pass'),
        (python_findings, 'hint = "install podman (apt-get install podman runc)"'),
        (shell_findings, "# podman ps (a comment)\n"),
        (shell_findings, "apt-get install podman runc\n"),
        (yaml_findings, "# ansible.builtin.command: podman ps\n"),
    ],
)
def test_the_scan_leaves_mentions_alone(finder, source) -> None:  # type: ignore[no-untyped-def]
    assert not finder(source), source
