"""A candidate's tasks and the server's prefix cache: one 5-task shard with and without warm-prefix order.

    .venv/bin/python benchmarks/bench_prefix_cache.py --candidates 12 --cap 4
    (SPEC_VETTING_VLLM_VENV=/path/.venv-vllm where the vLLM venv is not this checkout's .venv-vllm)

Starts the real vLLM CPU server on the trained tiny Qwen2.5-VL the way the real_server tests do
(tests/vllm_server.py: prefix caching on as vLLM ships it, ``--enable-prompt-tokens-details``; here also
``VLLM_SERVER_DEV_MODE=1`` so that the prefix cache can be emptied between runs), writes the example candidates, and
runs N candidates x 5 tasks as one shard through the pipeline's own shard code (``inspect_items``) and the HTTP
engine at an in-flight cap of ``--cap``: once with ``warm_prefix_first`` off (every pair at once, the old order),
once on (one pair per candidate first, the rest after its first reply), the prefix, multi-modal and encoder caches
emptied before each run. ``--block-size`` is the server's KV block, the unit its prefix cache matches in: 32 by
default, the least the CPU build takes and nearer vLLM's GPU default of 16 (SGLang matches single tokens) than the
CPU build's own 128, which caches nothing of a shared prefix shorter than two blocks (the tiny model's is 244 tokens
and its system text alone fills the first block). The requests are the same in both (same pictures, texts and sampling).

Prints one JSON object: per run, prompt and cached tokens (first turns; first turns of the tasks that follow a
candidate's first one; all turns), inspections per second, verdicts; and the part of a first prompt that a
candidate's tasks have in common (system text and full-view picture), from the server's own ``/tokenize`` of the
first-turn messages that were sent. The tiny model's timings measure 2 shared CPU cores, not a GPU.

``--url ROOT --server sglang`` measures an SGLang server already running on the same model folder instead (started
with ``--enable-cache-report`` so its replies carry ``cached_tokens``): its radix cache is emptied with ``POST
/flush_cache`` before each run, and the shared prefix is counted with the model folder's own tokenizer and image
processor (SGLang's ``/tokenize`` does not expand the picture). How such a server was built on this CPU:
benchmarks/RESULTS.md, "A candidate's tasks and the prefix cache".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import tiny_qwen  # noqa: E402
from vllm_server import VLLMServer, venv_problem  # noqa: E402

from spec_vetting.engines.http.engine import OpenAIEngine  # noqa: E402
from spec_vetting.pipeline.plan import WorkItem  # noqa: E402
from spec_vetting.pipeline.shard import ShardSpec, inspect_items  # noqa: E402
from spec_vetting.types import Sampling  # noqa: E402

TASKS = ("cv", "carbon", "ss", "gm", "wd")
#: a cap on each turn's generated tokens (the tiny model was trained on another renderer's pictures and may ramble);
#: the same in both runs
MAX_TOKENS = 120


def work_items(folder: Path, n: int) -> list[WorkItem]:
    """``n`` readable example candidates x the five tasks, candidate by candidate (as build_plan orders them)."""
    from spec_vetting.io.candidates import load_candidates
    from spec_vetting.synthetic.examples import write_examples

    write_examples(folder, n=max(n + 8, 20), seed=1)
    chosen = []
    for cand in load_candidates(folder / "candidates.csv"):
        try:
            cand.load_spectrum()
        except Exception:  # noqa: BLE001 - the example set holds broken files on purpose
            continue
        chosen.append(cand)
        if len(chosen) == n:
            break
    return [WorkItem(c, t) for c in chosen for t in TASKS]


#: what empties each server's prefix, multi-modal and encoder caches (vLLM's need VLLM_SERVER_DEV_MODE=1)
RESET_PATHS = {"vllm": ("/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"),
               "sglang": ("/flush_cache",)}


def reset_caches(root_url: str, server: str = "vllm") -> None:
    for path in RESET_PATHS[server]:
        r = httpx.post(root_url + path, timeout=60)
        r.raise_for_status()


async def run_shard(url: str, items: list[WorkItem], cap: int, warm: bool, sent: dict) -> tuple[list, float]:
    engine = OpenAIEngine([url], timeout_s=600, max_inflight_per_endpoint=cap, warm_prefix_first=warm)
    post = engine._post_with_retries

    async def recording(u, body, headers, *, what):  # keeps each first turn's body for /tokenize
        cid, turn = headers["X-Request-ID"].split("/")[1:]
        if turn == "0":
            sent.setdefault(cid, []).append(json.loads(body))
        return await post(u, body, headers, what=what)

    engine._post_with_retries = recording
    await engine.start()
    spec = ShardSpec(root="unused", run_id="bench", run_date="2026-01-01", shard_id="s0", items=items,
                     engine_name="openai", engine_options={}, sampling=Sampling(max_tokens=MAX_TOKENS),
                     concurrency=4 * cap)
    try:
        t0 = time.perf_counter()
        results = await inspect_items(spec, engine)
        return results, time.perf_counter() - t0
    finally:
        await engine.close()


def token_summary(results) -> dict:
    first_of: dict[str, int] = {}
    rows = {"first_turns": [0, 0], "first_turns_later_tasks": [0, 0], "later_turns": [0, 0], "all_turns": [0, 0]}
    for n, (item, result, _, _) in enumerate(results):
        cid = str(item.candidate.candidate_id)
        first_of.setdefault(cid, n)
        for turn in result.turns:
            p, c = turn.usage.prompt_tokens or 0, turn.usage.cached_tokens or 0
            keys = ["all_turns", "first_turns" if turn.index == 0 else "later_turns"]
            if turn.index == 0 and first_of[cid] != n:
                keys.append("first_turns_later_tasks")
            for k in keys:
                rows[k][0] += c
                rows[k][1] += p
    return {k: {"cached": c, "prompt": p, "share": round(c / p, 3) if p else None} for k, (c, p) in rows.items()}


def served_tokens(root_url: str, model: str, body: dict) -> list[int]:
    """The prompt's tokens as a vLLM server counts them (its ``/tokenize`` expands the picture)."""
    r = httpx.post(root_url + "/tokenize", json={"model": model, "messages": body["messages"],
                                                 "add_generation_prompt": True}, timeout=120)
    r.raise_for_status()
    return r.json()["tokens"]


def processor_tokens(model_dir: Path, body: dict) -> list[int]:
    """The prompt's tokens from the model folder's own chat template, tokenizer and image processor: one
    ``<|image_pad|>`` per merged patch block of each picture, as the processor expands it."""
    import base64
    import io

    from PIL import Image
    from transformers import AutoImageProcessor, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    images_proc = AutoImageProcessor.from_pretrained(model_dir)
    messages, pads = [], []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "image_url":
                    png = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                    grid = images_proc(images=[Image.open(io.BytesIO(png)).convert("RGB")])["image_grid_thw"][0]
                    pads.append(int(grid.prod()) // images_proc.merge_size ** 2)
                    parts.append({"type": "image"})
                else:
                    parts.append(part)
            content = parts
        messages.append({**m, "content": content})
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    pieces = text.split("<|image_pad|>")
    if len(pieces) != len(pads) + 1:
        raise ValueError(f"the chat template wrote {len(pieces) - 1} picture pads for {len(pads)} pictures")
    text = pieces[0] + "".join("<|image_pad|>" * n + rest for n, rest in zip(pads, pieces[1:], strict=True))
    return tok(text, add_special_tokens=False)["input_ids"]


def shared_prefix(ids: list[list[int]]) -> dict:
    """Tokens the first prompts of one candidate's tasks (``ids``, one token list per task) have in common."""
    common = 0
    while all(len(t) > common for t in ids) and len({t[common] for t in ids}) == 1:
        common += 1
    lengths = [len(t) for t in ids]
    return {"common_prefix_tokens": common, "first_prompt_tokens": lengths,
            "common_share": round(common / (sum(lengths) / len(lengths)), 3)}


#: characters per token of English and JSON text under the Qwen2.5 tokenizer, as
#: spec_vetting/analysis/capacity.py estimates
#: its text tokens (no Qwen tokenizer ships here); special tokens count one each
CHARS_PER_TOKEN = 3.6
SPECIAL = re.compile(r"<\|[a-z_]+\|>")
#: the 7B measured on an H200 (benchmarks/gpu/h200_batch128.json, random weights, batch 128, 5 turns)
H200 = REPO / "benchmarks" / "gpu" / "h200_batch128.json"


def text_tokens(text: str) -> float:
    specials = SPECIAL.findall(text)
    return len(specials) + len(SPECIAL.sub("", text)) / CHARS_PER_TOKEN


def paper_7b(tasks_per_candidate: int = len(TASKS)) -> dict:
    """What sending a candidate's other tasks after its first reply saves per inspection with Qwen2.5-VL-7B, on paper.

    The first prompt of each task is the system text, the full-view picture, then the task text. Without the order
    the candidate's tasks reach the server together and, where the server caches a prefix only once a request has
    computed it (SGLang's radix cache), each prefills the picture and runs the vision encoder on it; the system text
    is cached anyway (every candidate shares it). With the order, all but the first task find system text and
    picture cached. The picture's tokens come from the processor's rule (render/tokens.py) at the full view's
    typical size; text tokens are estimated from the real prompt texts.
    """
    from spec_vetting.inspect.conversation import build_initial_messages, render_text
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.render.tokens import SIZE_CLASSES, image_tokens

    full = next(sc for sc in SIZE_CLASSES if (sc.view, sc.span) == ("full", "> 3000"))
    pad = image_tokens(*full.typical_px)
    firsts = []
    for key in TASKS[:tasks_per_candidate]:
        text = render_text(build_initial_messages(get_task(key), b"png"))
        head, tail = text.split("<|image_pad|>")
        system_part, picture_markup = head.rsplit("<|im_end|>\n", 1)
        firsts.append({"task": key, "system": text_tokens(system_part + "<|im_end|>\n"),
                       "picture": text_tokens(picture_markup) + pad, "task_text": text_tokens(tail)})
    system = firsts[0]["system"]
    picture = firsts[0]["picture"]  # the user turn's opening markup, the picture's pads and its end marker
    first_prompt = sum(f["system"] + f["picture"] + f["task_text"] for f in firsts) / len(firsts)
    later = (tasks_per_candidate - 1) / tasks_per_candidate  # the share of inspections that follow a first one
    h200 = json.loads(H200.read_text())
    run = h200["runs"][0]
    per_inspection_prefill = run["new_prompt_tokens"] / run["batch"]
    per_inspection_image = run["image_tokens"] / run["batch"]
    saved_tokens = later * picture
    return {
        "full_view_px": list(full.typical_px), "image_tokens": pad,
        "first_prompt_tokens_est": round(first_prompt), "system_tokens_est": round(system),
        "picture_part_tokens": round(picture),
        "shared_share_of_first_prompt": round((system + picture) / first_prompt, 3),
        "saved_prefill_tokens_per_inspection": round(saved_tokens),
        "saved_vision_encoder_passes_per_inspection": round(later, 2),
        "saved_vision_encoder_patches_per_inspection": round(later * pad * 4),
        "h200_prefill_tokens_per_inspection": round(per_inspection_prefill),
        "h200_image_tokens_per_inspection": round(per_inspection_image),
        "saved_share_of_prefill": round(saved_tokens / per_inspection_prefill, 3),
        "saved_share_of_encoder_tokens": round(later * pad / per_inspection_image, 3),
        "saved_gpu_s_per_inspection_at_h200_prefill_rate": round(saved_tokens / run["prefill_tok_s"], 4),
        "h200_gpu_s_per_inspection_prefix_cached_est": round(run["gpu_s_per_inspection_prefix_cached_est"], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=12)
    ap.add_argument("--cap", type=int, default=4,
                    help="in-flight inspections at the server (max_inflight_per_endpoint)")
    ap.add_argument("--order", default="off,on", help="runs in this order (off: all at once, on: warm-prefix order)")
    ap.add_argument("--block-size", type=int, default=32,
                    help="the server's KV block size, the unit its prefix cache matches in: 32 is the least vLLM's CPU "
                    "build takes (its default is 128); vLLM on a GPU uses 16, SGLang matches single tokens")
    ap.add_argument("--cache", type=Path, default=REPO / ".pytest_cache" / "d" / "spec_vetting_tiny_qwen",
                    help="where the tiny model folders are cached (shared with the tests by default)")
    ap.add_argument("--url", help="measure a server already running on the trained tiny model at this root URL "
                    "(e.g. http://127.0.0.1:30011) instead of starting vLLM")
    ap.add_argument("--server", choices=sorted(RESET_PATHS), default="vllm",
                    help="what runs at --url (how its caches are emptied and its prompts counted)")
    ap.add_argument("--paper-only", action="store_true", help="print only the 7B estimate (no server)")
    args = ap.parse_args()
    if args.paper_only:
        print(json.dumps({"paper_7b": paper_7b()}, indent=1))
        return
    problem = None if args.url else venv_problem()
    if problem:
        sys.exit(problem)
    args.cache.mkdir(parents=True, exist_ok=True)
    with tiny_qwen.torch_threads(1):
        model = tiny_qwen.trained_model_folder(args.cache)
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the server's /reset_prefix_cache, for runs that start cold alike
    out: dict = {"server": args.server, "candidates": args.candidates, "tasks": len(TASKS), "cap": args.cap,
                 "max_tokens": MAX_TOKENS, "paper_7b": paper_7b(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        items = work_items(Path(tmp) / "examples", args.candidates)
        if args.url:
            root = args.url.rstrip("/")
            served = httpx.get(root + "/v1/models", timeout=30).json()["data"][0]["id"]
        else:
            out["block_size"] = args.block_size
            server = stack.enter_context(VLLMServer(model, Path(tmp) / "server.log",
                                                    extra_args=("--block-size", str(args.block_size))))
            out["server_start_to_healthy_s"] = round(server.start_s, 1)
            root, served = server.root_url, server.served_name
        replies: dict[str, dict] = {}
        for mode in args.order.split(","):
            reset_caches(root, args.server)
            sent: dict = {}
            results, wall = asyncio.run(run_shard(root + "/v1", items, args.cap, mode == "on", sent))
            n = len(results)
            verdicts: dict[str, int] = {}
            for _, r, _, _ in results:
                verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
            replies.setdefault(mode, {(str(i.candidate.candidate_id), i.task, t.index): t.assistant_text
                                      for i, r, _, _ in results for t in r.turns})
            out["runs"].append({"warm_prefix_first": mode, "inspections": n, "wall_s": round(wall, 2),
                                "inspections_per_s": round(n / wall, 3),
                                "turns": sum(len(r.turns) for _, r, _, _ in results),
                                "verdicts": verdicts, "tokens": token_summary(results)})
            if "shared_prefix" not in out:
                cid = next(iter(sent))
                ids = [served_tokens(root, served, b) if args.server == "vllm" else processor_tokens(model, b)
                       for b in sent[cid]]
                out["shared_prefix"] = {"candidate": cid, **shared_prefix(ids)}
        if {"off", "on"} <= set(replies):  # the same requests give the same greedy replies
            a, b = replies["off"], replies["on"]
            out["same_replies"] = f"{sum(a.get(k) == v for k, v in b.items())} of {len(b)} turns"
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
