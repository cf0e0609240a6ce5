"""`preflight` / `preview` tasks for AWS stacks: the failures a user meets first are one clear line."""

from __future__ import annotations

import pytest
from invoke import Context
from invoke.exceptions import Exit

from clusterforge.lock import stack_lock
from clusterforge.tasks import aws as aws_tasks


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask an instance metadata service


def test_preview_without_pulumi_cli_says_how_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(Exit) as err:
        aws_tasks.preview(Context(), stack="prod", skip_preflight=True)
    assert err.value.code == 2
    assert str(err.value.message).startswith("error: the Pulumi CLI is not installed")


def test_preflight_without_credentials_is_one_line(no_credentials: None):
    with pytest.raises(Exit) as err:
        aws_tasks.preflight(Context(), stack="dev")
    assert err.value.code == 1
    assert str(err.value.message).startswith("error: no AWS credentials found: run `aws sso login`")
    assert "\n" not in str(err.value.message)


def test_preview_refuses_a_local_stack():
    with pytest.raises(Exit) as err:
        aws_tasks.preview(Context(), stack="local", skip_preflight=True)
    assert err.value.code == 2 and "'local'" in str(err.value.message)


class DataProvider:
    """An AWS provider at the task's seam: nodes, data at risk, destroy."""

    def __init__(self) -> None:
        self.destroyed = False

    def nodes(self, spec):
        return []

    def data_at_risk(self, spec) -> list[str]:
        return ["file system fs-0123456789abcdef0: FSx for Lustre PERSISTENT_2, 48000 GiB, mounted at /fsx"]

    def destroy(self, spec):
        self.destroyed = True


def test_down_names_the_data_at_risk_before_asking(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from clusterforge.tasks import cluster

    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path))
    # prod keeps its state in S3 (docs/state.md): here the lock and state are the local folder's
    monkeypatch.setattr("clusterforge.state.changing", lambda spec, line, **kw: stack_lock(spec.stack, line))
    provider = DataProvider()
    monkeypatch.setattr("clusterforge.providers.get_provider", lambda _spec: provider)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    with pytest.raises(Exit) as err:
        cluster.down(Context(), stack="prod")
    assert "data: file system fs-0123456789abcdef0: FSx for Lustre PERSISTENT_2" in str(err.value.message)
    assert not provider.destroyed
