"""apt's own resolver against the Ubuntu-flavour stand-in of NVIDIA's repository (the real bounded
Depends of the driver packages, a newer point release per branch, Ubuntu's 570.211.01 transitional
packages): the four packages the role used to pin cannot be installed, the role's locked set and its
preferences file can. No container: apt-get --simulate in a private apt root, the stand-in as a
file: source. The converge on a node is tests/roles/test_driver_closure.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures import nvidia_repo
from tests.roles.test_role_vars import ROLES, render

pytestmark = pytest.mark.slow

FOUR = ["libnvidia-compute-{b}", "nvidia-utils-{b}", "nvidia-compute-utils-{b}", "nvidia-dkms-{b}-open"]


class AptRoot:
    """A private apt configuration (sources, preferences, state) around the stand-in repository."""

    def __init__(self, root: Path, repo: Path) -> None:
        self.root = root
        for sub in ("etc/apt/preferences.d", "etc/apt/apt.conf.d", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg"):  # fmt: skip
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "var/lib/dpkg/status").write_text("")
        (root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo.resolve()} /\n")
        self.opts = [
            "-o", f"Dir={root}",
            "-o", f"Dir::State::status={root}/var/lib/dpkg/status",
            "-o", "Debug::NoLocking=1",
            "-o", "APT::Architecture=amd64",
            "-o", "APT::Get::List-Cleanup=0",
        ]  # fmt: skip
        self.apt("update")

    def apt(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["apt-get", *self.opts, *args], capture_output=True, text=True, timeout=120, check=False
        )

    def simulate(self, *packages: str) -> subprocess.CompletedProcess[str]:
        return self.apt("--simulate", "--no-install-recommends", "install", *packages)

    def prefer(self, text: str) -> None:
        (self.root / "etc/apt/preferences.d/clusterforge-nvidia-driver").write_text(text)


@pytest.fixture(scope="module")
def apt_root(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> AptRoot:
    built = nvidia_repo.build(Path(pytestconfig.cache.mkdir("nvidia_repo")), nvidia_repo.UBUNTU_2204)
    return AptRoot(tmp_path_factory.mktemp("apt"), built.root / built.repo_path)


def _given(branch: str, version: str) -> dict[str, object]:
    return {
        "nvidia_driver_branch": branch,
        "nvidia_driver_version": version,
        "nvidia_driver_kernel_module": "open",
        "nvidia_driver_source": "cuda-repo",
        "nvidia_driver_kernel_module_install": True,
    }


@pytest.mark.parametrize(("branch", "version"), [("570", "570.133.20"), ("580", "580.105.08")])
def test_the_old_four_package_pin_cannot_install(apt_root: AptRoot, branch: str, version: str) -> None:
    apt_root.prefer("")
    run = apt_root.simulate(*(f"{p.format(b=branch)}={version}-0ubuntu1" for p in FOUR))
    assert run.returncode != 0
    # apt's own words: the bounded dependency against the candidate it picked instead
    assert f"nvidia-kernel-common-{branch} (<= {version}-1) but" in run.stdout + run.stderr


@pytest.mark.parametrize(("branch", "version"), [("570", "570.133.20"), ("580", "580.105.08")])
def test_the_roles_locked_set_and_preferences_install_the_pin(
    apt_root: AptRoot, branch: str, version: str
) -> None:
    given = _given(branch, version)
    text = render(
        "nvidia_driver",
        "ubuntu-22.04",
        (ROLES / "nvidia_driver" / "templates" / "apt-preferences.j2").read_text(),
        ansible_managed="test",
        **given,
    )
    apt_root.prefer(text)
    locked = render("nvidia_driver", "ubuntu-22.04", "{{ _nvidia_driver_locked }}", **given)
    run = apt_root.simulate(*(f"{p}={version}-0ubuntu1" for p in locked))
    assert run.returncode == 0, run.stdout + run.stderr
    installs = {
        line.split()[1]: line.split()[2].strip("()")
        for line in run.stdout.splitlines()
        if line.startswith("Inst ")
    }
    assert installs[f"nvidia-kernel-common-{branch}"] == f"{version}-0ubuntu1"
    assert installs[f"nvidia-firmware-{branch}-{version}"] == f"{version}-0ubuntu1"
    # Nothing from another version, and for 570 none of Ubuntu's transitional packages (which pull 580)
    assert all(v == f"{version}-0ubuntu1" for v in installs.values()), installs
    # With the preferences file the candidate of every locked package is the pin: a plain name works too
    plain = apt_root.simulate(*locked)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert f"Inst nvidia-kernel-common-{branch} ({version}-0ubuntu1" in plain.stdout


def _installed(apt_root: AptRoot, names: list[str], version: str, selection: str) -> None:
    """A dpkg status file saying these packages are installed (and held or not), as after a converge."""
    stanzas = [
        f"Package: {n}\nStatus: {selection} ok installed\nArchitecture: amd64\nVersion: {version}\n"
        f"Maintainer: t <t@clusterforge.invalid>\nDescription: stand-in\n"
        + (f"Provides: {p}\nConflicts: {p}\nReplaces: {p}\n" if (p := _virtual(n)) else "")
        for n in names
    ]
    (apt_root.root / "var/lib/dpkg/status").write_text("\n".join(stanzas))


def _virtual(name: str) -> str:
    for prefix, virtual in (("libnvidia-compute-", "libnvidia-compute"), ("nvidia-utils-", "nvidia-utils"),
                            ("nvidia-compute-utils-", "nvidia-compute-utils"), ("nvidia-dkms-", "nvidia-dkms-kernel"),
                            ("nvidia-kernel-common-", "nvidia-kernel-common"), ("nvidia-kernel-source-", "nvidia-kernel-source")):  # fmt: skip
        if name.startswith(prefix):
            return virtual
    return ""


def test_a_branch_move_needs_the_old_branch_released(apt_root: AptRoot) -> None:
    """prod's 570 -> 580 move: the held 570 set conflicts with 580's; apt keeps held packages and
    refuses, so the role releases them first (roles/nvidia_driver _nvidia_driver_other_branch)."""
    old = render(
        "nvidia_driver", "ubuntu-22.04", "{{ _nvidia_driver_locked }}", **_given("570", "570.133.20")
    )
    given = _given("580", "580.105.08")
    apt_root.prefer(render("nvidia_driver", "ubuntu-22.04", (ROLES / "nvidia_driver" / "templates" / "apt-preferences.j2").read_text(), ansible_managed="test", **given))  # fmt: skip
    new = render("nvidia_driver", "ubuntu-22.04", "{{ _nvidia_driver_locked }}", **given)
    try:
        _installed(apt_root, old, "570.133.20-0ubuntu1", "hold")
        held = apt_root.simulate("--allow-change-held-packages", *(f"{p}=580.105.08-0ubuntu1" for p in new))
        assert held.returncode != 0 and "held packages" in held.stdout + held.stderr
        released = render("nvidia_driver", "ubuntu-22.04", "{{ _nvidia_driver_other_branch }}",
                          __nvidia_driver_held_before={"stdout_lines": old}, **given)  # fmt: skip
        assert sorted(released) == sorted(old)
        _installed(apt_root, old, "570.133.20-0ubuntu1", "install")
        # Released but kept, apt "upgrades" them to Ubuntu's transitional 570.211.01 packages (they
        # depend on 580): the old branch would stay installed and unmanaged.
        kept = apt_root.simulate(*(f"{p}=580.105.08-0ubuntu1" for p in new))
        assert (
            "Inst nvidia-kernel-common-570 [570.133.20-0ubuntu1] (570.211.01-0ubuntu1.22.04.1" in kept.stdout
        )
        # The role removes them (name- : apt-get's removal in the same transaction), then installs.
        moved = apt_root.simulate(*(f"{p}-" for p in released), *(f"{p}=580.105.08-0ubuntu1" for p in new))
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert {line.split()[1] for line in moved.stdout.splitlines() if line.startswith("Remv ")} == set(old)
        assert "570.211.01" not in moved.stdout
    finally:
        (apt_root.root / "var/lib/dpkg/status").write_text("")
