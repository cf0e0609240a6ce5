"""Event -> progress mapping, on ansible-runner events recorded from a real run (tests/data/ansible-runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.ansible.events import CENSORED, ProgressModel, redact, secret_forms

DATA = Path(__file__).resolve().parents[1] / "data" / "ansible-runner"


def events(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def fold(name: str, secrets: list[bytes] | None = None) -> ProgressModel:
    model = ProgressModel(secrets=secrets or [])
    for event in events(name):
        model.apply(event)
    return model


def test_counts_match_ansible_own_recap() -> None:
    model = fold("three-hosts-one-fails-one-unreachable.jsonl")
    stats = model.stats
    for host, progress in model.hosts.items():
        assert progress.ok == stats["ok"].get(host, 0), host
        assert progress.changed == stats["changed"].get(host, 0), host
        assert progress.failed == stats["failures"].get(host, 0), host
        assert progress.unreachable == stats["dark"].get(host, 0), host
        assert progress.skipped == stats["skipped"].get(host, 0), host
    assert set(model.hosts) == {"host-a", "host-b", "host-c"}


def test_failing_task_and_host_extracted() -> None:
    model = fold("three-hosts-one-fails-one-unreachable.jsonl")
    assert set(model.failures) == {"host-b", "host-c"}
    failed = model.failures["host-b"]
    assert failed.task == "Install the pinned package" and not failed.unreachable
    assert failed.message == "non-zero return code"
    assert failed.render() == "TASK [Install the pinned package] failed on host-b: non-zero return code"
    dark = model.failures["host-c"]
    assert dark.unreachable and dark.task == "Write a marker file" and "Connection refused" in dark.message
    assert not model.hosts["host-a"].broken and model.hosts["host-b"].broken
    assert model.hosts["host-a"].changed_tasks == ["Write a marker file"]


def test_current_task_follows_runner_on_start() -> None:
    model = ProgressModel()
    seen: list[tuple[str, str]] = []
    for event in events("three-hosts-one-fails-one-unreachable.jsonl"):
        host = model.apply(event)
        if host and event["event"] == "runner_on_start":
            seen.append((host, model.hosts[host].task))
    assert ("host-a", "After the failure") in seen
    assert ("host-b", "After the failure") not in seen  # host-b stopped at its failure
    assert model.hosts["host-b"].task == "Install the pinned package"


def test_converged_rerun_reports_zero_changes() -> None:
    model = fold("rerun-converged-one-host.jsonl")
    assert set(model.hosts) == {"host-a"}
    assert model.changed_total() == 0 and not model.failures and model.hosts["host-a"].ok == 4


def test_no_log_result_is_censored_in_recording() -> None:
    text = (DATA / "three-hosts-one-fails-one-unreachable.jsonl").read_text()
    assert "s3cr3t-value" not in text  # Ansible's no_log did its job
    assert "no_log: true" in text


def test_known_secret_is_redacted_from_failure_line() -> None:
    recorded = events("three-hosts-one-fails-one-unreachable.jsonl")
    failed = next(e for e in recorded if e["event"] == "runner_on_failed")
    # the same failure, as if the task had printed the munge key on stderr
    leak = json.loads(json.dumps(failed))
    leak["event_data"]["res"]["msg"] = ""
    key = b"0123456789abcdef-munge-key-bytes"
    leak["event_data"]["res"]["stderr"] = f"cannot read key {key.decode()}"
    model = ProgressModel(secrets=[key])
    model.apply(leak)
    assert key.decode() not in model.failures["host-b"].message
    assert CENSORED in model.failures["host-b"].message


@pytest.mark.parametrize("form", ["raw", "base64", "hex"])
def test_redact_every_form(form: str) -> None:
    key = bytes(range(256))[:64]  # binary, like a real munge key
    forms = secret_forms([key])
    import base64

    printed = {"base64": base64.b64encode(key).decode(), "hex": key.hex(), "raw": "x"}[form]
    if form == "raw":
        text_key = b"plain-text-secret-value"
        forms = secret_forms([text_key])
        printed = text_key.decode()
    assert redact(f"before {printed} after", forms) == f"before {CENSORED} after"
