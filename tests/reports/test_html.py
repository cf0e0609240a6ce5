"""The run's HTML report on real validators reports (live CLI run + captured runs) and a synthetic GPU failure.

Live: ``python -m validators run --profile quick`` on this machine with the cheap checks (no torch
workloads: they take a minute on a loaded 2-core box). Captured (tests/reports/data/, see README
there): full quick-profile runs with gloo-allreduce, matmul-burnin and checkpoint-restart.
Synthetic: an 8-GPU p5 node with per-size nccl rows (the optional ``series`` key), a slow GPU and
a summary carrying markup.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from clusterforge.reports import read_reports, render_run_html, write_run_html

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
CHEAP_CHECKS = "python-runtime,software-versions,shared-storage,memlock-limit,gpu-inventory,nccl-single-node"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}
SIZES = [1 << k for k in range(26, 35)]  # 64 MiB .. 16 GiB, the full profile's sweep


def synthetic_gpu_report() -> dict[str, Any]:
    """A failing p5 node: GPU 5 slow, all_reduce under its floor at the big sizes, markup in a summary."""
    rates = [990.0, 985.5, 992.1, 988.0, 991.3, 700.2, 989.9, 987.4]
    busbw = [180.0, 260.0, 330.0, 380.0, 410.0, 420.0, 425.0, 428.0, 429.5]
    gaps = ["device 5: 700.200 TFLOP/s is 29.1% below the node median 989.000 (limit 5%)"]
    return {
        "schema_version": 1,
        "node": "node-003",
        "profile": "full",
        "started": "2026-11-30T03:00:00Z",
        "finished": "2026-11-30T03:40:00Z",
        "verdict": "fail",
        "instance_type": "p5.48xlarge",
        "checks": [
            {
                "id": "nccl-single-node",
                "status": "fail",
                "summary": "all_reduce: busbw 429.5 GB/s below 480 GB/s <script>alert('x')</script> & more",
                "metrics": {
                    "all_reduce.busbw": {"value": 429.5, "unit": "GB/s"},
                    "all_reduce.message_bytes": {"value": SIZES[-1], "unit": "B"},
                },
                "threshold": {"nccl.all_reduce.1node.busbw_gbps": {"value": 480.0, "unit": "GB/s"}},
                "series": {
                    "all_reduce.busbw": {
                        "x_unit": "B",
                        "y_unit": "GB/s",
                        "points": [[s, b] for s, b in zip(SIZES, busbw, strict=True)],
                    }
                },
                "evidence": {"command": "all_reduce_perf -b 64M -e 16G", "lines": ["</pre><b>raw</b>"]},
                "duration_s": 40.0,
            },
            {
                "id": "matmul-burnin",
                "status": "fail",
                "summary": gaps[0],
                "metrics": {
                    "rate_median": {"value": 989.0, "unit": "TFLOP/s"},
                    **{f"rate_device_{i}": {"value": r, "unit": "TFLOP/s"} for i, r in enumerate(rates)},
                },
                "threshold": {
                    "matmul.median_gap_pct": {"value": 5.0, "unit": "%"},
                    "matmul.tflops_min": {"value": 600.0, "unit": "TFLOP/s"},
                },
                "evidence": {"command": None, "lines": gaps},
                "duration_s": 1800.0,
            },
            {
                "id": "checkpoint-restart",
                "status": "pass",
                "summary": "resume bit-identical",
                "metrics": {
                    "ckpt_write_rate": {"value": 1500.0, "unit": "MB/s"},
                    "ckpt_read_rate": {"value": 2500.0, "unit": "MB/s"},
                    "plain_write_rate": {"value": 2000.0, "unit": "MB/s"},
                    "plain_read_rate": {"value": 3000.0, "unit": "MB/s"},
                },
                "threshold": {"checkpoint.write_ratio_min": {"value": 0.5, "unit": "ratio"}},
                "evidence": {"command": None, "lines": []},
                "duration_s": 60.0,
            },
        ],
    }


class Page(HTMLParser):
    """Records every element (tag, attrs, enclosing svg index) and fails on mis-nested tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.elements: list[tuple[str, dict[str, str], int]] = []
        self.svgs: list[dict[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        d = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.svgs.append(d)
        self.elements.append((tag, d, len(self.svgs) - 1 if "svg" in self.stack or tag == "svg" else -1))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        d = {k: v or "" for k, v in attrs}
        self.elements.append((tag, d, len(self.svgs) - 1 if "svg" in self.stack else -1))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def chart(self, label: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str]]]]:
        index = next(i for i, s in enumerate(self.svgs) if s.get("aria-label") == label)
        return self.svgs[index], [(t, a) for t, a, i in self.elements if i == index]


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    assert page.stack == [], f"unclosed: {page.stack}"
    return page


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Live CLI runs for node-004 (passes) and node-005 (shared path missing: fails); captured runs
    for node-001/node-002 (single-node and the 2-node network check); the synthetic node-003;
    node-006 ran nothing (empty folder)."""
    root = tmp_path_factory.mktemp("run")
    reports = root / "dev" / "reports"
    shared = root / "shared"
    shared.mkdir()
    procs = []
    for node, path in (("node-004", shared), ("node-005", root / "absent")):
        config = root / f"{node}.json"
        config.write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "node": node,
                    "instance_type": "local",
                    "gpu": {"count": 0},
                    "shared_storage": {"path": str(path), "require_mount": False},
                    "sizes": {"storage_test_bytes": 65536},
                }
            )
        )
        argv = [sys.executable, "-m", "validators", "run", "--profile", "quick", "--config", str(config)]
        argv += ["--out", str(reports / node), "--checks", CHEAP_CHECKS]
        procs.append(subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 1), err.decode()
    for node, name in (("node-001", "cpu-node-example"), ("node-002", "cpu-node-torch-checks")):
        (reports / node).mkdir(parents=True)
        shutil.copy(DATA / f"{name}.report.json", reports / node / "report.json")
    for node in ("node-001", "node-002"):
        shutil.copy(
            DATA / f"two-node-gloo-{node}.network-report.json", reports / node / "network-report.json"
        )
    (reports / "node-003").mkdir()
    (reports / "node-003" / "report.json").write_text(json.dumps(synthetic_gpu_report()))
    (reports / "node-006").mkdir()
    return reports


@pytest.fixture(scope="module")
def page(reports_dir: Path) -> tuple[Page, str]:
    out = write_run_html(reports_dir, reports_dir / "report.html", nodes=[f"node-00{i}" for i in range(1, 8)])
    html = out.read_text()
    return parse(html), html


def load(reports_dir: Path, node: str) -> dict[str, Any]:
    return json.loads((reports_dir / node / "report.json").read_text())


def test_every_node_and_check_appears(reports_dir: Path, page: tuple[Page, str]) -> None:
    parsed, html = page
    text = "".join(parsed.text)
    for node in ("node-001", "node-002", "node-003", "node-004", "node-005"):
        for check in load(reports_dir, node)["checks"]:
            assert f"<code>{check['id']}</code>" in html, (node, check["id"])
        assert f"id='node-{node}'" in html
    assert "stack dev" in text  # the folder above reports/
    assert "<script" not in html.lower()


def test_failing_reasons_are_visible_and_escaped(reports_dir: Path, page: tuple[Page, str]) -> None:
    parsed, html = page
    live = next(c for c in load(reports_dir, "node-005")["checks"] if c["id"] == "shared-storage")
    assert live["status"] == "fail"
    text = "".join(parsed.text)
    assert f"shared-storage: {live['summary']}" in text  # the findings column of the matrix
    bad = synthetic_gpu_report()["checks"][0]["summary"]
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in html  # markupsafe's escape
    assert bad in text  # the parser unescapes it back to exactly what the node wrote
    assert "&lt;/pre&gt;&lt;b&gt;raw&lt;/b&gt;" in html  # evidence lines too


def test_absent_reports_show_no_report(page: tuple[Page, str]) -> None:
    parsed, html = page
    rows = [a for t, a, _ in parsed.elements if t == "td" and a.get("class") == "st-norep"]
    assert len(rows) == 2  # node-006 (empty folder) and node-007 (expected, no folder)
    assert "no report.json in" in html and "no report folder" in html
    assert "no report: 2" in "".join(parsed.text)


def _linear(points: list[tuple[float, float]]) -> tuple[float, float]:
    (v1, p1), (v2, p2) = points[0], points[-1]
    slope = (p2 - p1) / (v2 - v1)
    return slope, p1 - slope * v1


def test_busbw_plot_log2_sizes_and_threshold_on_scale(page: tuple[Page, str]) -> None:
    parsed, _ = page
    svg, elements = parsed.chart("nccl-single-node all_reduce")
    points = [a for t, a in elements if t == "circle"]
    expected = synthetic_gpu_report()["checks"][0]["series"]["all_reduce.busbw"]["points"]
    assert int(svg["data-points"]) == len(points) == len(expected)
    xs = [float(a["cx"]) for a in points]
    steps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    assert max(steps) - min(steps) < 0.05  # sizes double each step: equal spacing on a log2 axis
    slope, base = _linear(sorted((float(a["data-y"]), float(a["cy"])) for a in points))
    threshold = next(a for t, a in elements if t == "line" and "threshold" in a.get("class", ""))
    assert float(threshold["data-value"]) == 480.0
    assert float(threshold["y1"]) == pytest.approx(slope * 480.0 + base, abs=0.05)
    assert float(threshold["y1"]) < min(float(a["cy"]) for a in points)  # above every point: all below floor


def test_gloo_plot_has_one_point_per_captured_node(reports_dir: Path, page: tuple[Page, str]) -> None:
    parsed, _ = page
    svg, elements = parsed.chart("gloo-allreduce all_reduce")
    nodes = [
        n
        for n in ("node-001", "node-002")
        if any(c["id"] == "gloo-allreduce" for c in load(reports_dir, n)["checks"])
    ]
    assert int(svg["data-points"]) == len(nodes) == 2
    values = sorted(float(a["data-y"]) for t, a in elements if t == "circle")
    recorded = sorted(
        c["metrics"]["busbw"]["value"]
        for n in nodes
        for c in load(reports_dir, n)["checks"]
        if c["id"] == "gloo-allreduce"
    )
    assert values == recorded


def _bar_scale(bars: list[dict[str, str]]) -> tuple[float, float]:
    """Pixels per unit and the zero line, from the tallest bar (its height is value * scale)."""
    tallest = max(bars, key=lambda a: float(a["data-value"]))
    per_unit = float(tallest["height"]) / float(tallest["data-value"])
    return per_unit, float(tallest["y"]) + float(tallest["height"])


@pytest.mark.parametrize(
    ("node", "floor_key"), [("node-003", "matmul.tflops_min"), ("node-002", "matmul.cpu_gflops_min")]
)
def test_matmul_bars_per_device_with_floor_and_median(
    reports_dir: Path, page: tuple[Page, str], node: str, floor_key: str
) -> None:
    parsed, _ = page
    check = next(c for c in load(reports_dir, node)["checks"] if c["id"] == "matmul-burnin")
    devices = [k for k in check["metrics"] if k.startswith("rate_device_")]
    unit_name = "GPU" if floor_key == "matmul.tflops_min" else "CPU worker"
    svg, elements = parsed.chart(f"{node}: matmul rate per {unit_name}")
    bars = [a for t, a in elements if t == "rect" and a.get("class") == "bar"]
    assert int(svg["data-bars"]) == len(bars) == len(devices)
    per_unit, zero = _bar_scale(bars)
    for bar in bars:  # every bar on the same scale
        assert float(bar["height"]) == pytest.approx(float(bar["data-value"]) * per_unit, abs=0.05)
    lines = {a["class"]: a for t, a in elements if t == "line" and a.get("class", "").startswith("hline")}
    floor = check["threshold"][floor_key]["value"]
    median = check["metrics"]["rate_median"]["value"]
    assert float(lines["hline threshold"]["y1"]) == pytest.approx(zero - floor * per_unit, abs=0.05)
    assert float(lines["hline median"]["y1"]) == pytest.approx(zero - median * per_unit, abs=0.05)
    slow = [b["data-group"] for b in bars if b["data-name"] == "below limit"]
    assert slow == (["gpu 5"] if node == "node-003" else [])


def test_checkpoint_bars_against_plain_io(reports_dir: Path, page: tuple[Page, str]) -> None:
    parsed, _ = page
    svg, elements = parsed.chart("checkpoint write rate vs plain sequential write")
    bars = [a for t, a in elements if t == "rect" and a.get("class") == "bar"]
    with_rates = [
        n for n in ("node-001", "node-002", "node-003")
        if any("ckpt_write_rate" in c["metrics"] for c in load(reports_dir, n)["checks"])
    ]  # fmt: skip
    assert int(svg["data-bars"]) == len(bars) == 2 * len(with_rates)
    assert {b["data-group"] for b in bars} == set(with_rates)
    per_unit, zero = _bar_scale(bars)
    mark = next(a for t, a in elements if t == "line" and "threshold" in a.get("class", ""))
    assert float(mark["data-value"]) == 1000.0  # 0.5 x plain 2000 MB/s on node-003
    assert float(mark["y1"]) == pytest.approx(zero - 1000.0 * per_unit, abs=0.05)


def test_malformed_reports_do_not_break_the_page() -> None:
    reports: list[Any] = [
        {"node": "a", "checks": "nope"},
        {
            "node": "b",
            "verdict": "pass",
            "checks": [{"id": "x", "status": "weird", "summary": None, "metrics": {"m": 3}}],
        },
        {
            "node": "c",
            "verdict": "pass",
            "checks": [{"id": "matmul-burnin", "metrics": {"rate_device_0": {"value": "fast"}}}],
        },
        {"node": "d", "missing": "ssh: timed out"},
        {
            "node": "e",
            "checks": [{"id": "nccl-single-node", "metrics": [{"x": 1}], "threshold": [[]], "series": 7}],
        },
        {
            "node": "f",
            "checks": [{"id": "gloo-allreduce", "metrics": {"busbw": {"value": 1, "unit": "GB/s"}}}],
        },
        "not a dict",
    ]
    parsed = parse(render_run_html(reports, stack="s<t>"))
    text = "".join(parsed.text)
    assert "stack s<t>" in text
    assert text.count("no report") >= 2  # a (no checks list) and d (missing)
    assert "ssh: timed out" in text


def test_unreadable_report_is_listed_missing(tmp_path: Path) -> None:
    (tmp_path / "node-001").mkdir()
    (tmp_path / "node-001" / "report.json").write_text("{truncated")
    reports = read_reports(tmp_path)
    assert reports[0]["node"] == "node-001" and "unreadable" in reports[0]["missing"]
    text = "".join(parse(render_run_html(reports, stack="x")).text)
    assert "no report: 1" in text and "unreadable" in text


def test_network_report_has_its_own_column_and_plot(reports_dir: Path, page: tuple[Page, str]) -> None:
    parsed, html = page
    net = {
        n: json.loads((reports_dir / n / "network-report.json").read_text()) for n in ("node-001", "node-002")
    }
    headers = [t for t, a, _ in parsed.elements if t == "th" and a.get("class") == "col"]
    assert "<th class='col'>network:gloo-allreduce</th>" in html and len(headers) >= 2
    failed = next(c for c in net["node-002"]["checks"] if c["status"] == "fail")
    assert f"network:gloo-allreduce: {failed['summary']}" in "".join(parsed.text)
    svg, elements = parsed.chart("gloo-allreduce all_reduce (network)")
    passed = net["node-001"]["checks"][0]
    points = [a for t, a in elements if t == "circle"]
    assert [float(a["data-y"]) for a in points] == [
        passed["metrics"]["busbw"]["value"]
    ]  # rank 1 has no figure
    line = next(a for t, a in elements if t == "line" and "threshold" in a.get("class", ""))
    assert float(line["data-value"]) == passed["threshold"]["gloo.all_reduce.2node.busbw_gbps"]["value"]
    # one point gives no scale; the y grid does (each grid line carries its tick value)
    grid = [
        (float(a["data-value"]), float(a["y1"]))
        for t, a in elements
        if t == "line" and a.get("class") == "grid"
    ]
    slope, base = _linear(sorted(grid))
    assert float(line["y1"]) == pytest.approx(slope * float(line["data-value"]) + base, abs=0.05)
    assert float(points[0]["cy"]) == pytest.approx(slope * float(points[0]["data-y"]) + base, abs=0.05)


def test_cli_writes_the_page_next_to_the_reports(reports_dir: Path, tmp_path: Path, capsys) -> None:
    from clusterforge.reports.__main__ import main

    out = tmp_path / "page.html"
    assert main([str(reports_dir), "--out", str(out), "--stack", "other"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert "stack other" in "".join(parse(out.read_text()).text)
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "nope")])
    assert exc.value.code == 2 and "not a folder" in capsys.readouterr().err


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    children = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    )
    return [path] + [p for k, v in children for p in _paths(v, (*path, k))]


def test_any_field_of_a_report_may_be_wrong() -> None:
    """Each field of the synthetic report replaced in turn by null, a string, a list and NaN: the page renders."""
    base = synthetic_gpu_report()
    # every point of the series is alike: the first one stands for all
    paths = [p for p in _paths(base) if p and not ("points" in p and p[p.index("points") + 1 :][:1] != (0,))]
    for path in paths:
        for odd in (None, "<b>x</b>", [1], float("nan")):
            report = json.loads(json.dumps(base))
            holder = report
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = odd
            html = render_run_html([report], stack="s")
            if isinstance(odd, str):  # the costly strict parse where markup could leak through
                parse(html)
            assert "<b>x</b>" not in html
    assert len(paths) > 50, len(paths)
    odd_keys = json.loads(
        json.dumps(base).replace("rate_device_5", "<b>x</b>").replace("node-003", "<b>x</b>")
    )
    odd_keys["checks"][0]["threshold"]["<b>x</b>"] = {"value": 1, "unit": "<b>x</b>"}
    html = render_run_html([odd_keys], stack="s")
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    parse(html)


def _series_points(elements: list[tuple[str, dict[str, str]]]) -> dict[str, list[tuple[float, float]]]:
    """data-series name -> its circles' (data-x, data-y), in drawing order."""
    out: dict[str, list[tuple[float, float]]] = {}
    name = None
    for tag, attrs in elements:
        if tag == "g" and "data-series" in attrs:
            name = attrs["data-series"]
            out[name] = []
        elif tag == "circle" and name is not None:
            out[name].append((float(attrs["data-x"]), float(attrs["data-y"])))
    return out


def test_the_network_section_draws_busbw_against_message_size_per_group_size(tmp_path: Path) -> None:
    mib = float(1 << 20)

    def group(nodes: list[str], purpose: str, k: float) -> dict[str, Any]:
        curve = [[mib, 0.1 * k], [4 * mib, 0.3 * k], [16 * mib, 0.4 * k]]
        return {"round": 1, "purpose": purpose, "nodes": nodes, "figure": 0.4 * k, "state": "done",
                "message_bytes": 16 * mib, "curve": curve, "size": len(nodes)}  # fmt: skip

    network = {"run_id": "R1", "rounds": 2, "jobs": 5, "problem": None, "links": [], "groups": [
        group(["n1", "n2"], "screen", 1.0), group(["n3", "n4"], "screen", 3.0), group(["n5", "n6"], "screen", 2.0),
        group(["n1", "n2", "n3", "n4"], "scale", 0.5),
        {"round": 1, "purpose": "screen", "nodes": ["n7", "n8"], "figure": None, "state": "no report", "curve": []},
        {"round": 2, "purpose": "scale", "nodes": "n1", "figure": "x", "curve": "<script>"},  # malformed: skipped
    ]}  # fmt: skip
    page = parse(render_run_html([], stack="s", network=network))
    _, elements = page.chart("busbw against message size, per group size (median over groups)")
    assert _series_points(elements) == {
        "2 nodes": [(mib, 0.2), (4 * mib, 0.6), (16 * mib, 0.8)],  # medians over the three pairs
        "4 nodes": [(mib, 0.05), (4 * mib, 0.15), (16 * mib, 0.2)],
    }
    xs = [float(a["cx"]) for t, a in elements if t == "circle"][:3]
    assert xs[2] - xs[1] == pytest.approx(xs[1] - xs[0], abs=0.05)  # 4x steps evenly spaced: log x
    _, scaling = page.chart("busbw against group size (median over groups)")
    assert _series_points(scaling) == {"median busbw": [(2.0, 0.8), (4.0, 0.2)]}
    text = " ".join(page.text)
    assert "1 MiB" in text and "16 MiB" in text  # the numbers' table beside the charts
