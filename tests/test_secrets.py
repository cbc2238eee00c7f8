"""No piece of the API key leaks (issue 24, item 3): a canary key, a server whose error bodies echo the
Authorization header at offsets on both sides of the 200-character cut, and every place a run writes or prints
searched for any 8-character piece of the key.

The in-process sweep covers every offset across the cut for each status; the `spec-vet run` subprocess covers the
catalog, the manifest, run.log, stderr at DEBUG, the review page and every export format.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_server import FakeOpenAIServer, Fault
from test_pipeline_cli import _env, _run

from spec_vetting.engines.http.engine import SERVER_TEXT_CHARS, OpenAIEngine
from spec_vetting.errors import EngineError

KEY = "sk-CANARY-7f3e9a1b4c2d"
PIECES = {KEY[i:i + 8] for i in range(len(KEY) - 7)}
ENV_NAME = "SPEC_VETTING_TEST_CANARY_KEY"
PREFIX = "Authorization: Bearer "
#: filler lengths that put the key across the cut at every character, plus wholly before and after it
CUT_OFFSETS = list(range(SERVER_TEXT_CHARS - len(PREFIX) - len(KEY) + 1, SERVER_TEXT_CHARS - len(PREFIX) + 1))


def _leaks(text: str) -> set[str]:
    return {p for p in PIECES if p in text}


def test_the_key_is_redacted_before_the_cut_at_every_offset(monkeypatch, caplog):
    monkeypatch.setenv(ENV_NAME, KEY)
    caplog.set_level(logging.DEBUG)

    async def sweep(srv) -> list[str]:
        eng = OpenAIEngine(srv.base_url, model="m", api_key_env=ENV_NAME, max_retries=0, health_interval_s=0)
        await eng.start()
        out = []
        try:
            for code in (401, 403, 500, 200):  # 200: a body that is not JSON
                for offset in [0, 50, *CUT_OFFSETS, 260]:
                    srv.push_faults(Fault.echo_auth(code, offset))
                    with pytest.raises(EngineError) as info:
                        await eng._post_with_retries(eng.endpoints[0], b'{"messages": []}', eng._auth_headers(),
                                                     what="the canary")
                    out.append(str(info.value))
        finally:
            await eng.close()
        return out

    with FakeOpenAIServer() as srv:
        messages = asyncio.run(sweep(srv))
        assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in srv.chat_requests)
    assert len(messages) == 4 * (len(CUT_OFFSETS) + 3)
    assert all("***" in m or "x" * 30 in m for m in messages)
    for m in messages:
        assert not _leaks(m), m
    assert not _leaks(caplog.text)


def _dump(path: Path) -> str:
    """What a file holds as text: Parquet decoded (its pages are compressed), anything else as bytes."""
    if path.suffix == ".parquet":
        try:
            return json.dumps(pq.read_table(path).to_pylist(), default=str)
        except Exception:
            pass
    return path.read_bytes().decode("latin-1")


@pytest.mark.slow
def test_no_piece_of_the_key_reaches_any_output(tmp_path):
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import write_spectrum

    spectra = tmp_path / "spectra"
    for i, kind in enumerate(["cv", "g_star", "wd_da", "m_giant"]):
        write_spectrum(make_spectrum(kind, seed=40 + i), spectra / f"s{i}.fits", "lamost-lrs-image")
    for i in range(4):
        shutil.copy(spectra / f"s{i}.fits", spectra / f"t{i}.fits")
    env = _env(tmp_path, SPEC_VETTING_API_KEY=KEY, SPEC_VETTING_LOG="DEBUG")
    root = tmp_path / "cat"
    tasks = ["--task", "cv", "--task", "wd", "--task", "carbon", "--task", "ss", "--task", "gm"]  # 40 pairs
    faults = [Fault.echo_auth(code, offset) for code in (401, 403, 500, 200, 502)
              for offset in [50, *CUT_OFFSETS[::3], 260]]
    outputs = []
    with FakeOpenAIServer() as srv:
        srv.push_faults(*faults, Fault.drop(), Fault.drop())
        for _ in range(3):  # a 502 takes its endpoint out for a while: pairs then end without a request
            r = _run(["run", "--candidates", spectra, *tasks, "--endpoint", srv.base_url, "--out", root, "--fresh",
                      "--threads", "--workers", "1", "--no-dashboard", "--max-inflight-per-endpoint", "1",
                      "--engine-option", "max_retries=0", "--engine-option", "backoff_initial_s=0.01"], env,
                     timeout=300)
            assert r.returncode == 0, r.stderr
            outputs += [r.stdout, r.stderr]
            if not srv.faults:
                break
        assert not srv.faults, f"{len(srv.faults)} faults were never served"
    rows = [x for f in root.glob("verdicts/*/*.parquet") for x in pq.read_table(f).to_pylist()]
    kinds = {x["error_kind"] for x in rows}
    assert {"http_401", "http_403", "bad_reply"} <= kinds, kinds
    assert any("***" in (x["error_message"] or "") for x in rows)
    assert any("DEBUG" in o for o in outputs)

    r = _run(["report", root, "-o", tmp_path / "page", "--images", "none"], env)
    assert r.returncode == 0, r.stderr
    outputs += [r.stdout, r.stderr]
    r = _run(["review-queue", root], env)
    assert r.returncode == 0, r.stderr
    outputs += [r.stdout, r.stderr]
    exports = tmp_path / "exports"
    exports.mkdir()
    for fmt, suffix in [("fits", "fits"), ("votable", "vot"), ("ecsv", "ecsv"), ("csv", "csv"),
                        ("parquet", "parquet")]:
        r = _run(["catalog", "export", root, "--format", fmt, "-o", exports / f"all.{suffix}"], env)
        assert r.returncode == 0, r.stderr
        outputs += [r.stdout, r.stderr]

    files = [p for d in (root, tmp_path / "page", exports) for p in d.rglob("*") if p.is_file()]
    assert any(p.name == "run.log" for p in files) and any(p.name == "manifest.json" for p in files)
    leaked = {str(p): _leaks(_dump(p)) for p in files}
    leaked.update({f"output {k}": _leaks(o) for k, o in enumerate(outputs)})
    assert not {k: v for k, v in leaked.items() if v}


@pytest.mark.parametrize("content, looks_like", [
    (b"SHELL=/bin/bash\x00SPEC_VETTING_API_KEY=" + KEY.encode() + b"\x00", "unknown binary"),
    (b"API_KEY=" + KEY.encode() + b"\nHOME=/root\n", "a text file"),
    (b"<html><body>" + KEY.encode() + b"</body></html>", "HTML"),
    (b"\x1f\x8b\x08\x00" + KEY.encode(), "gzip"),
    (b"", "empty"),
])
def test_a_file_that_is_not_fits_is_described_not_quoted(tmp_path, content, looks_like):
    """The reader's message says what the file looks like; none of its bytes (here a key) reach the message."""
    from spec_vetting.errors import SpectrumReadError
    from spec_vetting.io.fits_open import open_fits

    path = tmp_path / "spectrum.fits"
    path.write_bytes(content)
    with pytest.raises(SpectrumReadError) as info:
        open_fits(path)
    message = str(info.value)
    assert looks_like in message, message
    assert not _leaks(message) and "SHELL" not in message and "API_KEY" not in message, message


@pytest.mark.slow
def test_a_run_over_a_non_fits_file_records_no_byte_of_it(tmp_path):
    env = _env(tmp_path)
    secret = tmp_path / "environ.fits"
    secret.write_bytes(b"SHELL=/bin/bash\x00KEY=" + KEY.encode() + b"\x00")
    cands = tmp_path / "list.csv"
    cands.write_text(f"candidate_id,path\nc1,{secret}\n")
    r = _run(["run", "--candidates", cands, "--task", "cv", "--out", tmp_path / "cat", "--threads", "--workers", "1",
              "--no-dashboard"], env)
    assert r.returncode == 0, r.stderr
    [row] = [x for f in (tmp_path / "cat").glob("verdicts/*/*.parquet") for x in pq.read_table(f).to_pylist()]
    assert row["verdict"] == "ERROR" and "unknown binary" in row["error_message"], row
    assert "SHELL" not in row["error_message"] and not _leaks(row["error_message"])

