"""Parse `dcgmi diag` output: the `-j` JSON of DCGM 3.x and 4.x, and the boxed text table.

JSON: DCGM 3.x puts everything under "DCGM GPU Diagnostic" with per-result `gpu_id`/`gpu_ids`
(a string, "0,1,2", or a number) and sometimes `null` entries in the test lists; DCGM 4.x uses
"DCGM Diagnostic", per-result `entity_group`/`entity_id`, a `test_summary` and a top-level
`metadata`. dcgmi may print a banner ("Successfully ran diagnostic for group.", warnings) before the
document, which is skipped.

Text: rows `| name | result |` under section rows (`|-----  Deployment  ---...`); per-GPU results as
`Pass - GPUs: 1, 2` / `Fail - GPU: 0` (3.x) or `GPU0: Pass` (4.x) continuation rows; `Warning`,
`Error` and `Info` rows carry messages that wrap across rows at a fixed width.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from validators.parsers._common import strip_ansi

_RANK = {"fail": 5, "warn": 4, "pass": 3, "skip": 2, "not_run": 1}
# Message rows: "Warning", "Error", "Info", also qualified ("Warning: GPU0", "Info GPU 1"), which must never
# be read as a test named after them.
_MESSAGE_ROW = re.compile(r"^(warning|error|info)\b[\s:-]*(.*)$", re.IGNORECASE)
_METADATA_SECTION = "metadata"
_PER_GPU_3X = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)\s*-\s*GPUs?:\s*([\d,\s]+)$", re.IGNORECASE)
_PER_GPU_4X = re.compile(r"^GPU\s*(\d+):\s*(Pass|Fail|Warn|Skip|Not Run)\b", re.IGNORECASE)
_SECTION = re.compile(r"^[|+]-+\s+(\w[\w ]*?)\s+-+\+")
_ERROR_LINE = re.compile(r"^Error:.*$", re.MULTILINE)


def normalise_status(raw: Any) -> str:
    """DCGM status word -> pass/fail/warn/skip/not_run. An unknown word is never read as a pass."""
    text = str(raw or "").strip().lower().replace("_", " ")
    if text.startswith("pass"):
        return "pass"
    if text.startswith("warn"):
        return "warn"
    if text.startswith("skip"):
        return "skip"
    if text in ("not run", "notrun", "not ran", "not_run"):
        return "not_run"
    return "fail"  # "Fail", "FAILED", and anything unrecognised


def _worst(statuses: List[str]) -> str:
    return max(statuses, key=lambda s: _RANK[s]) if statuses else "not_run"


def _finish(tests: List[Dict[str, Any]], extra: Dict[str, Any]) -> Dict[str, Any]:
    failed = [t["name"] for t in tests if t["status"] == "fail"]
    result = {"tests": tests, "failed": failed, "ok": bool(tests) and not failed}
    result["skipped"] = [t["name"] for t in tests if t["status"] in ("skip", "not_run")]
    result.update(extra)
    result.setdefault("error", None)
    if not tests and result["error"] is None:
        result["error"] = "dcgmi diag output holds no test results"
    return result


# ---------------------------------------------------------------- JSON (-j)


def _gpu_indices(result: Dict[str, Any]) -> List[str]:
    if result.get("entity_group") not in (None, "GPU"):
        return []
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        if key in result and result[key] is not None:
            return [part.strip() for part in str(result[key]).split(",") if part.strip()]
    return []


def _messages(container: Dict[str, Any]) -> List[str]:
    out: List[str] = []
    for key in ("warnings", "info", "errors"):
        items = container.get(key) or []
        if isinstance(items, (str, dict)):
            items = [items]
        for item in items:
            text = (
                item.get("warning") or item.get("message") or item.get("info")
                if isinstance(item, dict)
                else item
            )
            if text:
                out.append(str(text).strip())
    return out


def _result_root(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The object holding test_categories: "DCGM Diagnostic" (4.x), "DCGM GPU Diagnostic" (<= 3.x), any
    other top-level key whose value has test_categories or a runtime_error, or the document itself."""
    for key in ("DCGM Diagnostic", "DCGM GPU Diagnostic"):
        if isinstance(doc.get(key), dict):
            return doc[key]
    for value in doc.values():
        if isinstance(value, dict) and ("test_categories" in value or "runtime_error" in value):
            return value
    return doc if "test_categories" in doc else {}


def _parse_json(doc: Dict[str, Any]) -> Dict[str, Any]:
    root = _result_root(doc)
    metadata = doc.get("metadata") or {}
    tests: List[Dict[str, Any]] = []
    for category in root.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or []:
            if not isinstance(test, dict):
                continue  # DCGM 3.x emits `null` between tests
            gpus: Dict[str, str] = {}
            messages: List[str] = []
            statuses: List[str] = []
            for res in test.get("results") or []:
                if not isinstance(res, dict):
                    continue
                status = normalise_status(res.get("status"))
                statuses.append(status)
                for index in _gpu_indices(res):
                    gpus[index] = _worst([gpus[index], status]) if index in gpus else status
                messages.extend(_messages(res))
            summary = test.get("test_summary") or {}
            if isinstance(summary, dict):
                messages.extend(_messages(summary))
                if summary.get("status"):
                    statuses.append(normalise_status(summary["status"]))
            tests.append(
                {
                    "name": str(test.get("name", "")),
                    "category": category.get("category"),
                    "status": _worst(statuses),
                    "gpus": gpus,
                    "messages": messages,
                }
            )
    version = root.get("version") or metadata.get("version")
    driver = (
        root.get("Driver Version Detected")
        or metadata.get("Driver Version Detected")
        or root.get("driver_version_detected")
    )
    extra: Dict[str, Any] = {"format": "json", "version": version, "driver_version": driver}
    if not root:
        extra["error"] = "no 'DCGM Diagnostic' / 'DCGM GPU Diagnostic' object in the dcgmi JSON"
    elif root.get("runtime_error"):  # nvvs could not run the tests (JsonResult.hpp: "runtime_error")
        extra["error"] = str(root["runtime_error"]).strip()
    if isinstance(root.get("Warning"), str):  # e.g. a deprecation message next to the results
        extra["warning"] = root["Warning"].strip()
    return _finish(tests, extra)


# ---------------------------------------------------------------- text table


def _cells(line: str) -> Optional[Tuple[str, str, int]]:
    """`| name | result |` -> (name, result without its pad, wrap width or 0 when the row is cut); None for
    rules and non-table lines."""
    if not line.startswith("|") or line.startswith("|=") or line.startswith("|-"):
        return None
    parts = line.split("|")
    if len(parts) < 3:
        return None
    name = parts[1].strip()
    result = parts[2]
    result = result[1:] if result.startswith(" ") else result  # one pad blank; keep the rest (wrapped text)
    return name, result.rstrip(), (_wrap_width(parts[2]) if len(parts) > 3 else 0)


def _wrap_width(cell: str) -> int:
    """dcgmi cuts a long message into chunks of the cell width less its 3 pad blanks (45 of 48)."""
    return max(len(cell) - 3, 0)


def _parse_text(text: str) -> Dict[str, Any]:
    tests: List[Dict[str, Any]] = []
    metadata: Dict[str, str] = {}
    section: Optional[str] = None
    current: Optional[Dict[str, Any]] = None
    in_message = False
    chunk = ""  # the last piece of a wrapped message, as printed
    for raw in text.splitlines():
        line = raw.strip()  # a copy may indent the whole table (a list item in a README)
        match = _SECTION.match(line)
        if match:
            section = match.group(1).strip()
            current, in_message = None, False
            continue
        cells = _cells(line)
        if cells is None:
            continue
        name, result, width = cells
        if name == "Diagnostic" and result.strip() == "Result":
            continue
        if (section or "").lower() == _METADATA_SECTION:
            metadata[name] = result.strip()
            continue
        message_row = _MESSAGE_ROW.match(name)
        if message_row:
            kind, qualifier = message_row.group(1).lower(), message_row.group(2).strip()
            if current is None:  # an Error with no test row before it: the section itself failed
                current = {
                    "name": section or name,
                    "category": section,
                    "status": "fail",
                    "gpus": {},
                    "messages": [],
                }
                tests.append(current)
            if kind == "error":
                current["status"] = "fail"
            current["messages"].append(f"{qualifier}: {result.strip()}" if qualifier else result.strip())
            in_message, chunk = True, result
            continue
        if name:
            words = result.strip()
            per_gpu = _PER_GPU_3X.match(words)
            current = {
                "name": name,
                "category": section,
                "status": normalise_status(words.split(" - ")[0]),
                "gpus": {},
                "messages": [],
            }
            tests.append(current)
            in_message = False
            if per_gpu:
                for index in re.findall(r"\d+", per_gpu.group(2)):
                    current["gpus"][index] = normalise_status(per_gpu.group(1))
            continue
        if current is None:
            continue
        stripped = result.strip()
        per_gpu_3 = _PER_GPU_3X.match(stripped)
        per_gpu_4 = _PER_GPU_4X.match(stripped)
        if per_gpu_3 or per_gpu_4:
            in_message = False
            if per_gpu_3:
                pairs = [(i, per_gpu_3.group(1)) for i in re.findall(r"\d+", per_gpu_3.group(2))]
            elif per_gpu_4:
                pairs = [(per_gpu_4.group(1), per_gpu_4.group(2))]
            for index, word in pairs:
                status = normalise_status(word)
                current["gpus"][index] = status
                current["status"] = _worst([current["status"], status])
        elif in_message and current["messages"]:
            # Fixed-width wrap: the split can fall inside a word ("desire|d"), so chunks are joined as
            # they are; a chunk shorter than the width lost a blank at its end to the row's padding.
            gap = " " if width and len(chunk) < width and not result.startswith(" ") else ""
            current["messages"][-1] += gap + result
            chunk = result
        elif stripped:
            current["messages"].append(stripped)
    extra: Dict[str, Any] = {
        "format": "text",
        "version": metadata.get("DCGM Version"),
        "driver_version": metadata.get("Driver Version Detected"),
    }
    errors = [line.strip() for line in _ERROR_LINE.findall(text)]
    if errors:
        extra["error"] = "; ".join(
            errors
        )  # dcgmi prints the failure, then its cause ("Cannot load plugins...")
    return _finish(tests, extra)


def parse_dcgmi_diag(text: str) -> Dict[str, Any]:
    """Parse `dcgmi diag` output (JSON or text). See the package docstring for the fields."""
    text = strip_ansi(text)  # a terminal's colours and underlines (validators/parsers/_common.py)
    start = text.find("{")
    if start != -1 and not text[:start].lstrip().startswith("+"):
        try:
            doc, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return _parse_json(doc)
    return _parse_text(text)
