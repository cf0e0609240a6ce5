"""The versioned state: written whole or not at all, conditional on the version read; a
concurrent writer refused; foreign or damaged objects named with their version; histories never
mixed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from clusterforge.journal import Journal
from clusterforge.state.backend import Backend, Unreachable
from clusterforge.state.errors import ForeignState, StateConflict
from clusterforge.state.snapshot import StackState, read_meta


def _work(root: Path, nodes: int = 3, verdict: str = "pass") -> Path:
    """A stack folder as `up` leaves it: journal, a baseline, reports, the munge key, run logs."""
    journal = Journal("s", root)
    for i in range(1, nodes + 1):
        journal.mark_done(f"node-{i:03d}", "certified", verdict=verdict, run_id="r1")
        (root / "s" / "reports" / f"node-{i:03d}").mkdir(parents=True, exist_ok=True)
        (root / "s" / "reports" / f"node-{i:03d}" / "report.json").write_text(json.dumps({"node": i}))
    (root / "s" / "baselines").mkdir(exist_ok=True)
    (root / "s" / "baselines" / "local.json").write_text('{"schema": "clusterforge-baseline"}')
    (root / "s" / "munge.key").write_bytes(b"k" * 1024)
    (root / "s" / "runs" / "20261201").mkdir(parents=True)
    (root / "s" / "runs" / "20261201" / "ansible.log").write_text("not state")
    return root / "s"


def test_a_state_written_from_one_copy_is_read_whole_by_another(backend: Backend, tmp_path: Path) -> None:
    first = _work(tmp_path / "a")
    store = StackState(backend, "s")
    written = store.push(first, None, "invoke up")
    assert (
        written.serial == 1 and "journal.log" in written.objects and "baselines/local.json" in written.objects
    )
    assert not any(p.startswith("runs/") for p in written.objects)  # run logs stay with the runner
    assert backend.get("s/secrets/munge.key") is not None and "munge.key" not in written.objects
    second = tmp_path / "b" / "s"
    got = StackState(backend, "s").pull(second)
    assert got is not None and got.serial == 1
    assert Journal("s", tmp_path / "b").record("node-002").verdict == "pass"
    assert (second / "reports" / "node-003" / "report.json").read_text() == '{"node": 3}'
    assert (second / "munge.key").read_bytes() == b"k" * 1024 and (
        second / "munge.key"
    ).stat().st_mode & 0o777 == 0o600
    meta = read_meta(second)
    assert meta is not None and meta.serial == 1 and meta.lineage == written.lineage


def test_a_concurrent_writer_is_detected_and_refused(backend: Backend, tmp_path: Path) -> None:
    store = StackState(backend, "s")
    base = store.push(_work(tmp_path / "a"), None, "invoke up")
    one, two = tmp_path / "one" / "s", tmp_path / "two" / "s"
    read_one, read_two = store.pull(one), store.pull(two)  # both read serial 1
    Journal("s", one.parent).mark_failed("node-001", "certified", "one's change")
    Journal("s", two.parent).mark_failed("node-002", "certified", "two's change")
    assert store.push(one, read_one, "invoke certify (one)").serial == 2
    with pytest.raises(StateConflict) as err:
        store.push(two, read_two, "invoke certify (two)")
    text = str(err.value)
    assert "changed since this command read it" in text and "serial 1 then" in text
    assert "invoke certify (one)" in text and str(two) in text and "Nothing was overwritten" in text
    now = store.read()
    assert now is not None and now.serial == 2 and now.lineage == base.lineage
    check = tmp_path / "check" / "s"
    store.pull(check)
    assert Journal("s", check.parent).record("node-001").reason == "one's change"
    assert Journal("s", check.parent).record("node-002").reason == ""  # two's write never landed


def test_a_failed_write_leaves_the_previous_state_whole(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StackState(backend, "s")
    work = _work(tmp_path / "a")
    base = store.push(work, None, "invoke up")
    Journal("s", work.parent).mark_failed("node-001", "certified", "after the first write")
    real = backend.put

    def manifest_fails(key: str, data: bytes, **kw: object) -> str:
        if key.endswith("state.json"):
            raise Unreachable(f"state backend {backend.url}: connection reset")
        return real(key, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(backend, "put", manifest_fails)
    with pytest.raises(Unreachable):
        store.push(work, base, "invoke certify")
    monkeypatch.undo()
    now = store.read()
    assert now is not None and now.version == base.version  # the commit point was never passed
    again = tmp_path / "again" / "s"
    store.pull(again)
    assert Journal("s", again.parent).record("node-001").reason == ""
    assert store.push(work, base, "invoke state.push").serial == 2  # the kept copy writes later


def test_unchanged_files_are_not_uploaded_again(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StackState(backend, "s")
    work = _work(tmp_path / "a", nodes=20)
    base = store.push(work, None, "invoke up")
    assert store.push(work, base, "invoke up").version == base.version  # nothing changed: nothing written
    puts: list[str] = []
    real = backend.put

    def recording(key: str, data: bytes, **kw: Any) -> str:
        puts.append(key)
        return real(key, data, **kw)

    monkeypatch.setattr(backend, "put", recording)
    (work / "reports" / "node-007" / "report.json").write_text('{"node": "seven again"}')
    new = store.push(work, base, "invoke certify --nodes node-007")
    objects = [k for k in puts if "/objects/" in k]
    assert len(objects) == 1 and new.serial == 2  # one changed report: one object, then the manifest
    assert puts[-1] == "s/state.json"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "is not JSON"),
        (b'{"kind": "terraform-state"}', "is not a clusterforge state manifest (kind 'terraform-state'"),
        (b'{"kind": "clusterforge-state", "version": 99}', "has state format 99"),
        (
            b'{"kind": "clusterforge-state", "version": 1, "stack": "other"}',
            "holds the state of stack 'other'",
        ),
        (
            b'{"kind": "clusterforge-state", "version": 1, "stack": "s", "objects": {"../x": {}}}',
            "is damaged",
        ),
    ],
)
def test_a_foreign_or_damaged_manifest_is_refused_with_its_name_and_version(
    backend: Backend, tmp_path: Path, content: bytes, says: str
) -> None:
    version = backend.put("s/state.json", content)
    with pytest.raises(ForeignState) as err:
        StackState(backend, "s").pull(tmp_path / "w" / "s")
    text = str(err.value)
    assert says in text and backend.where("s/state.json") in text and f"(version {version})" in text
    blob = backend.get("s/state.json")
    assert blob is not None and blob.data == content  # never replaced


def test_a_damaged_object_is_refused_naming_it(backend: Backend, tmp_path: Path) -> None:
    store = StackState(backend, "s")
    written = store.push(_work(tmp_path / "a"), None, "invoke up")
    sha = written.objects["baselines/local.json"].sha256
    backend.put(f"s/objects/{sha}", gzip.compress(b"something else"))
    with pytest.raises(ForeignState) as err:
        store.pull(tmp_path / "b" / "s")
    assert f"s/objects/{sha}" in str(err.value) and "baselines/local.json" in str(err.value)
    assert "corrupt" in str(err.value)


def test_histories_are_never_mixed(backend: Backend, tmp_path: Path) -> None:
    store = StackState(backend, "s")
    store.push(_work(tmp_path / "ci"), None, "invoke up")
    mine = _work(tmp_path / "laptop", verdict="fail")  # another history of the same stack name
    with pytest.raises(StateConflict, match=r"holds another one: take the backend's with `invoke state.pull"):
        store.pull(mine)
    assert Journal("s", mine.parent).record("node-001").verdict == "fail"  # left as it was


def test_a_new_backend_does_not_silently_start_beside_a_local_history(
    backend: Backend, tmp_path: Path
) -> None:
    mine = _work(tmp_path / "laptop")
    with pytest.raises(StateConflict, match=r"move it there once with `invoke state.push --stack s`"):
        StackState(backend, "s").pull(mine)


def test_changes_left_unwritten_are_kept_and_refused_once_the_backend_moved_on(
    backend: Backend, tmp_path: Path
) -> None:
    store = StackState(backend, "s")
    base = store.push(_work(tmp_path / "a"), None, "invoke up")
    mine = tmp_path / "mine" / "s"
    store.pull(mine)
    Journal("s", mine.parent).mark_failed("node-001", "certified", "unwritten")
    assert store.pull(mine) is not None  # same serial: the unwritten change stays for the next write
    assert Journal("s", mine.parent).record("node-001").reason == "unwritten"
    other = tmp_path / "other" / "s"
    store.pull(other)
    Journal("s", other.parent).mark_done("node-002", "configured", run_id="r2")
    store.push(other, store.read(), "invoke up (other)")
    assert base.serial == 1
    with pytest.raises(
        StateConflict, match=r"has changes not written to .* \(made on serial 1\), and the backend moved on"
    ):
        store.pull(mine)
