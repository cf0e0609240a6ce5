"""Preflight: what stops the local provider is found, with the fix, before anything is created."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterforge.providers.base import ProviderError
from clusterforge.providers.local import preflight
from clusterforge.providers.local.engine import Engine, EngineNotFound, detect_engine
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(stack_path("local"))[0]


def _stub(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


class FakeEngine(Engine):
    """Answers ``info`` like podman, finds nothing; records every call; never creates anything."""

    def __init__(self, graph_root: str = "/var/lib/containers/storage"):
        super().__init__("podman", "/nonexistent/podman")
        self.graph_root = graph_root
        self.calls: list[tuple[str, ...]] = []

    def run(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:  # type: ignore[override]
        self.calls.append(args)
        out = self.graph_root if args[:1] == ("info",) else ""
        rc = 1 if "inspect" in args[:2] else 0  # no container, network or image exists
        return subprocess.CompletedProcess(args, rc, out, "")


def test_no_engine_on_path_names_what_to_install(spec: ClusterSpec, tmp_path: Path) -> None:
    problems = preflight.run_preflight(spec, path=str(tmp_path))
    assert [p.check_id for p in problems] == ["engine-missing"]
    assert "apt-get install podman runc" in problems[0].message and "docker" in problems[0].message


def test_docker_without_daemon_says_start_it_or_install_podman(spec: ClusterSpec, tmp_path: Path) -> None:
    # The docker CLI's own message when no daemon runs (docker 28 CLI on this machine).
    _stub(
        tmp_path,
        "docker",
        "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
        "Is the docker daemon running?' >&2; exit 1\n",
    )
    problems = preflight.run_preflight(spec, path=str(tmp_path))
    assert [p.check_id for p in problems] == ["engine-missing"]
    assert (
        "systemctl start docker" in problems[0].message
        and "apt-get install podman runc" in problems[0].message
    )


def test_engine_named_in_spec_is_required(tmp_path: Path) -> None:
    _stub(tmp_path, "docker", "exit 0\n")  # a working docker must not stand in for podman
    with pytest.raises(EngineNotFound, match="provider.engine: podman: .*apt-get install podman runc"):
        detect_engine("podman", path=str(tmp_path))
    assert detect_engine("auto", path=str(tmp_path)).name == "docker"


def test_engine_that_fails_for_this_user_is_reported(spec: ClusterSpec, tmp_path: Path) -> None:
    _stub(
        tmp_path,
        "podman",
        "echo 'Error: cannot setup namespace using newuidmap: exit status 1' >&2; exit 125\n",
    )
    problems = preflight.run_preflight(spec, path=str(tmp_path))
    assert [p.check_id for p in problems] == ["engine-unusable"]
    assert "newuidmap" in problems[0].message and "apt-get install uidmap" in problems[0].message


def test_low_disk_says_how_much_to_free() -> None:
    engine = FakeEngine("/srv/containers")
    free = {"/srv/containers": 300 << 20, "/var/tmp": 50 << 30}
    problems = preflight.check_disk(engine, lambda path: free[path], need=1 << 30)
    assert [p.check_id for p in problems] == ["disk-low"]
    message = problems[0].message
    assert "/srv/containers has 0.3 GiB free" in message and "free at least 0.7 GiB" in message


def test_enough_disk_is_no_problem() -> None:
    assert preflight.check_disk(FakeEngine(), lambda path: 5 << 30) == []


def test_missing_image_checks_disk_and_tools_before_creating_anything(spec: ClusterSpec, monkeypatch) -> None:
    engine = FakeEngine()
    monkeypatch.setattr(engine, "image_exists", lambda tag: False)
    monkeypatch.setattr(preflight.shutil, "which", lambda name, path=None: None)
    problems = preflight.run_preflight(spec, engine=engine, free_bytes=lambda path: 1 << 20, is_root=False)
    ids = [p.check_id for p in problems]
    assert ids[:4] == ["debootstrap-missing", "image-needs-root", "disk-low", "disk-low"]
    assert "apt-get install debootstrap" in problems[0].message
    created = [
        c for c in engine.calls if c[:1] in (("run",), ("create",), ("import",)) or c[1:2] == ("create",)
    ]
    assert created == []


def test_a_check_that_crashes_becomes_a_finding(spec: ClusterSpec, monkeypatch) -> None:
    engine = FakeEngine()
    monkeypatch.setattr(engine, "image_exists", lambda tag: True)

    def broken(*args: object) -> list:
        raise ProviderError("podman network ls: boom")

    monkeypatch.setattr(preflight, "check_network", broken)
    problems = preflight.run_preflight(spec, engine=engine)
    assert [(p.check_id, p.level) for p in problems] == [("network-check", "error")]
    assert "boom" in problems[0].message
