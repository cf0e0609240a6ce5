"""Record, after a successful converge, what each node was converged with (the plan's default base).

Called by the pipeline's configure stage for the nodes that converged; `invoke plan` without
``--base`` compares the working tree with these records (``sources.base_from_journal``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from clusterforge.journal import Journal, now_iso
from clusterforge.plan.inputs import INPUTS_VERSION, NodeInputs, digest, stack_inputs
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec


def applied_record(spec: ClusterSpec, node: NodeInputs) -> dict[str, Any]:
    """One node's record: the spec's hash, and the node's fingerprints (roles, pins, reboot inputs)."""
    return {
        "inputs_version": INPUTS_VERSION,
        "spec": digest(spec.model_dump(mode="json")),
        "at": now_iso(),
        "inputs": node.to_dict(),
    }


def record_converged(
    journal: Journal, spec: ClusterSpec, names: Iterable[str], root: Path = REPO_ROOT
) -> str:
    """Journal what ``names`` (nodes that just converged) were given by this tree and spec.

    Returns "" or why nothing was recorded: a converge that worked is never failed for its record
    (the next `invoke plan` then says no applied state is recorded and offers --base)."""
    names = list(names)
    if not names:
        return ""
    try:
        inputs = stack_inputs(spec, root, "applied")
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return f"applied state not recorded: {type(exc).__name__}: {exc}"
    for name in names:
        if name in inputs.nodes:
            journal.record_applied(name, applied_record(spec, inputs.nodes[name]))
    return ""
