"""The benchmark's dataset on shared storage: shards of fixed-size samples (stdlib only).

A sample is ``sample_bytes`` on storage: what a real loader reads before tokenising or decoding
(a document, an image); the training step takes its first ``2 (seq_len + 1)`` bytes as uint16
token ids. Shard ``shard-NNNNN.bin`` holds ``samples_per_shard`` samples back to back;
``manifest.json`` is written last, so a dataset with a manifest is complete.

Reads are meant to measure the storage, not this node's page cache, as a dataset much larger
than memory would behave: they use ``O_DIRECT`` (``sample_bytes`` is a multiple of 4 KiB);
where the file system refuses it, buffered reads without read-ahead, each range dropped from the
cache after the read (the prepare step fsyncs first, so the pages are clean).

Modes:
  prepare --path DIR --shards S --samples-per-shard N --sample-bytes B   write the dataset (idempotent)
  sweep --config job.json --out FILE   samples/s and MB/s with 1, 2, 4, ... reader processes
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import mmap
import multiprocessing as mp
import os
import sys
import time
from typing import Any, Dict, List, Optional

MANIFEST = "manifest.json"
DIRECT_ALIGN = 4096  # O_DIRECT wants offsets and lengths in whole blocks


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.bin"


def sample_content(index: int, size: int) -> bytes:
    """Deterministic, incompressible-looking bytes of sample ``index`` (sha256 in counter mode)."""
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(f"{index}:{block}".encode()).digest()
        block += 1
    return bytes(out[:size])


def prepare(path: str, shards: int, per_shard: int, sample_bytes: int) -> Dict[str, Any]:
    """Write the dataset unless a complete one with the same shape is there; returns the manifest."""
    manifest: Dict[str, Any] = {
        "shards": shards,
        "samples_per_shard": per_shard,
        "sample_bytes": sample_bytes,
    }
    existing = read_manifest(path)
    if existing is not None and all(existing.get(k) == v for k, v in manifest.items()):
        return existing
    os.makedirs(path, exist_ok=True)
    started = time.monotonic()
    for s in range(shards):
        name = os.path.join(path, shard_name(s))
        with open(name, "wb") as fh:
            for i in range(per_shard):
                fh.write(sample_content(s * per_shard + i, sample_bytes))
            fh.flush()
            os.fsync(fh.fileno())
            drop_cache(fh.fileno(), 0, 0)
    manifest["written_s"] = round(time.monotonic() - started, 3)
    tmp = os.path.join(path, MANIFEST + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(manifest, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(path, MANIFEST))
    return manifest


def read_manifest(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(os.path.join(path, MANIFEST)) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def advise(fd: int, advice: str, offset: int = 0, length: int = 0) -> None:
    if hasattr(os, "posix_fadvise"):
        # a file system without fadvise: the figures may include cache hits
        with contextlib.suppress(OSError):
            os.posix_fadvise(fd, offset, length, getattr(os, advice))


def drop_cache(fd: int, offset: int, length: int) -> None:
    advise(fd, "POSIX_FADV_DONTNEED", offset, length)


class Samples:
    """Random access to the samples (a map-style dataset for torch's DataLoader as it is).

    Reads bypass the page cache (``O_DIRECT`` into a page-aligned buffer) where the file system
    allows it; elsewhere (tmpfs) they are buffered, each range dropped from the cache after the
    read, and ``direct`` says so. File handles are opened lazily per process: DataLoader workers
    start after construction and must not share them."""

    def __init__(self, path: str) -> None:
        manifest = read_manifest(path)
        if manifest is None:
            raise FileNotFoundError(
                f"{path}: no {MANIFEST}: the dataset was not prepared (or not completely)"
            )
        self.path = path
        self.per_shard = int(manifest["samples_per_shard"])
        self.sample_bytes = int(manifest["sample_bytes"])
        self.count = int(manifest["shards"]) * self.per_shard
        self.direct = hasattr(os, "O_DIRECT") and self.sample_bytes % DIRECT_ALIGN == 0
        self._fds: Dict[int, int] = {}
        self._pid = 0
        self._buf: Optional[mmap.mmap] = None

    def __len__(self) -> int:
        return self.count

    def _open(self, shard: int) -> int:
        name = os.path.join(self.path, shard_name(shard))
        if self.direct:
            try:
                return os.open(name, os.O_RDONLY | os.O_DIRECT)
            except OSError:
                self.direct = False  # e.g. tmpfs: EINVAL
        fd = os.open(name, os.O_RDONLY)
        advise(fd, "POSIX_FADV_RANDOM")  # no read-ahead: a sample's neighbours are not cached for free
        return fd

    def __getitem__(self, index: int) -> bytes:
        if self._pid != os.getpid():  # a new worker process: its own descriptors and buffer
            self._fds, self._pid, self._buf = {}, os.getpid(), None
        shard, slot = divmod(int(index) % self.count, self.per_shard)
        fd = self._fds.get(shard)
        if fd is None:
            fd = self._fds[shard] = self._open(shard)
        offset = slot * self.sample_bytes
        if self.direct:
            if self._buf is None:
                self._buf = mmap.mmap(-1, self.sample_bytes)  # page-aligned, as O_DIRECT needs
            got = os.preadv(fd, [self._buf], offset)
            data = self._buf[:got]
        else:
            data = os.pread(fd, self.sample_bytes, offset)
            drop_cache(fd, offset, self.sample_bytes)
        if len(data) != self.sample_bytes:
            raise OSError(
                f"{shard_name(shard)}: short read at sample {slot} ({len(data)} of {self.sample_bytes} B)"
            )
        return data


def _reader(path: str, first: int, stride: int, deadline: float, queue: Any) -> None:
    """Read samples first, first + stride, ... (wrapping round) until ``deadline``."""
    samples = Samples(path)
    began = time.monotonic()
    done = nbytes = 0
    index = first
    while time.monotonic() < deadline:
        nbytes += len(samples[index])
        done += 1
        index += stride
    queue.put((done, nbytes, began, time.monotonic()))


def measure(path: str, workers: int, seconds: float, offset: int) -> Dict[str, Any]:
    """``workers`` processes reading disjoint samples for ``seconds``: samples/s and MB/s over the
    span from the first reader's start to the last one's end (process start-up excluded)."""
    ctx: Any = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    queue = ctx.Queue()
    deadline = time.monotonic() + seconds
    procs = [
        ctx.Process(target=_reader, args=(path, offset + w, workers, deadline, queue)) for w in range(workers)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join(10)
    elapsed = max(r[3] for r in results) - min(r[2] for r in results)
    done = sum(r[0] for r in results)
    nbytes = sum(r[1] for r in results)
    return {
        "workers": workers,
        "samples": done,
        "bytes": nbytes,
        "seconds": round(elapsed, 4),
        "samples_per_s": done / elapsed if elapsed > 0 else 0.0,
        "mb_per_s": nbytes / elapsed / 1e6 if elapsed > 0 else 0.0,
    }


def sweep(job: Dict[str, Any], out: Any) -> int:
    data = job["data"]
    path = data["path"]
    offset = 0
    probe = Samples(path)
    probe[0]  # opens a shard: ``direct`` is then what the file system allowed
    direct = probe.direct
    for workers in data["workers"]:
        row = measure(path, int(workers), float(data["seconds"]), offset)
        offset += row["samples"]  # the next count reads other samples first
        out.write(json.dumps({"kind": "loader", "direct": direct, **row}) + "\n")
        out.flush()
    return 0


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="benchmark.data")
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--path", required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--samples-per-shard", type=int, required=True)
    p.add_argument("--sample-bytes", type=int, required=True)
    s = sub.add_parser("sweep")
    s.add_argument("--config", required=True)
    args = ap.parse_args(argv)
    if args.mode == "prepare":
        manifest = prepare(args.path, args.shards, args.samples_per_shard, args.sample_bytes)
        print(json.dumps({"kind": "prepared", **manifest}))
        return 0
    with open(args.config) as fh:
        job = json.load(fh)
    return sweep(job, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
