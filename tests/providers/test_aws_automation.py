"""The Automation API driver at its seam: a fake Stack that speaks with the real
``pulumi.automation`` event and result classes (the Pulumi CLI cannot run on these machines)."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi import automation as auto

from clusterforge.providers.aws import automation as am

PREFIX = "urn:pulumi:prod::clusterforge::"


def _event(
    seq: int, op: auto.OpType, type_: str, name: str, parent: str = "", keys: list[str] | None = None
) -> auto.EngineEvent:
    urn = f"{PREFIX}{parent}{type_}::{name}"
    meta = auto.StepEventMetadata(op=op, urn=urn, type=type_, provider="", keys=keys)
    return auto.EngineEvent(
        sequence=seq, timestamp=0, resource_pre_event=auto.ResourcePreEvent(metadata=meta)
    )


INSTANCE = "aws:ec2/instance:Instance"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
POOL_PARENT = "clusterforge:compute:NodePool$"


class FakeStack:
    """Records calls; replays engine events the way the CLI streams them."""

    def __init__(self, events: list[auto.EngineEvent] | None = None, resources: list[dict] | None = None):
        self.name = "prod"
        self.events = events or []
        self.resources = resources or []
        self.calls: list[str] = []
        self.kwargs: dict[str, dict[str, Any]] = {}

    def preview(self, **kwargs: Any) -> auto.PreviewResult:
        self.calls.append("preview")
        self.kwargs["preview"] = kwargs
        for event in self.events:
            kwargs["on_event"](event)
        return auto.PreviewResult(stdout="", stderr="", change_summary={})

    def up(self, **kwargs: Any) -> auto.UpResult:
        self.calls.append("up")
        self.kwargs["up"] = kwargs
        outputs = {"region": auto.OutputValue("us-east-1", False), "nodes": auto.OutputValue([], False)}
        return auto.UpResult(stdout="", stderr="", summary=None, outputs=outputs)  # type: ignore[arg-type]

    def destroy(self, **kwargs: Any) -> None:
        self.calls.append("destroy")

    def outputs(self) -> dict[str, auto.OutputValue]:
        return {"bucket": auto.OutputValue("ckpt", False)}

    def export_stack(self) -> auto.Deployment:
        return auto.Deployment(version=3, deployment={"resources": self.resources})


def _driver(stack: FakeStack) -> am.StackDriver:
    made: list[tuple[str, str]] = []

    def factory(name: str, work_dir: str) -> FakeStack:
        made.append((name, work_dir))
        return stack

    driver = am.StackDriver("prod", factory=factory)
    driver.made = made  # type: ignore[attr-defined]
    return driver


def test_preview_summarises_counts_and_the_nodes_it_touches():
    events = [
        _event(1, auto.OpType.SAME, "pulumi:pulumi:Stack", "clusterforge-prod"),
        _event(2, auto.OpType.SAME, "aws:ec2/vpc:Vpc", "prod-vpc"),
        _event(3, auto.OpType.UPDATE, LT, "prod-gpu", POOL_PARENT),
        _event(4, auto.OpType.CREATE_REPLACEMENT, INSTANCE, "gpu-003", POOL_PARENT),
        _event(5, auto.OpType.DELETE_REPLACED, INSTANCE, "gpu-003", POOL_PARENT),
        _event(6, auto.OpType.CREATE, INSTANCE, "gpu-017", POOL_PARENT),
        _event(7, auto.OpType.DELETE, "aws:ec2/securityGroup:SecurityGroup", "prod-old"),
    ]
    driver = _driver(FakeStack(events))
    summary = driver.preview()
    assert summary.counts == {"update": 1, "replace": 1, "create": 1, "delete": 1}
    assert summary.unchanged == 1  # the Stack itself is bookkeeping, not counted
    assert summary.nodes == {"gpu-003": "replace", "gpu-017": "create"}
    assert summary.render().splitlines() == [
        "stack prod: 1 to create, 1 to update, 1 to replace, 1 to delete, 1 unchanged",
        "  nodes to replace (1): gpu-003",
        "  nodes to create (1): gpu-017",
    ]
    assert driver.made == [("prod", str(am.STACKS_DIR))]  # type: ignore[attr-defined]


def test_up_and_outputs_return_plain_values():
    stack = FakeStack()
    driver = _driver(stack)
    assert driver.up() == {"region": "us-east-1", "nodes": []}
    assert driver.outputs() == {"bucket": "ckpt"}
    assert stack.calls == ["preview", "up"]


def test_preview_and_up_refresh_the_state_first():
    """An instance terminated outside Pulumi must show as one to create (issue 23: `up` never
    refreshed, so a lost node stayed in state and inventory)."""
    stack = FakeStack()
    _driver(stack).up()
    assert stack.kwargs["preview"]["refresh"] is True
    assert stack.kwargs["up"]["refresh"] is True


FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
STORAGE = "clusterforge:storage:Storage$"


def _fsx_replaced() -> list[auto.EngineEvent]:
    return [
        _event(1, auto.OpType.CREATE_REPLACEMENT, FSX, "prod-fsx", STORAGE, keys=["deploymentType"]),
        _event(2, auto.OpType.REPLACE, FSX, "prod-fsx", STORAGE, keys=["deploymentType"]),
        _event(3, auto.OpType.DELETE_REPLACED, FSX, "prod-fsx", STORAGE, keys=["deploymentType"]),
        _event(
            4,
            auto.OpType.REPLACE,
            "aws:s3/bucket:Bucket",
            "prod-ssm-transfer",
            STORAGE,
            keys=["bucketPrefix"],
        ),
    ]


def test_a_file_system_replacement_is_named_in_the_preview():
    summary = am.summarise_events("prod", [e for e in _fsx_replaced()])
    (change,) = summary.stateful  # the transfer bucket holds nothing worth keeping
    assert (change.kind, change.name, change.op, change.keys) == (
        "file system",
        "prod-fsx",
        "replace",
        ("deploymentType",),
    )
    assert "DATA: file system prod-fsx (the cluster's shared files" in summary.render()
    assert "because deploymentType changed" in summary.render()


def test_up_refuses_to_replace_the_file_system_unless_named():
    stack = RecordingStack("ami-0123456789abcdef0")
    stack.events = _fsx_replaced()
    driver = _driver(stack)
    with pytest.raises(am.DataAtRisk, match="--allow-replace prod-fsx") as err:
        driver.up()
    assert "file system prod-fsx" in str(err.value) and "nothing changed" in str(err.value)
    assert stack.calls == ["preview"]  # no up, no config written
    driver.up(allow_replace=frozenset({"prod-fsx"}))
    # The names reach the program for this run only (they lift `protect` on that resource).
    assert stack.calls[2:5] == [
        'set_config clusterforge:allow-replace=["prod-fsx"]',
        "up",
        "remove_config clusterforge:allow-replace",
    ]


def test_the_image_is_recorded_before_a_first_up():
    stack = RecordingStack("ami-0123456789abcdef0")
    driver = _driver(stack)
    driver.ensure_ami(lambda: "ami-0123456789abcdef0")
    driver.ensure_ami(lambda: "ami-0fedcba9876543210")  # a retry: the parameter moved on, the record did not
    assert stack.calls == ["set_config clusterforge:ami=ami-0123456789abcdef0"]


RESOURCES = [
    {"urn": f"{PREFIX}pulumi:pulumi:Stack::clusterforge-prod", "type": "pulumi:pulumi:Stack"},
    {"urn": f"{PREFIX}pulumi:providers:aws::default_7_0_0", "type": "pulumi:providers:aws"},
    {"urn": f"{PREFIX}aws:ec2/vpc:Vpc::prod-vpc", "type": "aws:ec2/vpc:Vpc"},
    {"urn": f"{PREFIX}{POOL_PARENT}{INSTANCE}::gpu-002", "type": INSTANCE},
    {"urn": f"{PREFIX}{POOL_PARENT}{INSTANCE}::gpu-001", "type": INSTANCE},
]


def test_destroy_asks_naming_the_stack_and_counting_what_goes():
    stack = FakeStack(resources=RESOURCES)
    prompts: list[str] = []

    def confirm(prompt: str) -> str:
        prompts.append(prompt)
        return "prod\n"

    gone = _driver(stack).destroy(confirm)
    assert stack.calls == ["destroy"]
    assert len(gone) == 3
    assert prompts == [
        "This destroys stack 'prod': 3 resources, among them 2 instances (gpu-001, gpu-002). "
        "Type the stack name (prod) to confirm: "
    ]


@pytest.mark.parametrize("answer", ["", "yes", "dev", "PROD"])
def test_destroy_without_the_stack_name_touches_nothing(answer: str):
    stack = FakeStack(resources=RESOURCES)
    with pytest.raises(am.DestroyAborted, match="not confirmed"):
        _driver(stack).destroy(lambda prompt: answer)
    assert stack.calls == []


def test_missing_cli_says_how_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(am.PulumiCliMissing) as err:
        am.StackDriver("prod").preview()
    assert "get.pulumi.com" in str(err.value) and "pulumi plugin install resource aws" in str(err.value)


class RecordingStack(FakeStack):
    """A stack whose `up` exports the AMI, with a config map like the CLI keeps."""

    def __init__(self, ami: str, config: dict[str, auto.ConfigValue] | None = None):
        super().__init__()
        self.ami = ami
        self.config = dict(config or {})

    def up(self, **kwargs: Any) -> auto.UpResult:
        self.calls.append("up")
        self.kwargs["up"] = kwargs
        outputs = {"ami": auto.OutputValue(self.ami, False)}
        return auto.UpResult(stdout="", stderr="", summary=None, outputs=outputs)  # type: ignore[arg-type]

    def get_all_config(self) -> dict[str, auto.ConfigValue]:
        return dict(self.config)

    def set_config(self, key: str, value: auto.ConfigValue, *, path: bool = False) -> None:
        self.calls.append(f"set_config {key}={value.value}")
        self.config[key] = value

    def remove_config(self, key: str, *, path: bool = False) -> None:
        self.calls.append(f"remove_config {key}")
        self.config.pop(key, None)


def test_up_records_the_ami_the_nodes_booted_once():
    stack = RecordingStack("ami-0123456789abcdef0")
    lines: list[str] = []
    driver = _driver(stack)
    driver.on_output = lines.append
    driver.up()
    driver.up()  # already recorded: no second write
    assert stack.calls == [
        "preview", "up", "set_config clusterforge:ami=ami-0123456789abcdef0", "preview", "up",
    ]  # fmt: skip
    assert len(lines) == 1 and "stacks/Pulumi.prod.yaml: commit it" in lines[0]


def test_a_new_spec_ami_replaces_the_record():
    old = {am.AMI_CONFIG_KEY: auto.ConfigValue(value="ami-0123456789abcdef0")}
    stack = RecordingStack("ami-0fedcba9876543210", old)
    _driver(stack).up()
    assert stack.config[am.AMI_CONFIG_KEY].value == "ami-0fedcba9876543210"


class FakeWorkspace:
    """`LocalWorkspace.who_am_i` at the seam: the CLI's answer for a logged-in backend."""

    def __init__(self, url: str | None = None, error: Exception | None = None):
        self.url, self.error = url, error

    def who_am_i(self) -> auto.WhoAmIResult:
        if self.error is not None:
            raise self.error
        return auto.WhoAmIResult(user="ops", url=self.url, organizations=[])


@pytest.mark.parametrize("url", ["file://~", "file:///srv/pulumi", "s3://state-bucket/clusterforge"])
def test_self_managed_backend_without_a_passphrase_stops_before_anything_runs(url: str, tmp_path):
    with pytest.raises(am.BackendNotReady, match="PULUMI_CONFIG_PASSPHRASE") as err:
        am.backend_notes(FakeWorkspace(url), "prod", str(tmp_path), env={})
    assert url in str(err.value) and "'prod'" in str(err.value)


def test_the_real_factory_checks_the_backend_first(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.setattr(am.shutil, "which", lambda name: "/usr/bin/pulumi")
    created: list[str] = []
    monkeypatch.setattr(auto.Stack, "create_or_select", lambda name, ws: created.append(name))
    with pytest.raises(am.BackendNotReady):
        am.pulumi_stack("prod", str(tmp_path), workspace_factory=lambda d: FakeWorkspace("file://~"), env={})
    assert created == []  # no `stack init` was attempted
    am.pulumi_stack(
        "prod",
        str(tmp_path),
        workspace_factory=lambda d: FakeWorkspace("file://~"),
        env={"PULUMI_CONFIG_PASSPHRASE": ""},
    )
    assert created == ["prod"]  # an empty passphrase is a passphrase


def test_passphrase_set_warns_about_the_salt_only_for_a_new_stack(tmp_path):
    env = {"PULUMI_CONFIG_PASSPHRASE_FILE": "/run/secrets/pulumi"}
    (tmp_path / "Pulumi.prod.yaml").write_text("config:\n  aws:region: us-east-1\n")
    (note,) = am.backend_notes(FakeWorkspace("s3://state"), "prod", str(tmp_path), env)
    assert "encryptionsalt" in note and "tracked by git" in note
    (tmp_path / "Pulumi.prod.yaml").write_text("encryptionsalt: v1:abc\nconfig: {}\n")
    assert am.backend_notes(FakeWorkspace("s3://state"), "prod", str(tmp_path), env) == []


def test_cloud_backend_and_kms_secrets_need_no_passphrase(tmp_path):
    assert am.backend_notes(FakeWorkspace("https://api.pulumi.com"), "prod", str(tmp_path), env={}) == []
    (tmp_path / "Pulumi.prod.yaml").write_text("secretsprovider: awskms://alias/pulumi\n")
    assert am.backend_notes(FakeWorkspace("s3://state"), "prod", str(tmp_path), env={}) == []


def test_not_logged_in_says_how_to_log_in(tmp_path):
    failure = auto.errors.CommandError(auto.CommandResult(stdout="", stderr="error: not logged in", code=255))
    with pytest.raises(am.BackendNotReady, match="pulumi login --local"):
        am.backend_notes(FakeWorkspace(error=failure), "prod", str(tmp_path), env={})
