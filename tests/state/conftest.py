"""Backends for the state tests: a folder (fast), and S3 as moto's server on 127.0.0.1 (slow).

moto 5.2's server checks If-None-Match / If-Match and then writes, as two steps with nothing
held between them (moto/s3/responses.py ``put_object``); S3 itself decides each conditional write
atomically (one wins, the other gets 412, or 409 to retry: Amazon S3 User Guide, conditional
writes). Two processes racing 300 times on unpatched moto here never both won (the window is
short under the GIL), but nothing guarantees it, so the fixture gives the stand-in S3's rule by
serialising moto's object writes and deletes: a race test then fails only for our own code."""

from __future__ import annotations

import functools
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterforge.state.backend import Backend
from clusterforge.state.fsdir import DirectoryBackend
from tests.fixtures.aws import running_moto

BUCKET = "cf-state-test"


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake keys and no config files: nothing here can reach or use a real account."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _atomic(method: Callable[..., Any], lock: threading.Lock) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    return wrapper


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    from moto.s3.responses import S3Response

    lock = threading.Lock()
    saved = {name: getattr(S3Response, name) for name in ("put_object", "delete_object")}
    for name, method in saved.items():
        setattr(S3Response, name, _atomic(method, lock))
    try:
        with running_moto() as url:
            yield url
    finally:
        for name, method in saved.items():
            setattr(S3Response, name, method)


@pytest.fixture
def s3_url(moto_server: str, fake_aws: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the loopback S3; boto3 reaches it through AWS_ENDPOINT_URL_S3."""
    import boto3

    urllib.request.urlopen(
        urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10
    ).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/clusters"


def make_backend(kind: str, where: str) -> Backend:
    """A backend object (a new one per process: the race tests build theirs after fork)."""
    if kind == "s3":
        from clusterforge.state.s3 import S3Backend

        return S3Backend(where, "us-east-1")
    return DirectoryBackend(Path(where))


@pytest.fixture(params=["dir", pytest.param("s3", marks=pytest.mark.slow)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, location) of an empty backend: a folder, or a bucket prefix on the loopback S3."""
    if request.param == "s3":
        return "s3", request.getfixturevalue("s3_url")
    folder = tmp_path / "shared-state"
    folder.mkdir()
    return "dir", str(folder)


@pytest.fixture
def backend(where: tuple[str, str]) -> Backend:
    return make_backend(*where)
