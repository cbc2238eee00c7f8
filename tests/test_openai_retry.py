"""Retry policy: Retry-After parsing (a table of bad headers), backoff, which statuses and errors are retried."""

from __future__ import annotations

import email.utils
import random

import httpx
import pytest

from spec_vetting.engines.http.retry import (
    MAX_BACKOFF_S,
    MAX_RETRY_AFTER_S,
    backoff_delay,
    is_retryable_exception,
    parse_retry_after,
    should_retry_status,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0"}, 0.0),
        ({"Retry-After": " 1.5 "}, 1.5),
        ({"Retry-After": "100000"}, MAX_RETRY_AFTER_S),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "junk", "Retry-After": "3"}, 3.0),
        ({"retry-after-ms": "-5", "Retry-After": "3"}, 3.0),
        ({"Retry-After": email.utils.formatdate(NOW + 10, usegmt=True)}, 10.0),
        ({"Retry-After": email.utils.formatdate(NOW - 10, usegmt=True)}, 0.0),
        # bad headers: ignored
        ({"Retry-After": "-1"}, None),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": ""}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "Mon, 99 Foo 2024 25:61:61"}, None),
        ({"Retry-After": "2024-01-01T00:00:00Z"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers, expected):
    got = parse_retry_after(headers, now=NOW)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


@pytest.mark.parametrize("status, retry", [(200, False), (400, False), (401, False), (404, False), (408, True),
                                           (409, True), (422, False), (429, True), (500, True), (502, True),
                                           (503, True), (504, True), (599, True)])
def test_should_retry_status(status, retry):
    assert should_retry_status(status) is retry


def test_retryable_exceptions():
    req = httpx.Request("POST", "http://x")
    assert is_retryable_exception(httpx.ConnectError("refused", request=req))
    assert is_retryable_exception(httpx.ReadTimeout("slow", request=req))
    assert is_retryable_exception(httpx.RemoteProtocolError("dropped", request=req))
    assert not is_retryable_exception(ValueError("x"))


def test_backoff_grows_is_capped_and_jittered():
    rng = random.Random(0)
    delays = [backoff_delay(a, rng=rng) for a in range(10)]
    assert all(0 < d <= MAX_BACKOFF_S for d in delays)
    assert delays[9] >= MAX_BACKOFF_S * 0.75
    assert backoff_delay(0, rng=random.Random(1)) != backoff_delay(0, rng=random.Random(2))
    assert backoff_delay(3, retry_after=1.25) == 1.25
    assert backoff_delay(0, initial_s=0.01, max_s=0.01) <= 0.01
