"""Ansible sized for the fleet (clusterforge/ansible/scale.py) and event handling linear in events.

Pure parts: forks from CPUs and the spec's bound, the environment a run gets (smart gathering, a
jsonfile cache under the stack's state, SSH connections kept), the control socket folder kept
under a Unix socket's path limit, facts of new machines dropped. With ansible-playbook (slow): the
facts land in the stack's cache (not the run's artifacts, as ansible-runner would put them) and a
second run gathers nothing; a secret that appears during the run (the munge key the run creates)
never reaches an event file, and the end-of-run scrub reads no event file back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from clusterforge.ansible.events import CENSORED, redact_event, secret_forms
from clusterforge.ansible.runner import PlaybookRun, ansible_env
from clusterforge.ansible.scale import (
    CONTROL_PERSIST_S,
    FORKS_PER_CPU,
    MIN_FORKS,
    control_path_dir,
    forget_facts,
    forks_for,
    scale_for,
)


@pytest.mark.parametrize(
    ("cpus", "bound", "forks", "want"),
    [
        (2, 128, None, 2 * FORKS_PER_CPU),  # this machine: 32, well above Ansible's 5
        (1, 128, None, max(MIN_FORKS, FORKS_PER_CPU)),
        (64, 128, None, 128),  # the spec's bound wins over the CPUs
        (64, 4096, None, 64 * FORKS_PER_CPU),
        (2, 128, 500, 128),  # an explicit count is bounded too
        (2, 128, 7, 7),
    ],
)
def test_forks_from_cpus_and_the_specs_bound(cpus: int, bound: int, forks: int | None, want: int) -> None:
    assert forks_for(cpus, bound, forks) == want


def test_environment_of_a_stack(tmp_path: Path) -> None:
    scale = scale_for(tmp_path / "demo", max_forks=128, cpus=2, fact_cache_timeout_s=600)
    env = ansible_env(tmp_path / "demo", scale)
    assert env["ANSIBLE_FORKS"] == "32"
    assert env["ANSIBLE_GATHERING"] == "smart"
    assert env["ANSIBLE_CACHE_PLUGIN"] == "jsonfile"
    assert env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] == str(tmp_path / "demo" / "ansible" / "facts")
    assert env["ANSIBLE_CACHE_PLUGIN_TIMEOUT"] == "600"
    assert f"ControlPersist={CONTROL_PERSIST_S}s" in env["ANSIBLE_SSH_ARGS"]
    assert "ControlMaster=auto" in env["ANSIBLE_SSH_ARGS"]
    assert env["ANSIBLE_SSH_CONTROL_PATH_DIR"] == str(control_path_dir(tmp_path / "demo" / "ansible"))
    assert "ANSIBLE_FORKS" not in ansible_env(tmp_path / "demo")  # without settings: Ansible's own


def test_control_sockets_stay_under_the_socket_path_limit() -> None:
    deep = Path("/" + "/".join(["a-rather-long-folder-name"] * 5)) / ".clusterforge" / "stack" / "ansible"
    folder = control_path_dir(deep)
    # "/<10-char hash>" and ssh's temporary ".<16 random>" suffix (OpenSSH mux.c) within sun_path's 108
    assert folder.parent == Path("/tmp") and len(str(folder)) + 1 + 10 + 17 < 108
    assert control_path_dir(Path("/srv/cf/s/ansible")) == Path("/srv/cf/s/ansible/cp")
    # a pytest folder of the kind that failed CI (83 characters with /cp: the socket's temp name was 111)
    ci = Path("/tmp/pytest-of-root/pytest-336/test_static_stack_over_ssh0/state/st26567/ansible")
    assert len(str(control_path_dir(ci))) + 1 + 10 + 17 < 108


def test_facts_of_new_machines_are_forgotten(tmp_path: Path) -> None:
    facts = tmp_path / "ansible" / "facts"
    facts.mkdir(parents=True)
    for name in ("s1_node-001", "s1_node-002", "node-003"):  # ansible-core 2.19 names, and older ones
        (facts / name).write_text("{}")
    assert forget_facts(tmp_path, ["node-002", "node-003", "node-009"]) == ["node-002", "node-003"]
    assert [p.name for p in facts.iterdir()] == ["s1_node-001"]


def test_an_event_is_redacted_in_place_everywhere() -> None:
    secret = b"munge-key-0123456789abcdef"
    event = {
        "stdout": "fatal: munge-key-0123456789abcdef",
        "event_data": {"res": {"results": [{"stderr": "x munge-key-0123456789abcdef y"}], "rc": 1}},
    }
    redact_event(event, secret_forms([secret]))
    assert "munge-key" not in json.dumps(event)
    assert event["event_data"]["res"]["results"][0]["stderr"] == f"x {CENSORED} y"
    assert event["event_data"]["res"]["rc"] == 1


def test_the_end_of_run_scrub_reads_no_event_file(tmp_path: Path) -> None:
    """Events are redacted as they come: the scrub after the run leaves job_events/ alone
    (read back, 16.8 M event files at 4,096 nodes were the cost)."""
    artifacts = tmp_path / "artifacts" / "run"
    (artifacts / "job_events").mkdir(parents=True)
    (artifacts / "stdout").write_text("leaked s3cret-value-123\n")
    event = artifacts / "job_events" / "1-x.json"
    event.write_text('{"marker": "s3cret-value-123"}')  # stands for an event never read back
    run = PlaybookRun(tmp_path / "p.yml", tmp_path / "h.yml", tmp_path, secrets=[b"s3cret-value-123"])
    run.scrub(artifacts, events=False)
    assert "s3cret" not in (artifacts / "stdout").read_text()
    assert "s3cret" in event.read_text()


PLAY = [
    {
        "name": "Facts, and a secret made during the run",
        "hosts": "all",
        "tasks": [
            {"name": "Use a fact", "ansible.builtin.debug": {"msg": "{{ ansible_facts['distribution'] }}"}},
            {
                "name": "Create the secret (as the slurm role creates the munge key)",
                "ansible.builtin.copy": {
                    "content": "{{ secret }}",
                    "dest": "{{ secret_file }}",
                    "mode": "0600",
                },
                "delegate_to": "localhost",
                "run_once": True,
                "no_log": True,
            },
            {
                "name": "Leak it by mistake",
                "ansible.builtin.debug": {"msg": "key {{ lookup('file', secret_file) }}"},
            },
        ],
    }
]


@pytest.mark.slow
def test_facts_cached_under_the_stack_and_a_secret_made_mid_run_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    state = tmp_path / "state" / "demo"
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump(PLAY))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a": local, "localhost": local}}}))
    secret_file = tmp_path / "munge.key"
    secret = "generated-munge-key-9876543210"

    def secrets() -> list[bytes]:
        return [secret_file.read_bytes()] if secret_file.exists() else []

    env = ansible_env(state, scale_for(state, max_forks=8, cpus=1))

    def run() -> Path:
        r = PlaybookRun(
            play,
            inventory,
            tmp_path / "runs",
            limit=["a"],
            extravars={"secret": secret, "secret_file": str(secret_file)},
            secrets=secrets,
            env=env,
        )
        result = r.run()
        assert result.host_ok("a"), result.failures
        return result.run_dir

    first = run()
    cached = list((state / "ansible" / "facts").glob("*a"))
    assert len(cached) == 1 and "ansible_distribution" in cached[0].read_text()
    assert not list(first.rglob("fact_cache"))  # not ansible-runner's per-run cache
    for path in first.rglob("*"):
        if path.is_file() and path.name != "extravars":
            assert secret not in path.read_text(errors="replace"), path
    second = run()
    gathered = [
        p
        for p in (second / "artifacts" / "run" / "job_events").iterdir()
        if '"Gathering Facts"' in p.read_text()
    ]
    assert gathered == []  # smart gathering: the cached facts were used
