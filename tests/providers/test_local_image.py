"""The node image recipe: mirrors from the machine's apt sources, the tag, the image's sources."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterforge.providers.local import image

DATA = Path(__file__).resolve().parents[1] / "data" / "apt-sources"


def _files(*names: str) -> dict[str, str]:
    # The parser dispatches on the suffix, as apt does: *.sources is deb822, *.list one-line.
    out = {}
    for name in names:
        text = (DATA / name).read_text()
        out[name.split(".", 1)[1] if name.startswith("debian12-cloud.") else name] = text
    return out


def test_mirrors_from_deb822_sources_skip_third_party_repositories() -> None:
    files = _files(
        "debian12-cloud.debian.sources",
        "debian12-cloud.nodesource.sources",
        "debian12-cloud.google-cloud-sdk.list",
    )
    mirrors = image.parse_apt_sources(files, "bookworm")
    assert mirrors == image.Mirrors("http://deb.debian.org/debian", "http://deb.debian.org/debian-security")


def test_third_party_suite_with_the_release_name_is_not_the_debian_mirror() -> None:
    # cloud-sdk-bookworm contains "bookworm" but is not the suite; nodesource has suite nodistro.
    files = _files("debian12-cloud.nodesource.sources", "debian12-cloud.google-cloud-sdk.list")
    mirrors = image.parse_apt_sources(files, "bookworm")
    assert mirrors.main == image.DEFAULT_MIRROR
    assert mirrors.security == image.DEFAULT_SECURITY_MIRROR


def test_mirror_from_one_line_sources_list_written_by_debootstrap() -> None:
    mirrors = image.parse_apt_sources(
        {"sources.list": (DATA / "debootstrap-bookworm.sources.list").read_text()}, "bookworm"
    )
    assert mirrors.main == "http://deb.debian.org/debian"


def test_one_line_options_and_trailing_slash() -> None:
    # Hand-written (not captured): a local mirror with [options] and a disabled entry.
    text = (
        "# deb http://wrong.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.local/debian/ bookworm main contrib\n"
        "deb-src http://src.local/debian bookworm main\n"
        "deb http://mirror.local/debian-security bookworm-security main\n"
    )
    mirrors = image.parse_apt_sources({"sources.list": text}, "bookworm")
    assert mirrors == image.Mirrors("http://mirror.local/debian", "http://mirror.local/debian-security")


def test_deb822_disabled_stanza_is_ignored() -> None:
    text = "Types: deb\nURIs: http://off.local/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n"
    assert image.parse_apt_sources({"x.sources": text}, "bookworm").main == image.DEFAULT_MIRROR


def test_tag_changes_with_package_list_and_not_with_its_order() -> None:
    mirrors = image.Mirrors(image.DEFAULT_MIRROR, image.DEFAULT_SECURITY_MIRROR)
    base = image.image_tag("podman", "bookworm", mirrors, image.PACKAGES)
    assert base.startswith("localhost/clusterforge-node:bookworm-")
    assert image.image_tag("podman", "bookworm", mirrors, tuple(reversed(image.PACKAGES))) == base
    assert image.image_tag("podman", "bookworm", mirrors, (*image.PACKAGES, "vim-tiny")) != base
    other_mirror = image.Mirrors("http://mirror.local/debian", image.DEFAULT_SECURITY_MIRROR)
    assert image.image_tag("podman", "bookworm", other_mirror, image.PACKAGES) != base
    assert image.image_tag("docker", "bookworm", mirrors, image.PACKAGES).startswith("clusterforge-node:")


@pytest.mark.parametrize("needed", ["systemd", "systemd-sysv", "dbus", "python3", "python3-apt"])
def test_package_list_has_what_systemd_nodes_and_ansible_need(needed: str) -> None:
    assert needed in image.PACKAGES


def test_image_sources_carry_non_free_and_security() -> None:
    text = image.image_sources(image.Mirrors("http://m/debian", "http://m/debian-security"), "bookworm")
    stanzas = text.strip().split("\n\n")
    assert "Suites: bookworm bookworm-updates" in stanzas[0]
    assert "URIs: http://m/debian-security" in stanzas[1] and "Suites: bookworm-security" in stanzas[1]
    for stanza in stanzas:
        assert "Components: main contrib non-free non-free-firmware" in stanza
    # What we write parses back to the same mirrors.
    assert image.parse_apt_sources({"debian.sources": text}, "bookworm") == image.Mirrors(
        "http://m/debian", "http://m/debian-security"
    )


def test_customise_makes_per_container_machine_id_and_keeps_debs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for folder in (
        "etc/apt/apt.conf.d",
        "var/lib/dbus",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives",
    ):
        (root / folder).mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text((DATA / "debootstrap-bookworm.sources.list").read_text())
    (root / "etc/machine-id").write_text("db50aab34ef640caad7f1d2cf5a83498\n")
    (root / "var/lib/dbus/machine-id").write_text("db50aab34ef640caad7f1d2cf5a83498\n")
    (root / "etc/hostname").write_text("vm\n")
    (root / "var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease").write_text("x")
    (root / "var/cache/apt/archives/apt_2.6.1_amd64.deb").write_text("x")
    (root / "var/cache/apt/pkgcache.bin").write_text("x")

    image._customise(root, image.Mirrors("http://m/debian", "http://m/debian-security"), "bookworm")

    assert not (root / "etc/apt/sources.list").exists()
    assert "non-free" in (root / "etc/apt/sources.list.d/debian.sources").read_text()
    apt_conf = (root / "etc/apt/apt.conf.d/90clusterforge-apt-cache").read_text()
    assert 'DPkg::Pre-Invoke { "/usr/local/sbin/clusterforge-apt-cache publish"; };' in apt_conf
    assert (root / "usr/local/sbin/clusterforge-apt-cache").stat().st_mode & 0o111
    assert (root / "etc/machine-id").read_text() == ""
    assert not (root / "var/lib/dbus/machine-id").exists()
    assert not (root / "etc/hostname").exists()
    for timer in ("apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer"):  # no job wakes in a node
        assert os.readlink(root / "etc/systemd/system" / timer) == "/dev/null", timer
    assert list((root / "var/lib/apt/lists").iterdir()) == [root / "var/lib/apt/lists/partial"]
    # Old enough that Ansible's `cache_valid_time` never takes the empty lists for a fresh update.
    assert (root / "var/lib/apt/lists").stat().st_mtime == 0
    assert not list((root / "var/cache/apt").rglob("*.deb")) and not list(
        (root / "var/cache/apt").rglob("*.bin")
    )
