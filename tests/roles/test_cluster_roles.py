"""The cluster roles (slurm, shared_storage, monitoring, validators_runtime) converged for real on a
head and two compute containers (systemd as PID 1), once per module; every test reads that cluster.

What it shows: compute nodes join Slurm held (DRAIN "clusterforge: certifying"), and after a resume
a job runs on both; a second converge changes nothing; the munge key is 0400 munge:munge and never
appears in ansible-runner's events; the shared volume is shared and writable; node_exporter
publishes certification results from its textfile folder; the validators suite runs on the node.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.nodes import LocalStack
from tests.roles.cluster_play import (
    CERTIFY_PLAYBOOK,
    CLUSTER_PLAYBOOK,
    CLUSTER_VALIDATORS_PLAYBOOK,
    REPO,
    TORCH_ON_NODE,
    PlayOutcome,
    cluster_vars,
    run_play,
    write_inventory,
)

# An hour, as tests/integration's get: pytest-timeout counts the module fixture (two converges) in the
# first test's time, 1,164 s of pyproject's 1,500 s in rehearsal 8 beside the other container phases.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

HOLD = "clusterforge: certifying"
PYXIS = "0.21.0"
PYXIS_STANDIN = REPO / "tests" / "data" / "pyxis-standin"
# SLURM_VERSION_NUMBER of Debian 12's Slurm 22.05.8 headers: the pyxis build folder is keyed by it.
SLURM_2205 = "160508"


def _pyxis_tarball() -> bytes:
    """The stand-in pyxis release (tests/data/pyxis-standin/SOURCES.md) as GitHub's tarball lays it out."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name in ("Makefile", "pyxis_standin.c"):
            tar.add(PYXIS_STANDIN / name, arcname=f"pyxis-{PYXIS}/{name}")
    return out.getvalue()


@dataclass
class Cluster:
    stack: LocalStack
    first: PlayOutcome
    second: PlayOutcome
    munge_key: Path
    inventory: Path
    work: Path
    torch: str

    @property
    def compute(self) -> list[str]:
        return sorted(n.name for n in self.stack.nodes if n.role == "gpu")

    @property
    def head(self) -> str:
        return next(n.name for n in self.stack.nodes if n.role == "head")


@pytest.fixture(scope="module")
def cluster(container_stack: Callable[..., LocalStack], tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    stack = container_stack(2, head=True)
    work = tmp_path_factory.mktemp("cluster-roles")
    munge_key = work / "secrets" / "munge.key"
    # torch installed once on the workstation (scripts/setup.d/45-roles-cluster.sh) is mounted read-only
    # into every node by the provider: then the role must find it there (shared); without it, none.
    torch = "shared" if (REPO / ".clusterforge" / "node-torch" / "torch").is_dir() else "none"
    variables = cluster_vars(stack.nodes, munge_key, torch)
    # A snapshot of the suite: both converges must ship the same sources even while validators/ is edited.
    source = shutil.copytree(
        REPO / "validators", work / "validators", ignore=shutil.ignore_patterns("__pycache__")
    )
    variables.update(validators_runtime_source=str(source), validators_runtime_build_dir=str(work / "build"))
    # pyxis: the stand-in release, put on the shared volume as the "download" (no GitHub here).
    tarball = f"/shared/pyxis-{PYXIS}.tar.gz"
    head = next(n.name for n in stack.nodes if n.role == "head")
    stack.exec(
        head, "sh", "-c", f"echo {base64.b64encode(_pyxis_tarball()).decode()} | base64 -d > {tarball}"
    )
    variables.update(pyxis_version=PYXIS, pyxis_source_url=f"file://{tarball}")
    inventory = write_inventory(work / "inventory", stack.nodes, variables)
    # As `up` converges: the head without its CPU cap for the runs (providers/local/nodes.py says why).
    with stack.provider.converging(stack.spec, [head]):
        first = run_play(work / "run1", CLUSTER_VALIDATORS_PLAYBOOK, inventory)
        assert first.rc == 0, first.explain()
        second = run_play(work / "run2", CLUSTER_VALIDATORS_PLAYBOOK, inventory)
        assert second.rc == 0, second.explain()
    return Cluster(stack, first, second, munge_key, inventory, work, torch)


def _exists(stack: LocalStack, node: str, path: str) -> bool:
    return stack.exec(node, "sh", "-c", f"test -e {path} && echo yes || echo no").strip() == "yes"


def _sinfo(cluster: Cluster) -> dict[str, tuple[str, str]]:
    out = cluster.stack.exec(cluster.head, "sinfo", "-h", "-N", "-o", "%N|%T|%E")
    rows = {}
    for line in out.splitlines():
        name, state, reason = line.split("|", 2)
        rows[name] = (state, reason)
    return rows


def test_second_converge_changes_nothing(cluster: Cluster) -> None:
    assert cluster.first.stats.get("changed"), "the first converge changed nothing: it did not really run"
    assert cluster.second.changed_tasks == {}, f"second converge changed: {cluster.second.changed_tasks}"
    assert sum(cluster.second.stats.get("changed", {}).values()) == 0


def test_check_mode_on_the_converged_cluster_reports_nothing_to_do(cluster: Cluster) -> None:
    with cluster.stack.provider.converging(cluster.stack.spec, [cluster.head]):
        checked = run_play(cluster.work / "check", CLUSTER_PLAYBOOK, cluster.inventory, check=True)
    assert checked.rc == 0, checked.explain()
    assert checked.changed_tasks == {}, checked.changed_tasks
    assert cluster.munge_key.read_text() not in checked.event_text  # --diff never shows the key


def test_compute_nodes_join_held_then_run_a_job_after_resume(cluster: Cluster) -> None:
    rows = _sinfo(cluster)
    for node in cluster.compute:
        state, reason = rows[node]
        assert state.startswith("drain"), f"{node} joined as {state}, not held: {rows}"
        assert reason == HOLD, rows
    # A job cannot land on a held node: it pends until the nodes are resumed.
    cluster.stack.exec(
        cluster.head, "scontrol", "update", f"NodeName={','.join(cluster.compute)}", "State=RESUME"
    )
    out = cluster.stack.exec(
        cluster.head, "timeout", "90", "srun", "-N2", "--partition=batch", "hostname", timeout=120
    )
    assert sorted(out.split()) == cluster.compute
    # ... with pyxis loaded (required) by srun on the head and by slurmd/slurmstepd on both nodes.
    # Re-runs never hold an admitted node again: the hold is recorded on the node, and the second
    # converge (no changes, above) skipped it.
    for node in cluster.compute:
        assert _exists(cluster.stack, node, f"/var/lib/clusterforge/slurm-held/{node}")


def test_pyxis_built_against_the_installed_slurm_on_every_slurm_host(cluster: Cluster) -> None:
    for node in [cluster.head, *cluster.compute]:
        # libslurm-dev (spank.h) came with the slurm role, pinned and held like the rest of Slurm.
        held = cluster.stack.exec(node, "apt-mark", "showhold").split()
        assert "libslurm-dev" in held, (node, held)
        # Built in a folder keyed by the Slurm headers' version, CPPFLAGS from the environment (a
        # command-line CPPFLAGS drops PYXIS_VERSION and the stand-in refuses to compile).
        assert _exists(cluster.stack, node, f"/usr/local/src/pyxis-{PYXIS}-slurm-{SLURM_2205}/spank_pyxis.so")
        conf = cluster.stack.exec(node, "cat", "/etc/slurm/plugstack.conf.d/pyxis.conf").strip()
        assert conf == "required /usr/local/lib/slurm/spank_pyxis.so", conf
    # srun on the head loads it: its option is in srun's help.
    assert f"[pyxis] stand-in {PYXIS}" in cluster.stack.exec(cluster.head, "srun", "--help")


def test_slurm_version_the_sources_lack_is_named(cluster: Cluster) -> None:
    # Ubuntu 22.04/24.04 ship one Slurm each, as Debian 12 ships 22.05.8: a spec asking for another
    # (prod/dev: 24.05.7) stops before apt, naming what the sources offer.
    node = cluster.compute[0]
    play = run_play(
        cluster.work / "slurm-missing",
        CLUSTER_PLAYBOOK,
        cluster.inventory,
        limit=node,
        extravars={"slurm_version": "24.05.7"},
    )
    assert play.rc != 0
    message = " ".join(play.failures.get(node, []))
    assert "slurm-client=24.05.7-* is not offered" in message and "22.05.8-" in message, play.explain()
    assert not play.changed_tasks.get(node), play.changed_tasks


def test_munge_key_is_private_and_never_logged(cluster: Cluster) -> None:
    key = cluster.munge_key.read_bytes()
    assert len(key) >= 128
    assert cluster.munge_key.stat().st_mode & 0o777 == 0o600
    for node in [cluster.head, *cluster.compute]:
        mode = cluster.stack.exec(node, "stat", "-c", "%a %U %G", "/etc/munge/munge.key").split()
        assert mode == ["400", "munge", "munge"], f"{node}: {mode}"
        assert cluster.stack.exec(node, "sha256sum", "/etc/munge/munge.key").split()[0] == _sha256(key)
    text = key.decode()
    for outcome in (cluster.first, cluster.second):
        assert "Install the cluster munge key" in outcome.event_text, "no event output captured"
        assert text not in outcome.event_text
        for path in outcome.artifacts.rglob("*"):
            if path.is_file():
                assert text not in path.read_text(errors="replace"), f"munge key leaked into {path}"


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_shared_volume_is_shared_and_writable(cluster: Cluster) -> None:
    a, b = cluster.compute
    stamp = f"written by {a} at {time.monotonic_ns()}"
    cluster.stack.exec(a, "sh", "-c", f"echo '{stamp}' > /shared/cluster-roles-test")
    assert cluster.stack.exec(b, "cat", "/shared/cluster-roles-test").strip() == stamp


def test_node_exporter_publishes_certification_results(cluster: Cluster) -> None:
    node = cluster.compute[0]
    report = {
        "schema_version": 1,
        "node": node,
        "profile": "quick",
        "finished": "2026-01-01T00:01:10Z",
        "verdict": "fail",
        "checks": [
            {"id": "software-versions", "status": "pass"},
            {"id": "gloo-allreduce", "status": "fail"},
            {"id": "gpu-inventory", "status": "skip"},
        ],
    }
    cluster.stack.exec(node, "sh", "-c", f"cat > /var/tmp/report.json <<'EOF'\n{json.dumps(report)}\nEOF")
    cluster.stack.exec(node, "/usr/local/sbin/clusterforge-cert-metrics", "/var/tmp/report.json")
    prom = cluster.stack.exec(
        node, "cat", "/var/lib/prometheus/node-exporter/clusterforge_certification.prom"
    )
    assert 'clusterforge_certification_passed{check="software-versions",profile="quick"} 1' in prom
    assert 'clusterforge_certification_passed{check="gloo-allreduce",profile="quick"} 0' in prom
    assert "gpu-inventory" not in prom  # skipped checks are not results
    assert 'clusterforge_certification_verdict{profile="quick"} 0' in prom
    # node_exporter itself serves them (its textfile collector reads the folder on each scrape).
    metrics = cluster.stack.exec(node, "curl", "-sf", "http://127.0.0.1:9100/metrics")
    assert 'clusterforge_certification_passed{check="gloo-allreduce",profile="quick"} 0' in metrics


def test_validators_suite_runs_on_the_node(cluster: Cluster) -> None:
    node = cluster.compute[0]
    plain = cluster.stack.exec(node, "python3", "-m", "validators", "list")
    wrapped = cluster.stack.exec(node, "/usr/local/bin/clusterforge-validators", "list")
    assert plain == wrapped
    # The node runs exactly the workstation's suite.
    local_ids = json.loads(_local_validators_list_json())
    node_ids = json.loads(cluster.stack.exec(node, "python3", "-m", "validators", "list", "--json"))
    assert _ids(node_ids) == _ids(local_ids) and _ids(node_ids)
    if cluster.torch == "shared":
        # The one read-only copy from the workstation, not an install on the node.
        found = cluster.stack.exec(
            node, "python3", "-c", "import torch; print(torch.__version__, torch.__file__)"
        )
        version, path = found.split()
        assert version.startswith("2.13.0") and path.startswith(TORCH_ON_NODE + "/"), found
        assert "ro" in cluster.stack.exec(node, "findmnt", "-n", "-o", "OPTIONS", TORCH_ON_NODE).split(",")


def _ids(listing: object) -> list[str]:
    items = listing.get("checks", listing) if isinstance(listing, dict) else listing
    return sorted(item["id"] if isinstance(item, dict) else str(item) for item in items)


def _local_validators_list_json() -> str:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "validators", "list", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_certify_playbook_runs_the_suite_and_fetches_the_report(cluster: Cluster) -> None:
    node = cluster.compute[0]
    checks = json.loads(cluster.stack.exec(node, "python3", "-m", "validators", "list", "--json"))
    # Two real, fast checks: the Python runtime and the pinned Slurm package version on the node.
    keep = {"python-runtime", "software-versions"}
    config = {
        "schema_version": 1,
        "node": node,
        "instance_type": "local",
        "software": {"slurm": "22.05.8"},
        "skip_checks": sorted(c["id"] for c in checks if c["id"] not in keep),
    }
    config_dir = cluster.work / "certify-config"
    (config_dir / node).mkdir(parents=True)
    (config_dir / node / "NODE.json").write_text(json.dumps(config))
    reports = cluster.work / "reports"
    outcome = run_play(
        cluster.work / "certify",
        CERTIFY_PLAYBOOK,
        cluster.inventory,
        limit=node,
        extravars={
            "certify_profile": "quick",
            "certify_config_dir": str(config_dir),
            "certify_reports_dir": str(reports),
            "certify_run_id": "test-run-1",
        },
    )
    assert outcome.rc == 0, outcome.explain()
    report = json.loads((reports / node / "report.json").read_text())
    status = {c["id"]: c["status"] for c in report["checks"]}
    assert status["software-versions"] == "pass", report
    assert report["verdict"] == "pass", report
    assert (reports / node / "junit.xml").read_text().lstrip().startswith("<")
    prom = cluster.stack.exec(
        node, "cat", "/var/lib/prometheus/node-exporter/clusterforge_certification.prom"
    )
    assert 'clusterforge_certification_passed{check="software-versions",profile="quick"} 1' in prom
    assert 'clusterforge_certification_verdict{profile="quick"} 1' in prom


def test_health_check_drains_a_failing_node_in_service_once(cluster: Cluster) -> None:
    node = cluster.compute[1]
    # A node in service whose shared filesystem is missing: the health check's quick checks fail.
    wrong = {
        "schema_version": 1,
        "node": node,
        "instance_type": "local",
        "shared_storage": {"path": "/shared-gone"},
    }
    cluster.stack.exec(
        node,
        "sh",
        "-c",
        f"mkdir -p /etc/clusterforge && echo '{json.dumps(wrong)}' > /etc/clusterforge/node.json",
    )
    cluster.stack.exec(cluster.head, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    try:
        assert not _sinfo(cluster)[node][0].startswith("drain")
        said = cluster.stack.exec(
            node,
            "sh",
            "-c",
            "/usr/local/sbin/clusterforge-healthcheck 2>&1; scontrol -o show node " + node,
            timeout=90,
        )
        state, reason = _sinfo(cluster)[node]
        assert state.startswith("drain"), f"{state} {reason}\n{said}"
        assert reason.startswith("clusterforge: healthcheck: shared-storage: "), reason
        assert "/shared-gone" in reason
        # Drained by clusterforge: the next health check leaves the node (and its reason) to the pipeline.
        cluster.stack.exec(node, "/usr/local/sbin/clusterforge-healthcheck", timeout=90)
        assert _sinfo(cluster)[node] == (state, reason)
    finally:
        cluster.stack.exec(node, "rm", "-f", "/etc/clusterforge/node.json")
        cluster.stack.exec(
            cluster.head, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False
        )
