"""Journal: appended changes, atomic compaction, resume, reset when the machine behind a node changes."""

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


def test_a_change_appends_one_line_and_never_rewrites_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "configured")
    rewrites: list[Path] = []
    real = jmod.write_atomic

    def recording(path: Path, text: str) -> None:
        rewrites.append(path)
        real(path, text)

    monkeypatch.setattr(jmod, "write_atomic", recording)
    before = j.log_path.read_text().count("\n")
    for i in range(50):
        j.annotate("n", certifying=f"run-{i}")
    assert j.log_path.read_text().count("\n") == before + 50
    assert rewrites == []  # under the compaction size nothing is rewritten, however many changes
    assert Journal("t", root=tmp_path).record("n").certifying == "run-49"


def test_the_bytes_written_grow_linearly_with_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh `up` of 2N nodes writes about twice what N nodes write (the old journal rewrote the
    whole file per change: four times). Compaction is made small here so that it happens."""
    monkeypatch.setattr(jmod, "COMPACT_MIN_BYTES", 2_000)
    written = {"bytes": 0}
    real_write, real_atomic = jmod.os.write, jmod.write_atomic

    def count_write(fd: int, data: bytes) -> int:
        written["bytes"] += len(data)
        return real_write(fd, data)

    def count_atomic(path: Path, text: str) -> None:
        written["bytes"] += len(text)
        real_atomic(path, text)

    monkeypatch.setattr(jmod.os, "write", count_write)
    monkeypatch.setattr(jmod.os, "fsync", lambda fd: None)  # bytes are counted here, not disk flushes
    monkeypatch.setattr(jmod, "write_atomic", count_atomic)

    def fresh_up(count: int) -> int:
        written["bytes"] = 0
        j = Journal(f"s{count}", root=tmp_path)
        for i in range(count):
            name = f"gpu-{i:04d}"
            j.observe(name, f"i-{i}")
            j.record_applied(name, {"inputs": {f"k{x}": "v" * 40 for x in range(5)}})
            j.mark_done(name, "configured")
            j.mark_done(name, "certified", verdict="pass")
        assert len(Journal(f"s{count}", root=tmp_path).nodes) == count
        return written["bytes"]

    small, large = fresh_up(40), fresh_up(160)
    assert large < 4 * small * 1.25, (small, large)  # linear (x4 nodes), far from quadratic (x16)


def test_load_replays_the_log_over_the_snapshot_across_compactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jmod, "COMPACT_MIN_BYTES", 1_000)
    monkeypatch.setattr(jmod.os, "fsync", lambda fd: None)
    j = Journal("t", root=tmp_path)
    for i in range(100):
        j.mark_done(f"n{i % 7}", "configured", run_id=f"r{i}")
    j.set_section("rollout", {"batch": 3})
    snapshot = json.loads(j.path.read_text())
    assert snapshot["generation"] >= 2  # compacted more than once
    again = Journal("t", root=tmp_path)
    assert {n: again.record(n).run_id for n in again.nodes} == {n: j.record(n).run_id for n in j.nodes}
    assert again.section("rollout") == {"batch": 3}


def test_a_second_journal_object_loses_nothing_to_a_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of one command open their own Journal: a compaction by one keeps the other's lines."""
    monkeypatch.setattr(jmod, "COMPACT_MIN_BYTES", 1_000)
    a, b = Journal("t", root=tmp_path), Journal("t", root=tmp_path)
    a.mark_done("from-a", "configured")
    b.mark_done("from-b", "configured")
    for i in range(40):
        a.annotate("from-a", run_id=f"r{i}")  # compacts several times
    b.mark_done("from-b", "certified", verdict="pass")
    c = Journal("t", root=tmp_path)
    assert c.is_done("from-b", "certified") and c.record("from-a").run_id == "r39"
    assert json.loads(c.path.read_text())["generation"] >= 2


def test_a_torn_last_line_is_dropped_and_the_next_change_appends_cleanly(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "configured")
    with open(j.log_path, "a") as handle:
        handle.write('{"node":"n","set":{"verdict":"pa')  # a crash in the middle of an append
    k = Journal("t", root=tmp_path)
    assert k.is_done("n", "configured") and k.record("n").verdict == ""
    k.mark_done("n", "certified", verdict="pass")
    assert Journal("t", root=tmp_path).record("n").verdict == "pass"
    assert all(json.loads(line) for line in k.log_path.read_text().splitlines())


def test_crash_during_compaction_keeps_the_old_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "configured")
    j.compact()
    before = j.path.read_text()
    j.mark_done("n", "certified", verdict="pass")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(jmod.os, "replace", boom)
    with pytest.raises(OSError):
        j.compact()
    monkeypatch.undo()
    assert j.path.read_text() == before  # the snapshot is the old one, whole
    assert sorted(p.name for p in j.dir.iterdir()) == ["journal.json", "journal.lock", "journal.log"]
    assert Journal("t", root=tmp_path).record("n").verdict == "pass"  # the log still has it


def test_a_log_the_snapshot_already_holds_is_not_applied_twice(tmp_path: Path) -> None:
    """A crash after the snapshot's rename and before the log's reset: the old log is ignored."""
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "configured")
    old_log = j.log_path.read_text()
    j.compact()
    j.log_path.write_text(old_log + json.dumps({"node": "n", "set": {"verdict": "stale"}}) + "\n")
    k = Journal("t", root=tmp_path)
    assert k.record("n").verdict == ""
    k.annotate("n", reason="after")  # appends to a fresh log of the snapshot's generation
    assert Journal("t", root=tmp_path).record("n").reason == "after"


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


def test_an_unreadable_line_inside_the_log_is_named(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "configured")
    j.mark_done("n", "certified")
    lines = j.log_path.read_text().splitlines()
    lines[1] = "garbage"
    j.log_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match=r"journal.log:2: unreadable journal line"):
        Journal("t", root=tmp_path)


def test_an_unknown_field_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    with pytest.raises(TypeError, match="verdcit"):
        j.annotate("n", verdcit="pass")
    assert "n" not in Journal("t", root=tmp_path).nodes


def test_reconfiguring_keeps_the_certification(tmp_path: Path) -> None:
    j = Journal("t", root=tmp_path)
    j.mark_done("n", "certified", verdict="pass")
    j.mark_done("n", "configured")  # a converged second `up`
    assert j.is_done("n", "certified")


def test_appending_to_a_list_section_writes_one_short_line_and_survives_reload(tmp_path: Path) -> None:
    """Strikes (clusterforge.health) are appended, never the whole list rewritten per strike: a fleet
    that fails at once must not write N^2 bytes. An expired oldest entry rewrites the kept ones once."""
    j = Journal("s", tmp_path)
    for i in range(200):
        j.append_to_section("strikes", {"n": i, "pad": "x" * 50})
    lines = j.log_path.read_text().splitlines()
    assert max(len(line) for line in lines[1:]) < 200  # each append is its own short line
    assert [e["n"] for e in Journal("s", tmp_path).section("strikes")] == list(range(200))
    j.append_to_section("strikes", {"n": 200}, keep=lambda e: e["n"] >= 150)  # the oldest expired
    assert [e["n"] for e in Journal("s", tmp_path).section("strikes")] == list(range(150, 201))
    j.compact()
    assert len(Journal("s", tmp_path).section("strikes")) == 51
