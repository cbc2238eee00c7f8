"""`spec-vet inspect` end to end: a committed real SDSS file, the real renderer, the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_server import FakeOpenAIServer, dead_endpoint

from spec_vetting.cli import main

SDSS = Path(__file__).parent / "data" / "real" / "spec-0907-52373-0419.fits"

pytestmark = pytest.mark.skipif(not SDSS.exists(), reason="committed test file missing")


@pytest.mark.slow
def test_inspect_json_against_server(tmp_path):
    with FakeOpenAIServer() as srv:
        res = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", "--endpoint", srv.base_url,
                                        "--json", "--save-images", str(tmp_path / "img"), "--redshift", "0"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert out["verdict"] == "YES" and out["status"] == "well_formed"
        assert out["engine"] == "openai" and out["model"] == "fake-spec-o3" and out["p_yes"] is None
        assert len(out["turns"]) == 2
        t0 = out["turns"][0]
        assert t0["tool_call"]["name"] == "spectral_visualization_tool"
        assert t0["tool_response_text"].startswith("Generated spectral visualization focused on wavelength range "
                                                   "(6500, 6600) Å")
        assert out["renderer_version"] and out["prompt_version"].startswith("builtin-")
        assert Path(out["full_view_file"]).read_bytes().startswith(b"\x89PNG")
        assert t0["turn"] == 0 and Path(t0["image_file"]).name == "turn00_zoom_6500-6600.png"
        assert all("tools" not in q.body for q in srv.chat_requests)


@pytest.mark.slow
def test_inspect_readable_output(monkeypatch):
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-cli-789")
    with FakeOpenAIServer(p_yes=0.75) as srv:
        res = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cc", "--endpoint", srv.base_url,
                                        "--logprobs", "--api-key-env", "MY_GATEWAY_KEY"])
        assert res.exit_code == 0, res.output
        assert "task carbon (Carbon Star (C-type))" in res.output
        assert "-- turn 0" in res.output and "zoom 6500-6600 Å" in res.output
        assert "verdict: YES (well_formed), p_yes 0.750 (logprobs)" in res.output
        assert all(q.body["logprobs"] is True for q in srv.chat_requests)
        assert all(q.headers.get("Authorization") == "Bearer sk-cli-789" for q in srv.requests)
        assert "sk-cli-789" not in res.output


def test_inspect_defaults_to_the_rules_engine_without_endpoint():
    res = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["engine"] == "rules" and out["model"] is None
    assert out["verdict"] in ("YES", "NO", "UNDECIDED") and out["status"] in ("well_formed", "none")
    assert out["turns"] and set(out["turns"][0]) >= {"assistant_text", "tool_call", "tool_response_text"}


def test_usage_errors():
    r = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "qso"])
    assert r.exit_code == 2 and "unknown task" in r.output
    r = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", "--engine", "openai"])
    assert r.exit_code == 2 and "--endpoint" in r.output
    r = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", "--engine", "local"])
    assert r.exit_code == 2 and "--model" in r.output
    for bad in (["--temperature", "-0.5"], ["--time-budget", "0"], ["--timeout", "0"]):
        r = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", *bad])
        assert r.exit_code == 2 and bad[0] in r.output


def test_unwritable_image_folder_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    r = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", "--save-images", str(blocker / "img")])
    assert r.exit_code == 2 and "--save-images" in r.output and "cannot create" in r.output


def test_missing_model_folder_is_a_usage_error_found_before_reading(tmp_path):
    bad = tmp_path / "x.fits"
    bad.write_bytes(b"not fits")  # never read: the model folder is checked first
    r = CliRunner().invoke(main, ["inspect", str(bad), "--task", "cv", "--engine", "local",
                                  "--model", str(tmp_path / "no-such-model")])
    assert r.exit_code == 2 and "no-such-model does not exist" in r.output


def test_dead_server_exits_1(tmp_path):
    r = CliRunner().invoke(main, ["inspect", str(SDSS), "--task", "cv", "--endpoint", dead_endpoint()])
    assert r.exit_code == 1 and "health check" in r.output


def test_unreadable_file_exits_2(tmp_path):
    bad = tmp_path / "x.fits"
    bad.write_bytes(b"not fits")
    r = CliRunner().invoke(main, ["inspect", str(bad), "--task", "cv", "--endpoint", "http://127.0.0.1:9/v1"])
    assert r.exit_code == 2 and str(bad) in r.output
