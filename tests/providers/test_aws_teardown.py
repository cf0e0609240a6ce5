"""`invoke down` on an AWS stack: the data at risk is listed, FSx is backed up before anything is
destroyed, the checkpoint bucket goes only on a typed answer. FSx and S3 are moto's server on
127.0.0.1 (create_file_system, create_backup, versioned buckets); a failed backup through
botocore's Stubber; the Pulumi stack is a fake driver at the provider's seam."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from clusterforge.providers.aws import teardown as td
from clusterforge.providers.aws.provider import AwsStackProvider
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec
from tests.fixtures.aws import reset

BUCKET = "clusterforge-prod-ckpt-0001"


@pytest.fixture
def clients(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> td.TeardownClients:
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    reset(moto_url)  # the session's server (tests/fixtures/aws.py), emptied
    return td.make_teardown_clients("us-east-1", endpoint_url=moto_url)


def _prod(**fsx: object) -> ClusterSpec:
    spec, _ = load_spec(stack_path("prod"))
    if fsx:
        lustre = spec.storage.fsx_lustre.model_copy(update=fsx)
        spec = spec.model_copy(update={"storage": spec.storage.model_copy(update={"fsx_lustre": lustre})})
    return spec


def _stack(clients: td.TeardownClients, versions: int = 3) -> dict[str, Any]:
    """A file system and a versioned bucket with ``versions`` versions of one key plus a delete marker."""
    fs = clients.fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=48000,
        SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
    )["FileSystem"]
    clients.s3.create_bucket(Bucket=BUCKET)
    clients.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    for n in range(versions):
        clients.s3.put_object(Bucket=BUCKET, Key="step-100/rank0.pt", Body=b"x" * (1024 * (n + 1)))
    clients.s3.delete_object(Bucket=BUCKET, Key="step-100/rank0.pt")
    return {"fsx": {"id": fs["FileSystemId"], "mount_point": "/fsx"}, "bucket": BUCKET}


def _bucket_exists(clients: td.TeardownClients) -> bool:
    return any(b["Name"] == BUCKET for b in clients.s3.list_buckets()["Buckets"])


def test_data_at_risk_names_the_file_system_and_every_object_version(clients: td.TeardownClients):
    outputs = _stack(clients)
    fs, bucket = td.data_at_risk(outputs, clients)
    assert (
        fs.render()
        == f"file system {outputs['fsx']['id']}: FSx for Lustre PERSISTENT_2, 48000 GiB, mounted at /fsx"
    )
    assert (
        bucket.render() == f"bucket {BUCKET}: 4 object versions, 0.0 GiB (checkpoints)"
    )  # 3 + delete marker


class Events:
    """One ordered log of what the teardown said, asked and did."""

    def __init__(self, answer: str = "") -> None:
        self.log: list[str] = []
        self.answer = answer

    def ask(self, prompt: str) -> str:
        self.log.append(f"ask: {prompt}")
        return self.answer

    def say(self, line: str) -> None:
        self.log.append(line)

    def destroy(self) -> list[tuple[str, str]]:
        self.log.append("DESTROY")
        return [("aws:ec2/vpc:Vpc", "prod-vpc")]


def _backups_finish(seconds: float) -> None:
    """The wait between polls: AWS finishes the backup meanwhile. moto keeps a backup CREATING
    for ever, so this flips it in moto's in-process backend, as the service would."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.fsx.models import fsx_backends

    for backup in fsx_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].backups.values():
        backup.lifecycle = "AVAILABLE"


def _teardown(clients: td.TeardownClients, events: Events) -> td.Teardown:
    return td.Teardown(clients, ask=events.ask, say=events.say, sleep=_backups_finish)


def test_down_backs_up_fsx_first_and_keeps_the_bucket_without_a_typed_answer(clients: td.TeardownClients):
    outputs = _stack(clients)
    events = Events(answer="")  # --yes without a terminal: nobody to type the bucket's name
    gone = _teardown(clients, events).run(_prod(), outputs, events.destroy)
    assert gone == [("aws:ec2/vpc:Vpc", "prod-vpc")]
    fs_id = outputs["fsx"]["id"]
    (backup,) = clients.fsx.describe_backups()["Backups"]
    assert backup["Lifecycle"] == "AVAILABLE"
    tags = {t["Key"]: t["Value"] for t in backup.get("Tags", [])}
    assert tags == {"clusterforge:stack": "prod", "clusterforge:final-backup": "true"}
    log = events.log
    assert log[0].startswith(f"data: file system {fs_id}") and log[1].startswith(f"data: bucket {BUCKET}")
    backed_up = next(i for i, line in enumerate(log) if line.startswith(f"final backup {backup['BackupId']}"))
    assert backed_up < log.index("DESTROY")  # the backup exists before anything is destroyed
    assert log[-2].startswith(f"ask: Checkpoint bucket {BUCKET} holds 4 object versions")
    assert log[-1].startswith(f"kept bucket {BUCKET}") and "no longer manages it" in log[-1]
    assert _bucket_exists(clients)


def test_the_bucket_goes_only_when_its_name_is_typed(clients: td.TeardownClients):
    outputs = _stack(clients)
    for answer, kept in (("yes", True), ("prod", True), (BUCKET, False)):
        events = Events(answer=answer)
        _teardown(clients, events).run(_prod(backup_on_destroy=False), outputs, events.destroy)
        assert _bucket_exists(clients) is kept, answer
    assert events.log[-1] == f"deleted bucket {BUCKET} and its 4 object versions"


def test_told_not_to_back_up_says_the_data_goes(clients: td.TeardownClients):
    outputs = _stack(clients)
    events = Events()
    _teardown(clients, events).run(_prod(backup_on_destroy=False), outputs, events.destroy)
    assert clients.fsx.describe_backups()["Backups"] == []
    assert any("no final backup" in line and "backup_on_destroy: false" in line for line in events.log)


def test_scratch_file_systems_cannot_be_backed_up_and_that_is_said(clients: td.TeardownClients):
    outputs = _stack(clients)
    events = Events()
    spec = _prod(deployment_type="SCRATCH_2", per_unit_storage_throughput=None)
    _teardown(clients, events).run(spec, outputs, events.destroy)
    assert clients.fsx.describe_backups()["Backups"] == []
    assert any("cannot be backed up; its data goes" in line for line in events.log)


def _fsx_stub() -> tuple[Any, Stubber]:
    client = boto3.client("fsx", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    return client, Stubber(client)


def _backup(state: str, **extra: object) -> dict[str, Any]:
    import datetime as dt

    return {
        "BackupId": "backup-0123456789abcdef0",
        "Lifecycle": state,
        "Type": "USER_INITIATED",
        "CreationTime": dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        "FileSystem": {"FileSystemId": "fs-0123456789abcdef0"},
        **extra,
    }


def test_a_failed_backup_stops_before_the_destroy():
    fsx, stub = _fsx_stub()
    stub.add_response("create_backup", {"Backup": _backup("CREATING")})
    stub.add_response(
        "describe_backups", {"Backups": [_backup("FAILED", FailureDetails={"Message": "disk full"})]}
    )
    events = Events()
    clients = td.TeardownClients(fsx=fsx, s3=None)
    with stub, pytest.raises(td.TeardownError, match="is FAILED \\(disk full\\); nothing destroyed"):
        td.final_backup(clients, "fs-0123456789abcdef0", "prod", sleep=events.say)
    assert "DESTROY" not in events.log


def test_a_backup_that_never_finishes_times_out_with_what_to_do():
    fsx, stub = _fsx_stub()
    stub.add_response("create_backup", {"Backup": _backup("CREATING")})
    stub.add_response("describe_backups", {"Backups": [_backup("CREATING")]})
    clients = td.TeardownClients(fsx=fsx, s3=None)
    with stub, pytest.raises(td.TeardownError, match="still CREATING .* run `invoke down` again"):
        td.final_backup(
            clients, "fs-0123456789abcdef0", "prod", sleep=lambda s: None, timeout_s=td.BACKUP_POLL_SECONDS
        )


class FakeDriver:
    """The Pulumi stack at the provider's seam: outputs as a prod stack exports them."""

    def __init__(self, outputs: dict[str, Any], events: Events) -> None:
        self._outputs = outputs
        self.events = events
        self.on_output = None

    def outputs(self) -> dict[str, Any]:
        return self._outputs

    def destroy(self, confirm) -> list[tuple[str, str]]:
        assert confirm("prompt") == "prod"
        return self.events.destroy() + [("aws:fsx/lustreFileSystem:LustreFileSystem", "prod-fsx")]


def test_provider_destroy_lists_the_data_and_takes_the_backup_path(clients: td.TeardownClients):
    outputs = _stack(clients)
    events = Events()
    provider = AwsStackProvider(
        _prod(),
        driver=lambda stack: FakeDriver(outputs, events),  # type: ignore[arg-type,return-value]
        teardown=lambda spec: _teardown(clients, events),
    )
    assert provider.data_at_risk(_prod()) == [
        f"file system {outputs['fsx']['id']}: FSx for Lustre PERSISTENT_2, 48000 GiB, mounted at /fsx",
        f"bucket {BUCKET}: 4 object versions, 0.0 GiB (checkpoints)",
    ]
    summary = provider.destroy(_prod())
    assert summary.removed() == {"VPC": ["prod-vpc"], "file system": ["prod-fsx"]}
    assert len(clients.fsx.describe_backups()["Backups"]) == 1 and _bucket_exists(clients)
