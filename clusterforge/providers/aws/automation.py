"""Drive the Pulumi program in ``stacks/`` through the Automation API (``pulumi.automation``).

The Automation API runs the Pulumi CLI underneath: without it nothing here can work, and the
error says how to install it. Everything goes through ``StackDriver``, whose only seam is the
stack factory ``(stack_name, work_dir) -> Stack``; tests pass a fake stack there. The real
factory first asks the workspace where state lives (``who_am_i``): a self-managed backend
(``pulumi login --local``, ``s3://`` …) encrypts config with a passphrase, and the CLI's
non-interactive ``stack init`` then fails without one (pulumi/pulumi#3204 made it fail rather
than prompt; automation-api-examples#4 shows the message): say what to set before anything runs.

Before the first ``up`` the AMI the nodes will boot is recorded in the stack config
(``clusterforge:ami``, in ``stacks/Pulumi.<stack>.yaml``), so neither the next run nor a retry of a
first run cut short follows the SSM parameter to a newer image (``stacks/components/cluster.py``,
``image_id``): every node of a stack boots one kernel.

Every preview and ``up`` refreshes first (``refresh=True``: "Refresh the state of the stack's
resources against the cloud provider before running up", ``pulumi.automation.Stack.up``): an
instance terminated or retired outside Pulumi shows as one to create, not as a running node.

``up`` previews first and refuses to replace or delete a resource that holds data (the FSx file
system, the checkpoint bucket; ``clusterforge.providers.aws.stateful``) unless it is named in
``allow_replace``; the names reach the program as ``clusterforge:allow-replace`` for that run only,
where they lift ``protect`` (a protected resource is never replaced, pulumi/pulumi pull 8810).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from clusterforge.providers.aws.stateful import StatefulChange, from_steps

STACKS_DIR = Path(__file__).resolve().parents[3] / "stacks"
INSTANCE_TYPE = "aws:ec2/instance:Instance"
# Resources that are Pulumi's bookkeeping, not cloud resources.
INTERNAL_TYPES = ("pulumi:pulumi:Stack", "pulumi:providers:")

INSTALL_HINT = (
    "the Pulumi CLI is not installed or not on PATH; the AWS stacks need it. Install it with "
    "`curl -fsSL https://get.pulumi.com | sh` (or see https://www.pulumi.com/docs/install/), then run "
    "`pulumi login` (or `pulumi login --local`) and `pulumi plugin install resource aws`"
)

# Engine step ops, folded into what a person wants to know.
OP_GROUPS = {
    "create": "create",
    "update": "update",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
    "delete": "delete",
    "same": "same",
}


AMI_CONFIG_KEY = "clusterforge:ami"
ALLOW_REPLACE_KEY = "clusterforge:allow-replace"
# State backends that are not Pulumi Cloud: their default secrets provider is a passphrase.
SELF_MANAGED_SCHEMES = ("file://", "s3://", "gs://", "azblob://", "postgres://")
PASSPHRASE_VARS = ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")


class PulumiCliMissing(Exception):
    """The Pulumi CLI cannot be found; the message says how to install it."""


class BackendNotReady(Exception):
    """The Pulumi backend cannot run this stack non-interactively; the message says what to set."""


class DestroyAborted(Exception):
    """The person did not confirm; nothing was destroyed."""


class DataAtRisk(Exception):
    """The update would replace or delete a resource that holds data; nothing was changed."""

    def __init__(self, changes: list[StatefulChange]) -> None:
        self.changes = changes
        names = " ".join(f"--allow-replace {c.name}" for c in changes)
        super().__init__(
            "refused, nothing changed: "
            + "; ".join(c.render() for c in changes)
            + f". Back the data up first (FSx: aws fsx create-backup), then run `invoke up` again with {names}"
        )


class StackLike(Protocol):
    """The part of ``pulumi.automation.Stack`` this module uses."""

    name: str

    # The keyword arguments this module passes (pulumi.automation.Stack takes many more).
    def preview(
        self,
        *,
        diff: bool | None = ...,
        refresh: bool | None = ...,
        on_event: Callable[[Any], Any] | None = ...,
        on_output: Callable[[str], Any] | None = ...,
    ) -> Any: ...
    def up(
        self,
        *,
        refresh: bool | None = ...,
        replace: list[str] | None = ...,
        on_output: Callable[[str], Any] | None = ...,
    ) -> Any: ...
    def remove_config(self, key: str, *, path: bool = False) -> None: ...
    def destroy(self, *, on_output: Callable[[str], Any] | None = ...) -> Any: ...
    def outputs(self) -> Mapping[str, Any]: ...
    def export_stack(self) -> Any: ...
    def get_all_config(self) -> Mapping[str, Any]: ...
    def set_config(self, key: str, value: Any, *, path: bool = False) -> None: ...


class WorkspaceLike(Protocol):
    """The part of ``pulumi.automation.LocalWorkspace`` the backend check uses."""

    def who_am_i(self) -> Any: ...


StackFactory = Callable[[str, str], StackLike]


def backend_notes(
    workspace: WorkspaceLike, stack_name: str, work_dir: str, env: Mapping[str, str] = os.environ
) -> list[str]:
    """Raise ``BackendNotReady`` when this backend would stop ``stack init``/``up`` for want of
    a passphrase; else the things a person should know (lines to print)."""
    try:
        url = workspace.who_am_i().url or ""
    except Exception as exc:  # noqa: BLE001 - CommandError: not logged in, or the backend is unreachable
        raise BackendNotReady(
            f"pulumi cannot tell which backend to use ({str(exc).strip().splitlines()[-1] if str(exc) else exc}); "
            "run `pulumi login` (Pulumi Cloud), `pulumi login --local`, or `pulumi login s3://BUCKET`"
        ) from None
    if not url.startswith(SELF_MANAGED_SCHEMES):
        return []
    stack_file = Path(work_dir) / f"Pulumi.{stack_name}.yaml"
    settings = (yaml.safe_load(stack_file.read_text(encoding="utf-8")) if stack_file.exists() else None) or {}
    provider = str(settings.get("secretsprovider") or "passphrase")
    if not provider.startswith("passphrase"):
        return []  # a KMS/Vault secrets provider: no passphrase involved
    if not any(var in env for var in PASSPHRASE_VARS):  # an empty passphrase is allowed (pulumi#2904)
        raise BackendNotReady(
            f"the Pulumi backend {url} is self-managed: stack {stack_name!r} encrypts its config with a "
            "passphrase, and the Automation API cannot prompt for it. Set PULUMI_CONFIG_PASSPHRASE (or "
            "PULUMI_CONFIG_PASSPHRASE_FILE) and keep it: the same passphrase is needed on every later run"
        )
    if "encryptionsalt" not in settings:
        return [
            f"note: Pulumi will write an `encryptionsalt` into {stack_file} (tracked by git) when it creates "
            f"stack {stack_name!r}; commit it: it is not a secret, and without it the passphrase cannot "
            "decrypt this stack's secrets"
        ]
    return []


def _local_workspace(work_dir: str) -> WorkspaceLike:
    from pulumi import automation as auto

    return auto.LocalWorkspace(work_dir=work_dir)


def pulumi_stack(
    stack_name: str,
    work_dir: str,
    workspace_factory: Callable[[str], WorkspaceLike] = _local_workspace,
    env: Mapping[str, str] = os.environ,
) -> StackLike:
    """The real factory: a local-program stack in ``work_dir`` (created if new), after the
    backend check."""
    if shutil.which("pulumi") is None:
        raise PulumiCliMissing(INSTALL_HINT)
    from pulumi import automation as auto

    try:
        workspace = workspace_factory(work_dir)
        for line in backend_notes(workspace, stack_name, work_dir, env):
            print(line, file=sys.stderr)
        # Tests pass a fake WorkspaceLike; the real factory's is a LocalWorkspace.
        return auto.Stack.create_or_select(stack_name, workspace)  # type: ignore[arg-type]  # a WorkspaceLike
    except FileNotFoundError:  # the CLI vanished between the check and the call
        raise PulumiCliMissing(INSTALL_HINT) from None


def resource_name(urn: str) -> str:
    """The logical name at the end of a URN (``urn:pulumi:prod::clusterforge::…::gpu-001``)."""
    return urn.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Change:
    op: str  # create | update | replace | delete
    type: str
    name: str


@dataclass
class PreviewSummary:
    stack: str
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    # Replaces and deletes of resources that hold data (FSx, the checkpoint bucket).
    stateful: list[StatefulChange] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(c.op for c in self.changes))

    @property
    def nodes(self) -> dict[str, str]:
        """Node name -> what happens to it (only nodes that change)."""
        return {c.name: c.op for c in self.changes if c.type == INSTANCE_TYPE}

    def render(self) -> str:
        counts = self.counts
        parts = [f"{counts.get(op, 0)} to {op}" for op in ("create", "update", "replace", "delete")]
        lines = [f"stack {self.stack}: " + ", ".join(parts) + f", {self.unchanged} unchanged"]
        by_op: dict[str, list[str]] = {}
        for node, op in sorted(self.nodes.items()):
            by_op.setdefault(op, []).append(node)
        for op, names in by_op.items():
            lines.append(f"  nodes to {op} ({len(names)}): {', '.join(names)}")
        if not by_op:
            lines.append("  no node changes")
        lines += [f"  DATA: {c.render()}" for c in self.stateful]
        return "\n".join(lines)


def summarise_events(stack: str, events: list[Any]) -> PreviewSummary:
    """Fold engine events (``ResourcePreEvent`` steps) into a summary."""
    summary = PreviewSummary(stack)
    seen: set[tuple[str, str]] = set()
    steps: list[tuple[str, str, str, list[str]]] = []
    for event in events:
        pre = getattr(event, "resource_pre_event", None)
        if pre is None:
            continue
        meta = pre.metadata
        op = OP_GROUPS.get(str(getattr(meta.op, "value", meta.op)))
        if op is None or meta.type.startswith(INTERNAL_TYPES):
            continue
        steps.append((op, meta.type, resource_name(meta.urn), list(getattr(meta, "keys", None) or [])))
        if op == "same":
            summary.unchanged += 1
            continue
        key = (meta.urn, op)  # a replacement shows up as two steps: count it once
        if key not in seen:
            seen.add(key)
            summary.changes.append(Change(op, meta.type, resource_name(meta.urn)))
    summary.stateful = from_steps(steps)
    return summary


class StackDriver:
    def __init__(
        self,
        stack_name: str,
        work_dir: Path = STACKS_DIR,
        factory: StackFactory = pulumi_stack,
        on_output: Callable[[str], None] | None = None,
    ) -> None:
        self.stack_name = stack_name
        self.work_dir = work_dir
        self._factory = factory
        self._stack: StackLike | None = None
        self.on_output = on_output

    @property
    def stack(self) -> StackLike:
        if self._stack is None:
            self._stack = self._factory(self.stack_name, str(self.work_dir))
        return self._stack

    def preview(self) -> PreviewSummary:
        events: list[Any] = []
        self.stack.preview(diff=False, refresh=True, on_event=events.append, on_output=self.on_output)
        return summarise_events(self.stack_name, events)

    def up(
        self, allow_replace: frozenset[str] = frozenset(), replace: list[str] | None = None
    ) -> dict[str, Any]:
        """Create or update everything; the stack outputs afterwards (plain values).

        Refuses (``DataAtRisk``, nothing changed) when the refreshed preview replaces or deletes a
        resource that holds data and is not in ``allow_replace``. ``replace``: URNs to replace
        (``invoke replace``). Records the AMI the nodes run, so the next run keeps it."""
        summary = self.preview()
        refused = [c for c in summary.stateful if c.name not in allow_replace]
        if refused:
            raise DataAtRisk(refused)
        allowed = sorted(c.name for c in summary.stateful)
        if allowed:
            from pulumi import automation as auto

            self.stack.set_config(ALLOW_REPLACE_KEY, auto.ConfigValue(value=json.dumps(allowed)))
        try:
            result = self.stack.up(refresh=True, replace=replace, on_output=self.on_output)
        finally:
            if allowed:
                self.stack.remove_config(ALLOW_REPLACE_KEY)
        outputs = {k: v.value for k, v in result.outputs.items()}
        self.record_ami(outputs.get("ami"))
        return outputs

    def recorded_ami(self) -> str | None:
        recorded = self.stack.get_all_config().get(AMI_CONFIG_KEY)
        return None if recorded is None else str(getattr(recorded, "value", recorded))

    def ensure_ami(self, resolve: Callable[[], str]) -> None:
        """Record the image a first run will boot before that run starts (a retry after a run cut
        short then boots the same one); nothing when one is recorded already."""
        if self.recorded_ami() is None:
            self.record_ami(resolve())

    def record_ami(self, ami: str | None) -> None:
        if not ami:
            return
        recorded = self.stack.get_all_config().get(AMI_CONFIG_KEY)
        if recorded is not None and getattr(recorded, "value", recorded) == ami:
            return
        from pulumi import automation as auto

        self.stack.set_config(AMI_CONFIG_KEY, auto.ConfigValue(value=ami))
        if self.on_output:
            self.on_output(
                f"recorded {AMI_CONFIG_KEY}={ami} in stacks/Pulumi.{self.stack_name}.yaml: commit it. Nodes "
                "keep this image; set provider.ami in the spec to move them to another\n"
            )

    def outputs(self) -> dict[str, Any]:
        return {k: v.value for k, v in self.stack.outputs().items()}

    def resources(self) -> list[tuple[str, str]]:
        """(type, name) of every cloud resource the stack holds now."""
        deployment = self.stack.export_stack().deployment or {}
        out = []
        for res in deployment.get("resources") or []:
            if res.get("type", "").startswith(INTERNAL_TYPES):
                continue
            out.append((res["type"], resource_name(res["urn"])))
        return out

    def destroy(self, confirm: Callable[[str], str]) -> list[tuple[str, str]]:
        """Destroy the stack after ``confirm(prompt)`` returns the stack's name.

        The prompt names the stack and counts what will go; anything else than the stack name
        as the answer raises ``DestroyAborted`` and nothing is touched. Returns what went."""
        resources = self.resources()
        instances = sorted(name for type_, name in resources if type_ == INSTANCE_TYPE)
        prompt = (
            f"This destroys stack {self.stack_name!r}: {len(resources)} resources, among them "
            f"{len(instances)} instances ({', '.join(instances) or 'none'}). "
            f"Type the stack name ({self.stack_name}) to confirm: "
        )
        if confirm(prompt).strip() != self.stack_name:
            raise DestroyAborted(f"not confirmed: stack {self.stack_name!r} left as it is")
        self.stack.destroy(on_output=self.on_output)
        return resources
