"""Retry policy for model servers: named constants and three small functions, gentle on the servers.

Retry only what can succeed on a second try: timeouts, connection errors, 408/409/429 and 5xx. Back off
exponentially with jitter, capped; honour ``Retry-After`` (seconds or HTTP date) and ``retry-after-ms`` within a cap.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping

import httpx

#: retries after the first try of one request (so 1 + MAX_RETRIES tries at most)
DEFAULT_MAX_RETRIES = 3
INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
#: fraction of the delay randomised away, so many clients do not retry in lockstep
JITTER_FRACTION = 0.25
#: a Retry-After longer than this is not honoured as is (a confused server must not stall a batch for hours)
MAX_RETRY_AFTER_S = 60.0

RETRYABLE_STATUS = frozenset({408, 409, 429})


def should_retry_status(status: int) -> bool:
    """True for 408 (timeout), 409 (conflict/lock), 429 (rate limit) and every 5xx."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def is_retryable_exception(exc: BaseException) -> bool:
    """Timeouts and transport failures (refused, reset, dropped mid-response) are worth another try."""
    return isinstance(exc, httpx.TimeoutException | httpx.TransportError)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, or None when it asked nothing usable.

    Reads ``retry-after-ms`` first (OpenAI-style), then ``Retry-After`` as seconds or as an HTTP date. Negative,
    non-finite, garbage or absent values give None; values above :data:`MAX_RETRY_AFTER_S` are capped to it.
    """
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms.strip())
        except ValueError:
            ms = float("nan")
        if math.isfinite(ms) and ms >= 0:
            return min(ms / 1000.0, MAX_RETRY_AFTER_S)
    raw = lower.get("retry-after")
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        seconds = max(seconds, 0.0)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def backoff_delay(attempt: int, *, retry_after: float | None = None, initial_s: float = INITIAL_BACKOFF_S,
                  max_s: float = MAX_BACKOFF_S, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based).

    The server's Retry-After wins when given; otherwise ``initial_s * 2**attempt`` capped at ``max_s``, minus up to
    :data:`JITTER_FRACTION` of it at random.
    """
    if retry_after is not None:
        return retry_after
    base = min(initial_s * (2 ** max(attempt, 0)), max_s)
    r = (rng or random).random()
    return base * (1.0 - JITTER_FRACTION * r)
