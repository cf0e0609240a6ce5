"""What pools with image: baked boot, the digest their nodes get in the inventory, and stale images;
the record file's round trip and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.images.boot import BakeNeeded, boot_images, expected_digests, stale_images, stale_notes
from clusterforge.images.digest import software_digest
from clusterforge.images.record import ImageRecord, ImageRecordError, load_records, save_record
from clusterforge.inventory import render_inventory
from clusterforge.providers.base import Node
from clusterforge.spec.loader import REPO_ROOT, load_spec
from clusterforge.spec.models import ClusterSpec

BASE = "localhost/clusterforge-node:bookworm-0123456789ab"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def baked(image: str = "baked") -> ClusterSpec:
    spec = load_spec(REPO_ROOT / "stacks" / "local.yaml")[0]
    pools = [p.model_copy(update={"image": image}) if p.role == "gpu" else p for p in spec.node_pools]
    return spec.model_copy(update={"node_pools": pools, "stack": "bk"})


def record(spec: ClusterSpec, base: str = BASE) -> ImageRecord:
    return ImageRecord(
        "node", "local", "localhost/clusterforge-baked:bk-node-x", software_digest(spec, "node", base), "now"
    )


def test_a_baked_pool_without_an_image_says_what_to_run() -> None:
    with pytest.raises(BakeNeeded, match=r"invoke image.bake --stack bk"):
        boot_images(baked())
    assert boot_images(baked("base")) == {}  # pools on the base image need nothing


def test_the_record_names_the_image_a_pool_boots(state: Path) -> None:
    spec = baked()
    save_record(spec.stack, record(spec))
    assert boot_images(spec) == {"node": "localhost/clusterforge-baked:bk-node-x"}
    assert load_records(spec.stack)["node"] == record(spec)
    assert (state / "bk" / "images.json").is_file()


def test_an_image_of_another_provider_is_refused() -> None:
    spec = baked()
    save_record(spec.stack, ImageRecord("node", "aws", "ami-0123456789abcdef0", record(spec).software, "now"))
    with pytest.raises(BakeNeeded, match="aws image"):
        boot_images(spec)


def test_an_unreadable_record_names_the_file(state: Path) -> None:
    (state / "bk").mkdir(parents=True)
    (state / "bk" / "images.json").write_text("{not json")
    with pytest.raises(ImageRecordError, match=r"images.json: cannot read .* run `invoke image.bake` again"):
        load_records("bk")


def test_stale_when_the_pins_moved_and_the_note_says_so() -> None:
    spec = baked()
    save_record(spec.stack, record(spec))
    assert stale_images(spec, base=BASE) == {}
    bumped = spec.model_copy(update={"software": spec.software.model_copy(update={"nccl": "2.27.3"})})
    stale = stale_images(bumped, base=BASE)
    assert stale == {"node": ["nccl_version 2.26.2 -> 2.27.3"]}
    (note,) = stale_notes(bumped, stale, load_records(spec.stack))
    assert note.startswith("pool node: baked image localhost/clusterforge-baked:bk-node-x")
    assert "nccl_version 2.26.2 -> 2.27.3" in note and "converge the node software in full" in note
    assert stale_images(baked(), records={}, base=BASE) == {"node": ["no image baked yet"]}


def test_the_inventory_gives_baked_pools_nodes_their_digest() -> None:
    spec = baked()
    digests = expected_digests(spec, base=BASE)
    nodes = [
        Node("head-001", "10.0.0.2", "head", "head", "local", {}),
        Node("node-001", "10.0.0.3", "node", "gpu", "local", {}),
    ]
    hosts = render_inventory(spec, nodes, Path("munge.key"), image_digests=digests).hosts["all"]["children"]
    assert hosts["gpu_nodes"]["hosts"]["node-001"]["node_image_software_digest"] == digests["node"]
    assert "node_image_software_digest" not in hosts["slurm_controller"]["hosts"]["head-001"]
    plain = render_inventory(spec, nodes, Path("munge.key")).hosts["all"]["children"]
    assert "node_image_software_digest" not in plain["gpu_nodes"]["hosts"]["node-001"]


def test_plan_says_when_a_pools_image_is_stale() -> None:
    from clusterforge.images.boot import base_image
    from clusterforge.tasks.plan import image_notes

    spec = baked()
    assert image_notes(spec, REPO_ROOT) == [
        "pool node: image: baked, but no image was baked yet: run `invoke image.bake --stack bk` before "
        "`invoke up` (which refuses until then)"
    ]
    save_record(spec.stack, record(spec, base_image(spec)))
    assert image_notes(spec, REPO_ROOT) == []
    bumped = spec.model_copy(update={"software": spec.software.model_copy(update={"slurm": "23.11.4"})})
    (note,) = image_notes(bumped, REPO_ROOT)
    assert "slurm_version 22.05.8 -> 23.11.4" in note
    assert image_notes(baked("base"), REPO_ROOT) == []
