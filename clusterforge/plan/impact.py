"""The pure diff: (base inputs, new inputs, live state, provider steps) -> one NodeImpact per node.

No I/O here: the caller reads both sides (``sources.py``), asks the provider and Slurm, and
hands the results in, so every rule below is tested on simulated fleets.

Rules (what a person needs to know before a change lands):
- provision: a node only in the new side is created, only in the base destroyed; a changed
  machine (instance type, OS image, root volume, placement) or the provider's own "replace"
  step replaces it; a node the provider must create again (its machine is gone) is created.
- configure: the roles whose files or host variables differ (all of them on a new machine).
- reboot: a kernel-level input changed where the host manages that kernel module.
- re-certify: compute nodes whose pinned versions, kernel-level inputs, certification profile or
  thresholds changed, or whose machine is new.
- drain: nodes in service that stop serving for it (destroy, replace, reboot, re-certify),
  with the jobs running on them now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from clusterforge.plan.inputs import NodeInputs, StackInputs

Provision = Literal["create", "replace", "destroy", "keep"]


@dataclass(frozen=True)
class LiveNode:
    """A node as it is now: from the provider and, when the stack is up, from Slurm."""

    name: str
    exists: bool = True
    state: str = "running"  # provider state
    serving: bool = False  # Slurm may give it user work now
    slurm_state: str = ""
    jobs: tuple[str, ...] = ()  # ids of jobs running on it
    pool: str = ""


@dataclass(frozen=True)
class LiveState:
    nodes: dict[str, LiveNode] = field(default_factory=dict)
    # Provider steps by node: create | replace | update | delete | start | keep (the Pulumi
    # preview's steps mapped to nodes for AWS; container presence for the local provider).
    steps: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what could not be asked, and why
    # Resources holding data that the provider would replace or delete (AWS: the FSx file system,
    # the checkpoint bucket), one line each; `up` refuses them unless named.
    data: tuple[str, ...] = ()

    @property
    def up(self) -> bool:
        """Whether any node of the stack exists: only then do the provider's steps count."""
        return any(n.exists for n in self.nodes.values())


@dataclass(frozen=True)
class NodeImpact:
    node: str
    pool: str
    role: str
    provision: Provision = "keep"
    configure: tuple[str, ...] = ()  # roles whose inputs change
    reboot: bool = False
    recertify: bool = False
    drain: bool = False
    jobs: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # one line each, for people

    @property
    def changed(self) -> bool:
        return self.provision != "keep" or bool(self.configure) or self.reboot or self.recertify

    def actions(self) -> list[str]:
        """``["create", "configure", "reboot", "re-certify", "drain"]``, only those that apply."""
        out: list[str] = [] if self.provision == "keep" else [self.provision]
        if self.configure:
            out.append("configure")
        if self.reboot:
            out.append("reboot")
        if self.recertify:
            out.append("re-certify")
        if self.drain:
            out.append("drain")
        return out

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["configure"] = list(self.configure)
        data["jobs"] = list(self.jobs)
        data["reasons"] = list(self.reasons)
        data["actions"] = self.actions()
        data["changed"] = self.changed
        return data


def _changes(label: str, old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append(f"{label}{key} {old.get(key) or '(none)'} -> {new.get(key) or '(none)'}")
    return lines


def _provision(
    base: NodeInputs | None, new: NodeInputs | None, live: LiveState
) -> tuple[Provision, list[str]]:
    name = (new or base).name  # type: ignore[union-attr]  # callers pass at least one of the two
    step = live.steps.get(name, "") if live.up else ""
    exists = name in live.nodes and live.nodes[name].exists
    if new is None:
        return "destroy", ["not in the spec any more"]
    if base is None:
        if exists:
            return "keep", ["nothing recorded as applied on this node"]
        return "create", ["new node"]
    changed = _changes("", base.machine, new.machine)
    if changed:
        return "replace", changed
    if step == "replace":
        return "replace", ["the provider replaces it"]
    if step == "create":
        return "create", ["its machine is gone: the provider creates it again"]
    return "keep", []


def _what_changed(base: NodeInputs, new: NodeInputs, role: str) -> str:
    old = base.roles.get(role)
    if old is None:
        return f"{role} (new role on this node)"
    parts = [
        what
        for what, differs in (
            ("files", old.files != new.roles[role].files),
            ("variables", old.variables != new.roles[role].variables),
        )
        if differs
    ]
    return f"{role} ({', '.join(parts)})"


def node_impact(base: NodeInputs | None, new: NodeInputs | None, live: LiveState) -> NodeImpact:
    """What happens to one node; ``base``/``new`` is None where the node is absent on that side."""
    ref = new or base
    if ref is None:
        raise ValueError("node_impact needs the node on at least one side")
    provision, reasons = _provision(base, new, live)
    now = live.nodes.get(ref.name, LiveNode(ref.name, exists=False))
    if new is None:
        configure: tuple[str, ...] = ()
        reboot = recertify = False
    elif provision in ("create", "replace") or base is None:
        configure = tuple(new.roles)
        reboot = False  # a new machine boots with what it is given
        recertify = new.role == "gpu"
    else:
        configure = tuple(r for r in new.roles if base.roles.get(r) != new.roles[r])
        reasons += _changes("", base.pinned, new.pinned)
        reboot = bool(new.reboot) and base.reboot != new.reboot
        if reboot:
            reasons += [f"reboot: {line}" for line in _changes("", base.reboot, new.reboot)]
        cert_changed = base.certification != new.certification
        if cert_changed and new.role == "gpu":
            reasons.append("certification profile or thresholds changed")
        recertify = new.role == "gpu" and (base.pinned != new.pinned or reboot or cert_changed)
        if configure:
            reasons.append("inputs changed: " + ", ".join(_what_changed(base, new, r) for r in configure))
    disruptive = provision in ("destroy", "replace") or reboot or recertify
    drain = now.serving and disruptive
    return NodeImpact(
        node=ref.name,
        pool=ref.pool,
        role=ref.role,
        provision=provision,
        configure=configure,
        reboot=reboot,
        recertify=recertify,
        drain=drain,
        jobs=now.jobs if drain else (),
        reasons=tuple(reasons),
    )


def plan_impacts(base: StackInputs, new: StackInputs, live: LiveState | None = None) -> list[NodeImpact]:
    """One impact per node on either side: the new side's order first, then destroyed nodes."""
    live = live or LiveState()
    names = list(new.nodes) + [n for n in base.nodes if n not in new.nodes]
    return [node_impact(base.nodes.get(n), new.nodes.get(n), live) for n in names]


def pending(impacts: list[NodeImpact]) -> bool:
    return any(i.changed for i in impacts)
