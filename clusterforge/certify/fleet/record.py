"""Add a judged run's healthy figures to the stored baselines (the fleet judge's output, kept)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from clusterforge.certify.fleet.baseline import KEEP, Baseline, BaselineStore, Sample
from clusterforge.certify.fleet.judge import FleetJudgement
from clusterforge.journal import now_iso


def record_run(
    store: BaselineStore,
    judgement: FleetJudgement,
    *,
    run_id: str,
    versions: Mapping[str, Mapping[str, str]],
    shares: Mapping[str, str] | None = None,
    when: str | None = None,
    keep: int = KEEP,
) -> dict[str, Path]:
    """Add the figures of every node that passed, with no fleet warning, to its type's baseline.

    ``versions``: instance type -> the software versions the run's nodes ran (NODE.json
    ``software``); ``shares``: instance type -> the share of the machine its nodes had (container
    types; each sample keeps it). A node whose report failed, or that any fleet rule flagged, adds nothing: an
    outlier never enters a baseline. Returns the files written, by type. An unusable existing
    file raises ``BaselineError`` (it is not overwritten: a person decides)."""
    when = when or now_iso()
    loaded: dict[str, Baseline] = {}
    for node, verdict in sorted(judgement.nodes.items()):
        if not verdict.passed or verdict.warnings or not verdict.report_passed:
            continue
        kind = verdict.instance_type
        if kind not in loaded:
            loaded[kind] = store.load(kind) or Baseline(kind, store.stack)
        for m in verdict.metrics:
            if m.status in ("pass", "unjudged"):
                share = (shares or {}).get(kind, "")
                sample = Sample(m.value, node, run_id, when, dict(versions.get(kind, {})), share)
                loaded[kind].add(m.metric, m.unit, m.higher_is_better, sample, keep)
    return {kind: store.save(b) for kind, b in sorted(loaded.items()) if b.metrics}
