"""`spec-vet endpoints check`: are the model servers ready for a run?"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import click

from ..engines.http import DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT_S
from .run_option import InputError


@click.group()
def endpoints():
    """Model endpoints (SGLang, vLLM or any OpenAI-compatible server)."""


@endpoints.command("check")
@click.argument("urls", nargs=-1, required=True)
@click.option("--model", help="Served model name to expect (default: the first id of GET /v1/models).")
@click.option("--timeout", "timeout_s", type=float, default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds allowed per request and for the smoke inspection.")
@click.option("--api-key-env", default=None, help="Environment variable holding the API key "
              f"(default {DEFAULT_API_KEY_ENV}).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per endpoint.")
def check(urls, model, timeout_s, api_key_env, as_json):
    """Check each endpoint: /health, model identity, image support and one short smoke inspection.

    Prints one line per endpoint with what is wrong, if anything; exits 1 when any endpoint fails, 2 when an
    argument is not an http(s) URL (before any is asked).

    \b
    Example:
      spec-vet endpoints check http://gpu01:30000/v1 http://gpu01:30001/v1
    """
    from ..engines.http.engine import normalize_endpoint
    from ..errors import ConfigError
    from ..pipeline.endpoint_check import check_endpoints

    try:
        for url in urls:  # a typo is the caller's to fix: no server is asked anything
            normalize_endpoint(url)
    except ConfigError as exc:
        raise InputError(str(exc)) from exc
    reports = asyncio.run(check_endpoints(list(urls), model=model, timeout_s=timeout_s, api_key_env=api_key_env))
    for r in reports:
        click.echo(json.dumps(dataclasses.asdict(r)) if as_json else r.line())
    if not all(r.ok for r in reports):
        raise SystemExit(1)
