"""``python3 -m validators {run,list,parse}``: the command line other tools call (a contract).

Exit codes: 0 the node passes, 1 it fails, 2 a usage or config error (with the reason).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import socket
import sys
import time
from datetime import datetime, timezone
from typing import List, Optional

from validators import __version__
from validators.profiles import PROFILES

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _usage_error(message: str) -> int:
    sys.stderr.write(f"validators: error: {message}\n")
    return EXIT_USAGE


def cmd_run(args: argparse.Namespace) -> int:
    from validators.checks.base import Context
    from validators.config import ConfigError, load_config
    from validators.registry import by_id, for_profile
    from validators.report import build_report, write_reports
    from validators.runner import run_command
    from validators.suite import run_checks, verdict

    try:
        config = load_config(args.config, args.profile, args.peers_file)
    except ConfigError as exc:
        return _usage_error(str(exc))
    checks = for_profile(args.profile)
    if args.checks:
        known = by_id()
        wanted = [c.strip() for c in args.checks.split(",") if c.strip()]
        for cid in wanted:
            if cid not in known:
                close = difflib.get_close_matches(cid, list(known), n=1)
                return _usage_error(
                    f"--checks: unknown check {cid!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                )
        checks = [c for c in known.values() if c.id in wanted]
    for cid in config.skip_checks:
        if cid not in by_id():
            return _usage_error(
                f"{config.source}: skip_checks: unknown check id {cid!r}; see `python3 -m validators list`"
            )
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        return _usage_error(f"--out {args.out}: cannot create: {exc.strerror}")
    ctx = Context(config, args.profile, run_command)
    started = _now()
    print(
        f"validators {__version__}: node {config.node} ({config.instance_type}), profile {args.profile}, {len(checks)} checks"
    )
    results = run_checks(checks, ctx, stream=sys.stdout)
    result = verdict(results)
    report = build_report(
        config.node,
        args.profile,
        started,
        _now(),
        result,
        results,
        {
            "instance_type": config.instance_type,
            "hostname": socket.gethostname(),
            "suite_version": __version__,
            "config": os.path.abspath(args.config),
        },
    )
    write_reports(args.out, report, {c.id: c.group for c in checks})
    failed = [r.id for r in results if r.status in ("fail", "error")]
    print(
        f"verdict: {result.upper()}"
        + (f" ({', '.join(failed)})" if failed else "")
        + f"; report: {os.path.join(args.out, 'report.json')}"
    )
    return EXIT_PASS if result == "pass" else EXIT_FAIL


def cmd_list(args: argparse.Namespace) -> int:
    from validators.registry import all_checks

    checks = all_checks()
    if args.profile:
        checks = [c for c in checks if args.profile in c.profiles]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": c.id,
                        "group": c.group,
                        "profiles": list(c.profiles),
                        "needs": list(c.needs),
                        "measures": c.measures,
                    }
                    for c in checks
                ],
                indent=2,
            )
        )
        return EXIT_PASS
    width = max(len(c.id) for c in checks) if checks else 2
    print(f"{'id':<{width}}  {'profiles':<21}  {'needs':<18}  measures")
    for c in checks:
        print(f"{c.id:<{width}}  {','.join(c.profiles):<21}  {','.join(c.needs) or '-':<18}  {c.measures}")
    return EXIT_PASS


def cmd_parse(args: argparse.Namespace) -> int:
    from validators.parsers import PARSERS

    if args.tool not in PARSERS:
        close = difflib.get_close_matches(args.tool, list(PARSERS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return _usage_error(f"unknown tool {args.tool!r}{hint} (known: {', '.join(sorted(PARSERS))})")
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
    except OSError as exc:
        return _usage_error(f"{args.file}: cannot read: {exc.strerror}")
    print(json.dumps(PARSERS[args.tool](text), indent=2))
    return EXIT_PASS


def cmd_passive(args: argparse.Namespace) -> int:
    """The passive check (validators/passive.py): JSON on stdout; exit 1 when the node should drain."""
    from validators.passive import run_passive
    from validators.runner import run_command

    result = run_passive(args.state, run_command)
    if args.textfile:
        from validators.passive import write_textfile

        result["textfile"] = write_textfile(args.textfile, result, time.time())
    print(json.dumps(result))
    return EXIT_FAIL if result["drain"] else EXIT_PASS


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python3 -m validators", description="Certify this node (see validators/SCHEMA.md)."
    )
    ap.add_argument("--version", action="version", version=f"validators {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="{run,list,parse,passive}")
    sub.required = True
    run = sub.add_parser("run", help="run a profile's checks; write OUT/report.json and OUT/junit.xml")
    run.add_argument("--profile", required=True, choices=PROFILES)
    run.add_argument("--config", required=True, metavar="NODE.json")
    run.add_argument("--out", required=True, metavar="DIR")
    run.add_argument(
        "--peers-file",
        metavar="MEMBERS.json",
        help="a multi-node group's members [{name, address}] (this node among them): the others are the peers",
    )
    run.add_argument("--checks", default="", metavar="ID[,ID]", help="run only these checks (debugging)")
    run.set_defaults(func=cmd_run)
    ls = sub.add_parser("list", help="list every check: id, profiles, needs, what it measures")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--profile", choices=PROFILES)
    ls.set_defaults(func=cmd_list)
    parse = sub.add_parser("parse", help="print what the suite reads from a captured tool output, as JSON")
    parse.add_argument("tool", metavar="TOOL")
    parse.add_argument("file", metavar="FILE", help="captured output, or - for stdin")
    parse.set_defaults(func=cmd_parse)
    passive = sub.add_parser(
        "passive",
        help="Xid, ECC, row remap and throttle changes since the last run (seconds; for Slurm's health check)",
    )
    passive.add_argument(
        "--state", required=True, metavar="FILE", help="what the last run saw (JSON, kept here)"
    )
    passive.add_argument(
        "--textfile",
        default="",
        metavar="DIR",
        help="node_exporter textfile folder: write metrics there if it exists",
    )
    passive.set_defaults(func=cmd_passive)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
