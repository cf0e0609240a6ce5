"""Network localisation: rounds, jobs and wall time to find node and link faults, at N up to 4,096.

    .venv/bin/python benchmarks/isolate.py [--sizes 8 64 256 1000 4096] [--seeds 1] [--round-seconds 60]

Simulates fleets (clusterforge/certify/network/sim.py: healthy 2-node figures 0.45 GB/s with 3 %
noise; a node fault scales every group it is in by 0.02-0.7, a link fault only the groups holding
both of its nodes) with d = 0, 1, 4, 16 random node faults (d <= N/2) and 0-2 link faults, and runs
the planner (clusterforge/certify/network/planner.py) against each. Link faults are put on pairs that round
1 tests: a fault between two nodes no group puts together is invisible to every plan short of
exhaustive pairwise, so only those measure whether a plan tells links from nodes. Figures are
judged against the fleet median, or the stored baseline where a quarter or more of the nodes are
faulty (a fleet that bad has no healthy median).

Wall time = rounds x ROUND_SECONDS (the groups of a round run concurrently; one round is one test
of the profile, default 60 s). Beside the planner:
- exhaustive pairwise: every pair once, N - 1 rounds of N/2 concurrent pairs (a round-robin);
  finds every fault and tells links apart, by construction (computed, not simulated);
- pairwise-quick with re-pair (Google cluster-health-scanner's nccl_runner.py, gcm
  --pairwise-quick): pair all nodes, then each suspect once with a node that passed; a node
  fails when it fails with that good partner (simulated on the same fleet).
The last line sums the planner's figures up for scripts.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from clusterforge.certify.network.evidence import upper_median  # noqa: E402
from clusterforge.certify.network.planner import IsolationRules, Planner, TestGroup  # noqa: E402
from clusterforge.certify.network.sim import Fleet, random_fleet, run_planner  # noqa: E402

HEALTHY = 0.45
FAULTS = (0, 1, 4, 16)
LINKS = (0, 1, 2)


def quick_repair(fleet: Fleet, rules: IsolationRules) -> tuple[int, int, set[str]]:
    """Pair, then re-pair each suspect once with a node that passed: (rounds, jobs, nodes failed)."""
    nodes = fleet.nodes
    first = [TestGroup((nodes[i], nodes[i + 1]), 1, "screen") for i in range(0, len(nodes) - 1, 2)]
    figures = {g: fleet.measure(g) for g in first}
    reference = rules.baseline.get(2) or upper_median([f for f in figures.values() if f is not None])
    floor = reference * (1 - rules.fail_gap)
    suspects = [n for g, f in figures.items() if f is None or f < floor for n in g.nodes]
    good = [n for g, f in figures.items() if f is not None and f >= floor for n in g.nodes]
    failed = set()
    for i, node in enumerate(suspects):
        if not good:
            failed.add(node)  # nobody to re-pair with: the tool can only fail it
            continue
        figure = fleet.measure(TestGroup((node, good[i % len(good)]), 2, "confirm"))
        if figure is None or figure < floor:
            failed.add(node)
    return (2 if suspects else 1), len(first) + len(suspects), failed


def round_floor(fleet: Fleet) -> tuple[int, str]:
    """Fewest rounds any plan of disjoint pairs needs on this fleet after the planner's round 1,
    even one told where the faults are (a counting bound; the planner does not know them), and why.

    After round 1 every node fault still needs failures with 2 different healthy partners (less
    the one its round-1 partner gave, when healthy), every healthy node whose round-1 pair failed
    needs passes with 2 different partners (one that sat round 1 out, 1; fewer when fewer healthy
    nodes are left besides its link partners: the planner asks for what is there), and each link
    fault one more run of its pair. Each such test takes a healthy node's one group of a round: h
    healthy nodes give h slots a round, so it takes at least 1 + ceil(slots / h) rounds; and a node
    that needs k more tests takes k more rounds. A bound, not a plan: a fleet under it may still
    need more, even for a planner told the faults.
    """
    first = Planner(fleet.nodes).next_round() or []
    faulty = set(fleet.node_faults) | fleet.dead
    healthy = [n for n in fleet.nodes if n not in faulty]
    if len(healthy) < 2:
        return 0, "fewer than 2 healthy nodes: nothing can be certified"
    in_pair = {n: g for g in first for n in g.nodes}
    linked = {n: sum(1 for link in fleet.link_faults if n in link) for n in healthy}
    need: dict[str, int] = {}
    for node in faulty:
        group = in_pair.get(node)
        given = 1 if group is not None and not (group.key - {node}) & faulty else 0
        need[node] = min(2, len(healthy)) - given
    passes = 0
    for node in healthy:
        group = in_pair.get(node)
        if group is None:
            wanted = 1
        elif group.key & faulty or group.key in fleet.link_faults:
            wanted = max(1, min(2, len(healthy) - 1 - linked[node]))
        else:
            wanted = 0
        passes += wanted
        need[node] = wanted + linked[node] * 1  # one more run of each of its links (retries = 1)
    confirmations = sum(need[n] for n in faulty)
    retests = len(fleet.link_faults)
    slots = confirmations + 2 * math.ceil(passes / 2) + 2 * retests
    by_slots = math.ceil(slots / len(healthy))
    by_node = max(need.values(), default=0)
    floor = 1 + max(by_slots, by_node) if slots else 1
    why = (
        f"{slots} test slots after round 1 ({confirmations} confirmations, {passes} passes, {retests} link "
        f"retest(s) x 2) over {len(healthy)} healthy nodes, one each a round"
    )
    if by_node > by_slots:
        why += f"; one node needs {by_node} more tests"
    return floor, why


def one_case(count: int, faults: int, links: int, seed: int, round_seconds: float) -> dict[str, float | str]:
    fleet = random_fleet(count, faults, 0, seed=seed)
    rules = IsolationRules(baseline={2: HEALTHY}) if 4 * faults >= count else IsolationRules()
    result = run_planner(fleet, rules=rules, screened_links=links)
    bad = set(result.failed())
    link_nodes = {n for link in fleet.link_faults for n in link}
    found_links = {frozenset(v.nodes) for v in result.link_verdicts if v.kind == "link-fault"}
    told = len(found_links & set(fleet.link_faults))
    missed = len(set(fleet.node_faults) - bad) + len(fleet.link_faults) - told
    wrong = len(bad - set(fleet.node_faults) - link_nodes)

    quick = random_fleet(count, faults, 0, seed=seed)  # same fleet, fresh noise
    quick.link_faults = dict(fleet.link_faults)
    q_rounds, q_jobs, q_failed = quick_repair(quick, rules)
    q_missed = len(set(fleet.node_faults) - q_failed) + sum(
        1 for link in fleet.link_faults if not link & q_failed
    )
    q_wrong = len(q_failed - set(fleet.node_faults) - link_nodes)
    rounds_exhaustive = count - 1 if count % 2 == 0 else count
    return {
        "n": count, "d": faults, "l": len(fleet.link_faults), "ref": "baseline" if rules.baseline else "median",
        "rounds": result.rounds, "jobs": result.jobs, "wall_min": result.rounds * round_seconds / 60,
        "found": len(fleet.node_faults) + len(fleet.link_faults) - missed, "missed": missed, "wrong": wrong,
        "told": told,
        "ex_rounds": rounds_exhaustive, "ex_jobs": count * (count - 1) // 2,
        "ex_wall_h": rounds_exhaustive * round_seconds / 3600,
        "floor": (floor := round_floor(fleet))[0], "floor_why": floor[1],
        "q_rounds": q_rounds, "q_jobs": q_jobs, "q_missed": q_missed, "q_wrong": q_wrong,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256, 1000, 4096])
    parser.add_argument("--seeds", type=int, default=1, help="fleets per case (different faults and noise)")
    parser.add_argument("--round-seconds", type=float, default=60.0, help="one round of concurrent tests")
    args = parser.parse_args()

    header = (
        f"{'N':>5} {'d':>3} {'L':>2} {'ref':>8} | {'rounds':>6} {'jobs':>5} {'wall':>7} {'found':>5} "
        f"{'missed':>6} {'wrong':>5} {'links':>5} | {'exhaustive: rounds':>18} {'jobs':>8} {'wall':>7} | "
        f"{'quick+re-pair: rounds':>21} {'jobs':>5} {'missed':>6} {'wrong':>5}"
    )
    print(header)
    rows = []
    for count in args.sizes:
        for faults in FAULTS:
            if faults > count // 2:
                continue
            for links in LINKS:
                for s in range(args.seeds):
                    seed = 1_000_003 * s + 10_007 * count + 101 * faults + links
                    r = one_case(count, faults, links, seed, args.round_seconds)
                    rows.append(r)
                    print(
                        f"{r['n']:>5} {r['d']:>3} {r['l']:>2} {r['ref']:>8} | {r['rounds']:>6} {r['jobs']:>5} "
                        f"{r['wall_min']:>5.0f} m {r['found']:>5} {r['missed']:>6} {r['wrong']:>5} "
                        f"{r['told']:>2}/{r['l']:<2} | {r['ex_rounds']:>18} {r['ex_jobs']:>8} {r['ex_wall_h']:>5.1f} h | "
                        f"{r['q_rounds']:>21} {r['q_jobs']:>5} {r['q_missed']:>6} {r['q_wrong']:>5}"
                    )
    skipped = [f"N={n} d={d}" for n in args.sizes for d in FAULTS if d > n // 2]
    if skipped:
        print(f"not run (more faults than half the nodes): {', '.join(skipped)}")
    for r in rows:
        if int(r["rounds"]) > 4:
            why = (
                f"no plan of disjoint pairs can do it in fewer than {r['floor']} (counting bound: {r['floor_why']})"
                if int(r["floor"]) > 4
                else f"the counting bound ({r['floor_why']}) allows {r['floor']}; not reached by a planner "
                "that does not know the faults"
            )
            print(f"over 4 rounds: N={r['n']} d={r['d']} L={r['l']}: {r['rounds']} rounds; {why}")
    links_total = sum(int(r["l"]) for r in rows)
    print(
        f"planner rounds: median {statistics.median(int(r['rounds']) for r in rows):g}; quick+re-pair told "
        f"0/{links_total} links apart and missed {sum(int(r['q_missed']) for r in rows)} faults"
    )
    over = [r for r in rows if int(r["rounds"]) > 4]
    feasible = [int(r["rounds"]) for r in rows if int(r["floor"]) <= 4]
    # The first five fields are read by scripts: keep them; new ones go after them.
    print(
        f"isolate: cases {len(rows)}, max rounds {max(int(r['rounds']) for r in rows)}, "
        f"faults missed {sum(int(r['missed']) for r in rows)}, "
        f"healthy wrongly failed {sum(int(r['wrong']) for r in rows)}, "
        f"link faults told apart {sum(int(r['told']) for r in rows)}/{links_total}, "
        f"max rounds where the bound allows 4 {max(feasible, default=0)}, "
        f"over 4 rounds {len(over)} (bound over 4: {sum(1 for r in over if int(r['floor']) > 4)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
