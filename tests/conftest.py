"""Shared test fixtures.

Real survey files live in ../shared/data/real (beside the clone in CI). A user's clone has no ../shared: tests
that need it skip with the reason, unless SPEC_VETTING_REQUIRE_SHARED=1 (set by .ci/run), which makes the skip a
failure.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPEC_VETTING_SHARED", REPO.parent / "shared"))
REAL = SHARED / "data" / "real"
REFERENCE = SHARED / "reference"
TEST_DATA = Path(__file__).resolve().parent / "data"


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        msg = f"{what} not found at {path} (it ships beside the repository in CI, not in a user's clone)"
        if os.environ.get("SPEC_VETTING_REQUIRE_SHARED") == "1":
            pytest.fail(msg + "; SPEC_VETTING_REQUIRE_SHARED=1 makes this a failure")
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def real_dir() -> Path:
    """../shared/data/real, or skip (fail in CI) when absent."""
    return _require(REAL, "real survey files")


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """../shared/reference, or skip (fail in CI) when absent."""
    return _require(REFERENCE, "reference renders")


@pytest.fixture(scope="session")
def manifest(real_dir) -> list[dict]:
    with open(real_dir / "MANIFEST.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def no_job_env(monkeypatch):
    """No SPEC_VETTING_JOB__* overrides from the caller's environment leak into a job built by a test."""
    for name in list(os.environ):
        if name.startswith("SPEC_VETTING_JOB__"):
            monkeypatch.delenv(name)
