"""The shipped chat template renders every request to the token stream RL training built (issue: the served model
sees exactly what it was trained on).

The oracle is tests/training_stream.py, written from the upstream recipe's template and verl's ToolAgentLoop, not
from this project's code: the first messages rendered once with the generation prompt, each generated turn appended
with its own ``<|im_end|>`` and nothing after it, each tool turn rendered alone minus the default system turn. The
client's conversation (its message builders, its wire format) rendered by deploy/chat_template.jinja must give that
string, hence those ids, before every turn: 0, 1, 2 and 8 tool turns, text-only tool answers (a zoom error, an
unknown tool), and through the real loop with a scripted model (malformed call, unknown tool, a cut turn). The stock
Qwen2.5-VL template differs by exactly one newline token per tool turn, which is why every deploy file passes
``--chat-template``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_vetting import protocol
from spec_vetting.types import ImagePart, Message, TextPart

pytest.importorskip("transformers")

from spec_vetting.engines.local.inputs import openai_messages  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RL_TEMPLATE = (REPO / "deploy" / "chat_template.jinja").read_text()
STOCK_TEMPLATE = (REPO / "deploy" / "chat_template_stock.jinja").read_text()

PNG = b"\x89PNG fake bytes: templates never decode images"
TASK_TEXT = ("Analyze the provided spectrum to determine if it is a **Cataclysmic Variables (CV)**.\n"
             "- broad Balmer emission")
TURN1 = (
    "<think>Broad emission near H-alpha? Zoom.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"label": "Zoom on the H\u03b1 region", '
    '"wavelength_range": [6500, 6600]}}\n</tool_call>'
)
TOOL1 = ("Generated spectral visualization focused on wavelength range (6500, 6600) \u00c5 "
         "for Zoom on the H\u03b1 region.")
TURN2 = (
    "<think>Try a window outside the data.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [100, 200]}}\n</tool_call>'
)
TOOL2 = ("Error: The specified wavelength range [100, 200] is invalid or outside the available data range "
         "[3700.0, 9100.0].")
FINAL = "<think>Broad, double-peaked H-alpha.</think>\n<answer>\\boxed{YES} Broad Balmer emission.</answer>"

IMG = "<|vision_start|><|image_pad|><|vision_end|>"

# Protocol section 2, written out by hand (the system text and tool line character for character).
EXPECTED_SYSTEM = (
    "<|im_start|>system\n"
    "You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "spectral_visualization_tool", "description": "A tool for '
    'visualizing spectral data with wavelength range zooming capabilities.", "parameters": {"type": "object", '
    '"properties": {"wavelength_range": {"type": "array", "description": "Wavelength range to focus on '
    '[min_wavelength, max_wavelength] in Angstroms"}, "label": {"type": "string", "description": "Optional label '
    'for the spectral feature being analyzed"}}, "required": ["wavelength_range"]}}}'
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)
# training appended each tool turn right after the generated <|im_end|>: no newline after an assistant turn
EXPECTED = (
    EXPECTED_SYSTEM
    + "<|im_start|>user\n" + IMG + "\n" + TASK_TEXT + "<|im_end|>\n"
    + "<|im_start|>assistant\n" + TURN1 + "<|im_end|>"
    + "<|im_start|>user\n<tool_response>\n" + IMG + TOOL1 + "\n</tool_response><|im_end|>\n"
    + "<|im_start|>assistant\n" + TURN2 + "<|im_end|>"
    + "<|im_start|>user\n<tool_response>\n" + TOOL2 + "\n</tool_response><|im_end|>\n"
    + "<|im_start|>assistant\n"
)
#: what a stock Qwen2.5-VL template renders: a newline after every <|im_end|>, the assistant's included
EXPECTED_STOCK = EXPECTED.replace("<|im_end|><|im_start|>", "<|im_end|>\n<|im_start|>")


def client_conversation() -> list[Message]:
    """The conversation as the client builds it (spec_vetting.inspect.conversation's builders when present, else the
    same list by hand from protocol.py)."""
    try:
        from spec_vetting.inspect.conversation import (
            assistant_message,
            build_initial_messages,
            tool_response_message,
        )
    except ImportError:  # pragma: no cover - the same list, from protocol.py
        return [
            Message("system", [TextPart(protocol.SYSTEM_TEXT)]),
            Message("user", [ImagePart(PNG), TextPart("\n" + TASK_TEXT)]),
            Message("assistant", [TextPart(TURN1)]),
            Message("user", [TextPart(protocol.TOOL_RESPONSE_OPEN), ImagePart(PNG),
                             TextPart(TOOL1 + protocol.TOOL_RESPONSE_CLOSE)]),
            Message("assistant", [TextPart(TURN2)]),
            Message("user", [TextPart(protocol.TOOL_RESPONSE_OPEN + TOOL2 + protocol.TOOL_RESPONSE_CLOSE)]),
        ]
    return [
        *build_initial_messages(TASK_TEXT, PNG),
        assistant_message(TURN1),
        tool_response_message(TOOL1, PNG),
        assistant_message(TURN2),
        tool_response_message(TOOL2, None),
    ]


def wire_messages(messages: list[Message]) -> list[dict]:
    """OpenAI-style dicts exactly as the HTTP engine sends them (the in-process engine uses the same converter)."""
    return openai_messages(messages)


@pytest.fixture(scope="module")
def tokenizer():
    from tiny_qwen import build_tokenizer

    return build_tokenizer(RL_TEMPLATE)


def render(tokenizer, messages, template, **kwargs):
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, **kwargs)


def test_protocol_strings_match_the_hand_written_layout():
    assert EXPECTED_SYSTEM == "<|im_start|>system\n" + protocol.SYSTEM_TEXT + "<|im_end|>\n"


@pytest.mark.parametrize("template,expected", [(RL_TEMPLATE, EXPECTED), (STOCK_TEMPLATE, EXPECTED_STOCK)],
                         ids=["rl", "stock"])
def test_client_conversation_renders_to_the_protocol_layout(tokenizer, template, expected):
    text = render(tokenizer, wire_messages(client_conversation()), template, add_generation_prompt=True)
    assert text == expected


def test_stock_template_adds_one_newline_token_per_assistant_turn(tokenizer):
    """The difference a server without --chat-template makes: one extra token per replayed assistant turn."""
    msgs = wire_messages(client_conversation())
    served = tokenizer(render(tokenizer, msgs, STOCK_TEMPLATE, add_generation_prompt=True))["input_ids"]
    trained = tokenizer(render(tokenizer, msgs, RL_TEMPLATE, add_generation_prompt=True))["input_ids"]
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
    assert len(newline) == 1 and len(served) - len(trained) == 2  # two assistant turns replayed
    end, start = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|im_start|>")

    def newline_between_turns(ids):
        return sum(ids[i:i + 3] == [end, newline[0], start] for i in range(len(ids)))

    # the stock template's extras sit exactly between an assistant's <|im_end|> and the next <|im_start|>
    assert newline_between_turns(served) - newline_between_turns(trained) == 2
    assert [t for t in served if t != newline[0]] == [t for t in trained if t != newline[0]]
    # a finished conversation without the generation prompt: the final answer ends the string at its <|im_end|>
    done = msgs + [{"role": "assistant", "content": FINAL}]
    assert render(tokenizer, done, RL_TEMPLATE, add_generation_prompt=False) == EXPECTED + FINAL + "<|im_end|>"


def test_rl_template_renders_training_style_conversation_identically(tokenizer):
    """tools= + role "tool" messages + parsed tool_calls (how verl fed the template) give the same string."""
    image = {"type": "image"}
    arguments = {"label": "Zoom on the H\u03b1 region", "wavelength_range": [6500, 6600]}
    msgs = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": [image, {"type": "text", "text": "\n" + TASK_TEXT}]},
        {"role": "assistant", "content": "<think>Broad emission near H-alpha? Zoom.</think>",
         "tool_calls": [{"type": "function", "function": {"name": protocol.TOOL_NAME, "arguments": arguments}}]},
        {"role": "tool", "content": [image, {"type": "text", "text": TOOL1}]},
        {"role": "assistant", "content": TURN2},
        {"role": "tool", "content": TOOL2},
    ]
    text = render(tokenizer, msgs, RL_TEMPLATE, tools=[json.loads(protocol.TOOL_LINE)], add_generation_prompt=True)
    assert text == EXPECTED


def test_rl_template_folds_consecutive_tool_messages_into_one_user_turn(tokenizer):
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "two calls"},
        {"role": "tool", "content": "first"},
        {"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": "second"}]},
    ]
    text = render(tokenizer, msgs, RL_TEMPLATE, add_generation_prompt=False)
    assert text.endswith(
        "<|im_start|>assistant\ntwo calls<|im_end|><|im_start|>user\n<tool_response>\nfirst\n</tool_response>\n"
        "<tool_response>\n" + IMG + "second\n</tool_response><|im_end|>\n"
    )


@pytest.mark.parametrize("template", [RL_TEMPLATE, STOCK_TEMPLATE], ids=["rl", "stock"])
def test_default_system_turn_when_none_is_given(tokenizer, template):
    text = render(tokenizer, [{"role": "user", "content": "hi"}], template, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_wire_dicts_carry_images_as_png_data_urls_and_no_tools():
    msgs = openai_messages(client_conversation())
    user = msgs[1]["content"]
    assert user[0]["type"] == "image_url" and user[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert user[1] == {"type": "text", "text": "\n" + TASK_TEXT}
    assert msgs[0] == {"role": "system", "content": protocol.SYSTEM_TEXT}
    assert msgs[2] == {"role": "assistant", "content": TURN1}
    assert all("tools" not in m and m["role"] != "tool" for m in msgs)


# ---- every request against the token stream training built (tests/training_stream.py) ----------------------------

from training_stream import (  # noqa: E402
    GeneratedTurn,
    build_row_messages,
    trained_prompt_ids,
    trained_prompt_texts,
)


def zoom_turn(i: int) -> str:
    lo = 4000 + 250 * i
    return (f"<think>Look at window {i}.</think>\n<tool_call>\n"
            f'{{"name": "spectral_visualization_tool", "arguments": {{"wavelength_range": [{lo}, {lo + 200}]}}}}'
            "\n</tool_call>")


UNKNOWN_TOOL_TURN = ('<think>Zoom.</think>\n<tool_call>\n{"name": "zoom", "arguments": {"wavelength_range": '
                     "[6500, 6600]}}\n</tool_call>")


def _scenario(name: str) -> list[GeneratedTurn]:
    """Turns that each get a tool answer (the request after the last one is the one the model answers)."""
    if name.startswith("zooms-"):
        n = int(name.split("-")[1])
        return [GeneratedTurn(zoom_turn(i), tool_text=f"Generated spectral visualization focused on wavelength "
                              f"range ({4000 + 250 * i}, {4200 + 250 * i}) \u00c5.", tool_image=True)
                for i in range(n)]
    if name == "text-only-answers":  # an unknown tool, then a window outside the data, then a zoom
        return [GeneratedTurn(UNKNOWN_TOOL_TURN, tool_text="Error when executing tool: 'zoom'"),
                GeneratedTurn(zoom_turn(40), tool_text=TOOL2),
                GeneratedTurn(zoom_turn(1), tool_text=TOOL1, tool_image=True)]
    raise KeyError(name)


def _client_requests(turns: list[GeneratedTurn]) -> list[list[Message]]:
    from spec_vetting.inspect.conversation import assistant_message, build_initial_messages, tool_response_message

    msgs = build_initial_messages(TASK_TEXT, PNG)
    requests = [list(msgs)]
    for t in turns:
        msgs += [assistant_message(t.text), tool_response_message(t.tool_text, PNG if t.tool_image else None)]
        requests.append(list(msgs))
    return requests


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("scenario", ["zooms-0", "zooms-1", "zooms-2", "zooms-8", "text-only-answers"])
def test_every_request_renders_to_the_stream_training_built(tokenizer, scenario):
    turns = _scenario(scenario)
    row = build_row_messages("You are a helpful assistant.", "<image>\n" + TASK_TEXT)
    texts = trained_prompt_texts(row, turns)
    ids = trained_prompt_ids(lambda s: _ids(tokenizer, s), tokenizer.convert_tokens_to_ids("<|im_end|>"), row,
                             turns)
    requests = _client_requests(turns)
    assert len(requests) == len(texts) == len(ids) == len(turns) + 1
    for k, request in enumerate(requests):
        served = render(tokenizer, wire_messages(request), RL_TEMPLATE, add_generation_prompt=True)
        assert served == texts[k], f"request {k} differs from training's text"
        assert _ids(tokenizer, served) == ids[k], f"request {k} differs from training's ids"
    if turns:  # the stock template is off by one token per replayed assistant turn
        stock = render(tokenizer, wire_messages(requests[-1]), STOCK_TEMPLATE, add_generation_prompt=True)
        assert len(_ids(tokenizer, stock)) - len(ids[-1]) == len(turns)


def test_a_row_system_text_that_holds_the_tools_block_renders_it_once(tokenizer):
    """SpecVI-Bench rows: training's template appends the tools block to the row's own system text; a row written
    with the block already in it (older spec-vetting exports) is the same system turn, not a second block."""
    from spec_vetting.inspect.conversation import build_initial_messages
    from spec_vetting.inspect.tasks import get_task

    base = get_task("cv")
    oracle = trained_prompt_texts(build_row_messages("You are a helpful assistant.", "<image>\n" + base.prompt), [])
    for own in ("You are a helpful assistant.", protocol.SYSTEM_TEXT):
        task = base.with_prompt(base.prompt, system=own)
        served = render(tokenizer, wire_messages(build_initial_messages(task, PNG)), RL_TEMPLATE,
                        add_generation_prompt=True)
        assert served == oracle[0] and served.count("# Tools") == 1
    # a system text of its own is kept, and the block follows it as training's template wrote it
    odd = base.with_prompt(base.prompt, system="You are an astronomer.")
    served = render(tokenizer, wire_messages(build_initial_messages(odd, PNG)), RL_TEMPLATE, add_generation_prompt=True)
    assert served == trained_prompt_texts(build_row_messages("You are an astronomer.", "<image>\n" + base.prompt),
                                          [])[0]
    assert odd.version != base.version


def test_the_loop_sends_every_request_as_training_built_it(tokenizer):
    """The real loop with a scripted model: an unknown tool, a window outside the data, a zoom, then a malformed
    call (verl's parser drops it: the rollout ends). Each request the loop sent renders to training's stream."""
    import asyncio

    from spec_vetting.engines.scripted import ScriptedEngine
    from spec_vetting.inspect.loop import run_inspection
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.types import InspectionContext

    malformed = ('<think>Again.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
                 "\n</tool_call>")
    replies = [UNKNOWN_TOOL_TURN, zoom_turn(400), zoom_turn(8), malformed]
    engine = ScriptedEngine(replies)
    spectrum = make_spectrum("cv", seed=3)
    task = get_task("cv")
    ctx = InspectionContext(candidate_id="c1", task="cv", spectrum=spectrum, redshift=spectrum.meta.redshift)
    result = asyncio.run(run_inspection(ctx, task, engine))
    assert len(engine.calls) == 4 and result.verdict == "UNDECIDED"
    answered = result.turns[:3]
    assert answered[0].tool_response_text == "Error when executing tool: 'zoom'"
    assert answered[1].tool_response_text.startswith(
        "Error: The specified wavelength range [104000, 104200] is invalid")
    assert answered[2].tool_response_text.startswith("Generated spectral visualization focused on wavelength range")
    assert result.turns[3].tool_response_text is None
    turns = [GeneratedTurn(t.assistant_text, tool_text=t.tool_response_text, tool_image=t.image_png is not None)
             for t in answered]
    texts = trained_prompt_texts(build_row_messages("You are a helpful assistant.", "<image>\n" + task.prompt), turns)
    for k, call in enumerate(engine.calls):
        served = render(tokenizer, wire_messages(call.messages), RL_TEMPLATE, add_generation_prompt=True)
        assert served == texts[k], f"turn {k}"


def test_a_cut_turn_ends_the_inspection_and_is_never_replayed():
    """A turn that stopped at max_tokens has no <|im_end|>: training ended the rollout there (its budget was spent),
    so the loop ends too instead of running the call it may hold."""
    import asyncio

    from spec_vetting.engines.scripted import ScriptedEngine
    from spec_vetting.inspect.loop import run_inspection
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.types import EngineReply, InspectionContext, Usage

    cut = EngineReply(text=zoom_turn(8), usage=Usage(100, 50), finish_reason="length", endpoint="scripted")
    engine = ScriptedEngine([zoom_turn(9), cut, "<think>never asked</think><answer>\\boxed{YES}</answer>"])
    spectrum = make_spectrum("cv", seed=3)
    ctx = InspectionContext(candidate_id="c1", task="cv", spectrum=spectrum, redshift=spectrum.meta.redshift)
    result = asyncio.run(run_inspection(ctx, get_task("cv"), engine))
    assert len(engine.calls) == 2
    assert result.verdict == "UNDECIDED" and "cut at max_tokens" in result.reason
    assert result.turns[-1].tool_response_text is None
