"""python -m clusterforge.reports REPORTS_DIR [--out FILE] [--stack NAME]: write the run's HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from clusterforge.reports import write_run_html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterforge.reports", description=__doc__)
    parser.add_argument("reports_dir", type=Path, help="folder holding <node>/report.json")
    parser.add_argument("--out", type=Path, help="HTML file to write (default REPORTS_DIR/report.html)")
    parser.add_argument("--stack", help="stack name shown in the header (default: the folder above)")
    args = parser.parse_args(argv)
    if not args.reports_dir.is_dir():
        parser.error(f"{args.reports_dir}: not a folder (expected .clusterforge/<stack>/reports)")
    out = write_run_html(args.reports_dir, args.out or args.reports_dir / "report.html", stack=args.stack)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
