"""`status` for people: fits 80 columns, relative times, empty columns dropped; --wide keeps all."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console

from clusterforge.spec.loader import REPO_ROOT, load_spec
from clusterforge.status import NodeStatus, _this_runs_report, table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPEC, _ = load_spec(REPO_ROOT / "stacks" / "local.yaml")


def _row(node: str, **kw: object) -> NodeStatus:
    base = dict(
        node=node, role="gpu", provider_state="running", configured=True, certification="certified",
        certified_at=(NOW - timedelta(minutes=12)).isoformat(), profile="quick", slurm_state="idle",
        slurm_reason="", report=f"/work/main/.clusterforge/local/reports/{node}/report.json", detail="",
    )  # fmt: skip
    base.update(kw)
    return NodeStatus(**base)  # type: ignore[arg-type]


ROWS = [
    _row(
        "head-001", role="head", certification="none", certified_at="", profile="", slurm_state="", report=""
    ),
    _row("node-001"),
    _row(
        "node-002",
        certification="failed",
        slurm_state="drained",
        slurm_reason="clusterforge: matmul-burnin: 11.4 GFLOP/s, 75 % under the fleet median 46.5 (3 local nodes)",
    ),
]


def render(wide: bool, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(table(SPEC, ROWS, wide=wide, now=NOW))
    return out.getvalue()


def test_narrow_fits_80_columns_with_whole_headers_and_relative_times() -> None:
    text = render(wide=False)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    header = next(line for line in lines if line.lstrip().startswith("node"))
    for name in ("node", "role", "state", "cfg", "cert", "when", "slurm", "reason"):
        assert f"{name}" in header.split(), (name, header)
    assert "…" not in header
    assert "12 min ago" in text and "2026-12" not in text  # relative, not cut ISO times
    assert "node-002" in text and "FAIL" in text and "matmul-burnin" in text and "75 % under" in text
    assert "report" not in header.split() and "profile" not in header.split()


def test_a_column_empty_for_every_node_is_dropped() -> None:
    rows = [_row("node-001", slurm_state="", certified_at="")]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table(SPEC, rows, now=NOW))
    header = next(line for line in out.getvalue().splitlines() if line.lstrip().startswith("node"))
    assert "slurm" not in header and "when" not in header


def test_wide_keeps_every_column_and_the_times_whole() -> None:
    text = render(wide=True, width=250)
    for name in ("provider", "configured", "certification", "certified at", "profile", "report"):
        assert name in text
    assert (NOW - timedelta(minutes=12)).isoformat() in text


def test_a_report_of_another_run_is_not_this_runs(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"verdict": "pass", "run_id": "20261201T100000Z"}))
    assert _this_runs_report(str(report), "20261201T100000Z") == str(report)
    assert _this_runs_report(str(report), "20261201T110000Z") == "no report in this run (20261201T110000Z)"
    report.unlink()
    assert _this_runs_report(str(report), "20261201T110000Z").startswith("no report in this run")


def test_a_large_stack_is_summarised_by_state_with_the_nodes_that_need_a_look() -> None:
    from clusterforge.status import SHOWN, summary

    rows = [_row(f"gpu-{i:04d}", pool="gpu") for i in range(1, 4097)]
    for i in range(0, 40, 3):  # 14 drained with a reason
        rows[i] = _row(rows[i].node, pool="gpu", certification="failed", slurm_state="drained",
                       slurm_reason="clusterforge: gpu-health: Xid 79")  # fmt: skip
    rows[100] = _row("gpu-0101", pool="gpu", slurm_state="idle*")  # slurmd stopped answering
    out = io.StringIO()
    Console(file=out, width=140, color_system=None).print(summary(SPEC, rows))
    text = out.getvalue()
    assert len(text.splitlines()) < 25, text
    assert (
        "4,096 nodes" in text
        and "certified 4,082, failed 14" in text
        and "idle 4,081, drained 14, idle* 1" in text
    )
    assert text.count("clusterforge: gpu-health: Xid 79") == SHOWN
    assert "… and 5 more need a look (gpu-[0031,0034,0037,0040,0101])" in text  # 0101 not answering


def test_strikes_column_only_where_a_node_has_incidents() -> None:
    out = io.StringIO()
    rows = [*ROWS[:2], _row("node-002", strikes="LEMON 3/3 in 7d, last 5 h ago, MTBI 2.4 d")]
    Console(file=out, width=120, color_system=None).print(table(SPEC, rows, now=NOW))
    assert "strikes" in out.getvalue() and "LEMON 3/3 in 7d" in out.getvalue()
    assert "strikes" not in render(wide=False)
