"""Journal: atomic writes, resume, reset when the machine behind a node changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterforge import journal as jmod
from clusterforge.journal import Journal, JournalError, write_atomic


def test_marks_persist_and_reload(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.observe("node-001", "cid-1")
    j.mark_done("node-001", "configured")
    j.mark_done("node-001", "certified", verdict="pass", profile="local")
    again = Journal("t", root=tmp_path)
    rec = again.record("node-001")
    assert rec.done == ["provisioned", "configured", "certified"]
    assert rec.verdict == "pass" and rec.profile == "local"
    assert again.is_done("node-001", "certified")
    assert not again.is_done("node-002", "provisioned")


def test_failure_forgets_the_failed_stage_and_later(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "certified", verdict="pass")
    j.mark_failed("n", "configured", "TASK [slurm : start] failed")
    rec = Journal("t", root=tmp_path).record("n")
    assert rec.done == ["provisioned"]
    assert rec.failed_stage == "configured" and "slurm" in rec.reason
    assert j.is_done("n", "provisioned") and not j.is_done("n", "configured")
    j.mark_done("n", "configured")
    assert j.is_done("n", "configured") and j.record("n").reason == ""


def test_replaced_machine_resets_the_record(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    assert j.observe("n", "cid-1") is False
    j.mark_done("n", "certified", verdict="pass")
    assert j.observe("n", "cid-1") is False
    assert j.is_done("n", "certified")
    assert j.observe("n", "cid-2") is True
    assert j.record("n").done == []


def test_invalidate_for_recertify(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "certified")
    j.invalidate("n", "certified")
    assert j.record("n").done == ["provisioned", "configured"]


def test_crash_during_write_keeps_the_old_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "configured")
    before = j.path.read_text()

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(jmod.os, "replace", boom)
    with pytest.raises(OSError):
        j.mark_done("n", "certified")
    assert j.path.read_text() == before
    assert [p.name for p in j.dir.iterdir()] == ["journal.json"]  # no temporary left behind


def test_write_atomic_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a" / "f.json"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two"
    assert os.listdir(target.parent) == ["f.json"]


def test_unreadable_journal_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "journal.json").write_text("{half")
    with pytest.raises(JournalError, match="move it away"):
        Journal("t", root=tmp_path)
    (tmp_path / "t" / "journal.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(JournalError, match="version 99"):
        Journal("t", root=tmp_path)


def test_reconfiguring_keeps_the_certification(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "certified", verdict="pass")
    j.mark_done("n", "configured")  # a converged second `up`
    assert j.is_done("n", "certified")
