"""The slurm role's source path (slurm_install_method: source) converged for real on a head and two
compute containers: Slurm built from the upstream release tarball, once, and copied to the others.

No SchedMD download here: Debian's source archive carries the upstream release tarball of its
Slurm (``slurm-wlm_22.05.8.orig.tar.gz``, SchedMD's GitHub tag archive). The test fetches it with
``apt-get source --download-only`` under a private apt configuration (a deb-src line for this
machine's mirror; the machine's apt sources are not touched), serves it over HTTP on the stack's
podman gateway as the "download", and gives the role its sha256, as a spec gives SchedMD's.

Opt-in (marker long): the compile runs on one core (make -j1) and takes minutes here.
    pytest -m long tests/roles/test_slurm_source.py
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterforge.providers.local.image import machine_mirrors
from tests.fixtures.nodes import LocalStack
from tests.fixtures.nvidia_repo import podman_gateway
from tests.roles.cluster_play import (
    CLUSTER_PLAYBOOK,
    REPO,
    PlayOutcome,
    cluster_vars,
    run_play,
    write_inventory,
)
from tests.roles.test_cluster_roles import PYXIS, _pyxis_tarball

pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.timeout(3600)]

SLURM = "22.05.8"
ORIG = f"slurm-wlm_{SLURM}.orig.tar.gz"
BUILD_TASK = "Build Slurm with make"


def debian_orig_tarball(cache: Path) -> Path:
    """Debian's copy of the upstream Slurm release tarball, downloaded once into ``cache``."""
    found = sorted(cache.glob(ORIG))
    if found:
        return found[0]
    mirror = machine_mirrors("bookworm").main
    apt = cache / "apt"
    for sub in ("etc/sources.list.d", "lists/partial", "cache/archives/partial"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / "etc" / "sources.list").write_text(f"deb-src {mirror} bookworm main\n")
    options = [
        f"-oDir::Etc::sourcelist={apt / 'etc' / 'sources.list'}",
        f"-oDir::Etc::sourceparts={apt / 'etc' / 'sources.list.d'}",
        f"-oDir::State::Lists={apt / 'lists'}",
        f"-oDir::Cache={apt / 'cache'}",
    ]
    subprocess.run(["apt-get", *options, "update"], check=True, capture_output=True)
    # bookworm has one slurm-wlm source (22.05.8-4+deb12uN): its .orig is the tarball named above.
    got = subprocess.run(
        ["apt-get", *options, "source", "--download-only", "slurm-wlm"],
        cwd=cache, capture_output=True, text=True,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    tarball = cache / ORIG
    assert tarball.is_file(), sorted(p.name for p in cache.iterdir())
    return tarball


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def serve_folder(folder: Path, host: str) -> Iterator[str]:
    """Serve ``folder`` on ``host`` (an address of this machine); yields the base URL."""

    def handler(*args: Any, **kwargs: Any) -> _Quiet:
        return _Quiet(*args, directory=str(folder), **kwargs)

    server = http.server.ThreadingHTTPServer((host, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def task_deltas(outcome: PlayOutcome, prefix: str) -> dict[str, str]:
    """host -> the ``delta`` (wall time) of the command task whose name starts with ``prefix``."""
    found = {}
    for path in sorted((outcome.artifacts / "job_events").glob("*.json")):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and str(data.get("task", "")).startswith(prefix):
            found[data.get("host")] = (data.get("res") or {}).get("delta", "")
    return found


@dataclass
class SourceCluster:
    stack: LocalStack
    first: PlayOutcome
    second: PlayOutcome
    first_s: float
    second_s: float
    cache_dir: Path
    sha256: str

    @property
    def compute(self) -> list[str]:
        return sorted(n.name for n in self.stack.nodes if n.role == "gpu")

    @property
    def head(self) -> str:
        return next(n.name for n in self.stack.nodes if n.role == "head")

    @property
    def hosts(self) -> list[str]:
        return [self.head, *self.compute]


@pytest.fixture(scope="module")
def source_cluster(
    container_stack: Callable[..., LocalStack],
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[SourceCluster]:
    tarball = debian_orig_tarball(Path(pytestconfig.cache.mkdir("slurm-orig")))
    sha256 = hashlib.sha256(tarball.read_bytes()).hexdigest()
    stack = container_stack(2, head=True)
    work = tmp_path_factory.mktemp("slurm-source")
    variables = cluster_vars(stack.nodes, work / "secrets" / "munge.key", "none")
    # A snapshot of the suite (as test_cluster_roles does): both converges must ship the same sources
    # even while validators/ is edited; run 2 of this test re-shipped it on an edit made mid-run.
    source = shutil.copytree(
        REPO / "validators", work / "validators", ignore=shutil.ignore_patterns("__pycache__")
    )
    variables.update(validators_runtime_source=str(source), validators_runtime_build_dir=str(work / "build"))
    head = next(n.name for n in stack.nodes if n.role == "head")
    pyxis = f"/shared/pyxis-{PYXIS}.tar.gz"
    stack.exec(head, "sh", "-c", f"echo {base64.b64encode(_pyxis_tarball()).decode()} | base64 -d > {pyxis}")
    gateway = podman_gateway(stack.engine(), f"clusterforge-{stack.spec.stack}")
    serving = serve_folder(tarball.parent, gateway)
    url = next(serving)
    try:
        cache_dir = work / "slurm-builds"
        variables.update(
            slurm_version=SLURM,
            slurm_install_method="source",
            slurm_source_url=f"{url}/{tarball.name}",
            slurm_source_sha256=sha256,
            slurm_source_cache_dir=str(cache_dir),
            # No NVML on these machines (no CUDA, no GPU); PMIx from Debian's libpmix-dev.
            slurm_source_nvml=False,
            slurm_source_pmix=True,
            # One core: the machine is shared (2 cores).
            slurm_source_build_jobs=1,
            pyxis_version=PYXIS,
            pyxis_source_url=f"file://{pyxis}",
            # The inventory renderer sets this for source installs (clusterforge/inventory.py).
            pyxis_slurm_include_dir="/usr/local/include",
        )
        inventory = write_inventory(work / "inventory", stack.nodes, variables)
        start = time.monotonic()
        first = run_play(work / "run1", CLUSTER_PLAYBOOK, inventory)
        first_s = time.monotonic() - start
        assert first.rc == 0, first.explain()
        start = time.monotonic()
        second = run_play(work / "run2", CLUSTER_PLAYBOOK, inventory)
        second_s = time.monotonic() - start
        assert second.rc == 0, second.explain()
        yield SourceCluster(stack, first, second, first_s, second_s, cache_dir, sha256)
    finally:
        serving.close()


def test_built_once_and_copied_to_the_other_hosts(source_cluster: SourceCluster) -> None:
    c = source_cluster
    builds = task_deltas(c.first, BUILD_TASK)
    print(f"first converge {c.first_s:.0f} s, second {c.second_s:.0f} s, make on {builds}")
    assert list(builds) == [c.head], builds  # the controller play's host, once
    archives = sorted(p.name for p in c.cache_dir.iterdir())
    assert len(archives) == 1 and archives[0].startswith(f"slurm-{SLURM}-debian12-x86_64-"), archives
    marker = archives[0].removeprefix("slurm-").removesuffix(".tar.gz")
    for node in c.hosts:
        assert c.stack.exec(node, "cat", "/var/lib/clusterforge/slurm-source-build").strip() == marker
        assert c.stack.exec(node, "/usr/local/sbin/slurmd", "-V").strip() == f"slurm {SLURM}"
        # Built, not packaged: no Slurm package, and apt refuses to install one beside it.
        assert not c.stack.exec(node, "sh", "-c", "dpkg -l 'slurm*' 2>/dev/null | grep ^ii || true").strip()
        refused = c.stack.exec(node, "sh", "-c", "apt-get install -s slurmd 2>&1; echo rc=$?", check=False)
        assert "rc=100" in refused, refused
    # The compute nodes run SchedMD's unit from the build, with the role's drop-ins.
    unit = c.stack.exec(c.compute[0], "systemctl", "show", "-p", "FragmentPath,ActiveState", "slurmd")
    assert (
        "FragmentPath=/usr/local/lib/systemd/system/slurmd.service" in unit and "ActiveState=active" in unit
    )


def test_second_converge_changes_nothing(source_cluster: SourceCluster) -> None:
    c = source_cluster
    assert c.second.changed_tasks == {}, f"second converge changed: {c.second.changed_tasks}"
    assert sum(c.second.stats.get("changed", {}).values()) == 0
    assert not task_deltas(c.second, BUILD_TASK)


def test_srun_runs_on_both_nodes_with_pyxis_built_against_the_source_headers(
    source_cluster: SourceCluster,
) -> None:
    c = source_cluster
    for node in c.hosts:
        assert (
            c.stack.exec(node, "sh", "-c", "test -f /usr/local/include/slurm/spank.h && echo yes").strip()
            == "yes"
        )
        conf = c.stack.exec(node, "cat", "/etc/slurm/plugstack.conf.d/pyxis.conf").strip()
        assert conf == "required /usr/local/lib/slurm/spank_pyxis.so", conf
    assert f"[pyxis] stand-in {PYXIS}" in c.stack.exec(c.head, "srun", "--help")
    c.stack.exec(c.head, "scontrol", "update", f"NodeName={','.join(c.compute)}", "State=RESUME")
    out = c.stack.exec(c.head, "timeout", "90", "srun", "-N2", "--partition=batch", "hostname", timeout=120)
    assert sorted(out.split()) == c.compute
