"""Reading the two sides of a plan: the working tree, a git ref, or the journal's applied record.

A side is read whole or not at all: a spec that does not parse at the base is an error naming
that side, the file and the line, never a plan from half a spec.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

import yaml

from clusterforge.journal import Journal
from clusterforge.plan.inputs import (
    HARDWARE_FILE,
    INPUTS_VERSION,
    NodeInputs,
    StackInputs,
    read_tree_hardware,
    stack_inputs,
)
from clusterforge.spec.loader import REPO_ROOT, SpecError, parse_spec, read_yaml
from clusterforge.spec.models import ClusterSpec

# What a side is made of, besides its spec file (relative to the repository root).
TREE_PARTS = ("roles", "playbooks", "clusterforge/data", "validators")
JOURNAL_LABEL = "last applied state (journal)"


class PlanError(Exception):
    """One side cannot be read; the message names the side, the file, the line and the fix."""


def repo_root_for(spec_path: Path) -> Path:
    """The git work tree holding the spec (so `--base` reads the same repository), else this one."""
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=spec_path.resolve().parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    root = Path(proc.stdout.strip()) if proc.returncode == 0 else REPO_ROOT
    return root if (root / "playbooks").is_dir() and (root / "roles").is_dir() else REPO_ROOT


def _git(root: Path, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *argv], cwd=root, capture_output=True, check=False)


def extract_ref(root: Path, ref: str, dest: Path, parts: tuple[str, ...]) -> list[str]:
    """Write ``parts`` as they are at ``ref`` under ``dest``; returns those that exist there."""
    verify = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if verify.returncode != 0:
        raise PlanError(f"--base {ref}: not a commit of the repository at {root} (try `git log --oneline`)")
    listed = _git(root, "ls-tree", "--name-only", ref, "--", *parts)
    present = [p for p in listed.stdout.decode().splitlines() if p]
    if not present:
        return []
    archive = _git(root, "archive", "--format=tar", ref, "--", *present)
    if archive.returncode != 0:
        raise PlanError(f"--base {ref}: git archive failed: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # Our own repository's archive; the "data" filter (Python 3.11.4+) also refuses odd members.
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - older 3.11 patch releases
            tar.extractall(dest)  # noqa: S202 - our own git archive, on a Python without the filter
    return present


def _load_spec(path: Path, label: str) -> ClusterSpec:
    """Schema phase only; findings carry ``label`` as their file (e.g. ``main:stacks/dev.yaml``)."""
    try:
        data, lines = read_yaml(path)
        return parse_spec(data, label, lines)
    except SpecError as exc:
        found = [replace(f, file=label) for f in exc.findings]
        raise SpecError(found) from None


def base_from_ref(root: Path, ref: str, spec_rel: str) -> tuple[StackInputs, list[str]]:
    """The base side at a git ref, and notes (e.g. the spec is new in the working tree)."""
    label = ref
    with tempfile.TemporaryDirectory(prefix="clusterforge-plan-") as tmp:
        dest = Path(tmp)
        present = extract_ref(root, ref, dest, (*TREE_PARTS, spec_rel))
        if spec_rel not in present:
            return StackInputs(label, {}), [f"{spec_rel} is not in {ref}: every node is new"]
        if "playbooks" not in present or "roles" not in present:
            raise PlanError(f"--base {ref}: it has no roles/ or playbooks/: not a clusterforge revision")
        try:
            spec = _load_spec(dest / spec_rel, f"{ref}:{spec_rel}")
        except SpecError as exc:
            lines = "\n".join(f"  {f.render()}" for f in exc.findings)
            raise PlanError(f"base {ref}: the spec does not load, so there is no plan:\n{lines}") from None
        try:
            hardware, notes = read_tree_hardware(dest), []
        except (ValueError, yaml.YAMLError) as exc:
            # The catalogue's schema moves with the code reading it: an older file may not load.
            first = str(exc).splitlines()[0]
            hardware = read_tree_hardware(REPO_ROOT)
            notes = [
                f"{ref}:{HARDWARE_FILE} does not load with this tree's code ({first}): the base uses this tree's catalogue"
            ]
        return stack_inputs(spec, dest, label, hardware), notes


def new_side(spec: ClusterSpec, root: Path) -> StackInputs:
    return stack_inputs(spec, root, "working tree")


# --- the journal's record of what was applied ----------------------------------------------


def base_from_journal(journal: Journal) -> StackInputs:
    """The last applied state: every node whose converge was recorded."""
    nodes: dict[str, NodeInputs] = {}
    for name in sorted(journal.nodes):
        rec = journal.record(name).applied
        if rec.get("inputs_version") == INPUTS_VERSION and rec.get("inputs"):
            nodes[name] = NodeInputs.from_dict(rec["inputs"])
    if not nodes:
        raise PlanError(
            f"{journal.path}: no applied state recorded for stack {journal.stack!r}: run "
            f"`invoke up --stack {journal.stack}` once (it records what it converged), or compare "
            "with a git revision: `invoke plan --base main`"
        )
    return StackInputs(JOURNAL_LABEL, nodes)
