"""`invoke replace`: one compute node on a new machine — drain, replace, configure, certify, admit.

- Refused (unless ``force``): a node that is not a compute node of the stack (never forced), and
  the only node of its pool still in service (the pool would serve nothing meanwhile).
- Drain with ``clusterforge: replacing``; jobs get the rollout's ``drain_timeout_s``. Still busy
  at the deadline: the node is resumed untouched and nothing is replaced (``force`` replaces it
  anyway: its jobs die with the machine).
- Replace: a provider with ``replace_node(spec, node, progress)`` replaces that machine alone
  (AWS must do it delete-before-replace inside a reservation); the local provider removes the
  node's container and ``create`` makes a new one. Any other provider is refused before anything
  is drained.
- Then the pipeline's provision -> configure -> certify for the head and that node (the head's
  Slurm configuration learns the new machine); admitted when it passes.
- The journal (section ``replacements``; also reports/<node>/replacements.json) and the summary
  name the old and new machine: provider id and GPU UUIDs/serials where the gpu-inventory check
  reported them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console

from clusterforge.pipeline.certify_stage import CertifyStage
from clusterforge.pipeline.context import Options
from clusterforge.pipeline.display import Board
from clusterforge.pipeline.scheduler import BaseStage
from clusterforge.pipeline.stages import ConfigureStage, ProvisionStage
from clusterforge.pipeline.up import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PREFLIGHT,
    Outcome,
    Seams,
    preflight,
    run_stages,
    stack_context,
)
from clusterforge.providers import Provider, get_provider
from clusterforge.providers.base import ProviderError, no_progress
from clusterforge.rollout.identity import fresh_journal, identity, record_replacement
from clusterforge.slurm.admission import REASON_PREFIX, Admission, AdmissionError
from clusterforge.spec.models import ClusterSpec

REPLACING_REASON = f"{REASON_PREFIX} replacing"


class ReplaceRefused(Exception):
    """The node may not be replaced; the message says why and what to do."""


@dataclass
class ReplaceOutcome:
    code: int
    old: dict | None = None
    new: dict | None = None


def replacer(provider: Provider, spec: ClusterSpec) -> Callable[[str], None]:
    """How this provider puts one node on a new machine; ReplaceRefused when it cannot."""
    own = getattr(provider, "replace_node", None)
    if callable(own):
        return lambda node: own(spec, node, no_progress)
    engine_of = getattr(provider, "engine", None)
    if spec.provider.kind == "local" and callable(engine_of):

        def remove_container(node: str) -> None:
            engine = engine_of(spec)
            argv = ["rm", "-f", "-t", "0"] if engine.name == "podman" else ["rm", "-f"]
            # provision's create() then makes the missing container anew (a new id, same name).
            engine.run(*argv, f"{spec.stack}-{node}")

        return remove_container
    raise ReplaceRefused(
        f"provider {spec.provider.kind!r} ({type(provider).__name__}) cannot replace one node: it has no "
        "replace_node(spec, node, progress) method yet. Nothing was drained or changed; replace the machine "
        "with the provider's own tools (AWS: `pulumi up --replace <urn of the node's instance>`), then run "
        f"`invoke up --stack {spec.stack}`"
    )


def check_replaceable(
    spec: ClusterSpec, provider: Provider, node: str, serving: dict[str, bool], force: bool
) -> None:
    planned = provider.plan(spec)
    compute = [p for p in planned if p.role == "gpu"]
    me = next((p for p in compute if p.name == node), None)
    if me is None:
        others = next((p for p in planned if p.name == node), None)
        what = f"a {others.role} node" if others else "not a node of the spec"
        raise ReplaceRefused(
            f"--node {node}: {what} of stack {spec.stack!r}; compute nodes: {', '.join(p.name for p in compute) or 'none'}"
        )
    in_service = [p.name for p in compute if p.pool == me.pool and serving.get(p.name)]
    if not force and in_service == [node]:
        raise ReplaceRefused(
            f"--node {node}: it is the only node of pool {me.pool!r} in service; replacing it leaves the pool "
            "with none. Bring another node of the pool back first, or add --force"
        )


def _drain(admission: Admission, node: str, timeout_s: int, force: bool, console: Console) -> None:
    admission.drain(node, REPLACING_REASON)
    busy = admission.wait_drained([node], timeout_s)
    if busy and not force:
        admission.release(node)
        raise ReplaceRefused(
            f"{node}: jobs still running after rollout.drain_timeout_s = {timeout_s} s; resumed untouched, "
            "nothing replaced. Wait for them, or add --force (they die with the machine)"
        )
    if busy:
        console.print(
            f"{node}: jobs still running at the deadline; --force: replacing anyway", style="yellow"
        )


def _confirm(spec: ClusterSpec, node: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise ReplaceRefused(
            f"refusing to replace {node} of stack {spec.stack!r} without a terminal to confirm: add --yes"
        )
    answer = input(
        f"Replace {node} of stack {spec.stack!r} with a new machine? Type the node name to confirm: "
    )
    if answer.strip() != node:
        raise ReplaceRefused("not confirmed: nothing replaced")


def replace(
    spec: ClusterSpec,
    node: str,
    *,
    force: bool = False,
    yes: bool = False,
    console: Console | None = None,
    seams: Seams | None = None,
) -> ReplaceOutcome:
    console = console or Console()
    seams = seams or Seams()
    provider = seams.provider or get_provider(spec)
    journal = fresh_journal(spec.stack)
    try:
        if not preflight(spec, provider, console, seams.playbooks):
            return ReplaceOutcome(EXIT_PREFLIGHT)
        live = {n.name: n for n in provider.nodes(spec)}
        heads = [n for n in live.values() if n.role == "head" and n.state == "running"]
        if not heads:
            raise ReplaceRefused(
                f"stack {spec.stack!r} has no running head node: run `invoke up --stack {spec.stack}`"
            )
        admission = Admission(seams.runner(heads[0], timeout_s=60))
        serving = {name: s.serving for name, s in admission.nodes().items()}
        check_replaceable(spec, provider, node, serving, force)
        swap = replacer(provider, spec)
        _confirm(spec, node, yes)
        before = journal.record(node)
        old = identity(journal, node)
        old["provider_id"] = live[node].provider_id if node in live else old["provider_id"]
        if node in serving:  # known to Slurm: let its jobs finish first
            _drain(admission, node, spec.rollout.drain_timeout_s, force, console)
        console.print(f"{node}: replacing machine {old['provider_id'] or '(none)'}", highlight=False)
        swap(node)
    except ReplaceRefused as exc:
        console.print(f"error: {exc}", style="red", highlight=False)
        return ReplaceOutcome(EXIT_PREFLIGHT)
    except (AdmissionError, ProviderError) as exc:
        console.print(f"error: {node} not replaced: {exc}", style="red", highlight=False)
        return ReplaceOutcome(EXIT_FAILED)
    outcome = _bring_up(spec, provider, node, console, seams)
    journal = fresh_journal(spec.stack)  # the pipeline wrote through its own instance
    new = identity(journal, node)
    record_replacement(journal, node, old, new, before.verdict, before.reason)
    after = journal.record(node)
    if after.verdict == "pass":
        journal.record_certified(node, _pins(after.applied), new)
    console.print(
        f"{node}: old machine {old['provider_id'] or '?'} (GPUs: {', '.join(old['gpus']) or 'none reported'}) -> "
        f"new machine {new['provider_id'] or '?'} (GPUs: {', '.join(new['gpus']) or 'none reported'})",
        highlight=False,
    )
    if outcome.code == EXIT_INTERRUPTED:
        return ReplaceOutcome(EXIT_INTERRUPTED, old, new)
    return ReplaceOutcome(EXIT_OK if not outcome.failed else EXIT_FAILED, old, new)


def _pins(applied: dict) -> dict[str, str]:
    return dict((applied.get("inputs") or {}).get("pinned") or {})


def _bring_up(spec: ClusterSpec, provider: Provider, node: str, console: Console, seams: Seams) -> Outcome:
    """provision (the new machine) -> configure (head + node) -> certify (node), as `up` does."""
    heads = [p.name for p in provider.plan(spec) if p.role == "head"]
    names = heads + [node]
    board = Board([(n, "head" if n in heads else "gpu") for n in names], console)
    ctx = stack_context(spec, provider, Options(only=frozenset([node])), board, seams)
    stages: list[BaseStage] = [ProvisionStage(ctx), ConfigureStage(ctx), CertifyStage(ctx)]
    return run_stages(ctx, stages, names, console)
