"""The model path against a real inference server, vLLM's CPU build serving the trained tiny Qwen2.5-VL.

One server for the session (``vllm_server`` in tests/conftest.py; tests/vllm_server.py says how it is started).
The oracles are independent of the code under test: the server itself (its rendering, its positions, its prefix
cache, its logprobs) and the protocol's token layout written out by hand (tests/test_chat_template.py holds the
system turn character for character). What is checked:

- ``spec-vet endpoints check``, ``spec-vet inspect --engine openai`` and ``spec-vet run`` end to end: the served
  model reproduces the trajectory it was trained on (zoom on H-alpha, then a well-formed YES), the second turn is
  served from vLLM's prefix cache, ``p_yes`` is read from the served logprobs;
- the exact prompt: the token ids vLLM renders (``/tokenize`` takes chat messages) for the client's two-zoom
  conversation are the ids RL training built (tests/training_stream.py, written from verl's agent loop: the prompt,
  each generated turn with its own <|im_end|>, each tool turn rendered alone minus the default system turn),
  tokenized with the tiny tokenizer and each image widened to one token per 28x28 block of the picture sent;
- sampling is pinned: a checkpoint whose generation_config.json asks for repetition_penalty 1.3 and top_k 1 is
  served exactly as the same checkpoint without that file (texts and logprobs), under the deploy files' flags;
- the in-process engine gives the same next-token log-probabilities as vLLM on that conversation (within 1e-3),
  i.e. the same 3-D multimodal positions (it did not before ``mm_token_type_ids`` was passed: up to 5 nats off).
"""

from __future__ import annotations

import asyncio
import io
import json
import math
from pathlib import Path

import httpx
import pytest

pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402
from local_openai import chat_completion  # noqa: E402
from tiny_qwen import (  # noqa: E402
    TRAJ_FINAL,
    TRAJ_TURN1,
    fixed_spectrum,
    inspection_context,
    spectrum_renderer,
    torch_threads,
    write_fixed_spectrum,
)
from training_stream import GeneratedTurn, build_row_messages, trained_prompt_ids  # noqa: E402
from vllm_server import SERVED_NAME  # noqa: E402

from spec_vetting.cli import main  # noqa: E402
from spec_vetting.engines.local.engine import LocalEngine  # noqa: E402
from spec_vetting.engines.local.inputs import openai_messages  # noqa: E402
from spec_vetting.inspect.conversation import (  # noqa: E402
    assistant_message,
    build_initial_messages,
    tool_response_message,
)
from spec_vetting.inspect.loop import run_inspection  # noqa: E402
from spec_vetting.inspect.tasks import get_task  # noqa: E402
from spec_vetting.types import Sampling  # noqa: E402

# the first test waits for the server (up to SPEC_VETTING_VLLM_START_TIMEOUT, 600 s) inside its own time limit
pytestmark = [pytest.mark.real_server, pytest.mark.slow, pytest.mark.timeout(900)]

MAX_TOKENS = 120  # the trained turns are 53 and 27 tokens

# ---- a two-zoom conversation, written out the protocol's way (section 2) ----------------------------------------

TURN1 = (
    "<think>Check the H-alpha region.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"label": "Zoom on the H\u03b1 region", '
    '"wavelength_range": [6500, 6600]}}\n</tool_call>'
)
TOOL1 = ("Generated spectral visualization focused on wavelength range (6500, 6600) \u00c5 "
         "for Zoom on the H\u03b1 region.")
TURN2 = (
    "<think>And H-beta.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4800, 4920]}}\n</tool_call>'
)
TOOL2 = "Generated spectral visualization focused on wavelength range (4800, 4920) \u00c5."


def _pictures() -> tuple[bytes, bytes, bytes]:
    """The full view and the two zooms of the fixed spectrum, as the project's renderer draws them."""
    s, render = fixed_spectrum(), spectrum_renderer()
    return (render(s.wavelength, s.flux), render(s.wavelength, s.flux, (6500, 6600)),
            render(s.wavelength, s.flux, (4800, 4920)))


def two_zoom_messages() -> list[dict]:
    """The client's conversation after two zooms, as the HTTP engine sends it (its builders, its wire format)."""
    full, zoom1, zoom2 = _pictures()
    messages = [
        *build_initial_messages(get_task("cv"), full),
        assistant_message(TURN1),
        tool_response_message(TOOL1, zoom1),
        assistant_message(TURN2),
        tool_response_message(TOOL2, zoom2),
    ]
    return openai_messages(messages)


def trained_ids(tokenizer) -> list[int]:
    """The ids training built before the third turn of the two-zoom rollout (image placeholders not yet widened)."""
    row = build_row_messages("You are a helpful assistant.", "<image>\n" + get_task("cv").prompt)
    turns = [GeneratedTurn(TURN1, tool_text=TOOL1, tool_image=True),
             GeneratedTurn(TURN2, tool_text=TOOL2, tool_image=True)]
    return trained_prompt_ids(lambda s: tokenizer.encode(s, add_special_tokens=False).ids,
                              tokenizer.token_to_id("<|im_end|>"), row, turns)[-1]


def sent_pictures() -> list[bytes]:
    """The pictures as the HTTP engine puts them on the wire (the first one resized as training's fetch_image did)."""
    import base64

    urls = [p["image_url"]["url"] for m in two_zoom_messages() if isinstance(m["content"], list)
            for p in m["content"] if p.get("type") == "image_url"]
    return [base64.b64decode(u.split(",", 1)[1]) for u in urls]


def qwen_image_tokens(png: bytes, min_pixels: int, max_pixels: int, factor: int = 28) -> int:
    """Qwen2-VL's published ``smart_resize`` (qwen-vl-utils): both sides rounded to multiples of 28 within the pixel
    bounds, aspect ratio kept; one token per 28x28 block."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        width, height = img.size
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return (h // factor) * (w // factor)


# ---- the CLI against the server --------------------------------------------------------------------------------


def test_endpoints_check_accepts_the_server(vllm_server):
    res = CliRunner().invoke(main, ["endpoints", "check", vllm_server.base_url, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert report["ok"] is True and report["problem"] is None, report
    assert report["healthy"] and report["images_ok"] and report["model"] == SERVED_NAME
    assert report["served_models"] == [SERVED_NAME]
    assert report["cached_tokens_reported"] is True  # --enable-prompt-tokens-details


def test_inspect_zooms_then_answers_yes_with_cache_hits_and_p_yes(vllm_server, tmp_path):
    fits_path = write_fixed_spectrum(tmp_path / "fixed-cv.fits")
    res = CliRunner().invoke(main, ["inspect", str(fits_path), "--task", "cv", "--engine", "openai",
                                    "--endpoint", vllm_server.base_url, "--logprobs", "--json",
                                    "--max-tokens", str(MAX_TOKENS), "--timeout", "120"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["verdict"] == "YES" and out["status"] == "well_formed", out
    assert out["engine"] == "openai" and out["model"] == SERVED_NAME
    turns = out["turns"]
    assert [t["assistant_text"] for t in turns] == [TRAJ_TURN1, TRAJ_FINAL]
    assert turns[0]["tool_call"]["name"] == "spectral_visualization_tool"
    assert turns[0]["zoom_window"] == [6500.0, 6600.0]
    # the second request repeats the first prompt: vLLM serves it from its prefix cache and says so
    # (the first turn may hit too: other tests sent the same system turn to this server before)
    assert 0 < turns[1]["cached_tokens"] <= turns[1]["prompt_tokens"]
    assert turns[1]["cached_tokens"] > (turns[0]["cached_tokens"] or 0)
    assert turns[1]["prompt_tokens"] > turns[0]["prompt_tokens"]
    assert out["p_yes_source"] == "logprobs" and out["p_yes"] > 0.9

    # the in-process engine on the same spectrum: the same turns, prompt sizes and p_yes
    async def in_process():
        engine = LocalEngine(vllm_server.model_dir)
        await engine.start()
        try:
            return await run_inspection(inspection_context("local"), get_task("cv"), engine,
                                        renderer=spectrum_renderer(),
                                        sampling=Sampling(max_tokens=MAX_TOKENS, logprobs=True, top_logprobs=20))
        finally:
            await engine.close()

    with torch_threads(1):
        local = asyncio.run(in_process())
    assert [t.assistant_text for t in local.turns] == [TRAJ_TURN1, TRAJ_FINAL]
    assert [t.usage.prompt_tokens for t in local.turns] == [t["prompt_tokens"] for t in turns]
    assert local.p_yes == pytest.approx(out["p_yes"], abs=1e-3)


def test_run_writes_the_verdict_and_turns_to_the_catalog(vllm_server, tmp_path, monkeypatch, no_job_env):
    from spec_vetting.catalog import read_turns, read_verdicts

    monkeypatch.chdir(tmp_path)  # Dask scratch space in the test's folder
    fits_path = write_fixed_spectrum(tmp_path / "fixed-cv.fits")
    (tmp_path / "candidates.csv").write_text(f"candidate_id,path,task\nfixed-cv,{fits_path},cv\n")
    res = CliRunner().invoke(main, ["run", "--candidates", "candidates.csv", "--endpoint", vllm_server.base_url,
                                    "--out", "catalog", "--logprobs", "--max-tokens", str(MAX_TOKENS),
                                    "--threads", "--workers", "1", "--no-dashboard"])
    assert res.exit_code == 0, res.output
    (row,) = read_verdicts(tmp_path / "catalog").to_pylist()
    assert row["candidate_id"] == "fixed-cv" and row["task"] == "cv"
    assert row["verdict"] == "YES" and row["status"] == "well_formed", row
    assert row["engine"] == "openai" and row["model"] == SERVED_NAME
    assert json.loads(row["zoom_windows"]) == [[6500.0, 6600.0]]
    assert row["p_yes_source"] == "logprobs" and row["p_yes"] > 0.9
    assert row["cached_tokens"] > 0
    turns = sorted((t for t in read_turns(tmp_path / "catalog").to_pylist() if t["turn"] >= 0),
                   key=lambda t: t["turn"])
    assert [t["assistant_text"] for t in turns] == [TRAJ_TURN1, TRAJ_FINAL]
    assert (turns[0]["zoom_min"], turns[0]["zoom_max"]) == (6500.0, 6600.0)
    assert turns[1]["cached_tokens"] > 0


# ---- the exact prompt and the model's positions ------------------------------------------------------------------


def test_vllm_renders_the_two_zoom_conversation_as_trained(vllm_server):
    from tokenizers import Tokenizer

    model_dir = Path(vllm_server.model_dir)
    messages = two_zoom_messages()
    r = httpx.post(vllm_server.root_url + "/tokenize", timeout=120,
                   json={"model": SERVED_NAME, "messages": messages, "add_generation_prompt": True})
    assert r.status_code == 200, r.text
    served = r.json()["tokens"]

    # training's ids, tokenized with the tiny tokenizer itself; each image placeholder widened by Qwen's rule
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    pad = tokenizer.token_to_id("<|image_pad|>")
    size = json.loads((model_dir / "preprocessor_config.json").read_text())["size"]
    counts = iter([qwen_image_tokens(png, size["shortest_edge"], size["longest_edge"]) for png in sent_pictures()])
    expected = []
    for t in trained_ids(tokenizer):
        expected.extend([pad] * next(counts) if t == pad else [t])
    assert next(counts, None) is None, "the layout has fewer image placeholders than pictures"

    if served != expected:  # say where they part, in text
        k = next((i for i, (a, b) in enumerate(zip(served, expected, strict=False)) if a != b),
                 min(len(served), len(expected)))
        raise AssertionError(
            f"vLLM's prompt differs from training's ids at token {k} of {len(expected)} (served {len(served)}):\n"
            f"served:   {tokenizer.decode(served[max(0, k - 8):k + 12], skip_special_tokens=False)!r}\n"
            f"expected: {tokenizer.decode(expected[max(0, k - 8):k + 12], skip_special_tokens=False)!r}"
        )


def _top_logprobs_by_token(entry: dict, strings: list[str] | None = None) -> dict[str, list[float]]:
    """{token text: sorted log-probabilities} of one position's alternatives (``token_id:N`` mapped to text)."""
    out: dict[str, list[float]] = {}
    for alt in entry["top_logprobs"]:
        tok = alt["token"]
        if strings is not None and tok.startswith("token_id:"):
            tok = strings[int(tok.split(":", 1)[1])]
        out.setdefault(tok, []).append(alt["logprob"])
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("conversation", ["two_zoom", "trained_turn2"])
def test_in_process_next_token_logprobs_equal_vllm(vllm_server, conversation):
    """The same body to both: vLLM (its own 3-D multimodal positions) and the in-process engine (transformers)."""
    if conversation == "two_zoom":
        messages = two_zoom_messages()
    else:  # the trained conversation up to the final answer: one zoom picture, the verdict still to write
        from tiny_qwen import trajectory_conversation

        messages = trajectory_conversation()[:-1]
    body = {"model": SERVED_NAME, "messages": messages, "max_tokens": 1, "temperature": 0.0,
            "logprobs": True, "top_logprobs": 20}
    r = httpx.post(vllm_server.base_url + "/chat/completions", timeout=120,
                   json={**body, "return_tokens_as_token_ids": True})
    assert r.status_code == 200, r.text
    served = r.json()

    engine = LocalEngine(vllm_server.model_dir)
    with torch_threads(1):
        engine.load()
        local = chat_completion(engine, body)
    strings = engine._strings()
    assert local["usage"]["prompt_tokens"] == served["usage"]["prompt_tokens"]

    (s_entry,) = served["choices"][0]["logprobs"]["content"]
    (l_entry,) = local["choices"][0]["logprobs"]["content"]
    s_top, l_top = _top_logprobs_by_token(s_entry, strings), _top_logprobs_by_token(l_entry)
    # the 10 most likely tokens agree (lower ranks may swap places at ties, so they are compared by value only)
    s_best = sorted(s_top, key=lambda t: -max(s_top[t]))[:10]
    for tok in s_best:
        assert tok in l_top, f"{tok!r} is in vLLM's top tokens, not in the in-process engine's"
        assert l_top[tok] == pytest.approx(s_top[tok], abs=1e-3), tok
    assert l_entry["logprob"] == pytest.approx(s_entry["logprob"], abs=1e-3)


# ---- sampling pinned: a checkpoint's generation_config.json changes nothing --------------------------------------


def test_a_checkpoints_generation_config_does_not_change_decoding(vllm_server, tmp_path):
    """The tiny model again, its generation_config.json now asking for repetition_penalty 1.3 and top_k 1 (Qwen's
    published checkpoints ship 1.05 and 1), served the way vLLM serves by default (``--generation-config auto``,
    i.e. without the deploy files' flag). The HTTP engine's request bodies give the same texts and logprobs as on
    the same weights without those defaults; a body that leaves the fields out does not (so the file is in force)."""
    import shutil

    from vllm_server import VLLMServer

    from spec_vetting.engines.http.wire import PINNED_SAMPLING_FIELDS, chat_request_body, parse_chat_response

    model = tmp_path / "model"
    shutil.copytree(vllm_server.model_dir, model)
    config = json.loads((model / "generation_config.json").read_text())
    config.update(repetition_penalty=1.3, top_k=1, temperature=0.1, top_p=0.5)
    (model / "generation_config.json").write_text(json.dumps(config))
    server = VLLMServer(model, tmp_path / "server.log", generation_config="auto").start()
    try:
        server.wait_healthy()
        full, zoom1, _ = _pictures()
        messages = [*build_initial_messages(get_task("cv"), full), assistant_message(TURN1),
                    tool_response_message(TOOL1, zoom1)]
        bodies = {
            "greedy": chat_request_body(messages, model=SERVED_NAME,
                                        sampling=Sampling(max_tokens=48, logprobs=True, top_logprobs=5)),
            "sampled": chat_request_body(messages, model=SERVED_NAME,
                                         sampling=Sampling(temperature=1.0, seed=11, max_tokens=48, logprobs=True,
                                                           top_logprobs=5)),
        }

        def ask(url, body):
            r = httpx.post(url + "/chat/completions", json=body, timeout=300)
            assert r.status_code == 200, r.text
            data = r.json()
            content = data["choices"][0]["logprobs"]["content"]
            return parse_chat_response(data).text, [e["token"] for e in content], [e["logprob"] for e in content]

        for name, body in bodies.items():
            plain_text, plain_tokens, plain_lp = ask(vllm_server.base_url, body)
            text, tokens, lp = ask(server.base_url, body)
            assert (text, tokens) == (plain_text, plain_tokens), name
            assert lp == pytest.approx(plain_lp, abs=1e-4), name
        # the file is in force for a body that leaves the fields out: sampled with top_k 1 it decodes greedily
        bare = {k: v for k, v in bodies["sampled"].items() if k not in PINNED_SAMPLING_FIELDS or k == "temperature"}
        assert ask(server.base_url, bare)[1] != ask(vllm_server.base_url, bare)[1]
    finally:
        server.stop()
