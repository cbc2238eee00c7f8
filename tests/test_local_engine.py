"""The in-process Qwen2.5-VL engine on a tiny model built offline, in two tests run in process:

1. the random tiny model through the engine and the real inspection loop: it writes neither a call nor an answer,
   and the loop records UNDECIDED with the reason;
2. the tiny model trained for a few seconds on one trajectory (zoom on H-alpha, then ``\\boxed{YES}``): greedy
   decoding reproduces it, so the loop really zooms and returns YES / well_formed, alone and batched.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json

import numpy as np
import pytest

pytest.importorskip("transformers")

import tiny_qwen  # noqa: E402
from tiny_qwen import (  # noqa: E402
    TRAJ_FINAL,
    TRAJ_TURN1,
    fixed_spectrum,
    inspection_context,
    one_torch_thread,
    spectrum_renderer,
    tiny_model_dir,
    trained_model_dir,
)

from spec_vetting.engines.local.engine import LocalEngine, model_checksum, verdict_position  # noqa: E402
from spec_vetting.engines.local.inputs import openai_messages  # noqa: E402
from spec_vetting.errors import ConfigError, EngineError  # noqa: E402
from spec_vetting.inspect.loop import run_inspection  # noqa: E402
from spec_vetting.inspect.tasks import get_task  # noqa: E402
from spec_vetting.types import (  # noqa: E402
    ImagePart,
    Message,
    Sampling,  # noqa: E402
    TextPart,
)

__all__ = ["one_torch_thread", "tiny_model_dir", "trained_model_dir"]  # fixtures imported so pytest finds them


def _png(width: int, height: int, seed: int = 0) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray((rng.random((height, width, 3)) * 255).astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _run(coro):
    return asyncio.run(coro)


async def _inspect(engine: LocalEngine, candidates: list[str], **kwargs):
    await engine.start()
    try:
        task = get_task("cv")
        return await asyncio.gather(*[
            run_inspection(inspection_context(cid), task, engine, renderer=spectrum_renderer(), **kwargs)
            for cid in candidates
        ])
    finally:
        await engine.close()


# ---- the engine on its own -------------------------------------------------------------------------------------


def test_identity_names_folder_and_checksum_without_loading(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir, max_pixels=28 * 28 * 8)
    before = engine.identity()  # from the folder's files: the pipeline records it without loading weights
    assert engine.model is None
    assert before.engine == "local" and before.model == tiny_model_dir.name
    assert "transformers/" in before.engine_version and "torch/" in before.engine_version
    assert before.model_info["checksum"] == model_checksum(tiny_model_dir)
    assert before.model_info["chat_template"].endswith("(checkpoint)")
    assert before.model_info["dtype"] == "float32" and before.model_info["max_pixels"] == 28 * 28 * 8
    engine.load()
    assert engine.identity() == before
    assert engine.inputs.size == {"shortest_edge": tiny_qwen.TINY_MIN_PIXELS, "longest_edge": 28 * 28 * 8}
    assert LocalEngine(tiny_model_dir, device="cuda").identity().model_info["dtype"] == "bfloat16"


def test_checkpoint_template_is_found_where_servers_look(tmp_path, tiny_model_dir):
    from spec_vetting.engines.local.inputs import DEPLOY_TEMPLATE, checkpoint_chat_template, load_chat_template

    assert checkpoint_chat_template(tiny_model_dir) == DEPLOY_TEMPLATE.read_text()
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    assert checkpoint_chat_template(tmp_path) == "{{ messages }}"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert checkpoint_chat_template(empty) is None
    assert load_chat_template(empty, None) == (DEPLOY_TEMPLATE.read_text(), str(DEPLOY_TEMPLATE))


def test_prompt_tokens_count_one_token_per_28px_block(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir)
    engine.load()
    msgs = [Message("user", [ImagePart(_png(84, 56)), TextPart("\nhello")])]  # 3 x 2 blocks of 28 px
    wire = openai_messages(msgs)
    text_ids = engine.tokenizer(engine.inputs.render(wire), add_special_tokens=False)["input_ids"]
    batch = engine.inputs.build([wire])
    assert batch.image_tokens == [6]
    assert batch.prompt_tokens == [len(text_ids) - 1 + 6]
    reply = engine.complete_openai(wire, Sampling(max_tokens=3))
    assert reply.usage.prompt_tokens == len(text_ids) - 1 + 6
    assert reply.usage.completion_tokens <= 3 and reply.usage.cached_tokens == 0


def test_big_images_are_capped_by_max_pixels(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir, max_pixels=28 * 28 * 8)
    engine.load()
    batch = engine.inputs.build([openai_messages([Message("user", [ImagePart(_png(792, 472))])])])
    assert 1 <= batch.image_tokens[0] <= 8


def test_max_tokens_caps_each_turn(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir)
    wire = openai_messages([Message("user", [TextPart("hello")])])
    reply = engine.complete_openai(wire, Sampling(max_tokens=4))
    if reply.finish_reason == "length":
        assert reply.usage.completion_tokens == 4
    else:  # the random model may stop early by chance; then the stop token is counted
        assert reply.finish_reason == "stop" and reply.usage.completion_tokens <= 4


def test_sampling_with_a_seed_is_reproducible(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir)
    wire = openai_messages([Message("user", [TextPart("hello")])])
    s = Sampling(temperature=1.0, max_tokens=8, seed=7)
    assert engine.complete_openai(wire, s).text == engine.complete_openai(wire, s).text


def test_missing_folder_and_wrong_model_are_config_errors(tmp_path, tiny_model_dir):
    with pytest.raises(ConfigError, match="does not exist"):
        LocalEngine(tmp_path / "nope").load()
    other = tmp_path / "other"
    other.mkdir()
    for name in ("tokenizer.json", "preprocessor_config.json"):
        (other / name).write_bytes((tiny_model_dir / name).read_bytes())
    (other / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ConfigError, match="model_type 'llama'"):
        LocalEngine(other).load()
    with pytest.raises(ConfigError, match="chat template"):
        LocalEngine(tiny_model_dir, chat_template=str(tmp_path / "missing.jinja")).load()


def test_bad_image_is_a_bad_request(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir)
    bad = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}]}]
    with pytest.raises(EngineError, match="data URLs") as info:
        engine.complete_openai(bad)
    assert info.value.kind == "bad_request"
    garbage = "data:image/png;base64," + base64.b64encode(b"not a png").decode()
    with pytest.raises(EngineError, match="could not be decoded"):
        engine.complete_openai([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": garbage}}]}])


def test_verdict_position_reads_the_last_answer_block():
    text = "<answer>\\boxed{NO}</answer> then <answer>\\boxed{ yes } ok</answer>"
    assert text[verdict_position(text):].startswith("yes")
    assert verdict_position("no boxed verdict here") is None


def test_p_yes_reads_tokens_that_merge_the_brace_with_the_verdict(tiny_model_dir):
    """The step that writes the verdict may write `{YES` in one token; candidates are judged on what they write."""
    engine = LocalEngine(tiny_model_dir)
    engine.load()
    tok = engine.tokenizer
    text = "<answer>\\boxed{YES} fine</answer>"
    body = tok(text, add_special_tokens=False)["input_ids"]

    class Recorder:  # top candidates at every step: the true token, then a NO-writing rival
        steps = []

    import torch

    pieces = [tok.decode(body[:n]) for n in range(len(body) + 1)]
    pos = verdict_position(text)
    k = next(i for i in range(len(body)) if len(pieces[i + 1]) > pos)
    lead = text[len(pieces[k]):pos]
    no_id = next(i for i, s in enumerate(engine._strings()) if s == (lead + "NO")[: len(s)] and len(s) > len(lead))
    for i, t in enumerate(body):
        ids = [t, no_id] if i == k else [t, 0]
        Recorder.steps.append((torch.tensor([[np.log(0.75), np.log(0.25)]]), torch.tensor([ids])))
    assert engine._p_yes(body, text, Recorder, 0) == pytest.approx(0.75)
    assert engine._p_yes(body, "no verdict", Recorder, 0) is None


# ---- 1. the random model through the loop -----------------------------------------------------------------------


def test_random_model_ends_undecided_with_the_reason(tiny_model_dir):
    engine = LocalEngine(tiny_model_dir)
    (result,) = _run(_inspect(engine, ["rand-1"], sampling=Sampling(max_tokens=12)))
    assert result.verdict == "UNDECIDED", (result.verdict, result.error_message,
                                           [t.assistant_text for t in result.turns])
    assert result.reason and "max_tokens" in result.reason
    assert result.status == "none" and result.engine == "local" and result.model == tiny_model_dir.name
    assert len(result.turns) == 1 and result.turns[0].usage.completion_tokens == 12
    assert result.turns[0].usage.prompt_tokens > 200  # system text, image tokens and task prompt


# ---- 2. the trained model zooms, then answers YES ----------------------------------------------------------------


@pytest.mark.slow
def test_trained_model_zooms_then_answers_yes(trained_model_dir):
    engine = LocalEngine(trained_model_dir)
    (result,) = _run(_inspect(engine, ["traj-1"], sampling=Sampling(max_tokens=120, logprobs=True)))
    assert [t.assistant_text for t in result.turns] == [TRAJ_TURN1, TRAJ_FINAL]
    assert result.verdict == "YES" and result.status == "well_formed", result.reason
    assert result.n_tool_calls == 1 and result.turns[0].zoom_window == (6500.0, 6600.0)
    assert result.turns[0].image_png is not None
    assert result.turns[0].tool_response_text.startswith("Generated spectral visualization focused on")
    assert result.p_yes_source == "logprobs" and result.p_yes > 0.9
    assert all(t.finish_reason == "stop" for t in result.turns)


def _counting(engine: LocalEngine) -> list[int]:
    """Record the size of every batch the engine generates (the batcher is made at start() from this attribute)."""
    sizes: list[int] = []
    inner = engine.generate_batch

    def counting(requests):
        sizes.append(len(requests))
        return inner(requests)

    engine.generate_batch = counting
    return sizes


@pytest.mark.slow
def test_waiting_turns_are_generated_in_one_left_padded_batch(trained_model_dir):
    """Three sessions asking at once (one with a longer prompt, so rows are padded) get one batch, same texts."""
    conversation = tiny_qwen.trajectory_conversation()
    first_turn = conversation[:2]  # system + user: the prompt of the first assistant turn
    longer = [dict(first_turn[0]), {**first_turn[1], "content": first_turn[1]["content"] + [
        {"type": "text", "text": " Be careful."}]}]
    engine = LocalEngine(trained_model_dir, batch=4, batch_wait_ms=200)
    sizes = _counting(engine)
    from spec_vetting.engines.local.engine import GenerationRequest

    async def main():
        await engine.start()
        try:
            reqs = [GenerationRequest(c, Sampling(max_tokens=80)) for c in (first_turn, longer, first_turn)]
            return await asyncio.gather(*[engine.complete_async(r) for r in reqs])
        finally:
            await engine.close()

    replies = _run(main())
    assert sizes == [3]
    assert replies[0].text == replies[2].text == TRAJ_TURN1
    alone = LocalEngine(trained_model_dir).complete_openai(longer, Sampling(max_tokens=80))
    assert replies[1].text == alone.text  # left padding changes nothing
    assert replies[1].usage.prompt_tokens == alone.usage.prompt_tokens > replies[0].usage.prompt_tokens


@pytest.mark.slow
def test_concurrent_inspections_all_answer_yes(trained_model_dir):
    engine = LocalEngine(trained_model_dir, batch=4, batch_wait_ms=100)
    sizes = _counting(engine)
    results = _run(_inspect(engine, ["b-1", "b-2", "b-3"], sampling=Sampling(max_tokens=120)))
    assert [r.verdict for r in results] == ["YES"] * 3
    assert all([t.assistant_text for t in r.turns] == [TRAJ_TURN1, TRAJ_FINAL] for r in results)
    assert sum(sizes) == 6  # two turns each, whatever the batching


def test_fixed_spectrum_is_deterministic():
    a, b = fixed_spectrum(), fixed_spectrum()
    assert np.array_equal(a.flux, b.flux)


def test_hub_style_preprocessor_config_is_read(tmp_path, tiny_model_dir):
    """Qwen2.5-VL checkpoints state min_pixels/max_pixels at the top level of preprocessor_config.json."""
    import shutil

    folder = tmp_path / "spec-o3-like"
    shutil.copytree(tiny_model_dir, folder)
    cfg = json.loads((folder / "preprocessor_config.json").read_text())
    cfg.pop("size")
    cfg.update({"min_pixels": 28 * 28 * 2, "max_pixels": 28 * 28 * 12, "processor_class": "Qwen2_5_VLProcessor",
                "image_processor_type": "Qwen2VLImageProcessor"})
    (folder / "preprocessor_config.json").write_text(json.dumps(cfg))
    engine = LocalEngine(folder)
    engine.load()
    assert engine.inputs.size == {"shortest_edge": 28 * 28 * 2, "longest_edge": 28 * 28 * 12}


def test_one_engine_serves_event_loops_in_several_threads(tiny_model_dir):
    """A worker may drive the engine from more than one event loop; each gets its own replies."""
    import threading

    from spec_vetting.engines.local.engine import GenerationRequest

    engine = LocalEngine(tiny_model_dir, batch_wait_ms=20)
    prompts = [[{"role": "user", "content": f"prompt number {i}"}] for i in range(2)]
    expected = [engine.complete_openai(p, Sampling(max_tokens=6)).text for p in prompts]
    _run(engine.start())
    got: dict[int, list[str]] = {}

    def worker(i: int) -> None:
        async def main():
            reqs = [engine.complete_async(GenerationRequest(prompts[(i + k) % 2], Sampling(max_tokens=6)))
                    for k in range(2)]
            return [r.text for r in await asyncio.gather(*reqs)]

        got[i] = asyncio.run(main())

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    _run(engine.close())
    assert got == {0: expected, 1: expected[::-1]}
