"""The network step's stored 2-node figures: read as the pair tests' references, written back after.

Metric ``network.2node.busbw`` (gloo, or nccl's all_reduce); on GPU types with several
collectives also ``network.2node.<collective>.busbw`` (collectives.py). Container types keep the
share of the machine each node had: a figure of another share is no reference (a pair of nodes
with another share moves the figures), and this run's median judges instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterforge.certify.fleet.baseline import Baseline, BaselineError, BaselineStore, Sample
from clusterforge.certify.network.collectives import baseline_metric
from clusterforge.certify.network.rounds import GroupRecord


def stored_references(
    store: BaselineStore, kind: str, collectives: tuple[str | None, ...], share: str
) -> tuple[dict[str | None, float], list[str]]:
    """The stored 2-node figure per collective (None: the gloo path), those with one, and why any
    other was not used. Raises BaselineError for an unusable file (the caller says so and goes on
    without references)."""
    base = store.load(kind)
    out: dict[str | None, float] = {}
    notes: list[str] = []
    for c in collectives:
        ref = base.reference(baseline_metric(c), None, share=share) if base else None
        if ref is not None and ref.other_share:
            notes.append(f"network baseline of another share not a reference ({ref.other_share})")
        elif ref is not None and ref.value > 0:
            out[c] = ref.value
    return out, notes


def record_samples(
    store: BaselineStore,
    kind: str,
    samples: Iterable[GroupRecord],
    collectives: tuple[str, ...],
    run_id: str,
    when: str,
    share: str,
) -> None:
    """Add the pair tests' figures (verdicts.baseline_samples) to the stored baseline of ``kind``.
    An unusable file is left alone: the fleet step names it, and it is never overwritten."""
    samples = list(samples)
    if not samples:
        return
    try:
        base = store.load(kind) or Baseline(kind, store.stack)
    except BaselineError:
        return
    for r in samples:
        # Several collectives: each one's own busbw (r.figure is then the worst ratio, not a figure).
        measured = r.figures if r.figures else {collectives[0] if collectives else None: r.figure}
        for c, value in measured.items():
            if value is not None:
                base.add(
                    baseline_metric(c),
                    "GB/s",
                    True,
                    Sample(float(value), "+".join(r.nodes), run_id, when, share=share),
                )
    store.save(base)
