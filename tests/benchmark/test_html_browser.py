"""The benchmark page in a real browser (Debian's chromium, headless): the rendered plots carry
their data. A harness page loads the report in an iframe and measures every mark as drawn
(getBoundingClientRect): stacked segments must be as tall as their values say, points must sit
where their values put them, and the figures must be the result document's."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterforge.benchmark.html import render
from tests.benchmark.pages import sample_result

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="needs chromium (scripts/setup.sh --dev installs it)"
    ),
]

HARNESS = """<!DOCTYPE html><html><body>
<iframe id="f" src="report.html" width="1300" height="9000"></iframe><pre id="out">not measured</pre>
<script>
document.getElementById('f').onload = function () {
  var d = document.getElementById('f').contentDocument;
  if (!d) { document.getElementById('out').textContent = 'no access to the report'; return; }
  var box = function (e) { var b = e.getBoundingClientRect(); return {x: b.left + b.width / 2, y: b.top + b.height / 2, w: b.width, h: b.height}; };
  var res = {charts: d.querySelectorAll('svg.chart').length, scripts: d.scripts.length, segments: [], points: []};
  d.querySelectorAll('rect.segment').forEach(function (r) {
    res.segments.push({part: r.dataset.part, value: +r.dataset.value, stack: r.closest('g.stack').dataset.label, box: box(r)});
  });
  d.querySelectorAll('circle.point').forEach(function (c) {
    res.points.push({chart: c.closest('svg').getAttribute('aria-label'), series: c.closest('g.series').dataset.series,
                     x: +c.dataset.x, y: +c.dataset.y, box: box(c)});
  });
  document.getElementById('out').textContent = JSON.stringify(res);
};
</script></body></html>"""


def measure(folder: Path) -> dict[str, Any]:
    argv = [
        "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={folder / 'profile'}",
        "--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom", (folder / "harness.html").as_uri(),
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium gave no page (rc {proc.returncode}): {proc.stderr[-800:]}"
    text = html.unescape(found.group(1))
    assert text.startswith("{"), f"the harness could not measure the report: {text}"
    return json.loads(text)


def linear(pairs: list[tuple[float, float]]) -> bool:
    """Pixel positions are one affine function of the values (within a pixel)."""
    (v0, p0), (v1, p1) = min(pairs), max(pairs)
    if v1 == v0:
        return all(abs(p - p0) <= 1 for _, p in pairs)
    k = (p1 - p0) / (v1 - v0)
    return all(abs(p0 + k * (v - v0) - p) <= 1.0 for v, p in pairs)


def test_rendered_plots_carry_the_results_figures(tmp_path: Path) -> None:
    doc = sample_result()
    (tmp_path / "report.html").write_text(render(doc))
    (tmp_path / "harness.html").write_text(HARNESS)
    got = measure(tmp_path)
    assert got["scripts"] == 0 and got["charts"] >= 6
    # stacked breakdown: one stack per node count, each segment as tall as its seconds say
    train = {f"{p['nodes']} node{'s' if p['nodes'] != 1 else ''}": p for p in doc["train"]["points"]}
    segs = got["segments"]
    assert {s["stack"] for s in segs} == set(train)
    scale = [s["box"]["h"] / s["value"] for s in segs if s["value"] > 0.02]
    assert max(scale) - min(scale) < 0.05 * max(scale), scale
    for s in segs:
        label = s["part"]
        assert any(abs(v - s["value"]) < 1e-9 for v in train[s["stack"]]["breakdown"].values()), (
            label,
            s["value"],
        )
    exposed = [s for s in segs if s["part"] == "exposed communication" and s["stack"] == "4 nodes"]
    assert exposed and exposed[0]["box"]["h"] > 5  # the part the fake made visible is drawn
    # scaling curve: the measured points are the document's tokens/s, placed linearly
    measured = [p for p in got["points"] if p["series"] == "measured"]
    assert sorted((p["x"], p["y"]) for p in measured) == sorted(
        (float(p["nodes"]), p["tokens_per_s"]) for p in train.values()
    )
    assert linear([(p["y"], -p["box"]["y"]) for p in measured])
    assert linear([(p["x"], p["box"]["x"]) for p in measured])
    # latency against batch size: p50 in ms, higher latency drawn higher
    p50 = [p for p in got["points"] if p["series"] == "p50"]
    assert sorted(p["y"] for p in p50) == sorted(1000 * p["latency_p50_s"] for p in doc["infer"]["points"])
    assert linear([(p["y"], -p["box"]["y"]) for p in p50])
