"""The reader process: ``python -m spec_vetting.io.read_child [CAP_MB]`` runs the calls its parent sends it, one at a
time, until its standard input ends; a call may grow the process's address space by at most CAP_MB, plus the size
of the file the call names as its size (a survey file's arrays grow with it: a DESI healpix coadd of 4,000 targets,
1.8 GB on disk, takes about 730 MB to read one target).

Why a process: a read stuck in the kernel (a stale network mount, a file whose opener waits on a lease) cannot be
interrupted in a thread, and a back end chewing on a pathological file cannot be stopped in one either; a process
can be killed, and its memory is bounded by ``RLIMIT_AS`` without touching the worker's (:mod:`.read_pool` is the
parent's side).

Protocol, over the child's stdin and stdout: each message is an 8-byte big-endian length and a pickle. The parent
sends ``(function, args, sized_by)`` (functions travel by reference, so the child imports the same code;
``sized_by`` is a path whose size is added to the call's memory, or None; the child stats it, since a stat on a
stale mount blocks as a read does); the child answers
``("ok", value)``, ``("error", exception)`` or ``("memory", text)`` when the cap was hit, after which it exits: a
heap that ran out half way is not trusted with the next read. Both ends are this package's, so the pickles are
trusted as much as the code.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import struct
import sys
import time

HEADER = struct.Struct("!Q")
#: modules a read needs, imported before the first request (so start-up is paid once, before the cap is set)
WARM_IMPORTS = ("spec_vetting.io.candidate", "spec_vetting.io.reader", "astropy.io.fits")


def send(fd: int, message) -> None:
    """Write ``message`` to the file descriptor ``fd`` as one length-prefixed pickle (both ends use it)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``, or None at a clean end before the first of them; TimeoutError past ``deadline``
    (``time.monotonic()``; None: wait as long as it takes), EOFError at an end inside them."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise EOFError(f"stream ended {n - got} bytes into a message")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive_bytes(fd: int, deadline: float | None = None) -> bytes | None:
    """The next message's pickle from ``fd``, or None when the stream ended between messages (see
    :func:`_read_exactly` for the deadline)."""
    head = _read_exactly(fd, HEADER.size, deadline)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    body = _read_exactly(fd, n, deadline)
    if body is None:
        raise EOFError("stream ended after a message header")
    return body


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), so a worker killed while this process
    is blocked in a read leaves no orphan; an idle child already ends on the end of its stdin."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the end of stdin still ends an idle child
        return
    if os.getppid() != parent:  # the parent died before the request above: nobody is left to read our replies
        os._exit(0)


def _address_space() -> int:
    """Bytes of address space this process maps now (0 where /proc does not say)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cap_call(cap_mb: int, sized_by: str | None) -> int:
    """Bound the address space for the next call: what is mapped now, plus ``cap_mb`` MB and the size of the file
    ``sized_by``; the bound in MB (0: none)."""
    if cap_mb <= 0:
        return 0
    extra = 0
    if sized_by:
        try:
            extra = os.stat(sized_by).st_size
        except OSError:  # the read itself says what is wrong with the file
            pass
    allowed = cap_mb * 1024 * 1024 + extra
    soft = _address_space() + allowed
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:  # a bound the site set (ulimit -v) stays the outer one: never raised
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return -(-allowed // (1024 * 1024))


def _reply(out: int, request: bytes, cap_mb: int) -> bool:
    """Run one request and answer it; False when this process should end (its cap was hit)."""
    allowed = 0
    try:
        fn, args, sized_by = pickle.loads(request)
        allowed = _cap_call(cap_mb, sized_by)
        message = ("ok", fn(*args))
    except MemoryError:
        message = None
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which decides what it means
        message = ("error", exc)
    if message is None:
        send(out, ("memory", f"while reading (allowed {allowed} MB)"))
        return False
    try:
        send(out, message)
    except MemoryError:
        send(out, ("memory", "while handing the spectrum back"))
        return False
    except Exception as exc:  # noqa: BLE001 - an exception or value that does not pickle: its text instead
        send(out, ("error", RuntimeError(f"{type(exc).__name__} while returning the result: {exc}")))
    return True


def main(argv: list[str]) -> int:
    parent = int(os.environ.get("SPEC_VET_READ_PARENT", os.getppid()))
    _die_with_parent(parent)
    out = os.dup(1)  # the replies' descriptor, kept apart from what libraries print
    os.dup2(2, 1)  # a library that prints writes to stderr, never into the replies
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us through stdin
    for name in WARM_IMPORTS:
        __import__(name)
    from .fits_open import _fitsio_available

    _fitsio_available()  # imports the fast back end where it is installed
    # each call's bound is over what is mapped when it starts: libraries reserve address space they never touch
    # (pyarrow's allocator, when a site module imports it, reserves more than a gigabyte), so an absolute bound
    # would fail every read
    cap_mb = int(argv[0]) if argv else 0
    send(out, ("ready", os.getpid()))
    while True:
        request = receive_bytes(sys.stdin.fileno())
        if request is None or not _reply(out, request, cap_mb):
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
