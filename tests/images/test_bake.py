"""bake_pool's order and its refusals, with a stand-in builder and playbook runner: converge, checks,
record, register; an image is never registered when the builder fails its checks or a playbook
fails; the builder is discarded whatever happened; the same digest is not baked twice."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clusterforge.ansible.events import HostProgress, TaskFailure
from clusterforge.ansible.runner import PlaybookResult
from clusterforge.images import bake as bake_mod
from clusterforge.images.bake import BakeError, bake_pool
from clusterforge.images.digest import SoftwareDigest
from clusterforge.images.record import load_records
from clusterforge.providers.base import Node
from clusterforge.spec.loader import REPO_ROOT, load_spec
from clusterforge.spec.models import ClusterSpec

BASE = "localhost/clusterforge-node:bookworm-0123456789ab"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


class FakeBuilder:
    kind = "local"

    def __init__(self, existing: str | None = None) -> None:
        self.events: list[str] = []
        self._existing = existing

    def base(self, spec: ClusterSpec) -> str:
        return BASE

    def existing(self, spec: ClusterSpec, pool: str, software: SoftwareDigest) -> str | None:
        return self._existing

    def start(self, spec: ClusterSpec, pool: str, base: str, progress: Any) -> Node:
        self.events.append(f"start {base}")
        return Node("node-bake", "10.0.0.9", pool, "gpu", "local", {"ansible_connection": "local"}, "cid")

    def register(self, spec: ClusterSpec, pool: str, node: Node, software: SoftwareDigest) -> str:
        self.events.append("register")
        return f"baked:{software.digest}"

    def discard(self, spec: ClusterSpec, node: Node) -> None:
        self.events.append("discard")


class FakeRuns:
    """PlaybookRun stand-in: each playbook ok (or failing), certify.yml writes a report."""

    def __init__(self, verdict: str = "pass", fail: str = "") -> None:
        self.verdict, self.fail = verdict, fail
        self.played: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, playbook: Path, inventory: Path, runs: Path, **kw: Any) -> Any:
        fake = self

        class Run:
            def run(self) -> PlaybookResult:
                fake.played.append((playbook.name, kw.get("extravars") or {}))
                ev = kw.get("extravars") or {}
                if playbook.name == "certify.yml":
                    out = Path(ev["certify_reports_dir"]) / "node-bake"
                    out.mkdir(parents=True, exist_ok=True)
                    checks = [
                        {
                            "id": "matmul-burnin",
                            "status": "pass" if fake.verdict == "pass" else "fail",
                            "summary": "11 GFLOP/s",
                            "metrics": {"rate": {"value": 11, "unit": "GFLOP/s"}},
                            "threshold": {},
                            "evidence": {"command": None, "lines": []},
                        }
                    ]
                    times = {"started": "2026-12-01T10:00:00Z", "finished": "2026-12-01T10:01:00Z"}
                    report = {"schema_version": 1, "node": "node-bake", "profile": "quick", **times}
                    out.joinpath("report.json").write_text(
                        json.dumps({**report, "verdict": fake.verdict, "checks": checks})
                    )
                failures = {}
                if playbook.name == fake.fail:
                    failures["node-bake"] = TaskFailure("node-bake", "Install", "nvidia_driver", "apt failed")
                return PlaybookResult(
                    playbook.name,
                    2 if failures else 0,
                    "failed" if failures else "successful",
                    {"node-bake": HostProgress("node-bake", changed=3)},
                    failures,
                    runs,
                    runs / "log",
                    {"processed": {"node-bake": 1}},
                )

        return Run()


def _spec() -> ClusterSpec:
    return load_spec(REPO_ROOT / "stacks" / "local.yaml")[0].model_copy(update={"stack": "bk"})


def test_converge_checks_record_register_in_that_order(monkeypatch: pytest.MonkeyPatch) -> None:
    runs, builder = FakeRuns(), FakeBuilder()
    monkeypatch.setattr(bake_mod, "PlaybookRun", runs)
    record = bake_pool(_spec(), "node", builder, env={})
    assert [p for p, _ in runs.played] == ["node_software.yml", "certify.yml", "image.yml"]
    assert runs.played[0][1] == {"local_scratch_enabled": False}  # the instance store is the machine's
    # certify.yml's own input check, read from the playbook: a run id with "+00:00" was refused there
    rule = re.search(
        r"certify_run_id is match\('([^']+)'\)", (REPO_ROOT / "playbooks" / "certify.yml").read_text()
    )
    assert rule is not None and re.match(rule.group(1), runs.played[1][1]["certify_run_id"])
    image_vars = runs.played[2][1]
    assert image_vars["node_image_bake_digest"] == record.digest
    assert "nvidia-smi" in " ".join(image_vars["node_image_bake_managed"]["packages"])
    assert builder.events == [f"start {BASE}", "register", "discard"]
    assert record.image == f"baked:{record.digest}" and record.checks.startswith("pass: 1 checks")
    assert load_records("bk")["node"] == record


@pytest.mark.parametrize(
    ("verdict", "fail", "says"),
    [("fail", "", "failed its single-node checks"), ("pass", "node_software.yml", "apt failed")],
)
def test_no_image_without_a_converged_and_certified_builder(
    monkeypatch: pytest.MonkeyPatch, verdict: str, fail: str, says: str
) -> None:
    builder = FakeBuilder()
    monkeypatch.setattr(bake_mod, "PlaybookRun", FakeRuns(verdict, fail))
    with pytest.raises(BakeError, match=says):
        bake_pool(_spec(), "node", builder, env={})
    assert builder.events == [f"start {BASE}", "discard"]
    assert load_records("bk") == {}


def test_the_same_digest_is_not_baked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    runs, builder = FakeRuns(), FakeBuilder(existing="baked:earlier")
    monkeypatch.setattr(bake_mod, "PlaybookRun", runs)
    record = bake_pool(_spec(), "node", builder, env={})
    assert runs.played == [] and builder.events == [] and record.image == "baked:earlier"
