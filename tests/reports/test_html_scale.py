"""The people's report at thousands of nodes: a summary page of aggregate views, node pages to
drill down to (issue 24). The 4,096-node page is opened in headless Chromium (slow)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from clusterforge.reports import write_run_html
from clusterforge.reports.html import INLINE_NODES, NODES_PER_PAGE
from tests.fixtures.reports import check, report
from tests.reports.test_html import parse

RUN = "R1"


def node_report(node: str, i: int, failing: bool) -> dict[str, Any]:
    rate = 40.0 + i % 7
    checks = [
        check("software-versions", summary="all pinned"),
        check(
            "matmul-burnin",
            "fail" if failing else "pass",
            f"{node}: 3 GFLOP/s <b>slow</b>" if failing else "ok",
            metrics={
                "rate_device_0": {"value": rate, "unit": "GFLOP/s"},
                "rate_median": {"value": rate, "unit": "GFLOP/s"},
            },
            threshold={"matmul.cpu_gflops_min": {"value": 10.0, "unit": "GFLOP/s"}},
        ),
        check(
            "gloo-allreduce",
            metrics={
                "busbw": {"value": 0.45 - 0.001 * (i % 9), "unit": "GB/s"},
                "message_bytes": {"value": 1 << 24, "unit": "bytes"},
            },
            series={
                "busbw": {
                    "x_unit": "bytes",
                    "y_unit": "GB/s",
                    "points": [[1 << k, 0.02 * k] for k in range(20, 27)],
                }
            },
        ),
    ]
    return report(node, checks, run_id=RUN, instance_type="local")


def write(folder: Path, count: int, failing: set[str]) -> list[str]:
    names = [f"gpu-{i:04d}" for i in range(1, count + 1)]
    for i, name in enumerate(names):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "report.json").write_text(json.dumps(node_report(name, i, name in failing)))
    # at least 250 figures (more than a strip plot draws as dots), whatever the node count
    values = {f"gpu-{i:04d}": 40.0 + i % 7 for i in range(1, max(count, 250) + 1)}
    fleet = {"groups": [{"metric": "matmul-burnin.rate", "instance_type": "local", "unit": "GFLOP/s", "values": values,
                         "reference": 43.0, "reference_kind": "fleet median", "warn_at": 38.0, "fail_at": 30.0}]}  # fmt: skip
    (folder / "fleet.json").write_text(json.dumps(fleet))
    for name in failing:
        data = json.loads((folder / name / "report.json").read_text())
        data["fleet"] = {"metrics": [{"metric": "matmul-burnin.rate", "status": "fail"}]}
        (folder / name / "report.json").write_text(json.dumps(data))
    return names


def test_a_large_run_is_a_summary_page_and_node_pages_to_drill_down_to(tmp_path: Path) -> None:
    count = 2 * NODES_PER_PAGE + 5
    failing = {"gpu-0007", "gpu-0070", "gpu-0133"}
    names = write(tmp_path / "reports", count, failing)
    out = write_run_html(tmp_path / "reports", tmp_path / "report.html", stack="big", nodes=names,
                         run_ids=dict.fromkeys(names, RUN))  # fmt: skip
    main = out.read_text()
    page = parse(main)
    assert count > INLINE_NODES and "details class='node'" not in main  # no node's detail here
    assert "<section id='checks'>" in main and "<section id='attention'>" in main
    assert (
        "Nodes not certified (3)" in main and "&lt;b&gt;slow&lt;/b&gt;" in main and "<b>slow</b>" not in main
    )
    assert "class='chart histogram'" in main  # 250 dots would be a smear: a histogram
    pages = sorted((tmp_path / "report-nodes").glob("*.html"))
    assert len(pages) == -(-count // NODES_PER_PAGE)
    seen = [m for p in pages for m in re.findall(r"<details class='node' id='node-(gpu-\d+)'", p.read_text())]
    assert sorted(seen) == names  # every node on exactly one page
    links = {href for tag, attrs, _ in page.elements if tag == "a" for href in [attrs.get("href", "")]}
    for node in failing:  # each failing node links to its detail, which is there
        href = next(h for h in links if h.endswith(f"#node-{node}"))
        target, anchor = href.split("#")
        assert f"id='{anchor}'" in (tmp_path / target).read_text()
    for p in pages:
        parse(p.read_text())  # well formed, every tag closed
    assert len(main) < min(p.stat().st_size for p in pages)
    write(tmp_path / "reports", count, failing)
    shutil.rmtree(tmp_path / "reports" / f"gpu-{count:04d}")
    write_run_html(tmp_path / "reports", tmp_path / "report.html", stack="big")
    assert len(list((tmp_path / "report-nodes").glob("*.html"))) == -(-(count - 1) // NODES_PER_PAGE)


def test_incident_history_lists_lemons_first_and_each_node_page_shows_its_own(tmp_path: Path) -> None:
    count = 2 * NODES_PER_PAGE + 5
    names = write(tmp_path / "reports", count, set())
    history = {  # node_history's order: lemons first, then by strikes held
        "gpu-0100": "LEMON 3/3 in 7d, last 2 min ago, MTBI 1.2 d",
        "gpu-0050": "2/3 in 7d, last 1 h ago, MTBI 3 h <script>",
        "gone-node": "1/3 in 7d, last 1 h ago",  # not in this run: not listed
        "gpu-0003": "1/3 in 7d, last 5 h ago",
    }
    out = write_run_html(tmp_path / "reports", tmp_path / "report.html", stack="big", nodes=names,
                         run_ids=dict.fromkeys(names, RUN), history=history)  # fmt: skip
    main = out.read_text()
    parse(main)
    assert "Incident history (3 nodes, 1 lemon)" in main and "gone-node" not in main
    rows = re.findall(r"<tr><td><a href='([^']+)'>(gpu-\d+)</a></td><td>([^<]*)</td></tr>", main)
    assert [node for _, node, _ in rows] == ["gpu-0100", "gpu-0050", "gpu-0003"]  # in history's order
    assert "MTBI 3 h &lt;script&gt;" in main and "<script>" not in main
    for href, _node, line in rows:  # each row drills down to the node, whose detail carries its line
        target, anchor = href.split("#")
        page = (tmp_path / target).read_text()
        detail = page[page.index(f"id='{anchor}'") :].split("</details>", 1)[0]
        assert f"incidents: {line}" in detail
    assert sum(p.read_text().count("incidents: ") for p in (tmp_path / "report-nodes").glob("*.html")) == 3
    two = write(tmp_path / "small", 2, set())
    small = write_run_html(tmp_path / "small", tmp_path / "small.html", stack="s", nodes=two, history=history)
    assert "Incident history" not in small.read_text()  # no incident among its nodes: no section
    inline = write_run_html(tmp_path / "small", tmp_path / "small.html", stack="s", nodes=two,
                            history={"gpu-0002": "1/3 in 7d, last 1 h ago"})  # fmt: skip
    assert "Incident history (1 node)" in inline.read_text() and "incidents: 1/3" in inline.read_text()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(url: str, profile: Path) -> tuple[str, float]:
    """The page as Chromium's DOM after loading it, and the seconds it took (start included)."""
    argv = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--no-first-run",
            f"--user-data-dir={profile}", "--dump-dom", url]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (scripts/setup.d/70-reports-dev.apt)")
def test_the_4096_node_report_opens_in_a_browser(tmp_path: Path) -> None:
    failing = {f"gpu-{i:04d}" for i in range(41, 4097, 100)}
    names = write(tmp_path / "reports", 4096, failing)
    out = write_run_html(tmp_path / "reports", tmp_path / "report.html", stack="big", nodes=names,
                         run_ids=dict.fromkeys(names, RUN))  # fmt: skip
    pages = sorted((tmp_path / "report-nodes").glob("*.html"))
    sizes = [out.stat().st_size] + [p.stat().st_size for p in pages]
    assert max(sizes) < 5e6, sizes  # every page a browser opens is under ~5 MB
    dom, seconds = dump_dom(out.as_uri(), tmp_path / "profile")
    print(f"summary page {sizes[0] / 1e6:.2f} MB rendered in {seconds:.1f} s (chromium start included)")
    assert f"Nodes not certified ({len(failing)})" in dom and "nodes (4096)" in dom
    assert dom.count("<tr>") < 1000  # aggregate rows, not a row per node
    dom, seconds = dump_dom(pages[40].as_uri(), tmp_path / "profile")
    print(f"node page {pages[40].stat().st_size / 1e6:.2f} MB rendered in {seconds:.1f} s")
    assert dom.count('class="node"') == NODES_PER_PAGE and "gpu-2600" in dom
