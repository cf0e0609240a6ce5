"""Parse ``dpkg-query -W -f='${Package}\\t${Status}\\t${Version}\\n' PKG...`` and judge package pins.

``${Status}`` is three words (dpkg-query(1), "Package status"): the selection (``install``,
``hold``, ``deinstall``, ``purge``), an error flag (``ok``) and the state (``installed``,
``config-files``, ``not-installed``, ``half-installed``, ...). ``apt-mark hold`` sets the
selection to ``hold``. A package dpkg knows nothing of is not printed at all: dpkg-query says
``no packages found matching NAME`` on stderr and exits 1 (tests/data/dpkg-query/).
"""

from __future__ import annotations

import fnmatch
from typing import Dict, List, NamedTuple, Sequence

from validators.config import Pin

DPKG_PIN_FORMAT = "${Package}\t${Status}\t${Version}\n"


class PackageState(NamedTuple):
    selection: str  # install, hold, deinstall, purge, unknown
    state: str  # installed, config-files, not-installed, ...
    version: str  # "" when dpkg has none (not-installed)


def parse_dpkg_status(text: str) -> Dict[str, PackageState]:
    """Package name -> its state, from dpkg-query output in DPKG_PIN_FORMAT."""
    out: Dict[str, PackageState] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0]:
            continue
        words = parts[1].split()
        if len(words) != 3:
            continue
        out[parts[0]] = PackageState(selection=words[0], state=words[2], version=parts[2].strip())
    return out


def pin_problems(pins: Sequence[Pin], states: Dict[str, PackageState]) -> List[str]:
    """One phrase per pinned package that is missing, at another version or no longer held."""
    problems = []
    for pin in pins:
        wanted = f"{pin.version} pinned" if pin.version else "pinned at any version"
        st = states.get(pin.package)
        if st is None or st.state != "installed":
            problems.append(f"{pin.package}: {_not_installed(st)} ({wanted})")
            continue
        found = []
        # apt takes a glob after "=" (the roles pin "<version>-*"); dpkg prints the full version.
        if pin.version and not fnmatch.fnmatchcase(st.version, pin.version):
            found.append(f"{st.version} installed ({wanted})")
        if pin.held and st.selection != "hold":
            found.append("not held")
        if found:
            problems.append(f"{pin.package}: {', '.join(found)}")
    return problems


def _not_installed(st: "PackageState | None") -> str:
    if st is None or st.state == "not-installed":
        return "not installed"
    if st.state == "config-files":
        return "removed (config files left)"
    return f"{st.state}, not fully installed"  # half-installed, unpacked, half-configured, ...
