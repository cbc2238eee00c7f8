"""Spectrum reads in reader processes that can be killed: a few long-lived children of the worker process
(:mod:`.read_child`), each serving one read at a time, killed and replaced when a read passes its timeout, hits the
memory cap or crashes.

Why: a read stuck in the kernel (a stale network mount) or a back end chewing on a pathological file cannot be
stopped in a thread; abandoned there, it kept its memory and its thread for as long as it ran (issue 34: one worker
at 12.4 GB). A child is SIGKILLed at the timeout, and its address space is capped (``RLIMIT_AS``), so whatever a
file does, the worker's own memory is untouched and the read ends as the pair's ERROR row.

Each child is owned by one thread of the pool, which starts it on its first read (about 0.3 s of imports; see
benchmarks/RESULTS.md) and keeps it for the next. Reads of one file go one at a time (``key``): rows naming a file
that blocks wait for the first read's end instead of blocking every child, and once a read of a file was cut
(timeout, memory, crash), the other reads of that file in the same ``scope`` (a run) fail at once, naming the
first cause: one timeout per stuck file and run, not one per row. Children end with the pool (:meth:`close`), when
their parent dies (``PR_SET_PDEATHSIG``) or when their stdin ends.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..errors import ReadMemoryError, ReadTimeoutError, SpectrumReadError
from .read_child import receive_bytes, send

log = logging.getLogger(__name__)

#: reader processes per worker process: one read stuck on a file still leaves one for the others
DEFAULT_READ_PROCESSES = 2
#: address space (MB) a read may add to its reader process (``RLIMIT_AS`` over the reader's footprint after start-up,
#: about 150 MB mapped, 60 MB resident): it bounds the reader's resident memory too, so each reader stays under a
#: gigabyte whatever a file asks for
DEFAULT_READ_MEMORY_MB = 768
#: seconds a reader process may take to start (imports) before its read fails
START_TIMEOUT_S = 60.0

#: files whose read was cut, per scope, at most this many remembered (then forgotten all at once)
MAX_REMEMBERED = 10_000


class _Died(Exception):
    """The child ended (or its pipes broke) before it answered."""


class _TimedOut(Exception):
    pass


def _child_env() -> dict[str, str]:
    """The worker's environment, with its import path (so the child runs the very code the worker runs) and one
    BLAS thread (their stacks and buffers would count against the address-space cap)."""
    paths = [p or os.getcwd() for p in sys.path]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "SPEC_VET_READ_PARENT": str(os.getpid()),
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class ReaderChild:
    """One reader process and its two pipes."""

    def __init__(self, memory_mb: int):
        t0 = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "spec_vetting.io.read_child", str(int(memory_mb))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_child_env(), bufsize=0)
        try:
            kind, _ = self._receive(time.monotonic() + START_TIMEOUT_S)
        except _TimedOut:
            self.kill()
            raise _TimedOut(f"no sign of life within {START_TIMEOUT_S:g} s") from None
        except _Died:
            how = self.exit_text()
            self.kill()
            raise _Died(f"it ended at start-up ({how}; its error is in the worker's log)") from None
        if kind != "ready":
            self.kill()
            raise _Died(f"it said {kind!r} instead of 'ready'")
        self.pid = self.proc.pid
        self.start_s = time.monotonic() - t0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, fn, args: tuple, timeout_s: float | None, sized_by: str | None = None) -> tuple[str, Any]:
        """``("ok", value)``, ``("error", exception)`` or ``("memory", text)``; raises _TimedOut or _Died.
        ``sized_by``: a file whose size the call may take in memory beyond the child's cap."""
        try:
            send(self.proc.stdin.fileno(), (fn, args, sized_by))
        except (BrokenPipeError, ValueError) as exc:
            raise _Died from exc
        return self._receive(None if timeout_s is None else time.monotonic() + timeout_s)

    def _receive(self, deadline: float | None):
        try:
            data = receive_bytes(self.proc.stdout.fileno(), deadline)
        except TimeoutError:
            raise _TimedOut from None
        except EOFError:
            raise _Died from None
        if data is None:
            raise _Died
        return pickle.loads(data)

    def exit_text(self) -> str:
        """How the child ended, once its pipe did (the exit status follows the pipe's end closely, not at once)."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return "it stopped answering"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def kill(self) -> None:
        """SIGKILL and reap (a process stuck in an uninterruptible read may outlive this by the read's end; the
        kernel's answer to SIGKILL, not ours)."""
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("reader process %d did not end within 5 s of SIGKILL", self.proc.pid)
        self._close_pipes()

    def close(self) -> None:
        """End an idle child through its stdin; kill it when it does not go."""
        self._close_pipes(stdout=False)
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_pipes()

    def _close_pipes(self, stdout: bool = True) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout) if stdout else (self.proc.stdin,):
            try:
                pipe.close()
            except OSError:
                pass


@dataclass
class _Job:
    fn: Any
    args: tuple
    key: str
    scope: str
    timeout_s: float | None
    future: concurrent.futures.Future
    sized_by: str | None = None


class ReaderPool:
    """Up to ``processes`` reader processes for this process's reads, each read capped at ``memory_mb`` MB of address
    space over what its reader maps when the read starts, plus the size of the file ``submit`` says it reads
    (``sized_by``): a genuine file's arrays grow with it, a hostile one (a gzip bomb) stays small on disk.

    :meth:`submit` returns a :class:`concurrent.futures.Future` (``asyncio.wrap_future`` awaits it on any loop):
    its result is ``fn(*args)`` run in a child, or the exception the call raised there, or a
    :class:`~spec_vetting.errors.ReadTimeoutError` / :class:`~spec_vetting.errors.ReadMemoryError` /
    :class:`~spec_vetting.errors.SpectrumReadError` naming ``key`` when the child was killed, hit its cap or died.
    ``fn`` and ``args`` must pickle (``fn`` by reference: a module-level function).
    """

    def __init__(self, processes: int = DEFAULT_READ_PROCESSES, memory_mb: int = DEFAULT_READ_MEMORY_MB):
        self.processes = max(1, int(processes))
        self.memory_mb = int(memory_mb)
        self._cond = threading.Condition()
        self._jobs: deque[_Job] = deque()
        self._busy: set[str] = set()  # keys being read now
        self._threads: list[threading.Thread] = []
        self._children: set[ReaderChild] = set()
        self._cut: dict[tuple[str, str], SpectrumReadError] = {}  # (scope, key) -> why its read was cut
        self._closed = False
        #: children started so far and their start-up seconds (benchmarks, tests)
        self.start_times: list[float] = []

    def submit(self, fn, args: tuple, *, key: str, timeout_s: float | None, scope: str = "",
               sized_by: str | None = None) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the reader pool is closed")
            self._jobs.append(_Job(fn, tuple(args), str(key), scope, timeout_s, future, sized_by))
            if len(self._threads) < self.processes:
                thread = threading.Thread(target=self._serve, name=f"spec-vet-reader-{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()
            self._cond.notify()
        return future

    def child_pids(self) -> list[int]:
        with self._cond:
            return sorted(c.pid for c in self._children)

    def close(self) -> None:
        """Kill every child (those in a read too) and fail the reads not started; the pool takes no more."""
        with self._cond:
            self._closed = True
            jobs, self._jobs = list(self._jobs), deque()
            children = list(self._children)
            self._cond.notify_all()
        for job in jobs:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(SpectrumReadError(job.key, "not read: the worker is shutting down",
                                                           hint="the pair is retried next run"))
        for child in children:
            child.kill()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    def _take(self) -> _Job | None:
        """The next job whose file no other child is reading (None once closed); marks its file busy."""
        with self._cond:
            while not self._closed:
                for i, job in enumerate(self._jobs):
                    if job.key not in self._busy:
                        del self._jobs[i]
                        if job.future.set_running_or_notify_cancel():
                            self._busy.add(job.key)
                            return job
                        break  # cancelled: look again from the start
                else:
                    self._cond.wait()
            return None

    def _serve(self) -> None:
        child: ReaderChild | None = None
        try:
            while (job := self._take()) is not None:
                try:
                    child = self._run(job, child)
                except BaseException as exc:  # noqa: BLE001 - a bug here must still answer the read
                    if not job.future.done():
                        job.future.set_exception(exc)
                    child = self._drop(child)
                finally:
                    with self._cond:
                        self._busy.discard(job.key)
                        self._cond.notify_all()
        finally:
            if child is not None:
                child.close()
                self._forget(child)

    def _run(self, job: _Job, child: ReaderChild | None) -> ReaderChild | None:
        """Answer ``job`` on ``child`` (started or replaced as needed); the child to keep for the next job."""
        earlier = self._cut.get((job.scope, job.key))
        if earlier is not None:
            job.future.set_exception(type(earlier)(
                job.key, f"not read again in this run: an earlier read of this file was cut ({earlier.reason})",
                hint=earlier.hint))
            return child
        if child is not None and not child.alive():  # died while idle (killed from outside): not this file's fault
            child = self._drop(child)
        if child is None:
            try:
                child = ReaderChild(self.memory_mb)
            except (_Died, _TimedOut, OSError) as exc:
                job.future.set_exception(SpectrumReadError(
                    job.key, f"not read: the reader process did not start: {exc}",
                    hint="check that `python -m spec_vetting.io.read_child` runs on this worker"))
                return None
            with self._cond:
                if self._closed:
                    child.kill()
                    job.future.set_exception(SpectrumReadError(job.key, "not read: the worker is shutting down"))
                    return None
                self._children.add(child)
                self.start_times.append(child.start_s)
        try:
            kind, value = child.call(job.fn, job.args, job.timeout_s, job.sized_by)
        except _TimedOut:
            self._drop(child)
            self._fail(job, ReadTimeoutError(
                job.key, f"reading the spectrum took more than {job.timeout_s:g} s (stale network mount or a file "
                "that blocks?); its reader process was killed", hint="check the file system; the pair is retried "
                "next run"))
            return None
        except _Died:
            how = child.exit_text()
            self._drop(child)
            self._fail(job, SpectrumReadError(
                job.key, f"the reader process died reading this file ({how}; out of memory, or a crash in the FITS "
                "library); it was replaced", hint="report this file to the developers"))
            return None
        if kind == "ok":
            job.future.set_result(value)
        elif kind == "error":
            job.future.set_exception(value)
        else:
            self._drop(child)
            self._fail(job, ReadMemoryError(
                job.key, f"reading the spectrum needed more than the reader's {self.memory_mb} MB of memory "
                f"(plus the file's size) {value}; its reader process was replaced",
                hint="a damaged or hostile file? if it is genuine, raise budgets.read_memory_mb"))
            return None
        return child

    def _fail(self, job: _Job, error: SpectrumReadError) -> None:
        with self._cond:
            if self._closed:  # killed by close(): not the file's fault, nothing to remember
                error = SpectrumReadError(job.key, "not read: the worker is shutting down",
                                          hint="the pair is retried next run")
            else:
                if len(self._cut) >= MAX_REMEMBERED:
                    self._cut.clear()
                self._cut[(job.scope, job.key)] = error
            log.warning("%s", error)
        job.future.set_exception(error)

    def _drop(self, child: ReaderChild | None) -> None:
        if child is not None:
            child.kill()
            self._forget(child)
        return None

    def _forget(self, child: ReaderChild) -> None:
        with self._cond:
            self._children.discard(child)


_POOLS: dict[tuple[int, int], ReaderPool] = {}
_POOLS_LOCK = threading.Lock()
_POOLS_PID = os.getpid()


def process_pool(processes: int = DEFAULT_READ_PROCESSES, memory_mb: int = DEFAULT_READ_MEMORY_MB) -> ReaderPool:
    """This process's pool for (processes, memory_mb), made on first use and kept until the process ends (its
    children are reused by every shard the worker runs)."""
    global _POOLS_PID
    key = (max(1, int(processes)), int(memory_mb))
    with _POOLS_LOCK:
        if _POOLS_PID != os.getpid():  # a forked copy of a process that had pools: their threads are not here
            _POOLS.clear()
            _POOLS_PID = os.getpid()
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ReaderPool(*key)
        return pool


@atexit.register
def close_process_pools() -> None:
    """Kill this process's reader children (also done by the kernel when it dies: see the module's docstring)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values()) if _POOLS_PID == os.getpid() else []
        _POOLS.clear()
    for pool in pools:
        pool.close()
