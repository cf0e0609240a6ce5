"""Parse the stdout of an nccl-tests binary (all_reduce_perf, all_gather_perf, ...) or its `-J` JSON file.

Formats read (NVIDIA/nccl-tests src/common.cu and src/util.cu across releases):
- 2017-18 (NCCL 1.x):  `bytes N type op time algbw busbw res ...` (float `res` column)
- 2019-21:             `size count type redop [root] time algbw busbw error ...` (float `error` column;
                       all_gather/all_to_all print neither redop nor root, broadcast prints root only)
- 2022+:               `size count type redop root time algbw busbw #wrong ...` (integer count, `N/A` with
                       `-c 0`, printed with %g so large counts come out as `1.04858e+06`)
- 2.17.4+:             `# nccl-tests version ...`, `# Collective test starting: X_perf` and
                       `# Collective test concluded: X_perf` (src/util.cu, commit 7bfcb34); `-J FILE` JSON from
                       2.17.3; optional `#bitdiff`, per-iteration and timestamp columns, which are read by name
                       from the header line and otherwise ignored. v2.14.1 (the project's pin) has none of these.
Lines may carry srun (`0: `), Open MPI (`[1,0]<stdout>:`) or MPICH (`[0] `) tags, and NCCL INFO/WARN lines
may be interleaved anywhere, including between table rows. 2019-21 releases printed the op and root of a
collective without them as blanks (alltoall under a `redop` header): such rows are read from the right. A
log may hold several runs one after another: rows are kept in order, `runs` counts them and the
out-of-bounds counts are summed so a failed run is not hidden by a later passing one.

How rows really arrive (nccl-tests prints a row in pieces, src/common.cu: the lead columns, then each
side with its own printf): an NCCL log line can start in the middle of a row (NCCL >= 2.22 connects
lazily, at a collective's first use, and logs it then: NVIDIA/nccl issue 1453), MPICH's `-prepend-rank`
tags each piece (`-1[0]     159.4`), a terminal or a paste adds escape codes, indentation or loses
separators. A row is rejoined from its pieces across interleaved log lines; a row that cannot be read
whole, or whose figures disagree with the rest of the run (algbw x time / size and busbw / algbw are
constant within a run, so a column read from the wrong place shows), is never guessed at: it goes to
`refused` with its line number and text, and the check judges that, not a shifted figure.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from validators.parsers._common import strip_ansi, strip_launcher_prefix, to_float, to_int

_BINARY = re.compile(r"\b((?:[a-z]+_)*[a-z]+)_perf(?:_mpi)?\b")
_STARTING = re.compile(r"^#\s*Collective test (?:starting|concluded):\s*(\S+)")
_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
_HEADER_PARAMS = re.compile(r"nThreads?:?\s+(\d+)\s+nGpus:?\s+(\d+)")
_VALIDATION = re.compile(r"\bvalidation:?\s+(\d+)")
# "#  Rank  0 Group  0 Pid 123 on host device  0 [0x31] NAME" ; oldest releases lack Group and/or Pid.
_RANK_LINE = re.compile(
    r"^#\s+Rank\s+(\d+)(?:\s+Group\s+\d+)?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$"
)
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_BITWISE = re.compile(r"^#\s*Bitwise mismatches\s*:\s*(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
# The footer as pasted without its "#" (NVIDIA/nccl-tests issue 37: " Out of bounds values : 2 FAILED"): still
# the footer, so a failed check is not lost and the run is not taken for one that died.
_BARE_FOOTER = re.compile(r"^(?:Out of bounds values|Avg bus bandwidth|Bitwise mismatches)\s*:")
# #wrong is an integer printed with %g ("16384", "1.04858e+06") or N/A; the old error column is %.0e ("2e-07").
_WRONG_TOKEN = re.compile(r"^(?:\d+|N/A|\d\.\d+e\+\d+)$")
# An NCCL log line's prefix, "host:pid:tid [cudaDev] NCCL INFO" (NCCL src/debug.cc), possibly after an MPICH
# rank tag: where it starts inside a table row, the rest of the line is the log's, not the row's.
_LOG_FRAGMENT = re.compile(r"(?:\[\d+\]\s*)?[\w.\-]+:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE|ABORT)\b")
# MPICH/Hydra -prepend-rank tags each printf piece of a row, so "[0]" also appears mid-row.
_MID_TAG = re.compile(r"\[\d+\]")
_ERROR_LINE = re.compile(
    r"NCCL WARN|Test (?:NCCL |CUDA )?failure|NCCL failure|Test timeout|^# error:|Bitwise mismatch \("
)

# Header names of the leading columns, per release, mapped onto our field names.
_LEAD_NAMES = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "n": "count",
    "type": "type",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_TIME_NAMES = ("time", "cputime")
_CHECK_NAMES = {"#wrong": "wrong", "error": "error", "res": "error"}


def _side(tokens: List[str], cols: Dict[str, int]) -> Dict[str, Any]:
    side: Dict[str, Any] = {
        "time_us": to_float(tokens[cols["time"]]),
        "algbw": to_float(tokens[cols["algbw"]]),
        "busbw": to_float(tokens[cols["busbw"]]),
        "wrong": None,
        "error": None,
    }
    if "wrong" in cols:
        side["wrong"] = to_int(tokens[cols["wrong"]])  # "N/A" (-c 0) -> None
    elif "error" in cols:
        side["error"] = to_float(tokens[cols["error"]])
    return side


class _Layout:
    """Column positions of one table, from its header line or guessed from a row."""

    def __init__(self, lead: Dict[str, int], sides: List[Dict[str, int]]) -> None:
        self.lead = lead
        self.sides = sides
        self.width = 1 + max([*lead.values(), *(i for s in sides for i in s.values())])

    @classmethod
    def from_header(cls, names: List[str]) -> Optional[_Layout]:
        lead: Dict[str, int] = {}
        sides: List[Dict[str, int]] = []
        for index, raw in enumerate(names):
            name = raw.lower()
            if name in _TIME_NAMES:
                sides.append({"time": index})
            elif not sides and name in _LEAD_NAMES:
                lead[_LEAD_NAMES[name]] = index
            elif sides and name in ("algbw", "busbw"):
                sides[-1].setdefault(name, index)
            elif sides and name in _CHECK_NAMES:
                sides[-1].setdefault(_CHECK_NAMES[name], index)
        if "size" not in lead or len(sides) != 2 or any(len(s) < 3 for s in sides):
            return None
        return cls(lead, sides)

    @classmethod
    def guess(cls, tokens: List[str]) -> Optional[_Layout]:
        """Layout for a row seen without a header (e.g. a log trimmed to its table rows)."""
        lead = {"size": 0, "count": 1, "type": 2}
        pos = 3
        if len(tokens) > pos and to_float(tokens[pos]) is None:
            lead["redop"] = pos
            pos += 1
        if len(tokens) >= pos + 9:  # root present when the remaining columns are 2 x 4 plus one
            lead["root"] = pos
            pos += 1
        if len(tokens) < pos + 8:
            return None
        check = "wrong" if _WRONG_TOKEN.match(tokens[pos + 3]) else "error"
        sides = [{"time": p, "algbw": p + 1, "busbw": p + 2, check: p + 3} for p in (pos, pos + 4)]
        return cls(lead, sides)

    def _short_row(self, tokens: List[str]) -> Optional[_Layout]:
        """Layout for a row that left out lead columns its header names.

        Releases of 2019-21 printed the op and root of a collective that has none as blank strings
        (alltoall: `float           520935 ...` under a `type redop time` header), so the row has fewer
        tokens than the header. The result columns are still the last ones: read them from the right and
        take the lead columns that are there (a word is the redop, a number the root).
        """
        missing = self.width - len(tokens)
        first = min(self.sides[0].values())
        present = first - missing
        if missing <= 0 or present < 3 or len(self.lead) - present != missing:
            return None
        lead = {"size": 0, "count": 1, "type": 2}
        for index in range(3, present):
            lead["redop" if to_float(tokens[index]) is None else "root"] = index
        sides = [{name: pos - missing for name, pos in side.items()} for side in self.sides]
        for side in sides:  # a row cut short by a crash or a paste must not be read as a shifted one
            for name in ("time", "algbw", "busbw"):
                value = to_float(tokens[side[name]])
                if value is None or value < 0:
                    return None
        return _Layout(lead, sides)

    def row(self, tokens: List[str]) -> Optional[Dict[str, Any]]:
        if to_int(tokens[0]) is None:
            return None
        if len(tokens) < self.width:
            short = self._short_row(tokens)
            return short.row(tokens) if short is not None else None
        lead = self.lead
        root: Optional[int] = None
        if "root" in lead:
            root = to_int(tokens[lead["root"]])  # "none"/"-1" print as -1 or text: text -> None
        return {
            "size": to_int(tokens[lead["size"]]),
            "count": to_int(tokens[lead["count"]]) if "count" in lead else None,
            "type": tokens[lead["type"]] if "type" in lead else None,
            "redop": tokens[lead["redop"]] if "redop" in lead else None,
            "root": root,
            "out_of_place": _side(tokens, self.sides[0]),
            "in_place": _side(tokens, self.sides[1]),
        }


def _collective_from(binary: Optional[str]) -> Optional[str]:
    if not binary:
        return None
    match = _BINARY.search(binary)
    return match.group(1) if match else None


def _finish(result: Dict[str, Any]) -> Dict[str, Any]:
    rows = result["rows"]
    any_wrong = any((row[side]["wrong"] or 0) > 0 for row in rows for side in ("out_of_place", "in_place"))
    result["ok"] = bool(
        result["complete"]
        and rows
        and not any_wrong
        and result["out_of_bounds"] == 0
        and not result.get("bitwise_mismatches")
        and result.get("avg_busbw_check") != "FAILED"
    )
    return result


def _parse_json(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The `-J FILE` document (JSON_FILE_VERSION 3, src/util.cu)."""
    rows = []
    for rec in doc.get("results") or []:
        row: Dict[str, Any] = {
            "size": rec.get("size"),
            "count": rec.get("count"),
            "type": rec.get("type"),
            "redop": rec.get("redop"),
            "root": to_int(str(rec.get("root", "")).strip()),
        }
        for key in ("out_of_place", "in_place"):
            part = rec.get(key) or {}
            wrong = part.get("nwrong")
            row[key] = {
                "time_us": part.get("time", part.get("cpu_time")),
                "algbw": part.get("alg_bw"),
                "busbw": part.get("bus_bw"),
                "wrong": None if wrong is None else int(wrong),
                "error": None,
            }
        rows.append(row)
    args = doc.get("args") or []
    config = doc.get("config") or {}
    oob = doc.get("out_of_bounds") or {}
    avg = doc.get("average_bus_bandwidth") or {}
    result: Dict[str, Any] = {
        "format": "json",
        "version": doc.get("version"),
        "collective": _collective_from(args[0] if args else None),
        "ranks": len(config.get("devices") or []) or None,
        "rows": rows,
        "out_of_bounds": oob.get("count"),
        "avg_busbw": to_float(str(avg.get("bandwidth"))) if "bandwidth" in avg else None,
        # "okay" is true/false (as the strings "true"/"false") when given -C, else "unchecked"
        "avg_busbw_check": {"true": "OK", "false": "FAILED"}.get(str(avg.get("okay")).lower()),
        "complete": "out_of_bounds" in doc,
        "errors": [e for e in doc.get("errors") or [] if e],
    }
    if "bitwise_mismatches" in doc:
        result["bitwise_mismatches"] = (doc["bitwise_mismatches"] or {}).get("count")
    return _finish(result)


def _is_figure(token: str) -> bool:
    return token == "N/A" or to_float(token) is not None


def _is_row_head(tokens: List[str]) -> bool:
    """The start of a table row: a size, a count and a data type word (float, half, bfloat16, int8...)."""
    return (
        len(tokens) >= 3
        and tokens[0].isdigit()
        and tokens[1].isdigit()
        and to_float(tokens[2]) is None
        and tokens[2].isalnum()
    )


def _lead_size(line: str) -> Optional[int]:
    first = _MID_TAG.sub(" ", line).split()[:1]
    return int(first[0]) if first and first[0].isdigit() else None


class _Pending:
    """A row whose pieces arrive on several lines (an NCCL log line cut it)."""

    def __init__(self, number: int, text: str, tokens: List[str]) -> None:
        self.number, self.text, self.tokens = number, text, list(tokens)

    def add(self, number: int, tokens: List[str]) -> None:
        self.tokens += tokens
        self.text += f" | line {number}: " + " ".join(tokens)

    def complete(self, layout: Optional[_Layout]) -> Optional[Dict[str, Any]]:
        if layout is None or len(self.tokens) != layout.width:
            return None
        return layout.row(self.tokens)

    def refusal(self, why: str) -> Tuple[int, str, str]:
        return self.number, self.text, f"row cut short ({len(self.tokens)} columns): {why}"


# Figures of one run agree with each other: algbw x time / size is the same constant on every row (1 in
# current releases; (n-1)/n or 1/2 in some old all_gather builds), and so is busbw / algbw (the
# collective's bus factor). A row read with its columns shifted breaks one of them. The tolerance covers
# the printed precision (algbw and busbw %6.2f, time to 2, 1 or 0 decimals) with room to spare.
_ABS_TOL = 0.011
_REL_TOL = 0.03


def _ratios(row: Dict[str, Any]) -> List[Tuple[str, float, float, float]]:
    """(what, printed value, reference figure, ratio) per side; only where the figures carry precision."""
    out: List[Tuple[str, float, float, float]] = []
    for side in ("out_of_place", "in_place"):
        part = row.get(side) or {}
        values = (part.get("time_us"), part.get("algbw"), part.get("busbw"), row.get("size"))
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            continue
        time_us, algbw, busbw, size = (float(v) for v in values)  # type: ignore[arg-type]  # checked numeric on the line above
        if time_us <= 0:
            continue
        rate = size / time_us / 1e3  # bytes / us / 1e3 = GB/s
        if algbw >= 0.1 and rate > 0:
            out.append((f"{side} algbw", algbw, rate, algbw / rate))
        if algbw >= 0.1:
            out.append((f"{side} busbw", busbw, algbw, busbw / algbw))
    return out


def _consistent(
    rows: List[Dict[str, Any]], lines_of: List[Tuple[int, str]], refused: List[Dict[str, Any]]
) -> Tuple[List[Dict[str, Any]], List[Tuple[int, str]]]:
    """Rows whose figures agree with the run's; the others are refused with their line."""
    import statistics

    every: Dict[str, List[float]] = {}
    for row in rows:
        for what, _, _, ratio in _ratios(row):
            every.setdefault(what.split()[-1], []).append(ratio)
    if not every:
        return rows, lines_of
    median = {what: statistics.median(values) for what, values in every.items()}
    kept: List[Dict[str, Any]] = []
    kept_lines: List[Tuple[int, str]] = []
    for index, row in enumerate(rows):  # (no zip(strict=): Python 3.9)
        number, text = lines_of[index]
        bad = [
            f"{what} {value:g} is not {median[what.split()[-1]]:.3g} x {ref:.4g} like the rest of the run"
            for what, value, ref, ratio in _ratios(row)
            if abs(value - median[what.split()[-1]] * ref)
            > _ABS_TOL + _REL_TOL * median[what.split()[-1]] * ref
        ]
        if bad:
            refused.append(
                {
                    "line": number,
                    "text": text,
                    "size": row.get("size"),
                    "why": "columns out of place: " + bad[0],
                }
            )
            continue
        kept.append(row)
        kept_lines.append((number, text))
    return kept, kept_lines


def parse_nccl_tests(text: str) -> Dict[str, Any]:
    """Parse one nccl-tests run (text stdout, or the JSON written by -J). See the package docstring."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            return _parse_json(json.loads(stripped))
        except ValueError:
            pass  # not JSON after all: read it as text
    text = strip_ansi(text)
    binary: Optional[str] = None
    version: Optional[str] = None
    header_ranks: Optional[int] = None
    ranks_seen: Dict[int, Dict[str, Any]] = {}
    layout: Optional[_Layout] = None
    rows: List[Dict[str, Any]] = []
    lines_of: List[Tuple[int, str]] = []  # (line number, text) of each row, for refusals
    refused: List[Dict[str, Any]] = []
    pending: Optional[_Pending] = None  # a row whose pieces are still arriving
    last_layout: Optional[_Layout] = None
    errors: List[str] = []
    out_of_bounds: Optional[int] = None
    bitwise: Optional[int] = None
    avg: Optional[float] = None
    avg_check: Optional[str] = None
    footers = 0  # "# Out of bounds values" lines: one per run in the log

    def refuse(number: int, line: str, why: str) -> None:
        refused.append({"line": number, "text": line, "size": _lead_size(line), "why": why})

    for number, raw in enumerate(text.splitlines(), 1):
        line = strip_launcher_prefix(raw).rstrip()
        body = line.strip()
        if not body:
            continue
        cut = _LOG_FRAGMENT.search(body)
        if cut is not None and cut.start() > 0 and body[:1].isdigit():
            # A row interrupted by an NCCL log line: keep the row's piece, the rest is the log's.
            log = body[cut.start() :]
            if _ERROR_LINE.search(log):
                errors.append(log)
            body = body[: cut.start()].rstrip()
        elif _ERROR_LINE.search(body):
            errors.append(body)
            continue
        if _BARE_FOOTER.match(body):
            body = "# " + body
        if body.startswith("#"):
            if pending is not None:
                refuse(*pending.refusal("the run's next header or footer came before the rest of it"))
                pending = None
            match = _STARTING.match(body)
            if match:
                binary = binary or match.group(1)
                continue
            match = _VERSION.match(body)
            if match:
                version = match.group(1)
                continue
            match = _RANK_LINE.match(body)
            if match:
                ranks_seen[int(match.group(1))] = {
                    "rank": int(match.group(1)),
                    "pid": to_int(match.group(2)),
                    "host": match.group(3),
                    "device": int(match.group(4)),
                    "bus": match.group(5),
                    "name": match.group(6).strip(),
                }
                continue
            match = _OOB.match(body)
            if match:
                # a log holding several runs (one test after another) fails if any of them did
                out_of_bounds = (out_of_bounds or 0) + int(match.group(1))
                footers += 1
                continue
            match = _BITWISE.match(body)
            if match:
                bitwise = (bitwise or 0) + int(match.group(1))
                continue
            match = _AVG.match(body)
            if match:
                avg = to_float(match.group(1))
                avg_check = "FAILED" if "FAILED" in (avg_check, match.group(2)) else match.group(2)
                continue
            names = body.lstrip("#").split()
            if names and names[0].lower() in ("size", "bytes"):
                layout = _Layout.from_header(names) or layout
            continue
        params = _HEADER_PARAMS.search(body)
        if params and header_ranks is None and "minBytes" in body:
            header_ranks = int(params.group(1)) * int(params.group(2))
        if binary is None and "_perf" in body and not body[:1].isdigit():
            match = _BINARY.search(body)  # a command line echoed before the run
            binary = match.group(0) if match else None
        tokens = _MID_TAG.sub(" ", body).split() if body[:1].isdigit() or body[:1] == "-" else body.split()
        if pending is not None:
            if tokens and all(_is_figure(t) for t in tokens):
                pending.add(number, tokens)
                known = layout or last_layout
                done = pending.complete(known)
                if done is not None:
                    rows.append(done)
                    lines_of.append((pending.number, pending.text))
                    pending = None
                elif known is not None and len(pending.tokens) > known.width:
                    refuse(
                        *pending.refusal(
                            f"its pieces make {len(pending.tokens)} columns, the table {known.width}"
                        )
                    )
                    pending = None
                continue
            if not tokens or not _is_row_head(tokens):
                continue  # NCCL INFO lines and launcher chatter between the pieces of a row
            refuse(*pending.refusal("the next row began before the rest of it"))
            pending = None
        if not tokens or to_int(tokens[0]) is None or not tokens[0].lstrip("-").isdigit():
            continue  # NCCL INFO lines, launcher chatter, "..." elisions
        row_layout = layout or _Layout.guess(tokens)
        row = row_layout.row(tokens) if row_layout else None
        known = layout or last_layout  # a log without its header: the layout of the rows read so far
        if row is not None:
            rows.append(row)
            lines_of.append((number, body))
            last_layout = row_layout
        elif known is not None and len(tokens) < known.width and _is_row_head(tokens):
            pending = _Pending(number, body, tokens)
        elif _is_row_head(tokens) or all(_is_figure(t) for t in tokens):
            width = f"the table's {known.width}" if known else "a table row's"
            refuse(number, body, f"{len(tokens)} columns, not {width}: columns run together or cut short")
    if pending is not None:
        refuse(*pending.refusal("the output ends before the rest of it"))
    rows, lines_of = _consistent(rows, lines_of, refused)
    headers = sum(1 for line in text.splitlines() if "minBytes" in line and _HEADER_PARAMS.search(line))
    header = re.search(r"^.*\bminBytes\b.*$", text, re.MULTILINE)
    check = _VALIDATION.search(header.group(0)) if header else None
    validation = int(check.group(1)) if check else None  # 0 with -c 0: nothing was checked, #wrong N/A
    if header_ranks is None:
        params = _HEADER_PARAMS.search(text)
        header_ranks = int(params.group(1)) * int(params.group(2)) if params else None
    result: Dict[str, Any] = {
        "format": "text",
        "version": version,
        "binary": binary,
        "collective": _collective_from(binary),
        "ranks": (max(ranks_seen) + 1) if ranks_seen else header_ranks,
        "validation": validation,
        "runs": max(footers, headers, 1 if rows else 0),
        "devices": [ranks_seen[k] for k in sorted(ranks_seen)],
        "rows": rows,
        "out_of_bounds": out_of_bounds,
        "avg_busbw": avg,
        "avg_busbw_check": avg_check,
        "complete": out_of_bounds is not None and avg is not None,
        "errors": errors,
        "refused": refused,
    }
    if bitwise is not None:
        result["bitwise_mismatches"] = bitwise
    return _finish(result)
