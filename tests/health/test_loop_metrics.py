"""The loop's textfile, the alert rules that read it, and the entry point's refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from clusterforge.health.loop.__main__ import main, publish
from clusterforge.health.loop.metrics import METRICS, TEXTFILE
from clusterforge.journal import Journal
from tests.health.fake_head import FakeHead
from tests.health.test_loop import NODES, Clock, config, round_

ROOT = Path(__file__).resolve().parents[2]


def test_the_textfile_has_every_figure_and_the_rules_read_only_those(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    textfile = tmp_path / "node-exporter"
    textfile.mkdir()
    cfg = type(cfg)(**{**cfg.__dict__, "textfile_dir": str(textfile)})
    head, clock = FakeHead(NODES), Clock()
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="boom")
    journal = Journal(cfg.stack, root=cfg.state_dir)
    result = round_(cfg, head, clock, journal)
    publish(cfg, journal, result, clock())
    text = (textfile / TEXTFILE).read_text()
    published = set(re.findall(r"^(clusterforge_health_\w+)", text, re.MULTILINE))
    assert published == set(METRICS)
    assert 'clusterforge_health_strikes{node="node-001"} 1' in text
    assert 'clusterforge_health_state{node="node-001",state="drained"} 1' in text
    assert 'clusterforge_health_state{node="node-002",state="checking"} 1' in text
    clock.advance(600)
    publish(cfg, journal, round_(cfg, head, clock, journal), clock())
    text = (textfile / TEXTFILE).read_text()
    assert re.search(r'clusterforge_health_state_seconds\{node="node-002",state="checking"\} (\d+)', text)
    seconds = int(re.search(r'state_seconds\{node="node-002",state="checking"\} (\d+)', text).group(1))
    assert 590 <= seconds <= 700  # the time in a state carries over between rounds
    rules = yaml.safe_load((ROOT / "roles/monitoring/files/clusterforge-health.rules.yml").read_text())
    (group,) = [g for g in rules["groups"] if g["name"] == "clusterforge-health-loop"]
    for rule in group["rules"]:
        named = set(re.findall(r"\b(clusterforge_\w+)", rule["expr"]))
        assert named and named <= published, rule["expr"]


def test_a_paused_round_says_so_in_the_textfile(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    cfg = type(cfg)(**{**cfg.__dict__, "textfile_dir": str(tmp_path)})
    head = FakeHead(NODES)
    head.controller_up = False
    journal = Journal(cfg.stack, root=cfg.state_dir)
    publish(cfg, journal, round_(cfg, head, Clock(), journal), 1.8e9)
    assert "clusterforge_health_paused 1" in (tmp_path / TEXTFILE).read_text()


def test_a_bad_configuration_is_named_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "health-loop.json"
    path.write_text(json.dumps({"stack": "t", "nodes": {}, "state_dir": str(tmp_path)}))
    assert main(["--config", str(path)]) == 1
    assert "missing key 'active_suite'" in capsys.readouterr().err
