"""The backends obey one set of rules: conditional create, compare-and-swap, conditional delete;
and one that cannot be reached says which it is and what to do."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from clusterforge.state.backend import Backend, PreconditionFailed, Unreachable
from clusterforge.state.fsdir import DirectoryBackend
from clusterforge.state.s3 import S3Backend


def test_create_only_if_absent(backend: Backend) -> None:
    version = backend.put("s/lock.json", b"one", if_absent=True)
    with pytest.raises(PreconditionFailed):
        backend.put("s/lock.json", b"two", if_absent=True)
    blob = backend.get("s/lock.json")
    assert blob is not None and blob.data == b"one" and blob.version == version


def test_replace_only_the_version_read(backend: Backend) -> None:
    first = backend.put("s/state.json", b"serial 1")
    second = backend.put("s/state.json", b"serial 2", if_match=first)
    with pytest.raises(PreconditionFailed):  # a writer that read serial 1 comes late
        backend.put("s/state.json", b"serial 2 from another runner", if_match=first)
    blob = backend.get("s/state.json")
    assert blob is not None and blob.data == b"serial 2" and blob.version == second
    with pytest.raises(PreconditionFailed):  # If-Match on an object that is not there
        backend.put("s/other.json", b"x", if_match=first)


def test_delete_only_the_version_read(backend: Backend) -> None:
    first = backend.put("s/lock.json", b"mine")
    backend.put("s/lock.json", b"taken over", if_match=first)
    with pytest.raises(PreconditionFailed):
        backend.delete("s/lock.json", if_match=first)
    assert backend.get("s/lock.json") is not None
    backend.delete("s/lock.json")
    assert backend.get("s/lock.json") is None
    backend.delete("s/lock.json")  # absent is fine without a condition


def test_list_names_keys_as_get_takes_them(backend: Backend) -> None:
    for key in ("a/objects/1", "a/objects/2", "a/state.json", "b/state.json"):
        backend.put(key, b"x")
    assert backend.list("a/objects/") == ["a/objects/1", "a/objects/2"]
    assert backend.list("c/") == []


def test_a_missing_folder_is_named_and_never_created(tmp_path: Path) -> None:
    gone = tmp_path / "not-mounted" / "state"
    backend = DirectoryBackend(gone)
    with pytest.raises(Unreachable) as err:
        backend.check()
    assert str(gone) in str(err.value) and "mkdir -p" in str(err.value) and "mounted" in str(err.value)
    with pytest.raises(Unreachable):
        backend.put("s/lock.json", b"x", if_absent=True)
    assert not gone.exists()


def test_secrets_are_the_owners_alone_on_a_shared_folder(tmp_path: Path) -> None:
    backend = DirectoryBackend(tmp_path)
    backend.put("s/secrets/munge.key", b"k" * 32)
    backend.put("s/state.json", b"{}")
    assert (tmp_path / "s" / "secrets" / "munge.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "s" / "state.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.slow
def test_an_s3_endpoint_that_does_not_answer_is_named(
    fake_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(Unreachable) as err:
        S3Backend("s3://cf-state/prod", "us-east-1").check()
    assert "state backend s3://cf-state/prod" in str(err.value) and "cannot be reached" in str(err.value)


@pytest.mark.slow
def test_a_missing_bucket_and_missing_credentials_are_named(
    s3_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Unreachable, match=r"bucket 'no-such-bucket' does not exist"):
        S3Backend("s3://no-such-bucket/prod", "us-east-1").check()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(Unreachable, match="no usable AWS credentials"):
        S3Backend(s3_url, "us-east-1").check()
