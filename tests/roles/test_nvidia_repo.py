"""The local stand-in for NVIDIA's CUDA repository: every listed package and version is built,
indexed and signed, and apt's Release checksums match the index files."""

from __future__ import annotations

import hashlib
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures import nvidia_repo

# slow: builds and signs the stand-in repository (dpkg-deb, gpg) once for the module
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> nvidia_repo.NvidiaRepo:
    return nvidia_repo.build(tmp_path_factory.mktemp("nvrepo"))


def _stanzas(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if not line.startswith(" ") and ": " in line:
                key, value = line.split(": ", 1)
                fields[key] = value
        out.append(fields)
    return out


def test_every_listed_version_is_indexed(built: nvidia_repo.NvidiaRepo) -> None:
    _, packages, _ = nvidia_repo.load_definitions()
    index = _stanzas((built.root / built.repo_path / "Packages").read_text())
    have = {(s["Package"], s["Version"]) for s in index}
    want = {(p.name, v) for p in packages for v in p.versions}
    assert want == have
    # The real names and version strings, epoch included.
    assert ("datacenter-gpu-manager-4-core", "1:4.2.3-1") in have
    assert ("libnccl2", "2.26.2-1+cuda12.8") in have


def test_release_checksums_match(built: nvidia_repo.NvidiaRepo) -> None:
    repo = built.root / built.repo_path
    release = (repo / "Release").read_text()
    sha = release.split("SHA256:\n", 1)[1]
    for line in sha.strip().splitlines():
        digest, size, name = line.split()
        data = (repo / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest and len(data) == int(size)


def test_signed_with_the_published_key(built: nvidia_repo.NvidiaRepo, tmp_path: Path) -> None:
    repo = built.root / built.repo_path
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch"]
    subprocess.run([*gpg, "--import", str(repo / nvidia_repo.KEY_FILE)], check=True, capture_output=True)
    ok = subprocess.run([*gpg, "--verify", str(repo / "InRelease")], capture_output=True)
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)
    assert ok.returncode == 0, ok.stderr.decode()
    assert b"Good signature" in ok.stderr


def test_payload_is_a_labelled_stub(built: nvidia_repo.NvidiaRepo) -> None:
    deb = built.root / built.repo_path / "nvidia-driver-cuda_570.133.20-1_amd64.deb"
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True, text=True).stdout
    assert "README.clusterforge-test" in files
    assert "/usr/bin/" not in files and ".so" not in files


def test_served_over_http_on_loopback(built: nvidia_repo.NvidiaRepo) -> None:
    serving = nvidia_repo.serve(built, "127.0.0.1")
    repo = next(serving)
    try:
        with urllib.request.urlopen(repo.key_url, timeout=10) as resp:
            assert b"BEGIN PGP PUBLIC KEY BLOCK" in resp.read()
        enroot = f"{repo.url}/{repo.files['enroot']}"
        with urllib.request.urlopen(enroot, timeout=10) as resp:
            assert resp.read(7) == b"!<arch>"
    finally:
        serving.close()
