"""plugins/connection/podman_pipelined.py: a module is one ``podman exec --interactive``, fed on stdin.

No container is needed: ``ansible_podman_executable`` points at a stand-in ``podman`` that logs its
arguments and whether stdin carried data, and runs what it is asked to in the test's own
filesystem (``mount`` fails, so file transfers take the plugin's ``podman cp`` path). The same
play through containers.podman.podman shows what pipelining saves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clusterforge.ansible.runner import CONNECTION_PLUGINS, REPO_ROOT
from clusterforge.providers.local.config import COLLECTIONS_PATH
from tests.fixtures.play import run_tasks

pytestmark = pytest.mark.skipif(
    not (COLLECTIONS_PATH / "ansible_collections" / "containers" / "podman").is_dir(),
    reason="containers.podman is not installed (scripts/setup.d/25-collections.sh)",
)

# argv: podman exec [--interactive] [--user U] CONTAINER CMD... | cp SRC CONTAINER:DST | mount CONTAINER
FAKE_PODMAN = """#!{python}
import json, shutil, subprocess, sys
args = sys.argv[1:]
data = b"" if sys.stdin is None or sys.stdin.closed else sys.stdin.buffer.read()
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": args, "stdin_bytes": len(data)}}) + "\\n")
if args[0] == "mount":
    sys.exit("Error: no mount here")
if args[0] == "cp":
    shutil.copyfile(args[1], args[2].split(":", 1)[1])
    sys.exit(0)
if args[0] == "exec":
    rest, interactive = args[1:], False
    while rest[0].startswith("--"):
        interactive = interactive or rest[0] == "--interactive"
        rest = rest[2:] if rest[0] == "--user" else rest[1:]
    # As podman does: without --interactive the command's stdin is not the caller's.
    sys.exit(subprocess.run(rest[1:], input=data if interactive else b"").returncode)
sys.exit("unexpected podman call: %r" % args)
"""

COMMANDS = [
    {"name": f"Run command {i}", "ansible.builtin.command": f"echo pipelined-{i}", "register": f"out{i}"}
    for i in range(3)
]
CHECK = {
    "name": "The commands' output came back",
    "ansible.builtin.assert": {"that": [f"out{i}.stdout == 'pipelined-{i}'" for i in range(3)]},
}


def _play(tmp_path: Path, connection: str, tasks: list[dict]) -> list[dict]:
    """Run ``tasks`` on one host through ``connection``; the stand-in podman's calls."""
    log = tmp_path / f"podman-{connection}.log"
    fake = tmp_path / "podman"
    fake.write_text(FAKE_PODMAN.format(python=sys.executable, log=str(log)))
    fake.chmod(0o755)
    host = {
        "ansible_connection": connection,
        "ansible_host": "node-x",
        "ansible_podman_executable": str(fake),
        "ansible_python_interpreter": sys.executable,
        "ansible_remote_tmp": str(tmp_path / "remote-tmp"),
    }
    # ANSIBLE_PIPELINING as the pipeline sets it; the collection's plugin ignores it.
    run_tasks(tmp_path, {"node-x": host}, tasks, {"ANSIBLE_PIPELINING": "True"})
    return [json.loads(line) for line in log.read_text().splitlines()]


def _execs(calls: list[dict]) -> list[dict]:
    return [c for c in calls if c["argv"][0] == "exec"]


@pytest.mark.slow
def test_each_module_is_one_interactive_exec_with_the_module_on_stdin(tmp_path: Path) -> None:
    calls = _play(tmp_path, "podman_pipelined", [*COMMANDS, CHECK])
    execs = _execs(calls)
    assert len(execs) == len(COMMANDS), [c["argv"] for c in execs]
    for call in execs:
        assert call["argv"][:2] == ["exec", "--interactive"], call["argv"]
        assert call["stdin_bytes"] > 1000, call  # the AnsiballZ payload, not an empty stdin
    assert not [c for c in calls if c["argv"][0] == "cp"]  # nothing copied into the node


@pytest.mark.slow
def test_the_collections_plugin_spends_several_execs_per_module(tmp_path: Path) -> None:
    """What the project's plugin saves: temp folder, copy, run and clean-up per module."""
    calls = _play(tmp_path, "containers.podman.podman", [*COMMANDS, CHECK])
    assert len(_execs(calls)) >= 2 * len(COMMANDS), [c["argv"] for c in calls]
    assert len([c for c in calls if c["argv"][0] == "cp"]) == len(COMMANDS)


@pytest.mark.slow
def test_file_transfers_and_failures_still_work(tmp_path: Path) -> None:
    dest = tmp_path / "copied.txt"
    tasks = [
        {
            "name": "Copy a file in",
            "ansible.builtin.copy": {"content": "from the controller\n", "dest": str(dest)},
        },
        {
            "name": "A failing command reports its output",
            "ansible.builtin.command": "sh -c 'echo broken >&2; exit 3'",
            "register": "bad",
            "failed_when": False,
        },
        {
            "name": "Its rc and stderr came back",
            "ansible.builtin.assert": {"that": ["bad.rc == 3", "'broken' in bad.stderr"]},
        },
    ]
    _play(tmp_path, "podman_pipelined", tasks)
    assert dest.read_text() == "from the controller\n"


def test_the_plugin_is_where_the_pipeline_looks() -> None:
    assert (CONNECTION_PLUGINS / "podman_pipelined.py").is_file()
    assert CONNECTION_PLUGINS.is_relative_to(REPO_ROOT)
