"""A simulated fleet for the localisation planner's tests and benchmark (pure, seeded).

Healthy groups measure `healthy` x a noise factor (normal, `noise` relative standard deviation:
healthy 2-node figures vary by a few per cent). A node fault scales every group it is in by its
factor; a link fault scales only groups holding both of its nodes; a dead node gives no result
with anyone; a flaky node fails each group it is in with probability `flaky_p`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterforge.certify.network.model import IsolationRules, TestGroup
from clusterforge.certify.network.planner import IsolationResult, Planner


@dataclass
class Fleet:
    nodes: list[str]
    healthy: float = 0.45
    noise: float = 0.03
    node_faults: dict[str, float] = field(default_factory=dict)  # node -> factor (0.01 .. 0.7)
    link_faults: dict[frozenset[str], float] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    flaky: set[str] = field(default_factory=set)
    flaky_p: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def measure(self, group: TestGroup) -> float | None:
        if self.dead & set(group.nodes):
            return None
        factor = 1.0
        for node in group.nodes:
            factor = min(factor, self.node_faults.get(node, 1.0))
            if node in self.flaky and self.rng.random() < self.flaky_p:
                factor = min(factor, 0.1)
        for link, slow in self.link_faults.items():
            if link <= group.key:
                factor = min(factor, slow)
        return max(0.0, self.healthy * factor * self.rng.gauss(1.0, self.noise))

    def faulty(self) -> set[str]:
        return set(self.node_faults) | self.dead | self.flaky | {n for link in self.link_faults for n in link}


def node_names(count: int) -> list[str]:
    return [f"node-{i:04d}" for i in range(1, count + 1)]


def random_fleet(count: int, node_faults: int, link_faults: int, seed: int, noise: float = 0.03) -> Fleet:
    """`node_faults` random slow nodes (factor 0.02..0.7) and `link_faults` random slow links between
    other nodes (a link fault on a faulty node would be hidden by the node fault)."""
    rng = random.Random(seed)
    nodes = node_names(count)
    bad = rng.sample(nodes, node_faults)
    rest = [n for n in nodes if n not in bad]
    links: dict[frozenset[str], float] = {}
    while len(links) < link_faults and len(rest) >= 2:
        links[frozenset(rng.sample(rest, 2))] = rng.uniform(0.02, 0.7)
    return Fleet(
        nodes=nodes,
        noise=noise,
        node_faults={n: rng.uniform(0.02, 0.7) for n in bad},
        link_faults=links,
        seed=seed,
    )


def run_planner(
    fleet: Fleet,
    rules: IsolationRules | None = None,
    topology: dict[str, str] | None = None,
    known_good: Sequence[str] = (),
    screened_links: int = 0,
) -> IsolationResult:
    """Run the planner's loop against the fleet. `screened_links`: that many link faults are put on
    pairs of healthy nodes that round 1 tests together (a link fault between two nodes no group puts
    together is invisible to any plan short of exhaustive pairwise)."""
    planner = Planner(fleet.nodes, topology=topology, rules=rules, known_good=known_good)
    while (groups := planner.next_round()) is not None:
        if planner.round == 1 and screened_links:
            faulty = fleet.faulty()
            clean = [g for g in groups if g.size == 2 and not faulty & g.key]
            for group in fleet.rng.sample(clean, min(screened_links, len(clean))):
                fleet.link_faults[group.key] = fleet.rng.uniform(0.02, 0.7)
        for group in groups:
            planner.record(group, fleet.measure(group))
    return planner.verdicts()
