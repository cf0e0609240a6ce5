"""Helpers shared by the parsers: launcher prefixes and tolerant number reading."""

from __future__ import annotations

import re
from typing import Optional

# Launchers prepend their own tag to every line of a rank's output:
#   srun --label           "0: "            (also "12: ", and " 0: " padded to the widest rank)
#   mpirun --tag-output    "[1,0]<stdout>:"  (Open MPI)
#   mpiexec -prepend-rank  "[0] "            (MPICH / Intel MPI Hydra, also their -l)
#   pdsh / clush           "node-001: "     (only stripped where a caller asks, see strip_host_prefix)
_LAUNCHER_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:\s?|\d+:\s|\[\d+\]\s)")


# Terminal control sequences: CSI (ESC [ ... final byte, e.g. the underline nvidia-smi topo -m puts
# around its header on drivers 590+, "\x1b[4mGPU0 ... \x1b[0m", even when its output is a file) and
# the two-byte escapes (ESC + one char). ECMA-48: parameter bytes 0x30-0x3F, intermediate 0x20-0x2F,
# final 0x40-0x7E.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, underline, cursor moves)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def strip_launcher_prefix(line: str) -> str:
    """Return `line` without an srun/mpirun rank tag (the rest of the line is kept as printed)."""
    return _LAUNCHER_PREFIX.sub("", line, count=1)


def to_float(token: str) -> Optional[float]:
    """Read a number as printed by C's %f/%g/%e ("1.2", "2e-07", "1.04858e+06"); None for N/A and the like."""
    try:
        value = float(token)
    except (TypeError, ValueError):
        return None
    if value != value:  # nan: the tool printed it, but it is not a measurement
        return None
    return value


def to_int(token: str) -> Optional[int]:
    """Read an integer, also when printed with %g in e-notation ("1.04858e+06" -> 1048580)."""
    try:
        return int(token)
    except (TypeError, ValueError):
        value = to_float(token)
        return None if value is None else int(round(value))


def is_number(token: str) -> bool:
    return to_float(token) is not None
