"""gloo-allreduce: the CPU path of the NCCL checks (torch.distributed, gloo backend)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from validators.checks.base import Check, Context
from validators.checks.checkpoint import last_json, tail
from validators.result import CheckResult, Number, Outcome


class GlooAllreduce(Check):
    id = "gloo-allreduce"
    group = "nccl"
    profiles = ("quick", "standard", "full")
    needs = ("torch",)
    measures = (
        "torch.distributed all_reduce (gloo) of sizes.gloo_bytes between this node and its peers (one rank per "
        "node, all started by the caller) or, without peers, between sizes.gloo_local_ranks local processes: "
        "durations.gloo_iterations or more, until durations.gloo_min_seconds of timed span per size: "
        "busbw = bytes/time * 2(n-1)/n vs gloo.all_reduce.<N>node.busbw_gbps; every element checked exactly; "
        "busbw at every size of sizes.gloo_sweep_bytes recorded (series busbw), not judged"
    )

    def applies(self, config) -> Optional[str]:
        if config.has_gpu:
            return "not applicable: GPU node; NCCL is measured by nccl-single-node / nccl-multi-node"
        return None

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        cfg = ctx.config
        timeout = cfg.duration("peer_timeout_seconds")
        nodes = 1 + len(cfg.peers)
        # The threshold's own message size when it names one, else sizes.gloo_bytes.
        nbytes = int(
            cfg.thresholds.get(f"gloo.all_reduce.{nodes}node.message_bytes") or cfg.size("gloo_bytes")
        )
        sweep = cfg.sweep("gloo_sweep_bytes")  # the report's busbw-against-size curve; not judged
        argv = [
            ctx.python,
            ctx.workload("gloo_allreduce.py"),
            "--bytes",
            str(nbytes),
            *(["--sizes", ",".join(str(b) for b in sweep)] if sweep else []),
            "--iterations",
            str(int(cfg.duration("gloo_iterations"))),
            "--min-seconds",
            f"{cfg.duration('gloo_min_seconds'):g}",
            "--timeout",
            f"{timeout:g}",
        ]
        if cfg.peers:
            names = sorted([cfg.node, *[p.name for p in cfg.peers]])
            addresses = {p.name: p.address for p in cfg.peers}
            master = names[0]
            if master == cfg.node:
                out.evidence(f"this node is rank 0: peers connect to it on port {cfg.gloo_port}")
                host = "0.0.0.0"  # listen on every interface; peers use this node's address
            else:
                host = addresses[master]
            argv += [
                "--rank",
                str(names.index(cfg.node)),
                "--world-size",
                str(len(names)),
                "--master",
                f"{host}:{cfg.gloo_port}",
            ]
        else:
            argv += ["--local-ranks", str(cfg.size("gloo_local_ranks"))]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv, timeout + cfg.duration("workload_timeout_seconds"))
        result = last_json(stdout)
        if rc != 0 or result is None or "error" in result:
            reason = (result or {}).get("error") or tail(stderr or stdout)
            out.fail(f"gloo all_reduce failed (rc {rc}): {reason}")
            return out.finish("")
        if result.get("wrong"):
            out.fail(f"{result['wrong']} wrong value(s) after all_reduce (rank {result.get('rank', 0)})")
        if cfg.peers and result.get("rank", 0) != 0:
            out.metric("ranks", result.get("ranks"), "count")
            return out.finish(
                f"rank {result['rank']} of {result['ranks']}: all_reduce correct; rank 0 judges the bandwidth"
            )
        busbw = float(result["busbw_gbps"])
        out.metric("busbw", round(busbw, 4), "GB/s")
        out.metric("algbw", round(float(result["algbw_gbps"]), 4), "GB/s")
        out.metric("ranks", result["ranks"], "count")
        out.metric("message_bytes", result["bytes"], "B")
        out.evidence(
            f"{result['ranks']} ranks, {result['bytes']} B x {result['iterations']}: "
            f"{result['time_us']:.0f} us/op, busbw {busbw:.4f} GB/s, {result['wrong']} wrong"
        )
        points = sweep_points(result)
        if len(points) > 1:
            out.series("busbw", points, "B", "GB/s")
            out.evidence("busbw by size: " + ", ".join(f"{b} B {bw:g} GB/s" for b, bw in points))
        key = f"gloo.all_reduce.{nodes}node.busbw_gbps"
        floor = cfg.threshold(key)
        if floor is None:
            out.warn(f"no threshold {key} in NODE.json; measured {busbw:.4f} GB/s, not judged")
        else:
            out.limit(key, floor, "GB/s")
            if busbw < floor:
                out.fail(f"busbw {busbw:.4f} GB/s below {floor:g} GB/s ({key})")
        return out.finish(f"{result['ranks']} ranks, busbw {busbw:.3f} GB/s, no wrong values")


def sweep_points(result: Dict[str, Any]) -> List[List[Number]]:
    """[[bytes, busbw GB/s], ...] from the workload's ``sizes`` list, ascending; malformed rows skipped."""
    points = []
    for row in result.get("sizes") or []:
        if not isinstance(row, dict):
            continue
        nbytes, busbw = row.get("bytes"), row.get("busbw_gbps")
        if isinstance(nbytes, int) and isinstance(busbw, (int, float)) and not isinstance(busbw, bool):
            points.append([nbytes, round(float(busbw), 4)])
    return sorted(points)
