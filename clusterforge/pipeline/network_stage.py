"""The certify stage's network step, adapted from the pipeline's context: certify/network/runner.py runs it.

What the step does, decides and writes is the runner's docstring; this module only says where the
pipeline keeps what the runner needs (the board, the journal, the spec's profile, the head node's
command runner) and numbers the step's runs within one certify stage.
"""

from __future__ import annotations

from clusterforge.certify.network import runner
from clusterforge.certify.network.runner import NetworkOutcome, NetworkSite
from clusterforge.node.config import profile_for
from clusterforge.pipeline.context import NODE_VALIDATORS, StackContext
from clusterforge.providers.base import Node
from clusterforge.providers.local.share import compute_share_label
from clusterforge.slurm.admission import Admission

__all__ = ["NetworkOutcome", "NetworkStep", "site_of"]


def site_of(ctx: StackContext, admission: Admission, head: Node, run_id: str, suite: str) -> NetworkSite:
    """The runner's view of the pipeline's context."""

    def drain_links(name: str) -> bool:
        """The node's profile's ``link_faults``: "drain" (default) or "report"."""
        _, profile = profile_for(ctx.spec, ctx.nodes[name].pool, ctx.options.profile)
        return getattr(profile, "link_faults", "drain") != "report"

    return NetworkSite(
        spec=ctx.spec,
        admission=admission,
        head=head,
        run_id=run_id,
        suite=suite,
        validators=NODE_VALIDATORS,
        reports_dir=ctx.paths.reports,
        compute=ctx.compute,
        certified=lambda name: ctx.journal.is_done(name, "certified"),
        head_runner=lambda node, timeout_s: ctx.runner(node, timeout_s=timeout_s),
        note=ctx.board.note,
        drain_links=drain_links,
        share=lambda: compute_share_label(ctx.spec),
    )


class NetworkStep:
    """The network step of one certify stage: ``unresponsive`` first, then ``run`` per instance
    type (each run gets folders and job names of its own)."""

    def __init__(self, ctx: StackContext, admission: Admission, head: Node, run_id: str, suite: str):
        self.site = site_of(ctx, admission, head, run_id, suite)
        self.scaling = True  # measure busbw at larger group sizes once the pairs are judged
        self.attempts = 0

    def unresponsive(self, names: list[str]) -> dict[str, str]:
        return runner.unresponsive(self.site, names)

    def run(self, group: list[Node], batch: set[str]) -> NetworkOutcome:
        self.attempts += 1
        return runner.run_network(self.site, group, batch, attempt=self.attempts, scaling=self.scaling)
