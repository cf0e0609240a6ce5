"""Value types of the network localisation planner (clusterforge/certify/network/planner.py).

Kept apart so the judging (isolate_evidence.py) and the pairing (isolate_schedule.py) share them
without importing the planner.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Purpose = Literal["screen", "confirm", "retest", "scale"]  # scale: measured by the runner, not planned
# warn: between the warn and the fail gap: not a failure, but not proof of a healthy node either
Outcome = Literal["pass", "warn", "fail", "none", "unjudged"]
NodeKind = Literal["pass", "node-fault", "dead", "flaky", "link-fault", "undetermined"]
LinkKind = Literal["link-fault", "flaky"]


@dataclass(frozen=True)
class TestGroup:
    """One job of a round: these nodes run the collective together (one Slurm job, `-w` them).

    purpose: "screen" (every node under test), "confirm" (nodes[0] under test, the others known
    good), "retest" (a group that failed between good nodes, run again).
    """

    __test__ = False  # not a pytest test class, despite the name

    nodes: tuple[str, ...]
    round: int
    purpose: Purpose

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def key(self) -> frozenset[str]:
        return frozenset(self.nodes)


@dataclass(frozen=True)
class IsolationRules:
    """How figures are judged and how long the planner may go on.

    fail_gap: a group fails below reference x (1 - fail_gap). Healthy 2-node figures vary by a
        few per cent run to run (REFERENCE.md: judge at the plateau); 0.15 keeps that noise
        several standard deviations inside the pass band.
    warn_gap: a group under reference x (1 - warn_gap) (and not failed) warns. Only a clean pass
        (within the warn band) proves a node free of node faults: a node under the reference with
        every partner and failing with one is a node fault, and a link fault needs both of its
        nodes to pass cleanly with others. None: no warn band (every figure that does not fail passes).
    baseline: stored reference per group size (busbw of earlier certified nodes); without one the
        reference is the median of this run's figures of that size, once there are
        `min_fleet_figures` of them (one figure is its own median and judges nothing).
    retries: extra runs of a group that failed between nodes that each pass with others, before
        it is called a link fault.
    flaky_retests: a group that failed and then passed on retry is run this many more times: a
        failure that recurs fails both nodes as a flaky link; one that never recurs was a one-off.
    max_rounds: the planner stops after this many rounds; what is unresolved then is undetermined.
    check: the name verdict reasons start with (a Slurm drain reason is `clusterforge: <reason>`).
    """

    fail_gap: float = 0.15
    baseline: Mapping[int, float] = field(default_factory=dict)
    min_fleet_figures: int = 3
    retries: int = 1
    warn_gap: float | None = None
    flaky_retests: int = 2
    max_rounds: int = 8
    check: str = "network"
    unit: str = "GB/s"

    def __post_init__(self) -> None:
        if not 0 < self.fail_gap < 1:
            raise ValueError(
                f"IsolationRules.fail_gap: got {self.fail_gap!r}; must be between 0 and 1 (e.g. 0.15)"
            )
        for size, value in self.baseline.items():
            if not isinstance(size, int) or size < 2 or not value > 0:
                raise ValueError(
                    f"IsolationRules.baseline: {size!r}: {value!r}; keys are group sizes >= 2, values figures > 0"
                )
        if self.min_fleet_figures < 2:
            raise ValueError("IsolationRules.min_fleet_figures: must be >= 2 (one figure is its own median)")
        if self.retries < 0 or self.max_rounds < 1 or self.flaky_retests < 0:
            raise ValueError("IsolationRules: retries and flaky_retests must be >= 0 and max_rounds >= 1")
        if self.warn_gap is not None and not 0 < self.warn_gap < self.fail_gap:
            raise ValueError(
                f"IsolationRules.warn_gap: got {self.warn_gap!r}; must be between 0 and fail_gap {self.fail_gap!r}"
            )

    @property
    def warn_at(self) -> float:
        """The gap under which a figure warns (the fail gap when there is no warn band)."""
        return self.fail_gap if self.warn_gap is None else self.warn_gap


@dataclass(frozen=True)
class Reference:
    """The figure a group of one size is judged against, and where it came from."""

    size: int
    value: float
    source: str  # "baseline" | "median of 37"

    def describe(self, unit: str) -> str:
        where = "baseline" if self.source == "baseline" else f"{self.size}-node {self.source}"
        return f"{self.value:.3g} {unit} ({where})"


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    kind: NodeKind
    reason: str  # one line, fit for a drain reason after "clusterforge: "

    @property
    def ok(self) -> bool:
        return self.kind == "pass"


@dataclass(frozen=True)
class LinkVerdict:
    nodes: tuple[str, str]
    kind: LinkKind
    reason: str


@dataclass(frozen=True)
class IsolationResult:
    node_verdicts: dict[str, NodeVerdict]
    link_verdicts: list[LinkVerdict]
    rounds: int
    jobs: int
    references: dict[int, Reference]
    problem: str | None = None  # run-wide: why the network could not be certified at all

    def failed(self) -> list[str]:
        return sorted(n for n, v in self.node_verdicts.items() if not v.ok)


@dataclass(frozen=True)
class Result:
    """One recorded group as seen from one of its nodes."""

    group: TestGroup
    figure: float | None
    outcome: Outcome
    others: frozenset[str]


@dataclass
class Evidence:
    references: dict[int, Reference]
    good: set[str]  # passed at least one group, if only in the warn band (or lent as known good)
    clean: set[str]  # good and never under test in a group that failed (a partner's failures do not count)
    sound: set[str] = field(default_factory=set)  # passed cleanly (within the warn band) at least once
    suspects: set[str] = field(default_factory=set)  # under test in a group that failed
    verdicts: dict[str, NodeVerdict] = field(default_factory=dict)  # resolved nodes
    links: list[LinkVerdict] = field(default_factory=list)
    needy: list[str] = field(default_factory=list)  # need a group with a new (good) partner
    retests: list[frozenset[str]] = field(default_factory=list)  # groups to run again
    tried: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # every partner so far
    waiting: dict[str, str] = field(default_factory=dict)  # unresolved node -> what it waits for
    results: dict[str, list[Result]] = field(default_factory=dict)

    def reference_text(self, size: int, unit: str) -> str:
        ref = self.references.get(size)
        return ref.describe(unit) if ref else f"no {size}-node reference"
