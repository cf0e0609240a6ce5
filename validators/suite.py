"""Run a profile's checks in registry order; one live line per check; never crash on a check."""

from __future__ import annotations

import os
import time
import traceback
from typing import Callable, List, Optional, TextIO

from validators.checks.base import Check, Context
from validators.result import CheckResult, skipped

_MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "error": "ERROR"}


def run_check(check: Check, ctx: Context) -> CheckResult:
    """applies -> skip; skip_checks -> skip; an exception -> ``error`` with its message."""
    if check.id in ctx.config.skip_checks:
        return skipped(check.id, "skipped: listed in NODE.json skip_checks")
    start = time.perf_counter()
    try:
        reason = check.applies(ctx.config)
        result = skipped(check.id, reason) if reason else check.run(ctx)
    except Exception as exc:  # noqa: BLE001 - a broken check must not take the suite down with it
        result = CheckResult(check.id, "error", f"{type(exc).__name__}: {exc}")
        tb = traceback.format_exc().splitlines()
        result.evidence = {
            "command": None,
            "lines": tb[-12:] if os.environ.get("VALIDATORS_DEBUG") else tb[-3:],
        }
    result.duration_s = time.perf_counter() - start
    return result


def run_checks(
    checks: List[Check],
    ctx: Context,
    stream: Optional[TextIO] = None,
    on_result: Optional[Callable[[CheckResult], None]] = None,
) -> List[CheckResult]:
    results = []
    width = max((len(c.id) for c in checks), default=10)
    for check in checks:
        live = stream is not None and stream.isatty()
        if live and stream is not None:
            stream.write(f"{check.id:<{width}}  ... ")
            stream.flush()
        result = run_check(check, ctx)
        results.append(result)
        if stream is not None:
            line = f"{check.id:<{width}}  {_MARK[result.status]:<5} {result.duration_s:6.1f}s  {result.summary[:160]}"
            stream.write(("\r" if live else "") + line + "\n")
            stream.flush()
        if on_result is not None:
            on_result(result)
    return results


def verdict(results: List[CheckResult]) -> str:
    return "fail" if any(r.status in ("fail", "error") for r in results) else "pass"
