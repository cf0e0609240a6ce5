"""The baseline store: where it lives, what enters it (passing nodes only), bounds, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.catalog import load_hardware
from clusterforge.certify.fleet.baseline import (
    SCHEMA,
    Baseline,
    BaselineError,
    BaselineStore,
    Sample,
    read_baseline,
)
from clusterforge.certify.fleet.judge import judge_run
from clusterforge.certify.fleet.record import record_run
from tests.certify.fleet.fleet_sim import MATMUL, fleet, report

HW = load_hardware()
VERSIONS = {"local": {"slurm": "22.05.8"}}


def run(store: BaselineStore, reports: dict, run_id: str = "r1", keep: int = 50) -> dict[str, Path]:
    j = judge_run(reports, dict.fromkeys(reports, "local"), catalog=HW, baselines=store, versions=VERSIONS)
    return record_run(store, j, run_id=run_id, versions=VERSIONS, when="2026-12-01T00:00:00+00:00", keep=keep)


def test_the_store_lives_under_the_state_dir_and_writes_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path))
    store = BaselineStore("dev")
    written = run(store, fleet(5, sd=0.01))
    assert written == {"local": tmp_path / "dev" / "baselines" / "local.json"}
    assert sorted(p.name for p in store.dir.iterdir()) == ["local.json"]  # no temporary file left
    data = json.loads(written["local"].read_text())
    assert data["schema"] == SCHEMA and data["instance_type"] == "local" and data["stack"] == "dev"
    sample = data["metrics"]["matmul-burnin.rate"]["samples"][0]
    assert (
        sample["run"] == "r1"
        and sample["versions"] == {"slurm": "22.05.8"}
        and sample["node"] == "node-00001"
    )
    assert store.types() == ["local"]


def test_outliers_warned_and_failed_nodes_never_enter(tmp_path: Path) -> None:
    store = BaselineStore("dev", root=tmp_path)
    reports = fleet(8, sd=0.005, outliers={"node-00002": 70.0, "node-00003": 40.0})
    reports["node-00004"]["verdict"] = "fail"  # the node-side checks failed it
    run(store, reports)
    baseline = store.load("local")
    assert baseline is not None
    nodes = {s.node for s in baseline.metrics["matmul-burnin.rate"].samples}
    assert nodes == {"node-00001", "node-00005", "node-00006", "node-00007", "node-00008"}


def test_each_metric_keeps_its_last_k_samples_and_the_reference_is_their_median(tmp_path: Path) -> None:
    store = BaselineStore("dev", root=tmp_path)
    for k in range(4):
        run(store, fleet(3, sd=0.01, seed=k), run_id=f"r{k}", keep=5)
    samples = store.load("local").metrics["matmul-burnin.rate"].samples  # type: ignore[union-attr]
    assert [s.run for s in samples] == ["r2", "r2", "r3", "r3", "r3"]  # 3 per run, the oldest dropped
    ref = store.load("local").reference("matmul-burnin.rate", VERSIONS["local"])  # type: ignore[union-attr]
    assert ref is not None and ref.applies and ref.samples == 5
    assert ref.value == pytest.approx(sorted(s.value for s in samples)[2])


def test_a_later_small_run_is_judged_against_what_an_earlier_run_recorded(tmp_path: Path) -> None:
    store = BaselineStore("dev", root=tmp_path)
    run(store, fleet(6, sd=0.01))
    alone = {"solo": report("solo", matmul=[MATMUL * 0.25])}
    j = judge_run(alone, {"solo": "local"}, catalog=HW, baselines=store, versions=VERSIONS)
    m = next(x for x in j.nodes["solo"].metrics if x.metric == "matmul-burnin.rate")
    assert m.reference_kind == "baseline" and m.status == "fail"


def test_versions_decide_whether_a_baseline_applies() -> None:
    b = Baseline("local")
    b.add("m", "GB/s", True, Sample(10.0, "a", "r", "t", {"slurm": "23.02.1"}))
    b.add("m", "GB/s", True, Sample(12.0, "b", "r", "t", {"slurm": "22.05.8"}))
    same = b.reference("m", {"slurm": "22.05.8"})
    assert same is not None and same.applies and same.value == 12.0 and not same.other_versions
    other = b.reference("m", {"slurm": "24.05.1"})
    assert other is not None and not other.applies and "24.05.1 now" in other.other_versions
    assert b.reference("m", {"slurm": "24.05.1"}, across_versions=True).applies  # type: ignore[union-attr]
    assert b.reference("m", None).samples == 2  # type: ignore[union-attr]
    assert b.reference("absent", None) is None


def test_a_baseline_counts_only_for_the_share_it_was_measured_with() -> None:
    """A container node with half the CPU is half as fast, not slow: samples of another share (or
    of no fixed share, recorded before nodes had one) are never a reference, whatever the profile."""
    b = Baseline("local")
    b.add("m", "GFLOP/s", True, Sample(4.0, "a", "r1", "t", {"slurm": "22.05.8"}, "0.5 CPU, 2048 MiB"))
    b.add("m", "GFLOP/s", True, Sample(9.0, "b", "r0", "t", {"slurm": "22.05.8"}))  # no share recorded
    same = b.reference("m", {"slurm": "22.05.8"}, share="0.5 CPU, 2048 MiB")
    assert same is not None and same.applies and same.value == 4.0 and same.samples == 1
    other = b.reference("m", {"slurm": "22.05.8"}, across_versions=True, share="0.375 CPU, 2048 MiB")
    assert other is not None and not other.applies
    assert (
        other.other_share.startswith("measured with ")
        and "these nodes have 0.375 CPU, 2048 MiB" in other.other_share
    )
    only_old = Baseline("local")
    only_old.add("m", "GFLOP/s", True, Sample(9.0, "b", "r0", "t"))
    old = only_old.reference("m", None, share="0.5 CPU, 2048 MiB")
    assert old is not None and not old.applies and "measured with no fixed share" in old.other_share
    assert b.reference("m", None).samples == 2  # type: ignore[union-attr]  # share None: not compared


def test_the_judge_says_a_baseline_of_another_share_is_not_a_reference(tmp_path: Path) -> None:
    store = BaselineStore("dev", root=tmp_path)
    j = judge_run(fleet(6, sd=0.01), dict.fromkeys(fleet(6, sd=0.01), "local"), catalog=HW, baselines=store)
    record_run(store, j, run_id="r1", versions=VERSIONS, shares={"local": "0.5 CPU, 2048 MiB"})
    assert {s.share for s in store.load("local").metrics["matmul-burnin.rate"].samples} == {
        "0.5 CPU, 2048 MiB"
    }  # type: ignore[union-attr]
    alone = {"solo": report("solo", matmul=[MATMUL * 0.25])}
    now = {"local": "0.375 CPU, 2048 MiB"}
    j = judge_run(alone, {"solo": "local"}, catalog=HW, baselines=store, versions=VERSIONS, shares=now)
    m = next(x for x in j.nodes["solo"].metrics if x.metric == "matmul-burnin.rate")
    assert (
        m.reference_kind == "floor" and m.status == "pass"
    )  # over the floor; the baseline is not its yardstick
    assert "baseline of another share not a reference (measured with 0.5 CPU, 2048 MiB" in m.note
    assert any(
        n.startswith("local: baseline of another share not a reference") for n in j.nodes["solo"].notes
    )
    same = judge_run(alone, {"solo": "local"}, catalog=HW, baselines=store, versions=VERSIONS,
                     shares={"local": "0.5 CPU, 2048 MiB"})  # fmt: skip
    m = next(x for x in same.nodes["solo"].metrics if x.metric == "matmul-burnin.rate")
    assert m.reference_kind == "baseline" and m.status == "fail"


GOOD = {"schema": SCHEMA, "schema_version": 1, "instance_type": "local", "stack": "x", "metrics": {}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        (json.dumps([1, 2]), "schema 'list'"),
        (
            json.dumps({**GOOD, "schema": "other-tool"}),
            "schema 'other-tool', expected 'clusterforge-baseline'",
        ),
        (json.dumps({**GOOD, "schema_version": 9}), "schema_version 9, this clusterforge reads 1"),
        (
            json.dumps({**GOOD, "instance_type": "p5.48xlarge"}),
            "the baseline of instance type 'p5.48xlarge', not 'local'",
        ),
        (
            json.dumps(
                {
                    **GOOD,
                    "metrics": {"m": {"unit": "GB/s", "higher_is_better": True, "samples": [{"value": "x"}]}},
                }
            ),
            "sample value 'x'",
        ),
        (json.dumps({**GOOD, "metrics": {"m": {"samples": []}}}), "needs a unit string"),
    ],
)
def test_a_bad_baseline_file_is_refused_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "local.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as err:
        read_baseline(path, "local")
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_binary_baseline_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    path.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(BaselineError, match=r"local\.json: not a usable baseline \(not JSON"):
        read_baseline(path)


def test_an_unreadable_baseline_is_named(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    path.mkdir()  # a folder where the file should be: reading fails with an OSError
    with pytest.raises(BaselineError, match=r"local\.json: cannot read the baseline"):
        read_baseline(path)


def test_recording_refuses_to_overwrite_a_corrupt_file(tmp_path: Path) -> None:
    store = BaselineStore("dev", root=tmp_path)
    store.dir.mkdir(parents=True)
    store.path("local").write_text("garbage")
    with pytest.raises(BaselineError, match="not a usable baseline"):
        run(store, fleet(3, sd=0.01))
    assert store.path("local").read_text() == "garbage"


def test_a_type_name_that_is_not_a_file_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="is not an instance type name"):
        BaselineStore("dev", root=tmp_path).path("../etc/passwd")
