"""The network step's judging (pure): the pair tests' rules, each node's verdict, what feeds the baseline.

The planner (planner.py) judges figures into node and link verdicts; this module turns those into
the certify stage's ``Verdict`` per node: which collective failed (several collectives), a link
fault reported rather than drained when the profile says so, and a node the planner could not
resolve (too few figures and no baseline to judge against) judged by its group tests' own floor
checks, the reason saying so. Nothing here touches Slurm, the head node or a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from clusterforge.certify.network.collectives import baseline_metric, collective_reason
from clusterforge.certify.network.planner import IsolationResult, IsolationRules
from clusterforge.certify.network.reasons import one_line
from clusterforge.certify.network.rounds import GroupRecord, RunLog
from clusterforge.node.reports import Verdict

BASELINE_METRIC = baseline_metric(None)  # "network.2node.busbw": gloo, or nccl all_reduce
GLOO_CHECK = "gloo-allreduce"
NCCL_CHECK = "nccl-multi-node"


def network_check_id(has_gpu: bool) -> str:
    """The group tests' check: nccl-tests on GPU types, gloo elsewhere."""
    return NCCL_CHECK if has_gpu else GLOO_CHECK


def isolation_rules(
    fail_gap_pct: float, warn_gap_pct: float, primary: float | None, check: str
) -> IsolationRules:
    """The planner's rules from the pair test's catalogue gaps (fleet metric network.2node.busbw),
    clamped to sane bounds, with the stored 2-node figure as the reference when there is one."""
    fail_gap = min(0.9, max(0.05, fail_gap_pct / 100))
    return IsolationRules(
        fail_gap=fail_gap,
        warn_gap=min(fail_gap * 0.99, max(0.01, warn_gap_pct / 100)),
        baseline={2: primary} if primary else {},
        check=check,
    )


def alone(names: Iterable[str], kind: str) -> dict[str, Verdict]:
    """A node with no partner: single-node checks only, said in the note (not a failure)."""
    why = (
        f"the network cannot be certified with one {kind} node: it needs a partner (a second node "
        "of the type in this run, or one certified earlier and idle); single-node checks only"
    )
    return {n: Verdict(n, True, note=why) for n in names}


def node_verdict(
    name: str,
    result: IsolationResult,
    log: RunLog,
    check: str,
    fail_gap: float = 0.15,
    drain_links: Callable[[str], bool] = lambda _: True,
) -> Verdict:
    """``name``'s verdict from the planner's; ``drain_links(node)``: the profile's ``link_faults``
    is "drain" (else a link fault is reported on a node that stays admitted)."""
    v = result.node_verdicts.get(name)
    if v is None:
        return Verdict(name, False, [(check, "the network planner gave no verdict for this node")])
    reason = v.reason.removeprefix(f"{check}: ")
    named = collective_reason(check, name, log.records, fail_gap) if log.collectives else None
    if named is not None and v.kind in ("node-fault", "flaky", "link-fault"):
        # Several collectives: say which one failed, with its own figures and reference.
        collective, line = named
        body = line.removeprefix(f"{check}: ")
        reason = one_line(body if v.kind == "node-fault" else f"{collective} under its reference; {reason}")
    if v.kind == "pass":
        return Verdict(name, True, note=reason)
    if v.kind == "link-fault" and not drain_links(name):
        return Verdict(
            name, True, note=f"{reason} (reported, not drained: the profile says links are reported)"
        )
    if v.kind == "undetermined" and 2 not in result.references:
        return by_floor(name, reason, log, check)
    # Undetermined with a reference to judge by (a retest or a partner still to come when the
    # rounds ran out): held, never admitted on a guess.
    return Verdict(name, False, [(check, reason)])


def by_floor(name: str, why: str, log: RunLog, check: str) -> Verdict:
    """No reference to judge against: the node's group tests' own floor checks decide. A report
    that could not be read is never a pass: its file, key and fix are the reason."""
    own = [c for g in log.reports.get(name, []) for c in g.report.check(check)]
    bad = [c for c in own if c.bad]
    malformed = log.malformed.get(name, [])
    if own and not bad and not malformed:
        return Verdict(name, True, note=f"judged against the floor only: {why}")
    # No report at all: what the jobs' own output said (NCCL's error, Slurm's time limit).
    said = [r.state for r in log.records if name in r.nodes and r.state.startswith("no report: ")]
    if bad:
        detail = bad[0].summary
    elif malformed:
        detail = f"a group report of this node is malformed: {malformed[-1]}"
    else:
        detail = "no group test of this node reported" + (f" ({said[-1]})" if said else "")
    return Verdict(name, False, [(check, f"{detail}; {why}")])


def baseline_samples(
    result: IsolationResult, log: RunLog, verdicts: Mapping[str, Verdict]
) -> list[GroupRecord]:
    """The 2-node pair tests (not scaling ones) with a figure whose both nodes passed: what enters
    the stored baseline."""
    good = {n for n, v in verdicts.items() if v.passed} | {
        n for n, v in result.node_verdicts.items() if v.kind == "pass"
    }
    return [
        r
        for r in log.records
        if len(r.nodes) == 2 and r.purpose != "scale" and r.figure is not None and set(r.nodes) <= good
    ]
