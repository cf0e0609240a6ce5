"""The suite's behaviour around checks: skip, error, verdict, report and JUnit."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from conftest import FakeRunner, gpu_config, make_context, tiny_cpu_config

from validators.checks.base import Check, Context
from validators.report import build_report, junit_xml
from validators.result import CheckResult, Outcome
from validators.suite import run_check, run_checks, verdict


class Exploding(Check):
    id = "exploding"
    group = "preflight"
    profiles = ("quick",)
    measures = "raises, to show that an exception becomes an error result"

    def run(self, ctx: Context) -> CheckResult:
        raise KeyError("gpus")


class Warns(Check):
    id = "warns"
    group = "preflight"
    profiles = ("quick",)

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        out.warn("not judged")
        return out.finish("never")


def test_an_exception_becomes_an_error_result_and_fails_the_node(tmp_path) -> None:
    ctx = make_context(tiny_cpu_config(tmp_path), FakeRunner({}))
    stream = io.StringIO()
    results = run_checks([Exploding(), Warns()], ctx, stream=stream)
    assert [r.status for r in results] == ["error", "warn"]
    assert results[0].summary == "KeyError: 'gpus'"
    assert verdict(results) == "fail"
    assert verdict(results[1:]) == "pass"
    assert stream.getvalue().splitlines()[0].startswith("exploding  ERROR")


def test_skip_checks_and_not_applicable_are_skips_with_their_reason(tmp_path) -> None:
    from validators.checks.gpu import GpuInventory

    cfg = tiny_cpu_config(tmp_path)
    result = run_check(GpuInventory(), make_context(cfg, FakeRunner({})))
    assert result.status == "skip" and result.summary.startswith("not applicable")
    data = gpu_config(skip_checks=["gpu-inventory"])
    result = run_check(GpuInventory(), make_context(data, FakeRunner({})))
    assert result.status == "skip" and "skip_checks" in result.summary


def test_junit_carries_the_same_verdicts() -> None:
    results = [
        CheckResult("a-pass", "pass", "ok"),
        CheckResult("b-fail", "fail", "bad"),
        CheckResult("c-skip", "skip", "n/a"),
        CheckResult("d-error", "error", "boom"),
        CheckResult("e-warn", "warn", "hmm"),
    ]
    report = build_report(
        "n1", "quick", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", verdict(results), results, {}
    )
    root = ET.fromstring(junit_xml(report, {}))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5",
        "1",
        "1",
        "1",
    )
    kinds = {c.get("name"): [x.tag for x in c] for c in suite.iter("testcase")}
    assert kinds == {
        "a-pass": ["system-out"],
        "b-fail": ["failure"],
        "c-skip": ["skipped"],
        "d-error": ["error"],
        "e-warn": ["system-out"],
    }
    assert report["counts"] == {"pass": 1, "fail": 1, "warn": 1, "skip": 1, "error": 1}
