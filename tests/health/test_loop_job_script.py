"""The loop's batch script run by /bin/sh as slurmd runs it (``--wrap``): the exit status in ``rc``, and
the node's validators lock held by the run, waited for while a health check holds it, and never a reason
for no run at all (tests/playbooks: the health check's side of the lock)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from clusterforge.health.loop.slurm import RC_FILE, VALIDATORS_LOCK, job_script


def fake_validators(tmp_path: Path, lock: Path, rc: int = 1) -> Path:
    """Appends one line per run: the time it started and whether ``lock`` was held (by the script)."""
    runs = tmp_path / "runs"
    tool = tmp_path / "clusterforge-validators"
    tool.write_text(
        "#!/bin/sh\n"
        f"if flock -n {lock} true 2>/dev/null; then held=free; else held=held; fi\n"
        f'echo "$(date +%s.%N) $held" >> {runs}\n'
        f"exit {rc}\n"
    )
    tool.chmod(0o755)
    return runs


def run_script(tmp_path: Path, lock: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = job_script([str(tmp_path / "clusterforge-validators")], "quick", "/etc/node.json",
                        tmp_path / "reports", "node-001", lock=lock)  # fmt: skip
    env = dict(os.environ, SLURM_JOB_ID="42")
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    return done, tmp_path / "reports" / "node-001" / "42"


def test_the_run_holds_the_lock_and_its_exit_status_goes_to_rc(tmp_path: Path) -> None:
    lock = tmp_path / "validators.lock"
    runs = fake_validators(tmp_path, lock, rc=1)
    done, folder = run_script(tmp_path, str(lock))
    assert done.returncode == 0, done.stderr
    assert (folder / RC_FILE).read_text().strip() == "1"  # the validators' own verdict, not the lock's
    (line,) = runs.read_text().splitlines()
    assert line.endswith(" held")
    assert not _held(lock)  # released with the run


def test_a_health_check_holding_the_lock_is_waited_for(tmp_path: Path) -> None:
    lock = tmp_path / "validators.lock"
    runs = fake_validators(tmp_path, lock, rc=0)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a health check's quick checks
    released = []

    def release() -> None:
        time.sleep(1.5)
        released.append(time.time())
        os.close(fd)

    threading.Thread(target=release).start()
    done, folder = run_script(tmp_path, str(lock))
    assert done.returncode == 0, done.stderr
    started = float(runs.read_text().split()[0])
    assert started >= released[0]  # not before the health check let go
    assert (folder / RC_FILE).read_text().strip() == "0"


@pytest.mark.parametrize("lock", ["/nonexistent-clusterforge/validators.lock", ""])
def test_a_lock_that_cannot_be_taken_still_runs_the_validators_once(tmp_path: Path, lock: str) -> None:
    runs = fake_validators(tmp_path, tmp_path / "unused.lock", rc=0)
    done, folder = run_script(tmp_path, lock)
    assert done.returncode == 0, done.stderr
    assert len(runs.read_text().splitlines()) == 1  # once: the fallback is for a lock file, not a failed run
    assert (folder / RC_FILE).read_text().strip() == "0"


def test_the_lock_is_the_slurm_roles() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    defaults = yaml.safe_load((root / "roles/slurm/defaults/main.yml").read_text())
    assert defaults["slurm_validators_lock"] == VALIDATORS_LOCK


def _held(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)
