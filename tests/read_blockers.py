"""Files whose reading blocks or eats memory for real, for the reader-process tests (issue 34, item 6).

- A regular file under a write lease (``fcntl F_SETLEASE``) held by another process: the kernel blocks every other
  ``open`` of it until the holder lets go or ``/proc/sys/fs/lease-break-time`` (45 s by default) passes, as an NFS
  server's delegations do. It passes every check a reader makes before opening (it is a regular file).
- A gzip bomb: a FITS header and then 1.6 GB of zeros in 1.6 MB of gzip members; the readers decompress gzip
  content in memory, so reading it allocates without bound.
"""

from __future__ import annotations

import contextlib
import gzip
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

HOLD_LEASE = (
    "import fcntl, os, signal, sys\n"
    "signal.signal(signal.SIGIO, signal.SIG_IGN)  # the kernel asks the holder to let go with SIGIO: never\n"
    "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
    "fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


@contextlib.contextmanager
def leased(path: Path):
    """``path`` (a regular file, written here) whose opening blocks while the context lasts; skips the test where
    the file system takes no leases."""
    path.write_bytes(b"SIMPLE  =                    T".ljust(2880, b" "))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LEASE, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "held":
            pytest.skip(f"no write lease on {path.parent}: {holder.communicate(timeout=10)[1].strip()[-200:]}")
        yield path
    finally:
        holder.kill()
        holder.wait(timeout=10)


def write_gzip_bomb(path: Path, gigabytes: float = 1.6) -> Path:
    """A ``.fits.gz`` whose header announces ``gigabytes`` of 8-bit data, all of it there (zeros), in ~1 MB per GB."""
    chunk = 16 * 1024 * 1024
    n = int(gigabytes * 1e9) // chunk
    cards = ["SIMPLE  =                    T", "BITPIX  =                    8", "NAXIS   =                    1",
             f"NAXIS1  = {n * chunk:>20d}", "END"]
    member = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip member
    zeros = member.compress(bytes(chunk)) + member.flush()
    with open(path, "wb") as fh:
        fh.write(gzip.compress(b"".join(c.ljust(80).encode() for c in cards).ljust(2880, b" ")))
        for _ in range(n):
            fh.write(zeros)
    return path


def allocate(n_bytes: int) -> int:
    """Take ``n_bytes`` of memory in the process that runs it (a reader) and hand back only their count."""
    return len(bytearray(n_bytes))
