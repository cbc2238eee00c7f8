"""The defaults bound a hung endpoint or file to minutes; the in-flight cap is never multiplied."""

from __future__ import annotations

import asyncio
import time

import pytest

from spec_vetting.engines.http.engine import DEFAULT_TIMEOUT_RETRIES, DEFAULT_TIMEOUT_S
from spec_vetting.engines.http.routing import Router
from spec_vetting.errors import ReadTimeoutError
from spec_vetting.pipeline.cluster import plan_workers
from spec_vetting.pipeline.config import BudgetConfig, ClusterConfig, EngineConfig, JobConfig
from spec_vetting.pipeline.shard import read_with_timeout


def test_defaults_bound_a_hung_inspection_to_minutes():
    b = BudgetConfig()
    attempts = 1 + b.max_endpoint_retries
    tries = 1 + DEFAULT_TIMEOUT_RETRIES
    assert EngineConfig().timeout_s == DEFAULT_TIMEOUT_S == 120.0
    # timeouts x tries x attempts, and the wall-time budget over all of it
    assert DEFAULT_TIMEOUT_S * tries * attempts <= 12 * 60
    assert b.time_budget_s is not None and b.time_budget_s <= 10 * 60
    assert b.read_timeout_s <= 120
    assert JobConfig(candidates=["x"], out="o").max_error_rate is None


def test_a_stuck_read_times_out_and_leaves_the_loop_free():
    async def main():
        t0 = time.monotonic()
        with pytest.raises(ReadTimeoutError, match="more than 0.2 s"):
            await read_with_timeout(lambda: time.sleep(5), 0.2, what="/mnt/stale/file.fits")
        assert time.monotonic() - t0 < 2
        assert await read_with_timeout(lambda: 42, 1.0, what="x") == 42
        with pytest.raises(ZeroDivisionError):
            await read_with_timeout(lambda: 1 / 0, 1.0, what="x")

    asyncio.run(main())


def test_rows_on_a_file_whose_read_is_stuck_do_not_start_more_reads():
    """Hundreds of rows naming one file that blocks (issue 34, item 6): one read, one timeout; the other rows fail at
    once while it runs, and the file is read again once it has ended."""
    import threading

    release = threading.Event()
    calls = []

    def stuck():
        calls.append(1)
        release.wait(10)
        return "late"

    async def main():
        path = "/mnt/stale/many-rows.fits"
        t0 = time.monotonic()
        with pytest.raises(ReadTimeoutError, match="more than 0.2 s"):
            await read_with_timeout(stuck, 0.2, what=path)
        for _ in range(300):
            with pytest.raises(ReadTimeoutError, match="earlier read of this file"):
                await read_with_timeout(stuck, 0.2, what=path)
        assert time.monotonic() - t0 < 2 and len(calls) == 1
        assert await read_with_timeout(lambda: 1, 0.2, what="/other.fits") == 1  # other files are read as before
        release.set()
        for _ in range(100):  # the abandoned read ends
            if threading.active_count() == 1:
                break
            await asyncio.sleep(0.02)
        assert await read_with_timeout(lambda: 2, 1.0, what=path) == 2

    asyncio.run(main())


def test_hung_endpoint_is_not_revived_by_its_health_check_during_the_cooldown():
    r = Router(["http://a/v1"], max_inflight_per_endpoint=1, hung_cooldown_s=60)
    r.mark_hung("http://a/v1", "no answer within 1 s")
    assert r.healthy == []
    st = r.states["http://a/v1"]
    assert 55 < st.hung_until - time.monotonic() <= 60

    class Ok:
        status_code = 200

    class Client:
        async def get(self, *a, **k):
            return Ok()

    asyncio.run(r.check_all(Client()))
    assert r.healthy == []  # /health answers, but chat requests hang: stays out
    # the other requests in flight when it hung time out within the cool-down: the same episode, counted once
    # (three in flight used to make it 60 -> 120 -> 240 s at once)
    r.mark_hung("http://a/v1", "in flight too")
    r.mark_hung("http://a/v1", "in flight too")
    assert st.hung_count == 1 and 55 < st.hung_until - time.monotonic() <= 60
    st.hung_until = time.monotonic() - 1  # the cool-down ended; used again, it hangs again
    r.mark_hung("http://a/v1", "again")
    assert 110 < st.hung_until - time.monotonic() <= 120  # doubles
    st.hung_until = 0
    asyncio.run(r.check_all(Client()))
    assert r.healthy == ["http://a/v1"]


@pytest.mark.parametrize("workers, shards, cap, expected, note", [
    (4, 10, 2, 2, "--workers 4 capped to 2: max_inflight_per_endpoint 2"),
    (64, 1, None, 1, "--workers 64 capped to 1: only 1 shard(s) to run"),
    (3, 10, 8, 3, None),
    (None, 1, None, 1, None),
])
def test_workers_are_capped(workers, shards, cap, expected, note):
    n, got = plan_workers(ClusterConfig(workers=workers), shards, cap)
    assert n == expected
    assert (got is None) if note is None else got.startswith(note)


def test_a_list_picture_that_blocks_is_cut_at_the_read_timeout_and_the_shard_goes_on():
    """A SpecVI-Bench row's own picture (a parquet cell) is read under the read timeout as a spectrum is: one row
    whose picture read blocks becomes an ERROR row ``read_timeout``; the other row of the shard is inspected."""
    import threading
    from dataclasses import dataclass

    from spec_vetting.engines import create_engine
    from spec_vetting.pipeline.plan import WorkItem
    from spec_vetting.pipeline.shard import ShardSpec, inspect_items
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.types import Sampling

    release = threading.Event()
    spectrum = make_spectrum("cv", seed=1, redshift=0.0)

    @dataclass
    class Row:
        candidate_id: str
        path: str

        def load_spectrum(self):
            return spectrum

        def load_initial_image(self):
            if self.candidate_id == "stuck":
                release.wait(10)  # a cell on a stale mount
            return None

    items = [WorkItem(Row("stuck", "/mnt/stale/test_cv.parquet"), "cv"),
             WorkItem(Row("fine", "/data/test_cv.parquet"), "cv")]
    spec = ShardSpec(root="unused", run_id="r", run_date="2026-01-01", shard_id="s0", items=items,
                     engine_name="rules", engine_options={}, sampling=Sampling(), read_timeout_s=0.3)

    async def main():
        engine = create_engine("rules")
        await engine.start()
        try:
            return await asyncio.wait_for(inspect_items(spec, engine), 30)
        finally:
            await engine.close()

    t0 = time.monotonic()
    try:
        results = asyncio.run(main())
    finally:
        release.set()
    assert time.monotonic() - t0 < 8
    by_id = {r.candidate_id: r for _, r, _, _ in results}
    assert by_id["stuck"].verdict == "ERROR" and by_id["stuck"].error_kind == "read_timeout", by_id["stuck"]
    assert "/mnt/stale/test_cv.parquet" in by_id["stuck"].error_message
    assert by_id["fine"].verdict != "ERROR" and by_id["fine"].turns, by_id["fine"]
