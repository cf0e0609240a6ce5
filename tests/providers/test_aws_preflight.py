"""AWS preflight: offerings and instance-type facts against moto's server on 127.0.0.1; capacity
reservations, Capacity Blocks, Service Quotas and placement groups (not in moto 5.2, or only for
VPC quotas) with botocore's Stubber, whose responses are validated against the service model."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from botocore.stub import Stubber

from clusterforge.catalog import load_hardware
from clusterforge.providers.aws import preflight as pf
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec
from tests.fixtures.aws import reset

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
PROD_CR = "cr-0a1b2c3d4e5f60718"


def _spec(stack: str, **provider: object) -> ClusterSpec:
    spec, _ = load_spec(stack_path(stack))
    if provider:
        spec = spec.model_copy(update={"provider": spec.provider.model_copy(update=provider)})
    return spec


def _with_pools(spec: ClusterSpec, **changes: object) -> ClusterSpec:
    pools = [p.model_copy(update=changes) if p.role == "gpu" else p for p in spec.node_pools]
    return spec.model_copy(update={"node_pools": pools})


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Fake keys and no config files: nothing here can reach or use a real account."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def moto(moto_url: str, fake_credentials: None) -> str:
    reset(moto_url)  # the session's server (tests/fixtures/aws.py), emptied
    return moto_url


def _stubbed(service: str) -> tuple[object, Stubber]:
    client = boto3.client(
        service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    return client, Stubber(client)


def _clients(**overrides: object) -> pf.AwsClients:
    base = {"ec2": None, "quotas": None, "sts": None}
    base.update(overrides)
    return pf.AwsClients(**base)


# --- moto: offerings and instance type facts ---------------------------------------------------


def test_prod_types_are_offered_in_its_zone(moto: str):
    spec = _spec("prod")
    assert pf.InstanceTypeOffered().run(spec, pf.make_clients("us-east-1", moto), NOW) == []


def test_type_not_offered_names_the_zones_that_have_it(moto: str):
    # moto's offerings data (captured from AWS) has no p4d.24xlarge in us-east-1e.
    spec = _with_pools(_spec("prod", availability_zone="us-east-1e"), instance_type="p4d.24xlarge")
    spec = spec.model_copy(update={"node_pools": [spec.pool("gpu")]})
    (finding,) = pf.InstanceTypeOffered().run(spec, pf.make_clients("us-east-1", moto), NOW)
    assert finding.level == "error" and finding.subject == "node_pools[gpu]"
    assert "p4d.24xlarge is not offered in us-east-1e" in finding.message
    assert "us-east-1a" in finding.fix and "us-east-1e" not in finding.fix


def test_catalogue_agrees_with_describe_instance_types(moto: str):
    """Every AWS type of the hardware catalogue against moto's DescribeInstanceTypes data
    (captured from AWS): GPU model and count, vCPUs, EFA interfaces, network cards."""
    prod = _spec("prod")
    gpu = prod.pool("gpu").model_copy(
        update={"capacity_reservation_id": None, "capacity_reservation_size": None}
    )
    names = load_hardware().names("aws")
    pools = [gpu.model_copy(update={"name": f"pool{i}", "instance_type": n}) for i, n in enumerate(names)]
    findings = pf.InstanceTypeFacts().run(
        prod.model_copy(update={"node_pools": pools}), pf.make_clients("us-east-1", moto), NOW
    )
    assert len(names) >= 8
    assert [f.render() for f in findings] == []


def test_preflight_against_moto_stops_at_missing_credentials(moto_url: str, fake_credentials, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(pf.CredentialsError) as err:
        pf.run_preflight(_spec("dev"), pf.make_clients("us-west-2", moto_url), NOW)
    assert str(err.value).startswith("no AWS credentials found:") and "\n" not in str(err.value)


def test_facts_mismatch_names_both_figures():
    ec2, stub = _stubbed("ec2")
    stub.add_response(
        "describe_instance_types",
        {
            "InstanceTypes": [
                {
                    "InstanceType": "p5.48xlarge",
                    "VCpuInfo": {"DefaultVCpus": 192},
                    "GpuInfo": {"Gpus": [{"Name": "H100", "Manufacturer": "NVIDIA", "Count": 8}]},
                    "NetworkInfo": {"MaximumNetworkCards": 32, "EfaInfo": {"MaximumEfaInterfaces": 16}},
                }
            ]
        },
        {"InstanceTypes": ["p5.48xlarge"]},
    )
    spec = _spec("prod").model_copy(update={"node_pools": [_spec("prod").pool("gpu")]})
    with stub:
        (finding,) = pf.InstanceTypeFacts().run(spec, _clients(ec2=ec2), NOW)
    assert "efa interfaces: catalogue 32, AWS 16" in finding.message
    assert "hardware.yaml" in finding.fix


# --- Service Quotas (moto implements only VPC quotas) -------------------------------------------


def _quota(code: str, name: str, value: float) -> dict:
    return {
        "Quota": {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:us-east-1:123456789012:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": name,
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }
    }


def test_vcpu_quota_too_small_names_the_code_and_the_request():
    quotas, stub = _stubbed("service-quotas")
    std = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
    stub.add_response(
        "get_service_quota",
        _quota("L-1216C47A", std, 640.0),
        {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"},
    )
    stub.add_response(
        "get_service_quota",
        _quota("L-417A185B", "Running On-Demand P instances", 2048.0),
        {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"},
    )
    with stub:
        (finding,) = pf.VcpuQuota().run(_spec("prod"), _clients(quotas=quotas), NOW)
    stub.assert_no_pending_responses()
    assert "3072 vCPUs" in finding.message and "(L-417A185B)" in finding.message and "2048" in finding.message
    assert "--quota-code L-417A185B --desired-value 3072" in finding.fix


def test_vcpu_quota_falls_back_to_the_default_when_never_changed():
    quotas, stub = _stubbed("service-quotas")
    stub.add_client_error(
        "get_service_quota", service_error_code="NoSuchResourceException", http_status_code=404
    )
    stub.add_response(
        "get_aws_default_service_quota", _quota("L-DB2E81BA", "Running On-Demand G and VT instances", 0.0)
    )
    dev = _spec("dev")
    dev = dev.model_copy(update={"node_pools": [dev.pool("gpu")]})
    with stub:
        (finding,) = pf.VcpuQuota().run(dev, _clients(quotas=quotas), NOW)
    assert "8 vCPUs of 'Running On-Demand G and VT instances' (L-DB2E81BA)" in finding.message


def test_quota_codes_by_family():
    assert pf.quota_for("p5.48xlarge")[0] == "L-417A185B"
    assert pf.quota_for("g5.xlarge")[0] == "L-DB2E81BA"
    assert pf.quota_for("m7i.4xlarge")[0] == "L-1216C47A"
    assert pf.quota_for("inf2.xlarge")[0] == "L-1945791B"  # not "i" (Standard)
    assert pf.quota_for("x2idn.32xlarge")[0] == "L-7295265B"  # X, not Standard
    # By first letter these fell into Standard (t, d, h): each has its own quota.
    assert pf.quota_for("trn1.32xlarge")[0] == "L-2C3B7624"
    assert pf.quota_for("trn2.48xlarge")[0] == "L-2C3B7624"
    assert pf.quota_for("dl1.24xlarge")[0] == "L-6E869C2A"
    assert pf.quota_for("hpc7a.96xlarge")[0] == "L-F7808C92"
    assert pf.quota_for("u-6tb1.56xlarge")[0] == "L-43DA4232"
    assert pf.quota_for("f2.12xlarge")[0] == "L-74FC7D96"
    assert pf.quota_for("t3.micro")[0] == "L-1216C47A" and pf.quota_for("d3.xlarge")[0] == "L-1216C47A"


# --- capacity reservations and Capacity Blocks --------------------------------------------------


def _reservation(rid: str, **fields: object) -> dict:
    base = {
        "CapacityReservationId": rid,
        "OwnerId": "123456789012",
        "CapacityReservationArn": f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{rid}",
        "InstanceType": "p5.48xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-1a",
        "Tenancy": "default",
        "TotalInstanceCount": 16,
        "AvailableInstanceCount": 16,
        "EbsOptimized": True,
        "State": "active",
        "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
        "StartDate": NOW - dt.timedelta(days=3),
        # prod.yaml names the group the reservation was made in
        "PlacementGroupArn": "arn:aws:ec2:us-east-1:123456789012:placement-group/prod-gpu-reserved",
    }
    base.update(fields)
    return {"CapacityReservations": [base]}


def _run_reservation(
    check: pf.Check, spec: ClusterSpec, rid: str, response: dict | None, **extra
) -> list[pf.Finding]:
    ec2, stub = _stubbed("ec2")
    if response is None:
        stub.add_client_error(
            "describe_capacity_reservations",
            service_error_code="InvalidCapacityReservationId.NotFound",
            http_status_code=400,
        )
    else:
        stub.add_response("describe_capacity_reservations", response, {"CapacityReservationIds": [rid]})
    for method, body in extra.items():
        stub.add_response(method, body)
    with stub:
        findings = check.run(spec, _clients(ec2=ec2), NOW)
    stub.assert_no_pending_responses()
    return findings


def test_matching_active_reservation_passes():
    assert _run_reservation(pf.CapacityReservation(), _spec("prod"), PROD_CR, _reservation(PROD_CR)) == []


def test_reservation_in_other_zone_and_too_small_says_both():
    res = _reservation(PROD_CR, AvailabilityZone="us-east-1b", TotalInstanceCount=8, AvailableInstanceCount=8)
    findings = _run_reservation(
        pf.CapacityReservation(), _spec("prod"), PROD_CR, res, describe_instances={"Reservations": []}
    )
    errors = [f for f in findings if f.level == "error"]
    assert len(errors) == 1
    assert "availability zone us-east-1b (spec: us-east-1a)" in errors[0].message
    assert "8 instances (pool count: 16)" in errors[0].message
    assert any(f.level == "warning" and "capacity_reservation_size" in f.subject for f in findings)


def test_reservation_outside_the_pools_placement_group_warns():
    res = _reservation(PROD_CR)
    del res["CapacityReservations"][0]["PlacementGroupArn"]
    (finding,) = _run_reservation(pf.CapacityReservation(), _spec("prod"), PROD_CR, res)
    assert finding.level == "warning"
    assert (
        "outside any placement group" in finding.message
        and "placement group prod-gpu-reserved" in finding.message
    )
    assert finding.fix.startswith("drop node_pools[gpu].placement_group")


def test_reservation_in_another_group_says_to_name_that_group():
    res = _reservation(
        PROD_CR, PlacementGroupArn="arn:aws:ec2:us-east-1:123456789012:placement-group/odcr-pg"
    )
    (finding,) = _run_reservation(pf.CapacityReservation(), _spec("prod"), PROD_CR, res)
    # A reservation made in a group serves only launches into that group (EC2 user guide,
    # cr-cpg): launching elsewhere can never use it, so up must not start.
    assert finding.level == "error"
    assert "created in placement group odcr-pg" in finding.message
    assert "only instances launched into that group can use it" in finding.message
    assert finding.fix.startswith("set node_pools[gpu].placement_group.name: odcr-pg")
    # Named, the pool and the reservation agree: nothing to say.
    pg = _spec("prod").pool("gpu").placement_group.model_copy(update={"name": "odcr-pg"})
    assert (
        _run_reservation(
            pf.CapacityReservation(), _with_pools(_spec("prod"), placement_group=pg), PROD_CR, res
        )
        == []
    )


def _instances(*reservations: str) -> dict:
    """A DescribeInstances page: one instance per reservation id given."""
    instances = [
        {"InstanceId": f"i-{n:017x}", "CapacityReservationId": rid, "State": {"Code": 16, "Name": "running"}}
        for n, rid in enumerate(reservations)
    ]
    return {"Reservations": [{"ReservationId": "r-0123456789abcdef0", "Instances": instances}]}


def _run_with_instances(res: dict, *pages: dict) -> list[pf.Finding]:
    ec2, stub = _stubbed("ec2")
    stub.add_response("describe_capacity_reservations", res, {"CapacityReservationIds": [PROD_CR]})
    for k, page in enumerate(pages):
        body = {**page, "NextToken": f"page-{k + 1}"} if k + 1 < len(pages) else page
        stub.add_response("describe_instances", body)
    with stub:
        findings = pf.CapacityReservation().run(_spec("prod"), _clients(ec2=ec2), NOW)
    stub.assert_no_pending_responses()
    return findings


def test_a_reservation_full_of_the_stacks_own_nodes_is_not_a_warning():
    # Second `up`: the stack's 16 nodes hold all 16 slots (over two pages of DescribeInstances).
    res = _reservation(PROD_CR, AvailableInstanceCount=0, InstanceMatchCriteria="open")
    assert _run_with_instances(res, _instances(*[PROD_CR] * 10), _instances(*[PROD_CR] * 6)) == []


def test_instances_outside_the_stack_in_the_reservation_warn_with_counts():
    res = _reservation(PROD_CR, AvailableInstanceCount=2, InstanceMatchCriteria="open")
    (finding,) = _run_with_instances(res, _instances(*[PROD_CR] * 10, "cr-0fffffffffffffff0"))
    assert finding.level == "warning"
    assert "has 2 free of 16: this stack holds 10, 4 are used by instances outside it" in finding.message


def test_missing_or_expired_reservation_is_an_error():
    (gone,) = _run_reservation(pf.CapacityReservation(), _spec("prod"), PROD_CR, None)
    assert "does not exist in us-east-1" in gone.message
    (expired,) = _run_reservation(
        pf.CapacityReservation(), _spec("prod"), PROD_CR, _reservation(PROD_CR, State="expired")
    )
    assert "is expired, not active" in expired.message


BLOCK = "cr-0123456789abcdef0"


def _block_spec() -> ClusterSpec:
    return _with_pools(
        _spec("prod"), capacity_reservation_id=None, capacity_reservation_size=None, capacity_block_id=BLOCK
    )


def _block(**fields: object) -> dict:
    window = {"StartDate": NOW - dt.timedelta(hours=1), "EndDate": NOW + dt.timedelta(days=1)}
    return _reservation(
        BLOCK, ReservationType="capacity-block", EndDateType="limited", **{**window, **fields}
    )


def test_capacity_block_inside_its_window_passes():
    assert _run_reservation(pf.CapacityBlock(), _block_spec(), BLOCK, _block()) == []


def test_capacity_block_not_started_yet():
    start = NOW + dt.timedelta(hours=5)
    (finding,) = _run_reservation(
        pf.CapacityBlock(),
        _block_spec(),
        BLOCK,
        _block(State="scheduled", StartDate=start, EndDate=start + dt.timedelta(days=1)),
    )
    assert "starts at 2026-11-30T17:00:00+00:00" in finding.message


def test_expired_capacity_block_offers_a_purchasable_one():
    offering = {
        "CapacityBlockOfferings": [
            {
                "CapacityBlockOfferingId": "cb-0123456789abcdef0",
                "InstanceType": "p5.48xlarge",
                "AvailabilityZone": "us-east-1a",
                "InstanceCount": 16,
                "StartDate": NOW + dt.timedelta(days=2),
                "EndDate": NOW + dt.timedelta(days=3),
                "CapacityBlockDurationHours": 24,
                "UpfrontFee": "12345.67",
                "CurrencyCode": "USD",
                "Tenancy": "default",
            }
        ]
    }
    res = _block(State="expired", StartDate=NOW - dt.timedelta(days=2), EndDate=NOW - dt.timedelta(days=1))
    (finding,) = _run_reservation(
        pf.CapacityBlock(), _block_spec(), BLOCK, res, describe_capacity_block_offerings=offering
    )
    assert "is expired, ended 2026-11-29T12:00:00+00:00" in finding.message
    assert finding.fix.startswith("buy offering cb-0123456789abcdef0") and "12345.67 USD" in finding.fix


def test_ordinary_reservation_named_as_capacity_block():
    offering = {"CapacityBlockOfferings": []}
    (finding,) = _run_reservation(
        pf.CapacityBlock(),
        _block_spec(),
        BLOCK,
        _reservation(BLOCK),
        describe_capacity_block_offerings=offering,
    )
    assert (
        "is not a Capacity Block" in finding.message
        and "buy a Capacity Block for 16 x p5.48xlarge" in finding.fix
    )


# --- placement groups ----------------------------------------------------------------------------


def _stack_made_group() -> ClusterSpec:
    """prod with a placement group the stack creates (prod-gpu) instead of the reservation's."""
    pg = _spec("prod").pool("gpu").placement_group.model_copy(update={"name": None})
    return _with_pools(_spec("prod"), placement_group=pg)


def test_placement_group_with_other_strategy_blocks_up():
    ec2, stub = _stubbed("ec2")
    stub.add_response(
        "describe_placement_groups",
        {
            "PlacementGroups": [
                {
                    "GroupName": "prod-gpu",
                    "State": "available",
                    "Strategy": "spread",
                    "GroupId": "pg-0123456789abcdef0",
                }
            ]
        },
        {"GroupNames": ["prod-gpu"]},
    )
    with stub:
        (finding,) = pf.PlacementGroup().run(_stack_made_group(), _clients(ec2=ec2), NOW)
    assert (
        "exists with strategy spread" in finding.message
        and "delete-placement-group --group-name prod-gpu" in finding.fix
    )


def test_placement_group_not_there_yet_is_fine():
    ec2, stub = _stubbed("ec2")
    stub.add_client_error(
        "describe_placement_groups", service_error_code="InvalidPlacementGroup.Unknown", http_status_code=400
    )
    with stub:
        assert pf.PlacementGroup().run(_stack_made_group(), _clients(ec2=ec2), NOW) == []


# --- the run as a whole ---------------------------------------------------------------------------


def test_expired_token_is_one_line_not_a_traceback():
    sts, stub = _stubbed("sts")
    stub.add_client_error("get_caller_identity", service_error_code="ExpiredToken", http_status_code=403)
    with stub, pytest.raises(pf.CredentialsError) as err:
        pf.run_preflight(_spec("prod"), _clients(sts=sts), NOW)
    assert str(err.value) == (
        "the AWS credentials are expired (ExpiredToken): run `aws sso login` or `aws configure` "
        "(or set AWS_PROFILE) and try again"
    )
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_a_crashing_check_becomes_an_error_and_the_rest_still_run():
    class Boom(pf.Check):
        id = "boom"

        def run(self, spec, aws, now):
            raise KeyError("Quota")

    class Fine(pf.Check):
        id = "fine"

        def run(self, spec, aws, now):
            return [pf.Finding(self.id, "info", "x", "ran")]

    findings = pf.run_preflight(_spec("prod"), _clients(), NOW, checks=[Boom(), Fine()])
    assert [(f.id, f.level) for f in findings] == [("boom", "error"), ("fine", "info")]
    assert "KeyError" in findings[0].message


def test_suppressed_check_does_not_run():
    spec = _spec("prod").model_copy(update={"suppress_checks": ["vcpu-quota"]})
    assert pf.run_preflight(spec, _clients(), NOW, checks=[pf.VcpuQuota()]) == []


def test_finding_renders_with_fix_and_maps_to_problem():
    f = pf.Finding("vcpu-quota", "error", "node_pools", "too few", "ask for more")
    assert f.render() == "error: node_pools: too few [vcpu-quota]\n    fix: ask for more"
    assert f.to_problem().render() == "error: node_pools: too few. Fix: ask for more [vcpu-quota]"


def test_every_check_is_registered_once_with_a_kebab_case_id():
    import re

    defined = {
        cls
        for cls in vars(pf).values()
        if isinstance(cls, type) and issubclass(cls, pf.Check) and cls is not pf.Check
    }
    registered = [type(c) for c in pf.CHECKS]
    assert set(registered) == defined and len(registered) == len(defined)
    ids = [c.id for c in pf.CHECKS]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", i) for i in ids)


# --- Capacity Blocks: the end of a block, its states, offering sizes and pages --------------------


def _offering(oid: str, zone: str, days: int, count: int = 16) -> dict:
    return {
        "CapacityBlockOfferingId": oid,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": zone,
        "InstanceCount": count,
        "StartDate": NOW + dt.timedelta(days=days),
        "EndDate": NOW + dt.timedelta(days=days + 1),
        "CapacityBlockDurationHours": 24,
        "UpfrontFee": "100.00",
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }


@pytest.mark.parametrize(
    ("minutes_left", "level", "text"),
    [
        (29, "error", "AWS terminates its instances from 2026-11-30T11:59:00+00:00"),
        (30, "error", "terminates its instances from 2026-11-30T12:00:00+00:00"),
        (31, "warning", "1 min from now"),
        (149, "warning", "119 min from now"),
    ],
)
def test_block_end_counts_from_the_termination_30_minutes_before(minutes_left: int, level: str, text: str):
    res = _block(EndDate=NOW + dt.timedelta(minutes=minutes_left))
    extra = {"describe_capacity_block_offerings": {"CapacityBlockOfferings": []}} if level == "error" else {}
    (finding,) = _run_reservation(pf.CapacityBlock(), _block_spec(), BLOCK, res, **extra)
    assert finding.level == level and text in finding.message


def test_block_with_plenty_of_time_left_passes():
    assert (
        _run_reservation(
            pf.CapacityBlock(), _block_spec(), BLOCK, _block(EndDate=NOW + dt.timedelta(minutes=151))
        )
        == []
    )


@pytest.mark.parametrize(
    "state", ["payment-failed", "cancelled", "cancelling", "unsupported", "unavailable", "failed"]
)
def test_blocks_that_will_never_run_offer_another(state: str):
    offers = {"CapacityBlockOfferings": []}
    (finding,) = _run_reservation(
        pf.CapacityBlock(),
        _block_spec(),
        BLOCK,
        _block(State=state),
        describe_capacity_block_offerings=offers,
    )
    assert (
        finding.level == "error"
        and f"is {state}" in finding.message
        and "buy a Capacity Block" in finding.fix
    )


@pytest.mark.parametrize("state", ["payment-pending", "assessing", "delayed", "pending"])
def test_blocks_on_their_way_say_to_wait(state: str):
    (finding,) = _run_reservation(pf.CapacityBlock(), _block_spec(), BLOCK, _block(State=state))
    assert f"is {state}, not yet active" in finding.message and finding.fix == "run again once it is active"


@pytest.mark.parametrize(("count", "size"), [(1, 1), (2, 2), (3, 4), (9, 16), (16, 16), (33, 64), (64, 64)])
def test_offerings_are_asked_for_a_size_aws_sells(count: int, size: int):
    spec = _with_pools(_block_spec(), count=count, capacity_reservation_size=None)
    ec2, stub = _stubbed("ec2")
    stub.add_client_error(
        "describe_capacity_reservations", service_error_code="InvalidCapacityReservationId.NotFound"
    )
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": []},
        {"InstanceType": "p5.48xlarge", "InstanceCount": size, "CapacityDurationHours": 24},
    )
    with stub:
        (finding,) = pf.CapacityBlock().run(spec, _clients(ec2=ec2), NOW)
    stub.assert_no_pending_responses()
    assert f"buy a Capacity Block for {size} x p5.48xlarge" in finding.fix


def test_more_than_64_nodes_cannot_be_one_block():
    spec = _with_pools(_block_spec(), count=65, capacity_reservation_size=None)
    (finding,) = _run_reservation(pf.CapacityBlock(), spec, BLOCK, None)
    assert "at most 64 instances" in finding.fix and "does not exist" in finding.message


def test_offerings_are_read_over_every_page_and_filtered_to_the_zone():
    ec2, stub = _stubbed("ec2")
    stub.add_client_error(
        "describe_capacity_reservations", service_error_code="InvalidCapacityReservationId.NotFound"
    )
    first = {
        "CapacityBlockOfferings": [_offering("cb-0000000000000000a", "us-east-1b", 1)],
        "NextToken": "t2",
    }
    second = {
        "CapacityBlockOfferings": [
            _offering("cb-0000000000000000c", "us-east-1a", 5),
            _offering("cb-0000000000000000b", "us-east-1a", 3),
        ]
    }
    stub.add_response("describe_capacity_block_offerings", first)
    stub.add_response("describe_capacity_block_offerings", second)
    with stub:
        (finding,) = pf.CapacityBlock().run(_block_spec(), _clients(ec2=ec2), NOW)
    stub.assert_no_pending_responses()
    assert finding.fix.startswith("buy offering cb-0000000000000000b")  # the earliest one in us-east-1a


def test_a_failed_offering_call_keeps_the_finding():
    ec2, stub = _stubbed("ec2")
    stub.add_client_error(
        "describe_capacity_reservations", service_error_code="InvalidCapacityReservationId.NotFound"
    )
    stub.add_client_error("describe_capacity_block_offerings", service_error_code="UnauthorizedOperation")
    with stub:
        findings = pf.run_preflight(_block_spec(), _clients(ec2=ec2), NOW, checks=[pf.CapacityBlock()])
    (finding,) = findings
    assert f"{BLOCK} does not exist" in finding.message
    assert "listing offerings failed: UnauthorizedOperation" in finding.fix


def test_a_named_placement_group_must_exist():
    pg = _spec("prod").pool("gpu").placement_group.model_copy(update={"name": "odcr-pg"})
    ec2, stub = _stubbed("ec2")
    stub.add_client_error("describe_placement_groups", service_error_code="InvalidPlacementGroup.Unknown")
    with stub:
        (finding,) = pf.PlacementGroup().run(
            _with_pools(_spec("prod"), placement_group=pg), _clients(ec2=ec2), NOW
        )
    assert (
        finding.subject == "node_pools[gpu].placement_group.name"
        and "odcr-pg does not exist" in finding.message
    )
