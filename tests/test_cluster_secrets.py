"""The munge key's store beside the workstation: an SSM SecureString on AWS (moto's SSM, in-process),
created once, read back by any runner; before/after a converge the local file follows it."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from clusterforge.cluster_secrets import SecretError, SsmKeyStore, after_converge, before_converge, key_store
from clusterforge.spec.loader import load_spec

STACKS = Path(__file__).resolve().parents[1] / "stacks"
pytestmark = pytest.mark.slow  # moto's in-process AWS


@pytest.fixture
def ssm(monkeypatch: pytest.MonkeyPatch):
    for var, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_EC2_METADATA_DISABLED", "true")):  # fmt: skip
        monkeypatch.setenv(var, value)
    with mock_aws():
        yield boto3.client("ssm", region_name="us-east-1")


def test_the_key_is_stored_once_as_a_secure_string_and_read_back(ssm, tmp_path: Path) -> None:
    store = SsmKeyStore(ssm, "prod")
    assert store.read() is None
    binary = bytes(range(256)) * 4  # mungekey(8) keys are binary
    assert store.create(binary) == binary
    param = ssm.get_parameter(Name="/clusterforge/prod/munge-key")["Parameter"]
    assert param["Type"] == "SecureString"
    # A second runner that raced to create one gets the first key, not its own.
    assert store.create(b"another key") == binary
    assert SsmKeyStore(ssm, "prod").read() == binary


def test_a_fresh_runner_writes_the_clusters_key_0600(ssm, tmp_path: Path) -> None:
    store = SsmKeyStore(ssm, "prod")
    store.create(b"the cluster's key")
    local = tmp_path / "prod" / "munge.key"
    assert "from SSM parameter /clusterforge/prod/munge-key" in before_converge(local, store)
    assert local.read_bytes() == b"the cluster's key" and local.stat().st_mode & 0o777 == 0o600


def test_an_existing_stacks_local_key_is_stored_on_the_next_converge(ssm, tmp_path: Path) -> None:
    store = SsmKeyStore(ssm, "prod")
    local = tmp_path / "munge.key"
    local.write_bytes(b"the key the cluster runs")
    before_converge(local, store)
    assert store.read() == b"the key the cluster runs"


def test_a_first_converges_key_is_stored_after_it(ssm, tmp_path: Path) -> None:
    store = SsmKeyStore(ssm, "prod")
    local = tmp_path / "munge.key"
    assert "converge reads the controller's" in before_converge(local, store)
    local.write_bytes(b"made by the role")
    assert after_converge(local, store).endswith("/clusterforge/prod/munge-key")
    assert store.read() == b"made by the role"
    assert after_converge(local, store) == ""


def test_a_local_key_that_differs_is_refused(ssm, tmp_path: Path) -> None:
    store = SsmKeyStore(ssm, "prod")
    store.create(b"cluster")
    local = tmp_path / "munge.key"
    local.write_bytes(b"mine")
    with pytest.raises(SecretError, match="is not the cluster's munge key"):
        before_converge(local, store)
    assert local.read_bytes() == b"mine"


def test_only_aws_stacks_have_a_store() -> None:
    prod, _ = load_spec(STACKS / "prod.yaml")
    local, _ = load_spec(STACKS / "local.yaml")
    made: list[tuple[str, str]] = []
    store = key_store(prod, client=lambda service, region: made.append((service, region)) or object())
    assert isinstance(store, SsmKeyStore) and store.name == "/clusterforge/prod/munge-key"
    assert made == [("ssm", "us-east-1")]
    assert key_store(local) is None
