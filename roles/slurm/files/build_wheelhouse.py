"""Build the health loop's wheelhouse on the control machine: the project's package and the loop's
dependencies at the control machine's own versions, so the head node installs with no index.

Usage: python3 build_wheelhouse.py PACKAGE_DIR BUILD_DIR DIST [DIST ...]
  PACKAGE_DIR  the clusterforge package (its pyproject.toml one folder up gives the version)
  BUILD_DIR    the wheelhouse folder (created; wheels it no longer needs are removed)
  DIST         a distribution installed beside this Python that the loop imports (pydantic, PyYAML, ...)

Prints JSON {"changed", "dir", "files", "requirements", "python_tags", "version"}.

- clusterforge's wheel is written here (pure Python): version ``<pyproject's>+<16 hex of its files>``,
  so a changed package is a new version, which pip installs and the role reports, and the same package
  always gives the same bytes. Its Requires-Dist names only the loop's dependencies (the workstation's
  pulumi, boto3 and ansible are not the head's).
- Each DIST is repacked from its installed files (importlib.metadata's RECORD, less the bytecode and
  pip's own INSTALLER/REQUESTED/direct_url.json), with its wheel tags (the dist-info's WHEEL): the
  versions the workstation ran its tests with, and no index needed. A binary wheel's tags name one
  Python (cp311): ``python_tags`` lists them, and the role refuses a head whose Python differs.
- Zip entries are sorted, dated 1980-01-01 and mode 0644: a rebuild of the same files is byte for
  byte the same, so Ansible's copy reports no change.
"""

import base64
import hashlib
import importlib.metadata
import io
import json
import os
import re
import sys
import tomllib
import zipfile

SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo")
PIP_FILES = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}  # pip writes these at install
EPOCH = (1980, 1, 1, 0, 0, 0)  # the zip format's first date: no timestamp in the wheel


class BuildError(Exception):
    """What cannot be built, and the fix."""


def escape(name):
    """A distribution name as wheel filenames spell it (PEP 427: runs of -_. become one _)."""
    return re.sub(r"[-_.]+", "_", name)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def zip_wheel(entries, dist_info):
    """``entries``: (arcname, bytes) pairs. Adds RECORD, returns the wheel's bytes (deterministic)."""
    entries = sorted(entries)
    record = [record_line(name, data) for name, data in entries]
    record.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return buf.getvalue()


def package_files(package_dir):
    """(arcname, bytes) of every file of the package, sorted, without caches and bytecode."""
    top = os.path.dirname(package_dir)
    out = []
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(SKIP_SUFFIXES):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                out.append((os.path.relpath(path, top).replace(os.sep, "/"), handle.read()))
    return out


def project_wheel(package_dir, requires):
    """clusterforge's own wheel: (file name, bytes, version)."""
    pyproject = os.path.join(os.path.dirname(package_dir), "pyproject.toml")
    try:
        with open(pyproject, "rb") as handle:
            project = tomllib.load(handle)["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(
            f"{pyproject}: cannot read [project] ({exc}); set slurm_health_loop_source"
        ) from None
    files = package_files(package_dir)
    content = hashlib.sha256()
    for name, data in files:
        content.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    version = f"{project['version']}+{content.hexdigest()[:16]}"
    name = project["name"]
    dist_info = f"{escape(name)}-{version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {project.get('description', '')} (the health loop's install: its dependencies only)",
        f"Requires-Python: {project.get('requires-python', '>=3')}",
        *(f"Requires-Dist: {req}" for req in requires),
    ]
    wheel_meta = [
        "Wheel-Version: 1.0",
        "Generator: clusterforge build_wheelhouse.py",
        "Root-Is-Purelib: true",
    ]
    wheel_meta.append("Tag: py3-none-any")
    entries = [
        *files,
        (f"{dist_info}/METADATA", ("\n".join(metadata) + "\n").encode()),
        (f"{dist_info}/WHEEL", ("\n".join(wheel_meta) + "\n").encode()),
    ]
    return f"{escape(name)}-{version}-py3-none-any.whl", zip_wheel(entries, dist_info), version


def tags_of(wheel_text):
    """The WHEEL file's Tag lines as (python, abi, platform) triples."""
    tags = []
    for line in wheel_text.splitlines():
        if line.startswith("Tag:"):
            python, abi, platform = line.split(":", 1)[1].strip().split("-")
            tags.append((python, abi, platform))
    return tags


def compressed(tags):
    """A wheel file name's tag part: each position's values, sorted and joined with dots (PEP 425)."""
    return "-".join(".".join(sorted({tag[i] for tag in tags})) for i in range(3))


def repack(dist_name):
    """An installed distribution as a wheel: (file name, bytes, version, tags)."""
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(
            f"{dist_name} is not installed beside {sys.executable}: the health loop needs it on the head node; "
            "install the project's requirements into the Python that runs ansible-playbook"
        ) from None
    name, version = dist.metadata["Name"], dist.version
    dist_info = f"{escape(name)}-{version}.dist-info"
    wheel_text = dist.read_text("WHEEL") or ""
    tags = tags_of(wheel_text)
    if not tags:
        raise BuildError(f"{dist_name} {version}: its WHEEL file names no tag (not installed from a wheel)")
    entries = []
    for path in dist.files or []:
        parts = path.parts
        if parts[0] == ".." or SKIP_DIRS.intersection(parts) or path.name.endswith(SKIP_SUFFIXES):
            continue  # scripts outside site-packages (pip makes them again), caches, bytecode
        if parts[0].endswith(".dist-info") and path.name in PIP_FILES:
            continue
        arcname = path.as_posix()
        if parts[0].endswith(".dist-info"):
            arcname = f"{dist_info}/{'/'.join(parts[1:])}"  # the wheel's own spelling of the folder
        entries.append((arcname, path.locate().read_bytes()))
    return f"{escape(name)}-{version}-{compressed(tags)}.whl", zip_wheel(entries, dist_info), version, tags


def write_if_changed(path, data):
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    return True


def build(package_dir, build_dir, dists):
    if not os.path.isfile(os.path.join(package_dir, "health", "loop", "__main__.py")):
        raise BuildError(
            f"{package_dir} is not the clusterforge package (no health/loop/__main__.py): set slurm_health_loop_source"
        )
    wheels, requirements, python_tags = {}, [], set()
    for dist_name in dists:
        filename, data, version, tags = repack(dist_name)
        wheels[filename] = data
        requirements.append(f"{filename.split('-')[0]}=={version}")
        python_tags.update(tag[0] for tag in tags if tag[0].startswith("cp"))
    top_level = [req.split("==")[0] for req in requirements]
    filename, data, version = project_wheel(package_dir, top_level)
    wheels[filename] = data
    requirements.insert(0, f"{filename.split('-')[0]}=={version}")
    os.makedirs(build_dir, exist_ok=True)
    changed = False
    for filename, data in wheels.items():
        changed |= write_if_changed(os.path.join(build_dir, filename), data)
    changed |= write_if_changed(
        os.path.join(build_dir, "requirements.txt"), ("\n".join(requirements) + "\n").encode()
    )
    for stale in sorted(set(os.listdir(build_dir)) - set(wheels) - {"requirements.txt"}):
        if stale.endswith(".whl"):
            os.remove(os.path.join(build_dir, stale))
            changed = True
    return {
        "changed": changed,
        "dir": build_dir,
        "files": sorted([*wheels, "requirements.txt"]),
        "requirements": requirements,
        "python_tags": sorted(python_tags),
        "version": version,
    }


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: build_wheelhouse.py PACKAGE_DIR BUILD_DIR DIST [DIST ...]")
    try:
        out = build(os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3:])
    except BuildError as exc:
        sys.exit(f"build_wheelhouse.py: {exc}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
