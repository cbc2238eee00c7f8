"""The token difference between training's stream and what a chat server renders, per template.

In RL the next turn was appended to the generated ids (``...<|im_end|><|im_start|>user``, tool_agent_loop.py:104
and 191-206). A chat server re-renders the whole history with its chat template: the stock Qwen2.5-VL template
writes ``<|im_end|>\\n`` after every turn, the assistant's included, i.e. one token per replayed assistant turn the
policy never saw; deploy/chat_template.jinja writes training's stream. This renders one conversation with N zoom
turns under both templates with the tiny offline tokenizer (Qwen's added tokens) and prints the counts against
training's ids (tests/training_stream.py, written from verl's agent loop).

    PYTHONPATH=. python benchmarks/newline_per_tool_turn.py [--zooms 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from spec_vetting.engines.local.inputs import openai_messages  # noqa: E402
from spec_vetting.inspect.conversation import (  # noqa: E402
    assistant_message,
    build_initial_messages,
    tool_response_message,
)
from spec_vetting.inspect.tasks import get_task  # noqa: E402

ZOOM = ('<think>Check Hα.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
        '{"label": "Hα", "wavelength_range": [6500, 6600]}}\n</tool_call>')
TOOL = "Generated spectral visualization focused on wavelength range (6500, 6600) Å for Hα."


def main() -> None:
    from tiny_qwen import build_tokenizer
    from training_stream import GeneratedTurn, build_row_messages, trained_prompt_ids

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zooms", type=int, default=2)
    n = parser.parse_args().zooms
    shipped = (ROOT / "deploy" / "chat_template.jinja").read_text()
    stock = (ROOT / "deploy" / "chat_template_stock.jinja").read_text()
    tok = build_tokenizer(shipped)
    task = get_task("cv")
    msgs = build_initial_messages(task, b"PNG")
    for _ in range(n):
        msgs += [assistant_message(ZOOM), tool_response_message(TOOL, b"PNG")]
    row = build_row_messages("You are a helpful assistant.", "<image>\n" + task.prompt)
    trained = trained_prompt_ids(lambda s: tok(s, add_special_tokens=False)["input_ids"],
                                 tok.convert_tokens_to_ids("<|im_end|>"), row,
                                 [GeneratedTurn(ZOOM, tool_text=TOOL, tool_image=True)] * n)[-1]
    print(f"training's ids before turn {n + 1}: {len(trained)}")
    for name, template in (("deploy/chat_template.jinja", shipped), ("stock Qwen2.5-VL template", stock)):
        text = tok.apply_chat_template(openai_messages(msgs), chat_template=template, tokenize=False,
                                       add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        verdict = "identical" if ids == trained else f"{len(ids) - len(trained):+d} tokens"
        print(f"{name:28s} {len(ids)} ids: {verdict}")


if __name__ == "__main__":
    main()
