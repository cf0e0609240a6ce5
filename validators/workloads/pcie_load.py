"""Keep every GPU's PCIe link busy (host <-> device copies) and sample a command mid-run.

Used by pcie-link: an idle link downclocks, so its generation is only meaningful under load.
``--sample CMD...`` is run once halfway through; its stdout is printed as this script's stdout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
import warnings
from typing import List

warnings.filterwarnings("ignore")


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--sample", nargs=argparse.REMAINDER, required=True)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.stderr.write("torch.cuda.is_available() is False: cannot load the PCIe links\n")
        return 3
    stop = threading.Event()

    def copy_loop(index: int) -> None:
        host = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
        dev = torch.empty_like(host, device=f"cuda:{index}")
        while not stop.is_set():
            dev.copy_(host, non_blocking=True)
            host.copy_(dev, non_blocking=True)
            torch.cuda.synchronize(index)

    threads = [
        threading.Thread(target=copy_loop, args=(i,), daemon=True) for i in range(torch.cuda.device_count())
    ]
    for t in threads:
        t.start()
    time.sleep(args.seconds / 2)
    proc = subprocess.run(args.sample, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    time.sleep(args.seconds / 2)
    stop.set()
    for t in threads:
        t.join(10)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
