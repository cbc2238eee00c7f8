"""Reads in reader processes the worker can kill (issue 34, item 6): a read blocked in the kernel is cut at the
timeout and its process killed, a read past the memory cap is an error and its process replaced, a process that
dies is replaced, and no reader process outlives its pool or its worker. Real processes, real blocking files."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from read_blockers import allocate, leased, write_gzip_bomb

from spec_vetting.errors import ReadMemoryError, ReadTimeoutError, SpectrumReadError
from spec_vetting.io.candidate import Candidate, read_candidate_file
from spec_vetting.io.read_pool import ReaderPool
from spec_vetting.io.reader import read_spectrum

REPO = Path(__file__).resolve().parents[1]


def gone(pid: int) -> bool:
    """True when ``pid`` has ended (a zombie that nobody reaps, as under a container's init, counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds (the kernel reaps on its own time; this waits for the fact, not a delay)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def pool():
    p = ReaderPool(processes=2, memory_mb=512)
    yield p
    p.close()


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "blocks.fits"
    os.mkfifo(path)
    return path


def test_a_read_blocked_in_the_kernel_is_cut_and_its_reader_killed(fifo):
    # opening a FIFO nobody writes to blocks in the kernel for ever (a thread could never be stopped there)
    pool = ReaderPool(processes=1, memory_mb=512)
    try:
        _blocked_read_is_cut(pool, fifo)
    finally:
        pool.close()


def _blocked_read_is_cut(pool, fifo):
    [reader] = {pool.submit(os.getpid, (), key="warm", timeout_s=30).result()}
    assert pool.child_pids() == [reader]
    t0 = time.monotonic()
    with pytest.raises(ReadTimeoutError, match=r"more than 0\.5 s.*reader process was killed") as err:
        pool.submit(Path.read_bytes, (fifo,), key=str(fifo), timeout_s=0.5, scope="run-1").result(timeout=20)
    assert time.monotonic() - t0 < 5 and str(fifo) in str(err.value) and err.value.kind == "read_timeout"
    assert gone(reader) and pool.child_pids() == []
    # the next read works, on a fresh child
    assert pool.submit(np.arange, (3,), key="next", timeout_s=30).result().tolist() == [0, 1, 2]
    assert len(pool.child_pids()) == 1 and pool.child_pids() != [reader]
    # more rows on the stuck file in the same run fail at once, naming the first cause; other runs try again
    t0 = time.monotonic()
    for _ in range(50):
        with pytest.raises(ReadTimeoutError, match="not read again in this run.*more than 0.5 s"):
            pool.submit(Path.read_bytes, (fifo,), key=str(fifo), timeout_s=0.5, scope="run-1").result(timeout=20)
    assert time.monotonic() - t0 < 2
    with pytest.raises(ReadTimeoutError, match=r"more than 0\.5 s.*killed"):
        pool.submit(Path.read_bytes, (fifo,), key=str(fifo), timeout_s=0.5, scope="run-2").result(timeout=20)


def test_reads_of_a_stuck_file_wait_for_its_first_read_and_leave_the_other_child_free(pool, fifo, tmp_path):
    t0 = time.monotonic()
    stuck = [pool.submit(Path.read_bytes, (fifo,), key=str(fifo), timeout_s=3.0, scope="r") for _ in range(20)]
    other = tmp_path / "other.bin"
    other.write_bytes(b"fine")
    assert pool.submit(Path.read_bytes, (other,), key=str(other), timeout_s=30).result(timeout=20) == b"fine"
    assert not any(f.done() for f in stuck)  # served by the second child while the first blocks
    for f in stuck:
        with pytest.raises(ReadTimeoutError):
            f.result(timeout=20)
    assert time.monotonic() - t0 < 15  # one timeout for the file, not twenty (60 s)


def test_a_regular_file_whose_open_blocks_is_cut_through_the_real_reader(pool, tmp_path):
    with leased(tmp_path / "leased.fits") as path:
        fn, args = Candidate(candidate_id="x", path=str(path)).file_read()
        t0 = time.monotonic()
        with pytest.raises(ReadTimeoutError, match=r"leased\.fits: reading the spectrum took more than 1 s"):
            pool.submit(fn, args, key=str(path), timeout_s=1.0).result(timeout=30)
        assert time.monotonic() - t0 < 10  # the kernel would hold it for 45 s


def test_a_read_past_the_memory_cap_is_an_error_and_its_reader_replaced(pool, tmp_path):
    bomb = write_gzip_bomb(tmp_path / "bomb.fits.gz")
    assert bomb.stat().st_size < 3_000_000
    worker_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ReadMemoryError, match=r"bomb\.fits\.gz: .*more than the reader's 512 MB") as err:
        pool.submit(read_candidate_file, (str(bomb),), key=str(bomb), timeout_s=60).result(timeout=60)
    assert err.value.kind == "read_memory"
    with pytest.raises(ReadMemoryError, match="not read again"):  # not handed to a child again
        pool.submit(read_candidate_file, (str(bomb),), key=str(bomb), timeout_s=60).result(timeout=60)
    with pytest.raises(ReadMemoryError):  # plain allocation past the cap
        pool.submit(bytearray, (700 * 2**20,), key="big", timeout_s=60).result(timeout=60)
    assert pool.submit(int, ("7",), key="after", timeout_s=30).result() == 7
    # none of it in this process (read here, the bomb alone would take 1.6-3.2 GB)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - worker_peak < 100_000


def test_a_read_may_also_take_its_files_size_so_a_large_genuine_file_is_read(tmp_path):
    # a 300 MB file (sparse: its apparent size is what counts) lets a read take 64 MB + 300 MB; 200 MB passes with
    # it and fails without it, and the bound is set again for every read (the next small read is not held to it)
    big = tmp_path / "coadd.fits"
    with open(big, "wb") as fh:
        fh.truncate(300 * 2**20)
    pool = ReaderPool(processes=1, memory_mb=64)
    try:
        assert pool.submit(allocate, (200 * 2**20,), key=str(big), timeout_s=60, sized_by=str(big)).result(
            timeout=60) == 200 * 2**20
        with pytest.raises(ReadMemoryError, match=r"more than the reader's 64 MB of memory \(plus the file's size\) "
                           r"while reading \(allowed 64 MB\)"):
            pool.submit(allocate, (200 * 2**20,), key="small", timeout_s=60).result(timeout=60)
        with pytest.raises(ReadMemoryError, match=r"allowed 364 MB"):
            pool.submit(allocate, (400 * 2**20,), key="bigger", timeout_s=60, sized_by=str(big)).result(timeout=60)
        assert pool.submit(int, ("3",), key="after", timeout_s=30, sized_by=str(tmp_path / "missing")).result() == 3
    finally:
        pool.close()


def test_a_reader_that_dies_is_an_error_and_replaced(pool):
    with pytest.raises(SpectrumReadError, match=r"crash\.fits: the reader process died .*SIGABRT"):
        pool.submit(os.abort, (), key="crash.fits", timeout_s=30).result(timeout=30)
    assert pool.submit(int, ("5",), key="x", timeout_s=30).result() == 5
    # killed from outside while idle: the next read starts a fresh child instead of failing
    [pid] = pool.child_pids()
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: gone(pid))
    assert pool.submit(os.getpid, (), key="y", timeout_s=30).result() != pid


def test_spectra_and_read_errors_come_back_as_in_process(pool):
    real = REPO / "tests" / "data" / "real"
    examples = [real / n for n in ("spec-0907-52373-0419.fits", "spec-55862-B6212_sp06-006.fits",
                                   "spec-57287-KP193637N444141V03_sp10-161.fits.gz",
                                   "coadd-4-80613-thru20210324.fits")]  # the last holds several targets: an error
    for path in examples:
        try:
            want = read_spectrum(path)
        except SpectrumReadError as exc:
            with pytest.raises(type(exc), match="."):
                pool.submit(read_candidate_file, (str(path),), key=str(path), timeout_s=60).result()
            continue
        got = pool.submit(read_candidate_file, (str(path),), key=str(path), timeout_s=60).result()
        np.testing.assert_array_equal(got.flux, want.flux)
        np.testing.assert_array_equal(got.mask, want.mask)
        assert got.meta == want.meta
    with pytest.raises(SpectrumReadError, match="missing.fits") as err:
        pool.submit(read_candidate_file, ("missing.fits",), key="missing.fits", timeout_s=60).result()
    assert type(err.value) is SpectrumReadError
    with pytest.raises(SpectrumReadError, match="folder|directory"):
        pool.submit(read_candidate_file, (str(real),), key=str(real), timeout_s=60).result()


def test_closing_the_pool_kills_every_reader_even_in_a_read(fifo):
    pool = ReaderPool(processes=2, memory_mb=512)
    blocked = pool.submit(Path.read_bytes, (fifo,), key=str(fifo), timeout_s=None)
    assert wait_until(lambda: len(pool.child_pids()) == 1)
    pool.submit(os.getpid, (), key="a", timeout_s=30).result()  # on the other child, which stays idle
    pids = pool.child_pids()
    assert len(pids) == 2
    pool.close()
    assert all(gone(pid) for pid in pids)
    with pytest.raises(SpectrumReadError, match="shutting down"):
        blocked.result(timeout=10)


KILLED_WORKER = """
import os, sys
from pathlib import Path
from spec_vetting.io.read_pool import ReaderPool
pool = ReaderPool(processes=2)
pool.submit(Path.read_bytes, (Path(sys.argv[1]),), key="fifo", timeout_s=None)
while len(pool.child_pids()) < 1:
    pass
pool.submit(os.getpid, (), key="idle", timeout_s=60).result()  # the other child, idle from now on
print(*pool.child_pids(), flush=True)
sys.stdin.read()
"""


def test_a_worker_killed_with_sigkill_leaves_no_reader_behind(fifo):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(fifo)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        pids = [int(p) for p in worker.stdout.readline().split()]
        assert len(pids) == 2 and not any(gone(p) for p in pids)
    finally:
        worker.kill()
        worker.wait()
    # one child idle (its stdin ends), one blocked in the kernel (the parent-death signal kills it)
    assert wait_until(lambda: all(gone(p) for p in pids)), [p for p in pids if not gone(p)]


def test_a_shard_reads_files_in_readers_and_the_rest_in_process(monkeypatch):
    import asyncio
    import dataclasses

    from spec_vetting.io import read_pool
    from spec_vetting.io.candidate import InlineSpectrum
    from spec_vetting.pipeline.shard import ShardSpec, read_candidate
    from spec_vetting.types import Sampling

    path = REPO / "tests" / "data" / "real" / "spec-55862-B6212_sp06-006.fits"
    in_file = Candidate(candidate_id="f", path=str(path))
    inline = Candidate(candidate_id="i", inline=InlineSpectrum(wavelength=np.linspace(4000.0, 5000.0, 50),
                                                               flux=np.ones(50)))
    spec = ShardSpec(root="unused", run_id="r", run_date="2026-01-01", shard_id="s", items=[], engine_name="rules",
                     engine_options={}, sampling=Sampling(), read_processes=1, read_memory_mb=512)
    try:
        got = asyncio.run(read_candidate(in_file, spec))
        pool = read_pool.process_pool(1, 512)
        [reader] = pool.child_pids()
        np.testing.assert_array_equal(got.flux, read_spectrum(path).flux)
        assert asyncio.run(read_candidate(inline, spec)).flux.tolist() == [1.0] * 50  # converted here
        assert len(pool.start_times) == 1 and pool.child_pids() == [reader]  # the reader kept, nothing else started

        def no_pool(*a, **k):
            raise AssertionError("read_processes 0 must read in the worker")

        monkeypatch.setattr("spec_vetting.pipeline.shard.process_pool", no_pool)
        in_worker = asyncio.run(read_candidate(in_file, dataclasses.replace(spec, read_processes=0)))
        np.testing.assert_array_equal(in_worker.flux, got.flux)
    finally:
        read_pool.close_process_pools()
    assert gone(reader)


def test_a_reader_that_cannot_start_is_an_error_naming_why(monkeypatch):
    # an interpreter that cannot find its standard library dies before it runs a line
    monkeypatch.setattr("spec_vetting.io.read_pool._child_env", lambda: {"PYTHONHOME": "/nonexistent"})
    pool = ReaderPool(processes=1)
    try:
        with pytest.raises(SpectrumReadError, match=r"a\.fits: not read: the reader process did not start: it ended "
                                                    r"at start-up \(exit status 1"):
            pool.submit(os.getpid, (), key="a.fits", timeout_s=30).result(timeout=60)
    finally:
        pool.close()


def test_readers_work_under_an_address_space_limit_the_site_set(tmp_path):
    # a batch system's `ulimit -v` is a hard limit nobody may raise: each read's bound stays inside it
    code = ("from spec_vetting.io.read_pool import ReaderPool\n"
            "p = ReaderPool(1, 64)\n"
            "print(p.submit(int, ('9',), key='k', timeout_s=30, sized_by=__file__).result())\n"
            "p.close()\n")
    script = tmp_path / "under_ulimit.py"
    script.write_text(code)
    r = subprocess.run(["bash", "-c", f"ulimit -v 4000000 && exec {sys.executable} {script}"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and r.stdout.strip() == "9", r.stderr[-2000:]
