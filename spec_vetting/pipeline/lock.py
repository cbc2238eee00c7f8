"""One run at a time per catalog root: an exclusive ``fcntl.flock`` on ``ROOT/_runs/lock``.

The operating system drops the lock when the process exits in any way (kill -9 included), so a killed run never
blocks its own resume; the PID written into the file only makes the refusal message useful.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import RunLockedError


class RootLock:
    def __init__(self, root: str | os.PathLike):
        self.path = Path(root) / "_runs" / "lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 200).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise RunLockedError(
                f"{self.path.parent.parent}: another `spec-vet run` is writing this catalog root (pid {holder}); "
                "wait for it to finish or use another --out. The lock frees itself when that process ends"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RootLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
