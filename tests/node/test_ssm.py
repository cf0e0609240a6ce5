"""Admission, liveness and the drift probe over SSM Run Command, against a prod-shaped inventory
(stacks/prod.yaml's 17 nodes, connection vars as the AWS provider renders them) and a local
stand-in of the SSM API on loopback (tests/fixtures/fake_ssm.py): the real boto3 client, the real
runner, the command, its output and its exit code carried through. Before issue 23 every call
raised "cannot run commands over ansible_connection 'amazon.aws.aws_ssm'"."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import boto3
import pytest

from clusterforge.drift.digest import gather
from clusterforge.drift.manages import Managed
from clusterforge.node import ssm as ssm_mod
from clusterforge.node.remote import node_runner, ssm_runner
from clusterforge.providers.aws.inventory import nodes_from_outputs
from clusterforge.providers.base import Node
from clusterforge.slurm.admission import Admission
from clusterforge.slurm.liveness import PROBE_SCRIPT, unresponsive
from clusterforge.spec.loader import load_spec, stack_path
from tests.fixtures.fake_ssm import FakeSsm, serve
from tests.pipeline.fakes import FakeSlurm

BUCKET = "clusterforge-prod-ssm-0a1b2c"


def prod_nodes() -> list[Node]:
    spec, _ = load_spec(stack_path("prod"))
    entries = [{"name": "head-001", "pool": "head", "role": "head", "instance_type": "m7i.4xlarge"}]
    entries += [
        {"name": f"gpu-{i:03d}", "pool": "gpu", "role": "gpu", "instance_type": "p5.48xlarge"}
        for i in range(1, 17)
    ]
    for i, e in enumerate(entries):
        e.update(instance_id=f"i-0{i:016x}", private_ip=f"10.0.0.{10 + i}", availability_zone="us-east-1a")
    outputs = {"nodes": entries, "transfer_bucket": BUCKET, "region": "us-east-1", "connection": "ssm"}
    return nodes_from_outputs(spec, outputs)


class Cluster:
    """What runs on each instance: the head answers Slurm (FakeSlurm, plus the liveness probe
    script); a compute node runs the command for real on this machine (the drift probe is stdlib
    Python), except where a test breaks it."""

    def __init__(self, nodes: list[Node]) -> None:
        self.by_instance = {n.provider_id: n for n in nodes}
        self.slurm = FakeSlurm(nodes={n.name: ("idle", "") for n in nodes if n.role == "gpu"})
        self.silent: set[str] = set()
        self.broken: dict[str, tuple[int, str, str]] = {}

    def __call__(self, instance: str, argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        node = self.by_instance[instance]
        if node.name in self.broken:
            return self.broken[node.name]
        if node.role == "head":
            if argv[:3] == ["sh", "-c", PROBE_SCRIPT]:  # liveness: one srun probe per node on stdin
                names = (stdin or "").split()
                return 0, "".join(f"{n} {124 if n in self.silent else 0}\n" for n in names), ""
            return self.slurm(argv, stdin)
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60, check=False)
        return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, FakeSsm, list[Node]]]:
    nodes = prod_nodes()
    world = Cluster(nodes)
    fake = FakeSsm(world)
    for var, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_EC2_METADATA_DISABLED", "true")):  # fmt: skip
        monkeypatch.setenv(var, value)
    with serve(fake) as url:
        client = boto3.client("ssm", region_name="us-east-1", endpoint_url=url)
        monkeypatch.setattr(ssm_mod, "_client", lambda service, region: client if service == "ssm" else fake)
        monkeypatch.setattr(ssm_mod, "POLL_S", 0.0)
        yield world, fake, nodes


def test_the_prod_inventory_is_reached_over_ssm(cluster: tuple[Cluster, FakeSsm, list[Node]]) -> None:
    _, fake, nodes = cluster
    head = nodes[0]
    assert head.connection["ansible_connection"] == "amazon.aws.aws_ssm"
    rc, out, err = node_runner(head)(["sinfo", "-N", "-h", "-o", "%N %T %E"])
    assert rc == 0 and "gpu-016 idle" in out and err == ""
    (inv,) = fake.invocations
    assert inv.instance_id == head.provider_id and inv.argv == ["sinfo", "-N", "-h", "-o", "%N %T %E"]
    assert inv.request["DocumentName"] == "AWS-RunShellScript"
    assert inv.request["OutputS3BucketName"] == BUCKET  # long output goes to the transfer bucket
    assert inv.polls >= 3  # "does not exist yet", in progress, then final: the runner waited


def test_admission_holds_and_releases_through_the_head_over_ssm(
    cluster: tuple[Cluster, FakeSsm, list[Node]],
) -> None:
    world, fake, nodes = cluster
    admission = Admission(node_runner(nodes[0]))
    assert set(admission.nodes()) == {f"gpu-{i:03d}" for i in range(1, 17)}
    admission.drain("gpu-003", "clusterforge: upgrading")
    assert world.slurm.nodes["gpu-003"]["reason"] == "clusterforge: upgrading"
    assert any(
        i.argv[:2] == ["scontrol", "update"] and "NodeName=gpu-003" in i.argv for i in fake.invocations
    )
    assert {i.instance_id for i in fake.invocations} == {nodes[0].provider_id}


def test_liveness_names_the_silent_node_over_ssm(cluster: tuple[Cluster, FakeSsm, list[Node]]) -> None:
    world, _, nodes = cluster
    world.silent = {"gpu-007"}
    head = node_runner(nodes[0])
    states = Admission(head).nodes()
    compute = [n.name for n in nodes if n.role == "gpu"]
    problems = unresponsive(head, states, compute, "clusterforge_cert", "clusterforge-probe-1")
    assert list(problems) == ["gpu-007"], problems


def test_the_drift_probe_runs_on_the_node_and_its_failure_is_carried(
    cluster: tuple[Cluster, FakeSsm, list[Node]],
) -> None:
    world, fake, nodes = cluster
    managed = Managed(packages=("dpkg",), files=("/etc/hostname",), units=(), roles=("common",))
    ok = gather(nodes[1], managed, node_runner)
    assert ok.ok, ok.error
    assert ok.items["package dpkg"].startswith("install installed ")  # this machine's, via SSM
    assert ok.items["file /etc/hostname"].startswith("sha256 ")
    probe = next(i for i in fake.invocations if i.instance_id == nodes[1].provider_id)
    assert probe.argv[:2] == ["python3", "-c"]  # the stdlib probe, as over podman and ssh
    world.broken["gpu-002"] = (3, "", "python3: can't open file: No space left on device")
    bad = gather(nodes[2], managed, node_runner)
    assert bad.error == "probe exited 3: python3: can't open file: No space left on device"


def test_output_past_ssms_limit_is_read_from_the_bucket(cluster: tuple[Cluster, FakeSsm, list[Node]]) -> None:
    world, _, nodes = cluster
    world.broken["gpu-004"] = (0, "x" * 30_000 + "END\n", "")
    rc, out, _ = node_runner(nodes[4])(["cat", "/var/log/big"])
    assert rc == 0 and len(out) == 30_004 and out.endswith("END\n")


def test_a_command_that_never_finishes_is_cancelled_and_answers_124(
    cluster: tuple[Cluster, FakeSsm, list[Node]],
) -> None:
    _, fake, nodes = cluster
    fake.hang.add(nodes[5].provider_id)
    ticks = iter(range(0, 10_000, 10))
    run = ssm_runner(nodes[5], timeout_s=30, clock=lambda: float(next(ticks)), sleep=lambda s: None)
    rc, _, err = run(["sleep", "3600"])
    assert rc == 124 and "timed out after 30 s over SSM: sleep 3600" in err
    assert next(i for i in fake.invocations if i.instance_id == nodes[5].provider_id).cancelled


def test_stdin_reaches_the_command(cluster: tuple[Cluster, FakeSsm, list[Node]]) -> None:
    _, _, nodes = cluster
    rc, out, _ = node_runner(nodes[6])(["cat"], stdin="a 'quoted' line\nand $HOME\n")
    assert (rc, out) == (0, "a 'quoted' line\nand $HOME\n")
