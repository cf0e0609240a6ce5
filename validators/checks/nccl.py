"""NCCL bus bandwidth with nccl-tests: single node, and across the peers (full group or pairwise)."""

from __future__ import annotations

import os
import statistics
from typing import Dict, List, Optional, Sequence

from validators.checks.base import Check, Context
from validators.config import NodeConfig, Peer
from validators.result import CheckResult, Outcome
from validators.runner import describe_failure


def threshold_keys(collective: str, nodes: int) -> Dict[str, str]:
    base = f"nccl.{collective}.{nodes}node"
    return {"busbw": f"{base}.busbw_gbps", "size": f"{base}.message_bytes"}


def bench_args(cfg: NodeConfig, collective: str, nodes: int, gpus_per_process: int) -> List[str]:
    """nccl-tests arguments: sizes, iterations, data check on (-c 1)."""
    size_key = threshold_keys(collective, nodes)["size"]
    top = max(cfg.size("nccl_max_bytes"), int(cfg.thresholds.get(size_key, 0)))
    return [
        os.path.join(cfg.nccl_tests_dir, f"{collective}_perf"),
        "-b", str(cfg.size("nccl_min_bytes")), "-e", str(top), "-f", "2",
        "-g", str(gpus_per_process),
        "-n", str(int(cfg.duration("nccl_iterations"))), "-w", str(int(cfg.duration("nccl_warmup_iterations"))),
        "-c", "1",
    ]  # fmt: skip


def judge_nccl(
    out: Outcome,
    cfg: NodeConfig,
    collective: str,
    nodes: int,
    label: str,
    rc: int,
    stdout: str,
    stderr: str,
    argv: Sequence[str],
    plateau: bool = False,
) -> Optional[float]:
    """Record and judge one nccl-tests run; return the busbw judged (GB/s) or None.

    The figure is the worst row at or above the threshold's message size when NODE.json names
    one; else the largest size's row, or with ``plateau`` the median of the sweep's plateau
    (``plateau_rows``)."""
    from validators.parsers import PARSERS

    parsed = PARSERS["nccl-tests"](stdout)
    rows = parsed.get("rows") or []
    for line in (parsed.get("errors") or [])[:5]:
        out.evidence(f"{label}: {line}")
    if rc != 0:
        out.fail(f"{label}: {describe_failure(argv, rc, stdout, stderr)}")
    # Integer #wrong counts; the old float `error` column is judged by the footer's out-of-bounds count.
    wrong = [
        r
        for r in rows
        for side in ("out_of_place", "in_place")
        if isinstance((r.get(side) or {}).get("wrong"), int) and r[side]["wrong"] > 0
    ]
    if wrong:
        wrong_sizes = sorted({r.get("size") for r in wrong})
        out.fail(f"{label}: wrong values at {len(wrong_sizes)} message size(s), e.g. {wrong_sizes[-1]} B")
    oob = parsed.get("out_of_bounds")
    if isinstance(oob, int) and oob > 0:
        out.fail(f"{label}: {oob} out-of-bounds values (# Out of bounds values : {oob} FAILED)")
    if not parsed.get("complete"):
        out.fail(f"{label}: the run did not reach its footer (it died mid-run)")
    points = [
        [r["size"], r["out_of_place"]["busbw"]]
        for r in rows
        if isinstance(r.get("size"), (int, float))
        and isinstance((r.get("out_of_place") or {}).get("busbw"), (int, float))
    ]
    if points:
        out.series(f"{label}.busbw", points, "B", "GB/s")
    keys = threshold_keys(collective, nodes)
    size_min = cfg.thresholds.get(keys["size"])
    # A row the parser could not read whole (cut by a log line and never completed, columns run
    # together) is never judged as 0 GB/s nor skipped in silence: at a judged size it fails, naming
    # the line; below it, it is evidence.
    largest = max((r.get("size") or 0) for r in rows) if rows else 0
    for bad in parsed.get("refused") or []:
        at = bad.get("size")
        line = f"{label}: line {bad['line']} not read ({bad['why']}): {bad['text'][:120]!r}"
        if at is not None and at >= (size_min if size_min is not None else largest):
            out.fail(line)
        else:
            out.evidence(line)
    if not rows:
        if rc == 0 and parsed.get("complete"):
            out.fail(f"{label}: no result rows in the output")
        return None
    rows = [r for r in rows if _busbw(r) is not None]
    if not rows:
        out.fail(f"{label}: no row with a busbw figure in the output")
        return None
    judged = [r for r in rows if size_min is None or (r.get("size") or 0) >= size_min]
    if size_min is None:
        judged = plateau_rows(rows) if plateau else [max(rows, key=lambda r: r.get("size") or 0)]
    if not judged and size_min is not None:  # (with no size_min, judged holds the largest row)
        out.fail(
            f"{label}: no row at or above {int(size_min)} B ({keys['size']}); largest was {max(r.get('size') or 0 for r in rows)} B"
        )
        return None
    worst = min(judged, key=lambda r: _busbw(r) or 0.0)
    if size_min is None and plateau:
        busbw = statistics.median(_busbw(r) or 0.0 for r in judged)
        at = max(r.get("size") or 0 for r in judged)
        how = f"median of the plateau, {len(judged)} size(s)"
    else:
        busbw, at, how = _busbw(worst) or 0.0, worst.get("size"), "worst"
    out.metric(f"{label}.busbw", busbw, "GB/s")
    out.metric(f"{label}.message_bytes", at, "B")
    sizes = ", ".join(str(r.get("size")) for r in judged)
    out.evidence(f"{label}: busbw {busbw:g} GB/s ({how}) at {sizes} B")
    floor = cfg.threshold(keys["busbw"])
    if floor is None:
        out.warn(f"{label}: no threshold {keys['busbw']} in NODE.json; measured {busbw:g} GB/s, not judged")
    else:
        out.limit(keys["busbw"], floor, "GB/s")
        if busbw < floor:
            out.fail(f"{label}: busbw {busbw:g} GB/s below {floor:g} GB/s ({keys['busbw']}) at {at} B")
    return busbw


# Rows of a sweep's plateau: busbw flattens once messages are large enough to hide latency
# (nccl-tests doc/PERFORMANCE.md: busbw is the figure to hold against the hardware's peak, which
# large messages approach). Within this fraction of their own maximum, rows are one plateau:
# healthy runs vary by a few per cent between sizes and tries.
PLATEAU_SPREAD = 0.05


def _busbw(row: dict) -> Optional[float]:
    value = (row.get("out_of_place") or {}).get("busbw")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def plateau_rows(rows: Sequence[dict]) -> List[dict]:
    """The run of the largest sizes whose out-of-place busbw all lie within PLATEAU_SPREAD of their
    maximum, walking down from the largest size. The largest row always belongs to it, so a
    sweep that falls off at its top is judged by that fall, never by an earlier peak."""
    ordered = sorted(
        (r for r in rows if isinstance(r.get("size"), (int, float)) and _busbw(r) is not None),
        key=lambda r: r["size"],
        reverse=True,
    )
    plateau: List[dict] = []
    for row in ordered:
        values = [_busbw(r) or 0.0 for r in (*plateau, row)]
        if plateau and max(values) * (1 - PLATEAU_SPREAD) > min(values):
            break
        plateau.append(row)
    return plateau


class NcclSingleNode(Check):
    id = "nccl-single-node"
    group = "nccl"
    profiles = ("quick", "standard", "full")
    needs = ("gpu", "nccl-tests")
    measures = (
        "nccl-tests all_reduce/all_gather/reduce_scatter/alltoall across this node's GPUs: busbw at the "
        "largest sizes vs nccl.<collective>.1node.busbw_gbps; wrong values, a missing footer or a non-zero exit fail"
    )

    def applies(self, config) -> Optional[str]:
        reason = super().applies(config)
        if reason:
            return reason
        return (
            None if config.gpu_count > 1 else "not applicable: one GPU has no intra-node collective to test"
        )

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        cfg = ctx.config
        if ctx.nvidia_smi(out) is None:
            return out.finish("")
        timeout = cfg.duration("workload_timeout_seconds")
        for collective in cfg.nccl_collectives:
            argv = bench_args(cfg, collective, 1, cfg.gpu_count)
            out.command(argv)
            rc, stdout, stderr = ctx.run(argv, timeout)
            judge_nccl(out, cfg, collective, 1, collective, rc, stdout, stderr, argv)
        return out.finish(
            f"{', '.join(cfg.nccl_collectives)} on {cfg.gpu_count} GPUs at or above threshold, no wrong values"
        )


def launcher_argv(cfg: NodeConfig, peers: Sequence[Peer]) -> List[str]:
    """NODE.json nccl.launcher with {nodes} {peer_addresses} {nnodes} {ranks} {gpus_per_node} filled in."""
    names = [cfg.node, *[p.name for p in peers]]
    fill = {
        "nodes": ",".join(names),
        "peer_addresses": ",".join(p.address for p in peers),
        "nnodes": str(len(names)),
        "ranks": str(len(names) * cfg.gpu_count),
        "gpus_per_node": str(cfg.gpu_count),
    }
    return [arg.format(**fill) for arg in cfg.nccl_launcher]


# On EFA nodes the multi-node run logs NCCL's init and net lines, so its own output shows whether NCCL
# used aws-ofi-nccl over the efa provider (parsers/nccl_net.py). `env` after the launcher sets them on
# every rank whatever the launcher exports (srun --export, mpirun -x).
NET_DEBUG_ENV = ("env", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET")


def judge_net_plugin(out: Outcome, label: str, rc: int, stdout: str, stderr: str) -> None:
    """Fail unless the run's NCCL INFO log shows aws-ofi-nccl in use over the efa provider."""
    from validators.parsers import PARSERS

    net = PARSERS["nccl-net"](stdout + "\n" + stderr)
    used = ", ".join(f"{name} ({n} lines)" for name, n in sorted(net["networks"].items())) or "none"
    providers = ", ".join(sorted(net["providers"])) or "none"
    out.evidence(
        f"{label}: network {used}; aws-ofi-nccl {net['ofi_version'] or '?'}; provider {providers}"
        + (f"; {net['nics']} nics" if net["nics"] else "")
    )
    if net["ok"]:
        return
    if rc != 0 and not net["networks"]:
        # The run died before NCCL chose a network: its own failure is the reason; say what is known.
        out.evidence(f"{label}: net plugin not judged (the run failed): {'; '.join(net['reasons'])}")
        return
    for reason in net["reasons"]:
        out.fail(f"{label}: {reason}")


class NcclMultiNode(Check):
    id = "nccl-multi-node"
    group = "nccl"
    profiles = ("standard", "full")
    needs = ("gpu", "nccl-tests", "peers")
    measures = (
        "nccl-tests across this node and its peers through NODE.json nccl.launcher (srun/mpirun, one rank per GPU), "
        "each of nccl.multi_node_collectives (default all_reduce): busbw at the plateau of the size sweep (or the "
        "worst row at or above nccl.<collective>.<N>node.message_bytes) vs nccl.<collective>.<N>node.busbw_gbps; "
        "with nccl.pairwise, one 2-node run per peer names the slow node; "
        "on EFA nodes (efa.interfaces > 0) the run logs NCCL_DEBUG=INFO (INIT,NET) and fails unless NCCL used "
        "aws-ofi-nccl ('Using network Libfabric'/'AWS Libfabric') over the efa provider"
    )

    def applies(self, config) -> Optional[str]:
        reason = super().applies(config)
        if reason:
            return reason
        return None if config.peers else "not applicable: NODE.json lists no peers"

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        cfg = ctx.config
        if not cfg.nccl_launcher:
            out.fail(
                'NODE.json lists peers but no nccl.launcher (e.g. ["srun", "-N", "{nnodes}", "--ntasks-per-node={gpus_per_node}"])'
            )
            return out.finish("")
        groups = [[p] for p in cfg.peers] if cfg.nccl_pairwise else [list(cfg.peers)]
        timeout = cfg.duration("workload_timeout_seconds")
        collectives = cfg.nccl_multi_node_collectives
        slow: List[str] = []
        for group in groups:
            nodes = 1 + len(group)
            before = len(out.failures)
            # Each collective its own run and figure (<collective>.<N>node.busbw), judged against
            # its own threshold key: alltoall stresses the fabric unlike a ring all_reduce.
            for collective in collectives:
                label = (
                    f"{collective}.{cfg.node}+{'+'.join(p.name for p in group)}"
                    if cfg.nccl_pairwise
                    else f"{collective}.{nodes}node"
                )
                efa = cfg.efa_interfaces > 0
                argv = [
                    *launcher_argv(cfg, group),
                    *(NET_DEBUG_ENV if efa else ()),
                    *bench_args(cfg, collective, nodes, 1),
                ]
                out.command(argv)
                rc, stdout, stderr = ctx.run(argv, timeout)
                judge_nccl(out, cfg, collective, nodes, label, rc, stdout, stderr, argv, plateau=True)
                if efa:
                    judge_net_plugin(out, label, rc, stdout, stderr)
            if cfg.nccl_pairwise and len(out.failures) > before:
                slow.append(group[0].name)
        if cfg.nccl_pairwise and slow:
            if len(slow) == len(cfg.peers) and len(slow) > 1:
                out.fail(f"every pair with {cfg.node} is slow or failing: suspect {cfg.node} itself")
            else:
                out.fail(f"slow or failing pairs with: {', '.join(slow)} (suspect those nodes)")
        over = " over aws-ofi-nccl/efa" if cfg.efa_interfaces > 0 else ""
        return out.finish(
            f"{', '.join(collectives)} across {1 + len(cfg.peers)} nodes at or above threshold{over}"
        )
