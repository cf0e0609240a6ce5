"""report.json and junit.xml (schemas in SCHEMA.md). Written atomically."""

from __future__ import annotations

import json
import os
import tempfile
import xml.etree.ElementTree as ET
from typing import Any, Dict, List

from validators.result import CheckResult

REPORT_SCHEMA_VERSION = 1


def build_report(
    node: str,
    profile: str,
    started: str,
    finished: str,
    verdict: str,
    results: List[CheckResult],
    extra: Dict[str, Any],
) -> Dict[str, Any]:
    report: Dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "node": node,
        "profile": profile,
        "started": started,
        "finished": finished,
        "verdict": verdict,
        "counts": {
            s: sum(1 for r in results if r.status == s) for s in ("pass", "fail", "warn", "skip", "error")
        },
        "checks": [r.to_json() for r in results],
    }
    report.update(extra)
    return report


def junit_xml(report: Dict[str, Any], groups: Dict[str, str]) -> bytes:
    checks = report["checks"]
    suite = ET.Element(
        "testsuite",
        {
            "name": f"validators.{report['profile']}",
            "hostname": report["node"],
            "timestamp": report["started"],
            "tests": str(len(checks)),
            "failures": str(sum(1 for c in checks if c["status"] == "fail")),
            "errors": str(sum(1 for c in checks if c["status"] == "error")),
            "skipped": str(sum(1 for c in checks if c["status"] == "skip")),
            "time": f"{sum(c['duration_s'] for c in checks):.3f}",
        },
    )
    for c in checks:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"validators.{groups.get(c['id'], 'check')}",
                "name": c["id"],
                "time": f"{c['duration_s']:.3f}",
            },
        )
        detail = "\n".join([c["summary"], *(c["evidence"].get("lines") or [])])
        if c["status"] == "fail":
            ET.SubElement(case, "failure", {"message": c["summary"], "type": "fail"}).text = detail
        elif c["status"] == "error":
            ET.SubElement(case, "error", {"message": c["summary"], "type": "error"}).text = detail
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", {"message": c["summary"]})
        else:
            ET.SubElement(case, "system-out").text = f"{c['status']}: {detail}"
    root = ET.Element("testsuites", {"name": "validators"})
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_reports(out_dir: str, report: Dict[str, Any], groups: Dict[str, str]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    write_atomic(os.path.join(out_dir, "report.json"), (json.dumps(report, indent=2) + "\n").encode())
    write_atomic(os.path.join(out_dir, "junit.xml"), junit_xml(report, groups))
