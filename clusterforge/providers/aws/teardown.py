"""What `invoke down` does with an AWS stack's data: say what would be lost, take a final FSx
backup, and decide the checkpoint bucket's fate only on a typed answer.

`pulumi destroy` alone loses the FSx for Lustre file system (no backup is taken: pulumi-aws's
``LustreFileSystem.skip_final_backup`` "Defaults to `true`", and must be set in an update before
the delete to matter) and then fails on a versioned, non-empty
bucket (``force_destroy=False``). So the program keeps the checkpoint bucket out of the destroy
(``retain_on_delete``) and this module, around the destroy:

1. lists the data at risk: the file system (id, size, type) and the bucket (object versions and
   bytes, from ListObjectVersions, every page);
2. backs the file system up first (FSx CreateBackup, waited until AVAILABLE), unless the spec
   says ``storage.fsx_lustre.backup_on_destroy: false``; user-initiated backups outlive the file
   system ("Protecting your data with backups", FSx for Lustre user guide); scratch file
   systems cannot be backed up, and that is said;
3. after the destroy, deletes the bucket only when the person types its name; otherwise leaves
   it, and says so with the command that would delete it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clusterforge.spec.models import ClusterSpec
from clusterforge.waiting import PausedTime, wait_until

BACKUP_POLL_SECONDS = 30
BACKUP_TIMEOUT_SECONDS = 6 * 3600  # a large file system's first backup takes hours
FINAL_BACKUP_TAG = "clusterforge:final-backup"


class TeardownError(Exception):
    """A step that protects data failed; nothing was destroyed after it. The message says why."""


@dataclass(frozen=True)
class TeardownClients:
    fsx: Any
    s3: Any


def make_teardown_clients(
    region: str, endpoint_url: str | None = None, session: Any = None
) -> TeardownClients:
    import boto3

    session = session or boto3.session.Session()
    kw = {"region_name": region, "endpoint_url": endpoint_url}
    return TeardownClients(fsx=session.client("fsx", **kw), s3=session.client("s3", **kw))


@dataclass(frozen=True)
class DataAtRisk:
    kind: str  # "file system" | "bucket"
    name: str
    detail: str
    objects: int = 0  # bucket: object versions and delete markers

    def render(self) -> str:
        return f"{self.kind} {self.name}: {self.detail}"


def _gib(size: float) -> str:
    return f"{size / 2**30:.1f} GiB"


def bucket_contents(s3: Any, bucket: str) -> tuple[int, int]:
    """(object versions + delete markers, bytes) over every page of ListObjectVersions."""
    count = size = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        versions = page.get("Versions", [])
        count += len(versions) + len(page.get("DeleteMarkers", []))
        size += sum(v.get("Size", 0) for v in versions)
    return count, size


def data_at_risk(outputs: Mapping[str, Any], clients: TeardownClients) -> list[DataAtRisk]:
    out = []
    fsx = outputs.get("fsx") or {}
    if fsx.get("id"):
        (fs,) = clients.fsx.describe_file_systems(FileSystemIds=[fsx["id"]])["FileSystems"]
        kind = (fs.get("LustreConfiguration") or {}).get("DeploymentType", "?")
        out.append(
            DataAtRisk(
                "file system",
                fsx["id"],
                f"FSx for Lustre {kind}, {fs.get('StorageCapacity')} GiB, mounted at {fsx.get('mount_point')}",
            )
        )
    bucket = outputs.get("bucket")
    if bucket:
        count, size = bucket_contents(clients.s3, bucket)
        out.append(
            DataAtRisk(
                "bucket", bucket, f"{count} object versions, {_gib(size)} (checkpoints)", objects=count
            )
        )
    return out


def final_backup(
    clients: TeardownClients,
    fs_id: str,
    stack: str,
    sleep: Callable[[float], None] = time.sleep,
    timeout_s: float = BACKUP_TIMEOUT_SECONDS,
) -> str:
    """A user-initiated backup of ``fs_id``, waited until AVAILABLE; its id."""
    backup = clients.fsx.create_backup(
        FileSystemId=fs_id,
        Tags=[{"Key": "clusterforge:stack", "Value": stack}, {"Key": FINAL_BACKUP_TAG, "Value": "true"}],
    )["Backup"]
    backup_id = backup["BackupId"]

    def described() -> dict[str, Any]:
        backups: list[dict[str, Any]] = clients.fsx.describe_backups(BackupIds=[backup_id])["Backups"]
        (latest,) = backups
        return latest

    def ended(b: dict[str, Any]) -> bool:
        return b.get("Lifecycle") in ("AVAILABLE", "FAILED", "DELETED")

    # The timeout counts the polls' pauses (an injected sleep may not wait at all).
    waited = PausedTime(sleep)
    if not ended(backup):
        backup = wait_until(
            described,
            ended,
            timeout_s=timeout_s,
            poll_s=BACKUP_POLL_SECONDS,
            pause_first=True,
            clock=waited.clock,
            sleep=waited.sleep,
        )
    state = backup.get("Lifecycle")
    if state in ("FAILED", "DELETED"):
        reason = (backup.get("FailureDetails") or {}).get("Message", "no reason given")
        raise TeardownError(f"final backup {backup_id} of {fs_id} is {state} ({reason}); nothing destroyed")
    if state != "AVAILABLE":
        raise TeardownError(
            f"final backup {backup_id} of {fs_id} is still {state} after {waited.elapsed / 3600:.1f} h; nothing "
            "destroyed: run `invoke down` again once it is AVAILABLE (aws fsx describe-backups)"
        )
    return backup_id


def delete_bucket(s3: Any, bucket: str) -> int:
    """Every object version and delete marker, then the bucket; how many objects went."""
    gone = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[start : start + 1000], "Quiet": True})
        gone += len(keys)
    s3.delete_bucket(Bucket=bucket)
    return gone


@dataclass
class Teardown:
    clients: TeardownClients
    ask: Callable[[str], str]  # a typed answer; returns "" where nobody can answer
    say: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep

    def run(self, spec: ClusterSpec, outputs: Mapping[str, Any], destroy: Callable[[], Any]) -> Any:
        """Protect the data, then ``destroy()``, then the bucket; what ``destroy`` returned."""
        risks = data_at_risk(outputs, self.clients)
        for risk in risks:
            self.say(f"data: {risk.render()}")
        fsx = spec.storage.fsx_lustre
        for risk in (r for r in risks if r.kind == "file system"):
            if fsx is not None and not fsx.deployment_type.startswith("PERSISTENT"):
                self.say(
                    f"{risk.name} is {fsx.deployment_type}: scratch file systems cannot be backed up; its data goes"
                )
            elif fsx is not None and not fsx.backup_on_destroy:
                self.say(
                    f"no final backup of {risk.name} (storage.fsx_lustre.backup_on_destroy: false): its data goes"
                )
            else:
                self.say(f"taking a final backup of {risk.name} before anything is destroyed ...")
                backup = final_backup(self.clients, risk.name, spec.stack, self.sleep)
                self.say(
                    f"final backup {backup} of {risk.name} is AVAILABLE; it outlives the stack (restore: "
                    f"aws fsx create-file-system --backup-id {backup} ...; delete: aws fsx delete-backup --backup-id {backup})"
                )
        gone = destroy()
        for risk in (r for r in risks if r.kind == "bucket"):
            self._bucket(risk)
        return gone

    def _bucket(self, risk: DataAtRisk) -> None:
        answer = self.ask(
            f"Checkpoint bucket {risk.name} holds {risk.detail}. Type its name to delete it with every object "
            "version, or press Enter to keep it: "
        )
        if answer.strip() == risk.name:
            count = delete_bucket(self.clients.s3, risk.name)
            self.say(f"deleted bucket {risk.name} and its {count} object versions")
        else:
            self.say(
                f"kept bucket {risk.name} ({risk.detail}); the stack no longer manages it. Delete it later with "
                f"`aws s3api delete-objects` for every version, then `aws s3 rb s3://{risk.name}`"
            )
