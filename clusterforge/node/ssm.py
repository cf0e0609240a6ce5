"""Run one command on an EC2 node through SSM Run Command, for nodes Ansible reaches with
``amazon.aws.aws_ssm`` (``provider.connection: ssm``: no SSH anywhere).

``SendCommand`` with the ``AWS-RunShellScript`` document runs the command as root; the answer is
read with ``GetCommandInvocation`` until it is final. From botocore's SSM model (service-2.json,
2014-11-06): ``GetCommandInvocation`` answers ``InvocationDoesNotExist`` for a moment after the send
(its ``CommandExecuted`` waiter retries on it); statuses Pending, InProgress, Delayed are not final;
``ResponseCode`` is the script's exit code ("-1 ... hasn't started"); ``StandardOutputContent`` holds
"the first 24,000 characters" and ``StandardErrorContent`` "the first 8,000", the whole text going to
S3 when the command names a bucket (``StandardOutputUrl``). The script's own limit is the document's
``executionTimeout``; ``TimeoutSeconds`` only bounds delivery.

The runner has the shape admission, liveness and the drift probe use: ``(argv, stdin) -> (rc, stdout,
stderr)``; a command still running at ``timeout_s`` is cancelled and answers 124, like ``timeout(1)``.
"""

from __future__ import annotations

import base64
import shlex
import time
from collections.abc import Callable
from functools import cache
from typing import Any
from urllib.parse import urlparse

# The ansible_connection names of the SSM connection plugin.
SSM_CONNECTIONS = ("amazon.aws.aws_ssm", "community.aws.aws_ssm", "aws_ssm")
STDOUT_LIMIT, STDERR_LIMIT = 24_000, 8_000
NOT_FINAL = ("Pending", "InProgress", "Delayed", "Cancelling")
POLL_S = 1.0
# SendCommand's TimeoutSeconds floor ("30 ... 2592000"): the command must have started by then.
DELIVERY_S = 30

ClientFactory = Callable[[str], Any]  # region -> boto3 SSM client (s3 for long output: same region)


@cache
def _client(service: str, region: str) -> Any:
    """One boto3 client per service and region for the process (they are thread-safe, and admission
    makes a runner per call)."""
    import boto3

    return boto3.client(service, region_name=region)


def boto3_ssm(region: str) -> Any:
    return _client("ssm", region)


def boto3_s3(region: str) -> Any:
    return _client("s3", region)


def script_of(argv: list[str], stdin: str | None) -> str:
    """The shell line Run Command executes: argv quoted, stdin fed through base64 (no quoting issues)."""
    line = shlex.join(argv)
    if stdin is None:
        return line
    data = base64.b64encode(stdin.encode()).decode()
    return f"printf %s {data} | base64 -d | {line}"


class SsmRunner:
    def __init__(
        self,
        instance_id: str,
        region: str,
        timeout_s: float = 120.0,
        bucket: str = "",
        ssm: ClientFactory = boto3_ssm,
        s3: ClientFactory = boto3_s3,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance_id, self.region, self.timeout_s, self.bucket = instance_id, region, timeout_s, bucket
        self._ssm_factory, self._s3_factory = ssm, s3
        self._ssm: Any = None
        self.sleep, self.clock = sleep, clock

    @property
    def ssm(self) -> Any:
        if self._ssm is None:
            self._ssm = self._ssm_factory(self.region)
        return self._ssm

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        try:
            return self._run(argv, stdin)
        except Exception as exc:  # noqa: BLE001 - a transport failure is an answer, never a crash
            name = type(exc).__name__
            return 255, "", f"SSM Run Command on {self.instance_id} failed: {name}: {exc}"

    def _run(self, argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        limit = max(1, int(self.timeout_s))
        send: dict[str, Any] = {
            "InstanceIds": [self.instance_id],
            "DocumentName": "AWS-RunShellScript",
            "Comment": "clusterforge: " + " ".join(argv)[:90],
            "TimeoutSeconds": max(DELIVERY_S, limit),
            "Parameters": {"commands": [script_of(argv, stdin)], "executionTimeout": [str(limit)]},
        }
        if self.bucket:
            send.update(OutputS3BucketName=self.bucket, OutputS3KeyPrefix="clusterforge-run-command")
        command_id = self.ssm.send_command(**send)["Command"]["CommandId"]
        deadline = self.clock() + limit + DELIVERY_S
        while True:
            try:
                inv = self.ssm.get_command_invocation(CommandId=command_id, InstanceId=self.instance_id)
            except self.ssm.exceptions.InvocationDoesNotExist:
                inv = {"Status": "Pending"}
            status = inv.get("Status", "")
            if status not in NOT_FINAL:
                return self._answer(inv)
            if self.clock() >= deadline:
                self.ssm.cancel_command(CommandId=command_id, InstanceIds=[self.instance_id])
                return 124, "", f"timed out after {self.timeout_s:g} s over SSM: {' '.join(argv)}"
            self.sleep(POLL_S)

    def _answer(self, inv: dict[str, Any]) -> tuple[int, str, str]:
        status, details = inv.get("Status", ""), inv.get("StatusDetails", "")
        out = inv.get("StandardOutputContent") or ""
        err = inv.get("StandardErrorContent") or ""
        if len(out) >= STDOUT_LIMIT:
            out = self._full(inv.get("StandardOutputUrl", ""), out, "stdout")
        if len(err) >= STDERR_LIMIT:
            err = self._full(inv.get("StandardErrorUrl", ""), err, "stderr")
        code = int(inv.get("ResponseCode", -1))
        if status == "Success":
            return code if code >= 0 else 0, out, err
        if status == "Failed" and code > 0:
            return code, out, err  # the script ran and exited non-zero: its own code
        if status == "TimedOut" or details == "ExecutionTimedOut":
            return 124, out, (err + f"\nSSM: {details or status}").strip()
        return (
            255,
            out,
            (err + f"\nSSM: the command did not run on {self.instance_id}: {details or status}").strip(),
        )

    def _full(self, url: str, cut: str, what: str) -> str:
        """The whole output from the command's S3 copy; the cut text (and why) without one."""
        parsed = urlparse(url)
        if not url or not self.bucket:
            return (
                cut
                + f"\n[clusterforge: {what} cut at SSM's limit; the node has no transfer bucket for the rest]"
            )
        # https://s3.<region>.amazonaws.com/<bucket>/<key> (path style, as Run Command reports it)
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        body = self._s3_factory(self.region).get_object(Bucket=bucket, Key=key)["Body"].read()
        return str(body.decode(errors="replace"))
