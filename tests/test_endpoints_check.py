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
