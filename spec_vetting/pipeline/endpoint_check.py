"""Check model endpoints before a run: health, model identity, chat template, sampling, image support, one short
smoke inspection.

The chat template is checked with the server's own tokenizer (``/tokenize``, :mod:`spec_vetting.engines.http.
fidelity`): a template that does not render training's token stream fails the check with the difference shown. The
sampling reported is what every request pins (the server's and the checkpoint's defaults cannot apply); a server
that refuses one of those fields fails the smoke inspection, and the check names the field.

Each endpoint is checked on its own (an engine of one endpoint), so one line can say exactly what is wrong where.
The smoke inspection is a real inspection of a synthetic cataclysmic-variable spectrum with a small turn and token
budget: it proves the server takes images as data URLs and answers chat completions; the verdict itself is not
judged (a random or base model may say anything).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ..engines.http import DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT_S
from ..engines.http.fidelity import pinned_sampling
from ..engines.http.wire import PINNED_SAMPLING_FIELDS
from ..errors import SpecVettingError
from ..inspect.loop import run_inspection
from ..inspect.tasks import get_task
from ..synthetic.synthetic import make_spectrum
from ..types import InspectionContext, Sampling

SMOKE_TASK = "cv"
SMOKE_MAX_TURNS = 2
SMOKE_MAX_TOKENS = 256


@dataclass
class EndpointReport:
    endpoint: str
    ok: bool
    model: str | None = None
    served_models: list[str] = field(default_factory=list)
    healthy: bool = False
    images_ok: bool | None = None  # None: not reached
    smoke_verdict: str | None = None
    smoke_turns: int = 0
    smoke_seconds: float = 0.0
    cached_tokens_reported: bool | None = None
    #: the chat template renders training's token stream: True, False (``template_detail`` says where not), None
    #: (not checkable: no /tokenize)
    template_exact: bool | None = None
    template_detail: str | None = None
    #: the sampling every request carries
    sampling: dict = field(default_factory=dict)
    problem: str | None = None

    def line(self) -> str:
        if not self.ok:
            return f"FAIL {self.endpoint}: {self.problem}"
        cache = {True: "cached tokens reported", False: "no cached-token usage (prefix cache report off?)",
                 None: "usage not reported"}[self.cached_tokens_reported]
        template = {True: "chat template exact", None: f"chat template NOT CHECKED ({self.template_detail})",
                    False: "chat template inexact"}[self.template_exact]
        sampling = ", ".join(f"{k} {v:g}" for k, v in self.sampling.items())
        return (f"OK   {self.endpoint}: model {self.model}, {template}, images accepted, smoke inspection "
                f"{self.smoke_verdict} in {self.smoke_turns} turn(s), {self.smoke_seconds:.1f} s, {cache}; "
                f"sampling pinned: {sampling}")


async def check_endpoint(url: str, *, model: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                         api_key_env: str | None = None) -> EndpointReport:
    from ..engines.http.engine import OpenAIEngine

    report = EndpointReport(endpoint=url, ok=False)
    try:
        engine = OpenAIEngine([url], model=model, api_key_env=api_key_env or DEFAULT_API_KEY_ENV,
                              timeout_s=timeout_s, max_retries=1)
    except SpecVettingError as exc:
        report.problem = str(exc)
        return report
    try:
        await engine.start()
    except SpecVettingError as exc:
        report.problem = str(exc)
        return report
    try:
        report.healthy = True
        ident = engine.identity()
        report.model = ident.model
        report.served_models = list(ident.model_info.get("served_models", []))
        if model and report.served_models and model not in report.served_models:
            report.problem = f"model {model!r} is not served here (served: {', '.join(report.served_models)})"
            return report
        found = (await engine.fidelity_checks()).get(engine.endpoints[0]) or {}
        rendering, sampling = found.get("rendering"), found.get("sampling")
        if rendering is not None:
            report.template_exact, report.template_detail = rendering.exact, rendering.detail
        report.sampling = pinned_sampling()
        if sampling is not None and sampling.accepted is False:
            report.problem = (f"the server {sampling.detail}: spec-vet sends training's sampling on every request; "
                              "serve with vLLM or SGLang (or run with --allow-inexact-template)")
            return report
        if report.template_exact is False:
            report.problem = rendering.detail + " (or run with --allow-inexact-template)"
            return report
        spectrum = make_spectrum("cv", seed=0)
        ctx = InspectionContext(candidate_id="endpoint-check", task=SMOKE_TASK, run_id="endpoint-check",
                                spectrum=spectrum, redshift=spectrum.meta.redshift)
        t0 = time.monotonic()
        result = await run_inspection(ctx, get_task(SMOKE_TASK), engine,
                                      sampling=Sampling(max_tokens=SMOKE_MAX_TOKENS), max_turns=SMOKE_MAX_TURNS)
        report.smoke_seconds = time.monotonic() - t0
        report.smoke_turns = len(result.turns)
        report.smoke_verdict = result.verdict
        if result.verdict == "ERROR":
            msg = result.error_message or result.error_kind or "unknown error"
            image_words = ("image", "multimodal", "vision", "image_url")
            refused = [f for f in PINNED_SAMPLING_FIELDS if f in msg]
            if refused:
                report.problem = (f"the server refused the pinned sampling field(s) {', '.join(refused)}: {msg}. "
                                  "spec-vet sends training's sampling on every request; serve with vLLM or SGLang")
            elif any(w in msg.lower() for w in image_words):
                report.images_ok = False
                report.problem = f"the server refused the picture (is it a vision model?): {msg}"
            else:
                report.problem = f"smoke inspection failed: {msg}"
            return report
        report.images_ok = True
        cached = [t.usage.cached_tokens for t in result.turns]
        if any(c is not None for c in cached):
            report.cached_tokens_reported = True
        elif any(t.usage.prompt_tokens is not None for t in result.turns):
            report.cached_tokens_reported = False
        report.ok = True
        return report
    finally:
        await engine.close()


async def check_endpoints(urls: list[str], **kwargs) -> list[EndpointReport]:
    return list(await asyncio.gather(*(check_endpoint(u, **kwargs) for u in urls)))
