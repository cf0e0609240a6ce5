"""The benchmark page's source (fast): self-contained, escaped, every plot mark carries its figure."""

from __future__ import annotations

import copy
import re

from clusterforge.benchmark.html import render
from tests.benchmark.pages import sample_result


def test_the_page_is_self_contained_and_has_every_section() -> None:
    page = render(sample_result())
    assert "<script" not in page.lower()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    for section in ('id="train"', 'id="infer"', 'id="data"', 'id="telemetry"', 'id="runs"', 'id="software"'):
        assert section in page
    assert page.count('class="chart ') >= 6


def test_marks_carry_the_figures_of_the_result() -> None:
    doc = sample_result()
    page = render(doc)
    for p in doc["train"]["points"]:
        assert f'data-x="{float(p["nodes"])!r}" data-y="{float(p["tokens_per_s"])!r}"' in page
        for part, value in p["breakdown"].items():
            assert re.search(rf'data-part="[^"]+" data-value="{re.escape(repr(value))}"', page), (part, value)
    for p in doc["infer"]["points"]:
        assert f'data-y="{1000 * p["latency_p50_s"]!r}"' in page


def test_text_from_nodes_is_escaped() -> None:
    doc = copy.deepcopy(sample_result())
    evil = "<script>alert(1)</script>"
    doc["software"]["node-001"]["kernel"] = evil
    doc["failures"] = [f"train-2n: rank 1 on node-002 exited 1 at step 3: {evil}"]
    doc["telemetry"]["train-2n"][evil] = doc["telemetry"]["train-2n"]["node-001"]
    page = render(doc)
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_at_scale_the_page_summarises_nodes_and_ranks() -> None:
    doc = copy.deepcopy(sample_result())
    tel = doc["telemetry"]["train-4n"]
    one = tel["node-001"]
    for i in range(40):
        tel[f"node-{i + 100:04d}"] = copy.deepcopy(one)
    p4 = next(p for p in doc["train"]["points"] if p["nodes"] == 4)
    p4["ranks"] = 40
    p4["ranks_detail"] = [{**p4["ranks_detail"][0], "rank": r, "own_s": r / 100} for r in range(40)]
    page = render(doc)
    assert 'data-series="median of 44 nodes"' in page and 'data-series="node-0100"' not in page
    assert "the 16 slowest of 40" in page and "<td>39</td>" in page and "<td>3</td><td" not in page
