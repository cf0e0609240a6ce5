"""The passive check on captured kernel logs (tests/data/xid, SOURCES.md) and nvidia-smi outputs
(tests/data/nvidia-smi): new events since the last run only, one reason per Xid kind, the reason format."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import FakeRunner, captured

from validators.parsers import PARSERS
from validators.passive import load_state, run_passive, verdict

BOOT = "3d1f0c2e-boot-a"


def h200() -> list[dict]:
    return PARSERS["nvidia-smi"](captured("nvidia-smi", "q_550_h200_healthy.txt"))["gpus"]


def repeated(line: str, times: int, start: float = 1843.0) -> str:
    """The captured line under dmesg's own uptime stamps, as a GPU repeating it would print it."""
    return "".join(f"[{start + i:12.6f}] {line}\n" for i in range(times))


XID63 = captured("xid", "xid63_row_remapper_line.txt").strip()
XID79 = captured("xid", "xid79_fallen_off_bus_line.txt").strip()


def test_many_lines_of_one_node_xid_give_one_reason_with_its_count() -> None:
    log = repeated(XID79, 40)
    result = verdict(log, None, {}, BOOT)
    assert result["reasons"] == [
        "clusterforge: xid: Xid 79 x40 on 0000:44:00 (node fault): GPU has fallen off the bus"
    ]
    assert result["drain"] == result["reasons"][0]


def test_one_reason_per_kind_and_application_xids_do_not_drain() -> None:
    log = repeated(XID63, 3) + captured("xid", "dmesg_T_xid13_no_pid.txt") + repeated(XID79, 2, 2000.0)
    result = verdict(log, None, {}, BOOT)
    assert [r.split(" on ")[0] for r in result["reasons"]] == [
        "clusterforge: xid: Xid 63 x3",
        "clusterforge: xid: Xid 79 x2",
    ]
    assert result["drain"].endswith("(+1 more)")
    assert [n.split(" on ")[0] for n in result["notes"]] == ["xid: Xid 13 x8"]


def test_only_an_application_xid_drains_nothing() -> None:
    result = verdict(captured("xid", "dmesg_T_xid13_no_pid.txt"), None, {}, BOOT)
    assert result["drain"] == "" and result["reasons"] == []


def test_a_gpu_off_the_bus_without_an_xid_drains() -> None:
    result = verdict(captured("xid", "dmesg_fallen_off_bus_without_xid.txt"), None, {}, BOOT)
    assert result["drain"] == "clusterforge: xid: GPU 0000:b3:00.0 fell off the bus (no Xid printed)"


def test_only_events_since_the_last_run_count() -> None:
    first = verdict(repeated(XID79, 5), None, {}, BOOT)
    assert first["drain"]
    again = verdict(repeated(XID79, 5), None, first["state"], BOOT)
    assert again["drain"] == "" and again["new_events"] == 0
    grown = verdict(repeated(XID79, 7), None, again["state"], BOOT)
    assert grown["reasons"] == [
        "clusterforge: xid: Xid 79 x2 on 0000:44:00 (node fault): GPU has fallen off the bus"
    ]


def test_a_new_boot_starts_again() -> None:
    first = verdict(repeated(XID79, 5), None, {}, BOOT)
    after_reboot = verdict(repeated(XID79, 1), None, first["state"], "another-boot")
    assert "Xid 79 x1" in after_reboot["drain"]


def test_uncorrected_ecc_drains_when_it_grows_not_while_it_stays() -> None:
    gpus = h200()
    base = verdict("", gpus, {}, BOOT)
    assert base["drain"] == "" and base["state"]["ecc"] == {"GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732": 0}
    bad = copy.deepcopy(gpus)
    bad[0]["ecc_uncorrected_volatile"] = 2
    grown = verdict("", bad, base["state"], BOOT)
    assert grown["drain"] == (
        "clusterforge: ecc: GPU 0 (GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732): +2 uncorrected volatile ECC error(s) "
        "(now 2)"
    )
    assert verdict("", bad, grown["state"], BOOT)["drain"] == ""


def test_a_pending_row_remap_drains() -> None:
    gpus = PARSERS["nvidia-smi"](captured("nvidia-smi", "q_510_a100_remap_pending_excerpt.txt"))["gpus"]
    result = verdict("", gpus, {}, BOOT)
    assert result["reasons"] == [
        "clusterforge: row-remap: GPU 0 ("
        + str(gpus[0].get("bus_id"))
        + "): row remap pending (reset the GPU)"
    ]


@pytest.mark.parametrize(
    ("active", "drains"), [(["Idle"], False), (["HW Slowdown"], True), (["SW Power Cap"], False)]
)
def test_throttle_reasons(active: list[str], drains: bool) -> None:
    gpus = copy.deepcopy(h200())
    gpus[0]["throttle_active"] = active
    result = verdict("", gpus, {}, BOOT)
    assert bool(result["drain"]) is drains
    if drains:
        assert result["drain"].startswith("clusterforge: throttle: GPU 0 (GPU-cb3dfa52")


def test_the_xid_hook_is_one_new_event_per_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv("VALIDATORS_FAULT_DIR", str(faults))
    boot = tmp_path / "boot_id"
    boot.write_text(BOOT + "\n")
    state = tmp_path / "state" / "passive.json"
    runner = FakeRunner({("journalctl",): (0, captured("xid", "dmesg_T_xid13_no_pid.txt"), "")})

    assert (
        run_passive(str(state), runner, str(boot))["drain"] == ""
    )  # application Xids only; nvidia-smi absent
    (faults / "xid").write_text("79\n")
    hooked = run_passive(str(state), runner, str(boot))
    assert hooked["drain"].startswith("clusterforge: xid: Xid 79 x1 on 0000:00:00 (node fault) (test hook)")
    assert run_passive(str(state), runner, str(boot))["drain"] == ""  # seen already
    (faults / "xid").write_text("79\n79\n")
    assert "Xid 79 x1" in run_passive(str(state), runner, str(boot))["drain"]
    assert load_state(str(state))["boot_id"] == BOOT


def test_a_torn_state_file_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "passive.json"
    path.write_text('{"version": 1, "boot_')
    assert load_state(str(path)) == {}


def test_textfile_metrics_and_the_alert_rules_that_read_them(tmp_path: Path) -> None:
    import re

    import yaml

    from validators.passive import TEXTFILE_NAME, write_textfile

    result = verdict(captured("xid", "dmesg_T_xid13_no_pid.txt") + repeated(XID79, 3), None, {}, BOOT)
    result["seconds"] = 0.02
    assert not write_textfile(
        str(tmp_path / "absent"), result, 1.8e9
    )  # no node_exporter folder: nothing written
    assert write_textfile(str(tmp_path), result, 1.8e9)
    text = (tmp_path / TEXTFILE_NAME).read_text()
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert samples == [
        "clusterforge_passive_last_run_timestamp_seconds 1800000000",
        "clusterforge_passive_drain 1",
        "clusterforge_passive_run_seconds 0.020",
        'clusterforge_passive_new_xid_events{xid="13",kind="application"} 8',
        'clusterforge_passive_new_xid_events{xid="79",kind="node"} 3',
        'clusterforge_passive_reasons{check="xid"} 1',
    ]
    root = Path(__file__).resolve().parents[2]
    published = set(re.findall(r"^(clusterforge_\w+)", text, re.MULTILINE))
    cert = (root / "roles/monitoring/templates/clusterforge-cert-metrics.py.j2").read_text()
    published |= set(re.findall(r"\b(clusterforge_certification_\w+)", cert))
    rules = yaml.safe_load((root / "roles/monitoring/files/clusterforge-health.rules.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] if g["name"] == "clusterforge-health" for r in g["rules"]]
    assert len(exprs) == 5  # the loop's own group: tests/health/test_loop_metrics.py
    for expr in exprs:
        named = set(re.findall(r"\b(clusterforge_\w+)", expr))
        assert named and named <= published, expr


def ports_from_ibstatus(text: str) -> dict[str, str]:
    """{"mlx5_0/1": "4: ACTIVE"}: ibstatus prints each port's sysfs state file verbatim after "state:"."""
    import re

    ports: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        head = re.match(r"Infiniband device '([^']+)' port (\d+) status:", line)
        if head:
            current = f"{head.group(1)}/{head.group(2)}"
        elif line.strip().startswith("state:") and current:
            ports[current] = line.split("state:", 1)[1].strip()
    return ports


def test_an_rdma_port_that_went_down_since_the_last_run_drains() -> None:
    up = ports_from_ibstatus(captured("ibstatus", "cuml_wiki_4x_edr_infiniband_active.txt"))
    mixed = ports_from_ibstatus(captured("ibstatus", "edr_ethernet_one_down_one_active.txt"))
    assert set(up.values()) == {"4: ACTIVE"} and mixed["mlx5_0/1"] == "1: DOWN"
    first = verdict("", None, {}, BOOT, up)
    assert first["drain"] == ""
    down = dict(up, **{"mlx5_1/1": mixed["mlx5_0/1"]})
    went = verdict("", None, first["state"], BOOT, down)
    assert went["reasons"] == ["clusterforge: link: mlx5_1 port 1 went down (ACTIVE -> DOWN)"]
    assert verdict("", None, went["state"], BOOT, down)["drain"] == ""  # reported once, when it went down
    gone = {k: v for k, v in up.items() if k != "mlx5_2/1"}
    assert verdict("", None, first["state"], BOOT, gone)["reasons"] == [
        "clusterforge: link: mlx5_2 port 1 went down (ACTIVE -> gone)"
    ]
    assert verdict("", None, {}, BOOT, mixed)["drain"] == ""  # never up: the full check judges that


def test_links_are_read_from_sysfs(tmp_path: Path) -> None:
    from validators.passive import read_links

    for device, port, text in (("mlx5_0", "1", "4: ACTIVE\n"), ("efa_0", "1", "1: DOWN\n")):
        folder = tmp_path / device / "ports" / port
        folder.mkdir(parents=True)
        (folder / "state").write_text(text)
    assert read_links(str(tmp_path)) == {"efa_0/1": "1: DOWN", "mlx5_0/1": "4: ACTIVE"}
    assert read_links(str(tmp_path / "absent")) == {}


def test_identical_bare_lines_still_count_once_each() -> None:
    # The captured line has no timestamp: every repetition is the same text.
    first = verdict(XID79 + "\n" + XID79 + "\n", None, {}, BOOT)
    assert "Xid 79 x2" in first["drain"] and first["state"]["marker_seen"] == 2
    assert verdict((XID79 + "\n") * 2, None, first["state"], BOOT)["drain"] == ""
    more = verdict((XID79 + "\n") * 5, None, first["state"], BOOT)
    assert "Xid 79 x3" in more["drain"]
    rotated = verdict(XID79 + "\n" + XID63 + "\n", None, first["state"], BOOT)  # the ring buffer dropped one
    assert [r.split(" on ")[0] for r in rotated["reasons"]] == ["clusterforge: xid: Xid 63 x1"]


def test_real_lines_logged_after_the_hook_are_still_new() -> None:
    from validators.passive import hook_lines

    hook = "\n".join(hook_lines("79\n")) + "\n"
    first = verdict(repeated(XID63, 1), None, {}, BOOT, hook=hook)
    assert [r.split(" on ")[0] for r in first["reasons"]] == [
        "clusterforge: xid: Xid 63 x1",
        "clusterforge: xid: Xid 79 x1",
    ]
    later = verdict(repeated(XID63, 1) + repeated(XID79, 1, 3000.0), None, first["state"], BOOT, hook=hook)
    assert later["reasons"] == [
        "clusterforge: xid: Xid 79 x1 on 0000:44:00 (node fault): GPU has fallen off the bus"
    ]


def test_a_run_without_nvidia_smi_keeps_the_ecc_baseline() -> None:
    gpus = copy.deepcopy(h200())
    gpus[0]["ecc_uncorrected_volatile"] = 4
    first = verdict("", gpus, {}, BOOT)
    assert "+4" in first["drain"]
    blind = verdict("", None, first["state"], BOOT)  # nvidia-smi failed this time
    assert blind["drain"] == "" and blind["state"]["ecc"] == first["state"]["ecc"]
    assert verdict("", gpus, blind["state"], BOOT)["drain"] == ""  # still 4: nothing new
