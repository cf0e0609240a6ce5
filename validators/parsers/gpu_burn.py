"""Parse the output of wilicc/gpu-burn (`gpu_burn [-d] [-tc] SECONDS`).

Progress records look like `60.0%  proc'd: 10 (2047 Gflop/s) - ...   errors: 0 - ...   temps: 46 C - ...`
(one entry per GPU, " - " separated; an error count may carry `(WARNING!)` or `(DIED!)`; records are
sometimes printed without a newline between them). The run ends with `Tested N GPUs:` and one
`GPU i: OK|FAULTY` line per GPU. gpu_burn exits 0 even when a GPU is FAULTY, so the verdict must come
from this text: a run without the final block did not finish, and a run where a GPU never completed
an iteration (proc'd <= 0) proved nothing about that GPU.

Each progress record's `(N Gflop/s)` is that GPU's rate over the interval since its previous report
(gpu_burn-drv.cpp `listenClients`: `processed * OPS_PER_MUL / clientTimeDelta`, printed with
`"%d (%.0f Gflop/s) "`; 0 until the GPU first reports). `gflops` is the last record's figure;
`gflops_median` the median of the GPU's non-zero figures over every record, the steadier rate.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from validators.parsers._common import strip_ansi

_HEADER = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$", re.MULTILINE)
_RECORD = re.compile(
    r"(\d+(?:\.\d+)?)%\s+proc'd:(.*?)errors:(.*?)temps:(.*?)(?=\d+(?:\.\d+)?%\s+proc'd:|$)", re.DOTALL
)
_PROCD = re.compile(r"(-?\d+)\s*\((-?\d+(?:\.\d+)?) Gflop/s\)")
_ERRORS = re.compile(r"(-?\d+)\s*(\((?:WARNING|DIED)!\))?")
_TESTED = re.compile(r"^Tested (\d+) GPUs:\s*$", re.MULTILINE)
_VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\s*$", re.MULTILINE)
_ABORT = re.compile(r"No clients are alive!.*|Couldn't init a GPU test:.*|Failure during compute:.*")


def _last_record(text: str) -> Optional[Dict[str, Any]]:
    records = list(_RECORD.finditer(text))
    if not records:
        return None
    last = records[-1]
    procd = [(int(n), float(g)) for n, g in _PROCD.findall(last.group(2))]
    errors = [(int(n), flag) for n, flag in _ERRORS.findall(last.group(3).split("\n")[0])]
    temps = [int(t) for t in re.findall(r"(-?\d+)\s*C", last.group(4).split("\n")[0])]
    return {"percent": float(last.group(1)), "procd": procd, "errors": errors, "temps": temps}


def _rates(text: str) -> List[List[float]]:
    """Per GPU, its non-zero Gflop/s over every progress record, in order."""
    rates: List[List[float]] = []
    for record in _RECORD.finditer(text):
        for index, (_n, gflops) in enumerate(_PROCD.findall(record.group(2))):
            while len(rates) <= index:
                rates.append([])
            if float(gflops) > 0:
                rates[index].append(float(gflops))
    return rates


def _median(values: List[float]) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def parse_gpu_burn(text: str) -> Dict[str, Any]:
    """Parse gpu_burn output. See the package docstring for the fields."""
    text = strip_ansi(text)  # a terminal's colours and underlines (validators/parsers/_common.py)
    names = {int(i): name for i, name, _uuid in _HEADER.findall(text)}
    record = _last_record(text)
    tested = _TESTED.search(text)
    verdicts = {int(i): word for i, word in _VERDICT.findall(text[tested.end() :])} if tested else {}
    count = max([len(names), len(verdicts), len(record["procd"]) if record else 0])
    rates = _rates(text)
    gpus: List[Dict[str, Any]] = []
    for index in range(count):
        procd = record["procd"][index] if record and index < len(record["procd"]) else None
        error = record["errors"][index] if record and index < len(record["errors"]) else None
        verdict = verdicts.get(index)
        gpus.append(
            {
                "index": index,
                "name": names.get(index),
                "ok": None if verdict is None else verdict == "OK",
                "errors": None if error is None else error[0],
                "error_flag": None if error is None or not error[1] else error[1].strip("()!").lower(),
                "iterations": None if procd is None else procd[0],
                "gflops": None if procd is None else procd[1],
                "gflops_median": _median(rates[index]) if index < len(rates) else None,
                "temp_c": record["temps"][index] if record and index < len(record["temps"]) else None,
            }
        )
    abort = _ABORT.search(text)
    complete = tested is not None and int(tested.group(1)) == len(verdicts) and len(verdicts) > 0
    worked = all(g["iterations"] is not None and g["iterations"] > 0 for g in gpus)
    clean = all(g["errors"] in (None, 0) and g["error_flag"] is None for g in gpus)
    result: Dict[str, Any] = {
        "gpus": gpus,
        "complete": complete,
        "progress_percent": record["percent"] if record else None,
        "ok": bool(complete and gpus and all(g["ok"] for g in gpus) and worked and clean and not abort),
        "error": abort.group(0).strip() if abort else None,
    }
    if complete and not worked and result["error"] is None:
        result["error"] = "gpu_burn reported its verdict without any completed iteration on some GPU"
    return result
