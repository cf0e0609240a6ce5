"""Which benchmark runs can go where: certified idle nodes only (pure).

A node may run benchmark jobs only when the provider has it running, the journal has it
certified (and no certification under way), and Slurm has it ``idle`` and serving: never a node
drained, held in the certification reservation, busy with other jobs or not answering. Each
excluded node is named with why. Node counts larger than the eligible nodes of one instance type
are skipped, each with the reason; training always includes one node (efficiency is measured
against it). Nodes are taken in name order, so the same counts land on the same nodes run after
run and results stay comparable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from clusterforge.slurm.parse import SinfoNode

WORKLOADS = ("train", "infer", "data")


class PlanError(Exception):
    pass


@dataclass(frozen=True)
class Candidate:
    """A compute node as the provider, the journal and Slurm see it."""

    name: str
    instance_type: str
    running: bool
    certified: bool
    certifying: bool
    verdict: str = ""
    reason: str = ""  # the journal's last failure reason


@dataclass(frozen=True)
class Run:
    workload: str  # train | infer | data
    nodes: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.nodes)

    @property
    def key(self) -> str:
        return f"{self.workload}-{self.count}n"


@dataclass(frozen=True)
class Skip:
    workload: str
    count: int
    reason: str


@dataclass(frozen=True)
class Plan:
    instance_type: str
    eligible: tuple[str, ...]
    excluded: dict[str, str]
    runs: tuple[Run, ...]
    skipped: tuple[Skip, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


def parse_counts(text: str) -> list[int]:
    """``--nodes 1,2,4`` -> [1, 2, 4] (sorted, once each); a clear error for anything else."""
    counts = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise PlanError(f"--nodes {text!r}: {part!r} is not a node count; give counts >= 1, e.g. 1,2,4")
        counts.add(int(part))
    if not counts:
        raise PlanError(f"--nodes {text!r}: give at least one node count, e.g. 1,2,4")
    return sorted(counts)


def parse_workloads(text: str) -> list[str]:
    names = [w.strip() for w in text.split(",") if w.strip()]
    if names == ["all"]:
        return list(WORKLOADS)
    bad = [w for w in names if w not in WORKLOADS]
    if bad or not names:
        raise PlanError(f"--workload {text!r}: give train, infer, data or all (or a comma list of them)")
    return [w for w in WORKLOADS if w in names]


def exclusion(c: Candidate, slurm: SinfoNode | None) -> str:
    """Why ``c`` may not run benchmark jobs now; "" when it may."""
    if not c.running:
        return "not running"
    if c.certifying:
        return "under certification"
    if not c.certified:
        return f"not certified (failed: {c.reason})" if c.verdict == "fail" and c.reason else "not certified"
    if slurm is None:
        return "not known to Slurm"
    if slurm.in_maintenance:
        return "held in a maintenance reservation (certification)"
    if slurm.drained:
        return f"drained ({slurm.reason})" if slurm.reason else "drained"
    if not slurm.responding:
        return f"not answering the controller (sinfo {slurm.display})"
    if slurm.state != "idle":
        return f"busy (sinfo {slurm.display})"
    return ""


def make_plan(
    workloads: Sequence[str],
    counts: Sequence[int],
    candidates: Iterable[Candidate],
    slurm: Mapping[str, SinfoNode],
) -> Plan:
    cands = sorted(candidates, key=lambda c: c.name)
    excluded = {c.name: why for c in cands if (why := exclusion(c, slurm.get(c.name)))}
    by_type: dict[str, list[str]] = {}
    for c in cands:
        if c.name not in excluded:
            by_type.setdefault(c.instance_type, []).append(c.name)
    notes: list[str] = []
    if by_type:
        kind = max(sorted(by_type), key=lambda t: len(by_type[t]))
        if len(by_type) > 1:
            others = ", ".join(f"{len(v)} {t}" for t, v in sorted(by_type.items()) if t != kind)
            notes.append(f"runs use the {len(by_type[kind])} eligible {kind} nodes; not mixed with {others}")
    else:
        kind = cands[0].instance_type if cands else ""
    eligible = tuple(by_type.get(kind, []))
    want = sorted(set(counts))
    if "train" in workloads and 1 not in want:
        want = [1, *want]
        notes.append("train: 1 node added: scaling efficiency is measured against one node")
    runs: list[Run] = []
    skipped: list[Skip] = []
    why_few = _few(eligible, excluded)
    for workload in workloads:
        sizes = want if workload == "train" else [1]
        for n in sizes:
            if n <= len(eligible):
                runs.append(Run(workload, eligible[:n]))
            else:
                skipped.append(Skip(workload, n, f"needs {n} certified idle nodes; {why_few}"))
    return Plan(kind, eligible, excluded, tuple(runs), tuple(skipped), tuple(notes))


def _few(eligible: Sequence[str], excluded: Mapping[str, str], shown: int = 5) -> str:
    """How many nodes are eligible, and why the others are not (grouped by reason, a few names each:
    the line stays short at thousands of nodes)."""
    have = f"{len(eligible)} {'is' if len(eligible) == 1 else 'are'}"
    if eligible:
        have += f" ({_names(list(eligible), shown)})"
    groups: dict[str, list[str]] = {}
    for name, why in sorted(excluded.items()):
        groups.setdefault(why, []).append(name)
    rest = "; ".join(
        f"{_names(names, shown)} {why}" for why, names in sorted(groups.items(), key=lambda g: -len(g[1]))
    )
    return f"{have}; {rest}" if rest else have


def _names(names: list[str], shown: int) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
