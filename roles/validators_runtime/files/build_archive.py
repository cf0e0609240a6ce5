"""Build a deterministic tar of the validators package on the control machine.

Usage: python3 build_archive.py SOURCE_DIR BUILD_DIR
Prints JSON {"hash", "archive", "changed"}. The archive name carries a hash of the content, so
the same sources always give the same file (no timestamps, owners or __pycache__ inside) and a
converged node sees no change on a re-run.
"""

import hashlib
import io
import json
import os
import sys
import tarfile

SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo")


def members(source):
    for root, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if not name.endswith(SKIP_SUFFIXES):
                path = os.path.join(root, name)
                yield path, os.path.relpath(path, os.path.dirname(source))


def build(source):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, arcname in members(source):
            with open(path, "rb") as handle:
                data = handle.read()
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: build_archive.py SOURCE_DIR BUILD_DIR")
    source, build_dir = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if not os.path.isfile(os.path.join(source, "__main__.py")):
        sys.exit(f"{source} is not the validators package (no __main__.py): set validators_runtime_source")
    data = build(source)
    digest = hashlib.sha256(data).hexdigest()[:16]
    archive = os.path.join(build_dir, f"validators-{digest}.tar")
    changed = not os.path.exists(archive)
    if changed:
        os.makedirs(build_dir, exist_ok=True)
        tmp = archive + ".tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, archive)
    print(json.dumps({"hash": digest, "archive": archive, "changed": changed}))


if __name__ == "__main__":
    main(sys.argv)
