"""The token difference between training's appended ids and a chat server's re-rendered prompt.

In RL the next turn was appended to the generated ids (``...<|im_end|><|im_start|>user``, tool_agent_loop.py:104
and 191-206); a chat server re-renders the history with the template (``...<|im_end|>\\n<|im_start|>user``).
This tokenizes one two-zoom conversation both ways with the tiny offline tokenizer (Qwen's added tokens) and prints
where the ids differ. Run: PYTHONPATH=. python benchmarks/newline_per_tool_turn.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from spec_vetting.inspect.conversation import (  # noqa: E402
    assistant_message,
    build_initial_messages,
    render_text,
    tool_response_message,  # noqa: E402
)
from spec_vetting.inspect.tasks import get_task  # noqa: E402

ZOOM = ('<think>Check Hα.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
        '{"label": "Hα", "wavelength_range": [6500, 6600]}}\n</tool_call>')
TOOL = "Generated spectral visualization focused on wavelength range (6500, 6600) Å for Hα."


def main() -> None:
    from tiny_qwen import build_tokenizer

    template = (Path(__file__).resolve().parents[1] / "deploy" / "chat_template.jinja").read_text()
    tok = build_tokenizer(template)
    msgs = build_initial_messages(get_task("cv"), b"PNG")
    for _ in range(2):
        msgs += [assistant_message(ZOOM), tool_response_message(TOOL, b"PNG")]
    served = render_text(msgs)  # what a chat server renders (stock template: <|im_end|>\n after every message)
    # training: each generated turn ends at its <|im_end|>, the tool turn is appended without the newline
    trained = served.replace("<|im_end|>\n<|im_start|>user\n<tool_response>",
                             "<|im_end|><|im_start|>user\n<tool_response>")
    a, b = tok(trained)["input_ids"], tok(served)["input_ids"]
    nl = tok("\n", add_special_tokens=False)["input_ids"]
    print(f"trained ids: {len(a)}, re-rendered ids: {len(b)}, difference: {len(b) - len(a)} "
          f"(tool turns: 2); the newline token: {nl}")
    i = 0
    diffs = []
    j = 0
    while i < len(a) and j < len(b):
        if a[i] != b[j]:
            diffs.append((j, b[j]))
            j += 1
            continue
        i += 1
        j += 1
    print("extra ids in the re-rendered prompt (position, id):", diffs,
          "each right after", tok.convert_ids_to_tokens([b[diffs[0][0] - 1]]) if diffs else None)


if __name__ == "__main__":
    main()
