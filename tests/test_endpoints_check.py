"""`spec-vet endpoints check` against local OpenAI-compatible test servers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fake_server import FakeOpenAIServer, Fault, dead_endpoint

from spec_vetting.cli import main


@pytest.mark.slow
def test_check_reports_one_line_per_endpoint_and_what_is_wrong():
    with FakeOpenAIServer() as good, FakeOpenAIServer() as no_images, FakeOpenAIServer() as unhealthy:
        no_images.always = Fault.status(400, "Invalid request: this model does not support image input")
        unhealthy.healthy = False
        dead = dead_endpoint()
        urls = [good.base_url, no_images.base_url, unhealthy.base_url, dead]
        res = CliRunner().invoke(main, ["endpoints", "check", *urls, "--timeout", "5"])
        chats = good.chat_requests
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1, res.output
    assert len(lines) == 4
    assert lines[0].startswith("OK ") and urls[0] in lines[0] and "images accepted" in lines[0]
    assert "2 turn(s)" in lines[0]  # the smoke inspection zoomed once and answered
    assert lines[1].startswith("FAIL") and "refused the picture" in lines[1]
    assert lines[2].startswith("FAIL") and "health" in lines[2]
    assert lines[3].startswith("FAIL") and dead in lines[3]
    # the smoke inspection sent a picture and no tools field
    assert chats and all("tools" not in c.body for c in chats)


def test_check_json_and_wrong_model():
    with FakeOpenAIServer() as srv:
        res = CliRunner().invoke(main, ["endpoints", "check", srv.base_url, "--model", "no-such-model", "--json",
                                        "--timeout", "5"])
    assert res.exit_code == 1
    report = json.loads(res.output.strip().splitlines()[0])
    assert report["ok"] is False and "not served here" in report["problem"]


# ---- the chat template and the sampling, checked per endpoint ------------------------------------------------------

from pathlib import Path  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SHIPPED = (DEPLOY / "chat_template.jinja").read_text()
STOCK = (DEPLOY / "chat_template_stock.jinja").read_text()


def test_check_tells_an_exact_template_from_a_stock_one_with_the_difference_shown():
    with FakeOpenAIServer(chat_template=SHIPPED) as exact, FakeOpenAIServer(chat_template=STOCK) as stock, \
            FakeOpenAIServer() as unknown:
        res = CliRunner().invoke(main, ["endpoints", "check", exact.base_url, stock.base_url, unknown.base_url,
                                        "--json", "--timeout", "5"])
        stock_chats = stock.chat_requests
    reports = [json.loads(line) for line in res.output.strip().splitlines()]
    assert res.exit_code == 1, res.output
    assert reports[0]["ok"] and reports[0]["template_exact"] is True
    # the sampling it will apply: training's, pinned on every request
    assert reports[0]["sampling"] == {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                                      "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
    bad = reports[1]
    assert not bad["ok"] and bad["template_exact"] is False and not stock_chats  # refused before any chat
    # the difference shown: the stock template's newline after the assistant's <|im_end|>, one per assistant turn
    assert "one extra token per assistant turn" in bad["problem"]
    served, trained = bad["problem"].split("; served ", 1)[1].split(" where training had ", 1)
    assert "\\n" in served and "\\n" not in trained.split(".")[0]  # (the fake's tokens are characters)
    assert "--chat-template deploy/chat_template.jinja" in bad["problem"]
    # a server without /tokenize cannot be checked: said, not failed
    assert reports[2]["ok"] and reports[2]["template_exact"] is None
    assert "/tokenize does not exist" in reports[2]["template_detail"]


def test_check_names_a_sampling_field_the_server_refuses():
    with FakeOpenAIServer(refuse_sampling={"repetition_penalty"}) as srv:
        res = CliRunner().invoke(main, ["endpoints", "check", srv.base_url, "--json", "--timeout", "5"])
    report = json.loads(res.output.strip().splitlines()[0])
    assert res.exit_code == 1 and not report["ok"]
    assert "refuses the pinned sampling field(s) repetition_penalty" in report["problem"]
    # a refusal met during the smoke inspection (the probe passed) is named too
    with FakeOpenAIServer() as srv:
        srv.always = Fault.status(400, "Unrecognized request argument supplied: top_k")
        res = CliRunner().invoke(main, ["endpoints", "check", srv.base_url, "--json", "--timeout", "5"])
    report = json.loads(res.output.strip().splitlines()[0])
    assert res.exit_code == 1 and "refused the pinned sampling field(s) top_k" in report["problem"]


def test_run_refuses_an_inexact_template_unless_allowed(tmp_path, monkeypatch, no_job_env):
    from spec_vetting.synthetic.examples import write_examples

    monkeypatch.chdir(tmp_path)
    write_examples(tmp_path / "ex", n=1, seed=1)
    with FakeOpenAIServer(chat_template=STOCK) as stock:
        args = ["run", "--candidates", str(tmp_path / "ex" / "candidates.csv"), "--task", "cv", "--endpoint",
                stock.base_url, "--out", "cat", "--threads", "--workers", "1", "--no-dashboard"]
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 2, refused.output
        assert stock.base_url in refused.output and "--allow-inexact-template" in refused.output
        assert not stock.chat_requests
        allowed = CliRunner().invoke(main, [*args, "--allow-inexact-template"])
    assert allowed.exit_code == 0, allowed.output
    manifest = json.loads(next((tmp_path / "cat" / "_runs").glob("*/manifest.json")).read_text())
    assert manifest["job"]["engine"]["allow_inexact_template"] is True
    (check,) = manifest["engine"]["model_info"]["fidelity"].values()
    assert check["rendering"]["exact"] is False
    assert check["rendering"]["served_tokens"] > check["rendering"]["trained_tokens"]
    assert check["sampling"]["accepted"] is True


def test_run_refuses_a_server_that_refuses_a_sampling_field_unless_allowed(tmp_path, monkeypatch, no_job_env):
    """Refused at the start (nothing inspected); allowed, the field is left out of that endpoint's requests only."""
    from spec_vetting.catalog import read_verdicts
    from spec_vetting.synthetic.examples import write_examples

    monkeypatch.chdir(tmp_path)
    write_examples(tmp_path / "ex", n=1, seed=1)
    with FakeOpenAIServer(refuse_sampling={"top_k", "min_p"}, chat_template=SHIPPED) as srv:
        args = ["run", "--candidates", str(tmp_path / "ex" / "candidates.csv"), "--task", "cv", "--endpoint",
                srv.base_url, "--out", "cat", "--threads", "--workers", "1", "--no-dashboard"]
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 2, refused.output
        assert "min_p, top_k" in refused.output or "top_k, min_p" in refused.output
        assert not srv.chat_requests
        allowed = CliRunner().invoke(main, [*args, "--allow-inexact-template"])
        bodies = [r.body for r in srv.chat_requests]
        url = srv.base_url
    assert allowed.exit_code == 0, allowed.output
    assert bodies and all("top_k" not in b and "min_p" not in b and b["repetition_penalty"] == 1.0 for b in bodies)
    assert set(read_verdicts(tmp_path / "cat").column("verdict").to_pylist()) <= {"YES", "NO"}
    manifest = json.loads(next((tmp_path / "cat" / "_runs").glob("*/manifest.json")).read_text())
    assert sorted(manifest["job"]["engine"]["options"]["omit_sampling"][url]) == ["min_p", "top_k"]
