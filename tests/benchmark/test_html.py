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
