"""A state backend in S3: ``s3://bucket/prefix``, for cloud stacks and CI runners.

Conditional writes are S3's own: ``If-None-Match: *`` creates an object only if the key is free,
``If-Match: <ETag>`` replaces (or deletes) it only if it is unchanged; a failed condition is
``412 Precondition Failed``, and a write racing another conditional write on the same key may get
``409 ConditionalRequestConflict``, which S3 says to retry (Amazon S3 User Guide, "How to prevent
object overwrites with conditional writes"; conditional deletes in general purpose buckets,
2025). This is what Terraform's S3 backend locks with since 1.10 (``use_lockfile``).

The bucket must exist (with versioning on, so an earlier state can be recovered by hand); the
runner needs s3:GetObject, s3:PutObject, s3:DeleteObject on ``prefix/*`` and s3:ListBucket on the
bucket. Endpoints follow boto3's configuration (``AWS_ENDPOINT_URL_S3`` reaches a local S3 such
as moto's server in the tests).
"""

from __future__ import annotations

import time
from typing import Any

from clusterforge.state.backend import Backend, Blob, PreconditionFailed, Unreachable

CONFLICT_RETRIES = 5  # 409 ConditionalRequestConflict: S3 asks for a retry


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (bucket, "some/prefix")."""
    rest = url[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


class S3Backend(Backend):
    def __init__(self, url: str, region: str | None = None, client: Any = None) -> None:
        self.bucket, self.prefix = parse_url(url)
        self.url = f"s3://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")
        self.region = region
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            config = Config(
                retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=5, read_timeout=60
            )
            # A session of its own: credentials are resolved now, not cached from earlier use in the process.
            self._client = boto3.session.Session(region_name=self.region).client("s3", config=config)
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, key: str, fn: Any, **kwargs: Any) -> Any:
        """One S3 call; errors become Unreachable or PreconditionFailed naming the object."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
            PartialCredentialsError,
        )

        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                return fn(Bucket=self.bucket, **kwargs)
            except (NoCredentialsError, PartialCredentialsError) as exc:
                raise Unreachable(
                    f"state backend {self.url}: no usable AWS credentials ({exc}); set AWS_PROFILE or assume "
                    "a role that may read and write the state bucket"
                ) from None
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code in ("PreconditionFailed",) or status == 412:
                    raise PreconditionFailed(
                        f"{self.where(key)}: changed since it was read ({what})"
                    ) from None
                if code == "ConditionalRequestConflict" or status == 409:
                    if attempt < CONFLICT_RETRIES:
                        time.sleep(0.1 * (attempt + 1))
                        continue
                    raise PreconditionFailed(f"{self.where(key)}: conflicting writes ({what})") from None
                if code in ("NoSuchKey", "404") or status == 404 and code != "NoSuchBucket":
                    raise KeyError(key) from None
                if code == "NoSuchBucket":
                    raise Unreachable(
                        f"state backend {self.url}: bucket {self.bucket!r} does not exist; create it once "
                        "(with versioning on) or fix state.backend in the spec"
                    ) from None
                if code in (
                    "AccessDenied",
                    "403",
                    "InvalidAccessKeyId",
                    "SignatureDoesNotMatch",
                    "ExpiredToken",
                ):
                    raise Unreachable(
                        f"state backend {self.url}: access denied ({code}) on {what} {key}; the runner's role "
                        f"needs s3:GetObject, s3:PutObject, s3:DeleteObject on {self.where('*')} and "
                        f"s3:ListBucket on {self.bucket}"
                    ) from None
                raise Unreachable(
                    f"state backend {self.url}: {what} {key} failed: {code or status}: {exc}"
                ) from None
            except BotoCoreError as exc:
                raise Unreachable(f"state backend {self.url}: cannot be reached ({exc})") from None
        raise AssertionError("unreachable")

    def check(self) -> None:
        self._call("list", "", self.client.list_objects_v2, Prefix=self._key(""), MaxKeys=1)

    def get(self, key: str) -> Blob | None:
        try:
            response = self._call("get", key, self.client.get_object, Key=self._key(key))
        except KeyError:
            return None
        return Blob(response["Body"].read(), str(response["ETag"]))

    def put(self, key: str, data: bytes, *, if_match: str | None = None, if_absent: bool = False) -> str:
        extra: dict[str, str] = {}
        if if_absent:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match
        try:
            response = self._call("put", key, self.client.put_object, Key=self._key(key), Body=data, **extra)
        except KeyError:  # If-Match on an object that is gone
            raise PreconditionFailed(f"{self.where(key)}: vanished since it was read") from None
        return str(response["ETag"])

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        extra = {"IfMatch": if_match} if if_match is not None else {}
        try:
            self._call("delete", key, self.client.delete_object, Key=self._key(key), **extra)
        except KeyError:
            if if_match is not None:
                raise PreconditionFailed(f"{self.where(key)}: vanished since it was read") from None

    def list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        token: dict[str, str] = {}
        strip = len(self._key(""))
        while True:
            page = self._call("list", prefix, self.client.list_objects_v2, Prefix=self._key(prefix), **token)
            keys += [str(o["Key"])[strip:] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return sorted(keys)
            token = {"ContinuationToken": str(page["NextContinuationToken"])}
