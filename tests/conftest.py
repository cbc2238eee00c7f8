"""Shared test fixtures.

Real survey files live in ../shared/data/real (beside the clone in CI). A user's clone has no ../shared: tests
that need it skip with the reason, unless SPEC_VETTING_REQUIRE_SHARED=1 (set by .ci/run), which makes the skip a
failure. The same holds for the real vLLM server of the ``real_server`` tests (its virtualenv, .venv-vllm, is
built by ``make vllm-venv``; ``make test`` builds it).
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


def _skip_or_fail(msg: str) -> None:
    if os.environ.get("SPEC_VETTING_REQUIRE_SHARED") == "1":
        pytest.fail(msg + "; SPEC_VETTING_REQUIRE_SHARED=1 makes this a failure")
    pytest.skip(msg)


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        _skip_or_fail(f"{what} not found at {path} (it ships beside the repository in CI, not in a user's clone)")
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


@pytest.fixture(scope="session")
def vllm_server(request, tmp_path_factory):
    """One real vLLM server (CPU build) serving the trained tiny Qwen2.5-VL, for the whole session.

    Skips (fails under SPEC_VETTING_REQUIRE_SHARED=1) without .venv-vllm, naming the command that builds it.
    """
    from vllm_server import VLLMServer, venv_problem

    problem = venv_problem()
    if problem:
        _skip_or_fail(problem)
    pytest.importorskip("transformers")
    import tiny_qwen

    with tiny_qwen.torch_threads(1):
        model = tiny_qwen._trained_model_dir(tiny_qwen._tiny_model_dir(request, tmp_path_factory), request,
                                             tmp_path_factory)
    server = VLLMServer(model, tmp_path_factory.mktemp("vllm") / "server.log")
    server.start()
    try:
        server.wait_healthy()
    except RuntimeError as exc:
        server.stop()
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used the vLLM server shows the tail of the server's log."""
    outcome = yield
    report = outcome.get_result()
    server = getattr(item, "funcargs", {}).get("vllm_server")
    if report.failed and server is not None:
        report.sections.append(("vLLM server log", server.log_tail()))


@pytest.fixture(scope="session")
def baseline():
    """The plain pyplot routine (benchmarks/render/baseline.py): identical to the upstream plotting routine on the
    365 shared references, and the renderers' oracle for generated views."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_baseline", REPO / "benchmarks" / "render" / "baseline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render_baseline
