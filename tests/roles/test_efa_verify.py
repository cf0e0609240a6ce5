"""The efa role checks the installer tarball against AWS's signing key before anything unpacks: the
procedure of AWS's "Verify the EFA tarball" (import the key, compare its fingerprint, gpg --verify
the .sig), run for real by ansible-playbook on this machine against a local server with a
throw-away key standing in for AWS's. A tampered tarball or another key stops the role and removes
the tarball."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

ROLE = Path(__file__).resolve().parents[2] / "roles" / "efa"


class Signed:
    def __init__(self, root: Path) -> None:
        self.root = root
        home = root / "gnupg"
        home.mkdir(mode=0o700)
        gpg = [
            "gpg",
            "--homedir",
            str(home),
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ]
        subprocess.run([*gpg, "--quick-gen-key", "stand-in EFA <efa@clusterforge.invalid>", "rsa2048", "sign", "never"], check=True, capture_output=True)  # fmt: skip
        colons = subprocess.run(
            [*gpg, "--with-colons", "--fingerprint"], check=True, capture_output=True, text=True
        )
        self.fingerprint = next(
            line.split(":")[9] for line in colons.stdout.splitlines() if line.startswith("fpr:")
        )
        files = root / "srv"
        files.mkdir()
        (files / "aws-efa-installer.key").write_bytes(
            subprocess.run([*gpg, "--armor", "--export"], check=True, capture_output=True).stdout
        )
        self.tarball = files / "aws-efa-installer-1.40.0.tar.gz"
        self.tarball.write_bytes(b"stand-in installer payload\n")
        subprocess.run([*gpg, "--detach-sign", "-o", f"{self.tarball}.sig", str(self.tarball)], check=True, capture_output=True)  # fmt: skip
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Signed, str]]:
    signed = Signed(tmp_path_factory.mktemp("efa"))

    def handler(*args: Any, **kwargs: Any) -> http.server.SimpleHTTPRequestHandler:
        return http.server.SimpleHTTPRequestHandler(*args, directory=str(signed.root / "srv"), **kwargs)

    http.server.SimpleHTTPRequestHandler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield signed, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def verify(
    work: Path, url: str, fingerprint: str, payload: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """The role's verify.yml on localhost, with the tarball already where the download put it."""
    work.mkdir()
    tarball = work / "aws-efa-installer-1.40.0.tar.gz"
    tarball.write_bytes(payload if payload is not None else b"stand-in installer payload\n")
    variables = {
        "efa_installer_version": "1.40.0",
        "efa_work_dir": str(work),
        "efa_installer_url": f"{url}/aws-efa-installer-1.40.0.tar.gz",
        "efa_installer_key_url": f"{url}/aws-efa-installer.key",
        "efa_installer_sig_url": f"{url}/aws-efa-installer-1.40.0.tar.gz.sig",
        "efa_installer_gpg_fingerprint": fingerprint,
        "_efa_tarball": str(tarball),
        "_efa_key": str(work / "aws-efa-installer.key"),
        "ansible_python_interpreter": sys.executable,
    }
    play = [{"hosts": "localhost", "gather_facts": False, "vars": variables,
             "tasks": [{"ansible.builtin.include_tasks": str(ROLE / "tasks" / "verify.yml")}]}]  # fmt: skip
    (work / "play.yml").write_text(yaml.safe_dump(play))
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(work / "play.yml")],
        env={**os.environ, "ANSIBLE_HOME": str(work / "ah"), "ANSIBLE_LOCAL_TEMP": str(work / "ah" / "tmp"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_signed_installer_passes(served: tuple[Signed, str], tmp_path: Path) -> None:
    signed, url = served
    run = verify(tmp_path / "good", url, signed.fingerprint)
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"VERIFIED: aws-efa-installer-1.40.0.tar.gz is signed by {signed.fingerprint}" in run.stdout
    assert (tmp_path / "good" / "aws-efa-installer-1.40.0.tar.gz").exists()


def test_a_tampered_installer_stops_the_role_and_is_removed(
    served: tuple[Signed, str], tmp_path: Path
) -> None:
    signed, url = served
    run = verify(tmp_path / "bad", url, signed.fingerprint, payload=b"stand-in installer payload, changed\n")
    assert run.returncode != 0
    assert "is not signed by the key with fingerprint" in run.stdout and "BADSIG" in run.stdout
    assert not (tmp_path / "bad" / "aws-efa-installer-1.40.0.tar.gz").exists()


def test_a_key_with_another_fingerprint_is_refused(served: tuple[Signed, str], tmp_path: Path) -> None:
    signed, url = served
    aws = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"  # AWS's, not the stand-in's
    run = verify(tmp_path / "other", url, aws)
    assert run.returncode != 0
    assert f"not signed by the key with fingerprint {aws} (key fetched: {signed.fingerprint}" in run.stdout
