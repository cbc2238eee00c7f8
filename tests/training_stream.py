"""The token stream RL training built, restated from the upstream code: the oracle for the served template.

Written from Maxwell-Jia/spec-o3 @ dd6eb91 (read, not imported, not copied; nothing here uses spec_vetting):

- ``reinforcement_learning/recipe/spec_o3/configs/spec_o3.yaml``, ``actor_rollout_ref.model.custom_chat_template``:
  the template the processor rendered with. :func:`training_template` says in Python what it writes: always a
  system turn first (the first message's visible text when it is a system message, else the default sentence,
  then the tools block when ``tools`` is given, then ``<|im_end|>\\n``); then per message: ``user`` ->
  ``<|im_start|>user\\n`` + visible text + ``<|im_end|>\\n``; ``assistant`` -> the same with its tool_calls;
  ``tool`` -> folded into one user turn of ``\\n<tool_response>\\n`` + visible text + ``\\n</tool_response>``
  blocks; system messages in the loop are not written; the generation prompt ``<|im_start|>assistant\\n``.
  Visible text of a list: text items' text, image items as ``<|vision_start|><|image_pad|><|vision_end|>``.
- ``verl/utils/dataset/rl_dataset.py`` ``_build_messages``: every message of a row with images has its content
  split at ``<image>`` into ``[{"type": "image"}, {"type": "text", "text": rest}]`` (empty pieces dropped).
- ``verl/experimental/agent_loop/tool_agent_loop.py`` ``run``: ``prompt_ids`` = the first messages rendered with
  ``tools=`` and the generation prompt; each generated turn's ids are appended as generated (they end with the
  ``<|im_end|>`` the model stopped on; a turn cut at max_new_tokens has none); each tool turn is the tool messages
  rendered alone with the generation prompt, minus the length of ``system_prompt`` (the template on ``[{}]``
  without the generation prompt: the default system turn); a tool answer with an image is
  ``{"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": text}]}``, one without is
  ``{"role": "tool", "content": text}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
DEFAULT_SYSTEM = "You are a helpful assistant."
IM_END = "<|im_end|>"
TOOLS_HEAD = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
              "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
              "<args-json-object>}\n</tool_call>")
#: the tool schema of the recipe's tool config, as the template's ``tojson`` writes it (key order kept)
TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "spectral_visualization_tool",
        "description": "A tool for visualizing spectral data with wavelength range zooming capabilities.",
        "parameters": {
            "type": "object",
            "properties": {
                "wavelength_range": {"type": "array", "description": "Wavelength range to focus on "
                                     "[min_wavelength, max_wavelength] in Angstroms"},
                "label": {"type": "string", "description": "Optional label for the spectral feature being analyzed"},
            },
            "required": ["wavelength_range"],
        },
    },
}


def visible_text(content) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    out = []
    for item in content:
        if isinstance(item, dict) and item.get("type") == "text":
            out.append(item["text"])
        elif isinstance(item, dict) and (item.get("type") == "image" or "image" in item):
            out.append(IMAGE)
        elif isinstance(item, str):
            out.append(item)
    return "".join(out)


def training_template(messages: Sequence[dict], tools: Sequence[dict] | None = None,
                      add_generation_prompt: bool = False) -> str:
    """What the recipe's custom_chat_template writes for ``messages`` (see the module docstring)."""
    first = messages[0] if messages else {}
    out = ["<|im_start|>system\n"]
    out.append(visible_text(first.get("content")) if first.get("role") == "system" else DEFAULT_SYSTEM)
    if tools:
        out.append(TOOLS_HEAD + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + TOOLS_TAIL)
    out.append(IM_END + "\n")
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "user":
            out.append("<|im_start|>user\n" + visible_text(m["content"]) + IM_END + "\n")
        elif role == "assistant":
            out.append("<|im_start|>assistant\n" + visible_text(m.get("content")))
            for call in m.get("tool_calls") or []:
                call = call.get("function", call)
                out.append('\n<tool_call>\n{"name": "' + call["name"] + '", "arguments": '
                           + json.dumps(call["arguments"], ensure_ascii=False) + "}\n</tool_call>")
            out.append(IM_END + "\n")
        elif role == "tool":
            if i == 0 or messages[i - 1].get("role") != "tool":
                out.append("<|im_start|>user")
            out.append("\n<tool_response>\n" + visible_text(m["content"]) + "\n</tool_response>")
            if i == len(messages) - 1 or messages[i + 1].get("role") != "tool":
                out.append(IM_END + "\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def build_row_messages(system: str, user: str) -> list[dict]:
    """A SpecVI-Bench row's prompt as the RL dataset hands it to the agent loop (content split at ``<image>``)."""
    out = []
    for role, text in (("system", system), ("user", user)):
        pieces = [p for p in re.split("(<image>|<video>)", text) if p != ""]
        out.append({"role": role, "content": [{"type": "image"} if p == "<image>" else {"type": "text", "text": p}
                                              for p in pieces]})
    return out


@dataclass
class GeneratedTurn:
    """One assistant turn of a rollout: its text, whether generation stopped on <|im_end|>, and the tool answer
    appended after it (None: the rollout ended here). ``tool_image`` says whether that answer carried a picture."""

    text: str
    stopped: bool = True
    tool_text: str | None = None
    tool_image: bool = False


def tool_message(text: str, image: bool) -> dict:
    if image:
        return {"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": text}]}
    return {"role": "tool", "content": text}


def trained_prompt_ids(tokenize: Callable[[str], list[int]], im_end_id: int, row_messages: list[dict],
                       turns: Sequence[GeneratedTurn]) -> list[list[int]]:
    """The ids the model was given before each of its turns, built as ToolAgentLoop.run built them.

    Returns one list per generation request: ``[prompt before turn 0, prompt before turn 1, ...]``. Generated turns
    are tokenized from their text (a real rollout appended the sampled ids; the text is what a client can replay).
    """
    system_prompt = tokenize(training_template([{}], add_generation_prompt=False))
    prompt_ids = tokenize(training_template(row_messages, tools=[TOOL_SCHEMA], add_generation_prompt=True))
    requests = [list(prompt_ids)]
    for turn in turns:
        prompt_ids += tokenize(turn.text) + ([im_end_id] if turn.stopped else [])
        if turn.tool_text is None:
            break
        tool_ids = tokenize(training_template([tool_message(turn.tool_text, turn.tool_image)],
                                              add_generation_prompt=True))
        assert tool_ids[: len(system_prompt)] == system_prompt  # what the slice relies on
        prompt_ids += tool_ids[len(system_prompt):]
        requests.append(list(prompt_ids))
    return requests


def trained_prompt_texts(row_messages: list[dict], turns: Sequence[GeneratedTurn]) -> list[str]:
    """:func:`trained_prompt_ids` as text (every cut falls on a special token, so text and ids agree)."""
    system_prompt = training_template([{}], add_generation_prompt=False)
    text = training_template(row_messages, tools=[TOOL_SCHEMA], add_generation_prompt=True)
    requests = [text]
    for turn in turns:
        text += turn.text + (IM_END if turn.stopped else "")
        if turn.tool_text is None:
            break
        tool = training_template([tool_message(turn.tool_text, turn.tool_image)], add_generation_prompt=True)
        assert tool.startswith(system_prompt)
        text += tool[len(system_prompt):]
        requests.append(text)
    return requests
