"""The drift probe: runs ON a node (its system python3, 3.9+, stdlib only), one command per node.

    python3 -c "<this file>" '{"packages": [...], "files": [...], "units": [...]}'

Prints one JSON object: ``{"items": {"<kind> <name>": "<state>"}, "errors": [...]}``. A state is
what the roles manage, in words a diff can show: a package's dpkg selection (``hold`` when held),
state and version; a file's sha256, mode and owner (or ``absent``); a unit's unit-file state and
active state. What cannot be read goes to ``errors`` (the workstation then converges the node,
never assuming it clean). The workstation never parses anything but this JSON; the parsers below
are tested on captured output (tests/data/dpkg-query/, tests/data/systemctl-show/).
"""

import hashlib
import json
import os
import subprocess
import sys

# dpkg-query(1): ${Status} is "<selection> <flag> <state>"; apt-mark hold sets the selection to
# "hold". Same format as validators/parsers/dpkg.py (the software-versions check).
DPKG_FORMAT = "${Package}\t${Status}\t${Version}\n"
# systemctl(1), systemd 252: `show` prints KEY=VALUE lines; -p limits them to these properties.
UNIT_PROPERTIES = "Id,LoadState,ActiveState,UnitFileState"


def parse_dpkg(text):
    """dpkg-query output in DPKG_FORMAT -> package -> "<selection> <state> <version>"."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0]:
            continue
        words = parts[1].split()
        if len(words) != 3:
            continue
        out[parts[0]] = " ".join(w for w in (words[0], words[2], parts[2].strip()) if w)
    return out


def parse_unit(text):
    """`systemctl show -p UNIT_PROPERTIES UNIT` output -> "<unit-file state> <active state>"."""
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    if props.get("LoadState") == "not-found":
        return "not-found"
    return f"{props.get('UnitFileState') or '-'} {props.get('ActiveState') or '-'}"


def file_state(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    if os.path.islink(path):
        return "link -> " + os.readlink(path)
    if not os.path.isfile(path):
        return f"not a file (mode {st.st_mode:o})"
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()[:16]
    return f"sha256 {sha} mode {st.st_mode & 0o7777:04o} owner {st.st_uid}:{st.st_gid}"


def run(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True)
    except OSError as exc:
        return 127, "", f"{argv[0]}: {exc.strerror}"
    return proc.returncode, proc.stdout, proc.stderr


def probe(want):
    items, errors = {}, []
    packages = sorted(set(want.get("packages") or []))
    if packages:
        rc, out, err = run(["dpkg-query", "-W", "-f", DPKG_FORMAT] + packages)
        # dpkg-query exits 1 when some name matches nothing; what it knows is still printed.
        if rc not in (0, 1):
            errors.append(f"dpkg-query exited {rc}: {err.strip()[:200]}")
        else:
            found = parse_dpkg(out)
            for name in packages:
                items["package " + name] = found.get(name, "absent")
    for path in sorted(set(want.get("files") or [])):
        try:
            items["file " + path] = file_state(path)
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror}")
    for unit in sorted(set(want.get("units") or [])):
        rc, out, err = run(["systemctl", "show", "--property=" + UNIT_PROPERTIES, unit])
        if rc != 0 or "LoadState=" not in out:
            errors.append(f"systemctl show {unit} exited {rc}: {(err or out).strip()[:200]}")
        else:
            items["unit " + unit] = parse_unit(out)
    return {"items": items, "errors": errors}


if __name__ == "__main__":
    print(json.dumps(probe(json.loads(sys.argv[1])), sort_keys=True))
