#!/usr/bin/env python3
"""What one Spec-o3 inspection costs on a GPU: Qwen2.5-VL-7B (random weights, real shapes) generating in process.

Self-contained on purpose: it imports only torch, transformers and numpy (the GPU machine has nothing else of
this project), builds the model from the public Qwen2.5-VL-7B configuration directly on the GPU in bf16 (no
download, no 28 GB fp32 init on the CPU), and drives ``generate`` the way the in-process engine does
(spec_vetting/engines/local/engine.py): explicit greedy decoding, the checkpoint's generation defaults
ignored, left-padded batches, each ``<|image_pad|>`` widened to one token per 28x28 pixel block.

The conversations are realistic in shape: the system text with the tools block, the full-spectrum picture and the
task prompt, then 3-5 assistant turns of 150-300 generated tokens (lengths forced with min_new_tokens, since a
random model has no reason to stop) separated by tool responses that each carry a zoom picture of one of the
renderer's window size classes. Text token ids are random (the weights are random too): only shapes cost time.

Each turn re-sends the whole conversation, as the in-process engine does (no prefix cache). Reported per batch
size: GPU seconds per inspection, prefill and decode tokens per second, peak memory; plus an estimate for a
server with a prefix cache (SGLang's radix cache) that prefills only each turn's new tokens. The paper claims
0.2 s per spectrum on one 8xH100 server, i.e. 1.6 GPU-seconds per spectrum.

    python benchmarks/gpu/bench_gpu.py                       # 7B, batches 8 and 32, about 3-4 minutes on an H200
    python benchmarks/gpu/bench_gpu.py --model 3b --batch 16
    python benchmarks/gpu/bench_gpu.py --smoke               # tiny config on the CPU, seconds (tested in CI)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

PAPER_GPU_S_PER_SPECTRUM = 0.2 * 8  # 0.2 s per spectrum on one server of 8 H100

# Qwen2.5-VL special token ids (shared by the 3B and 7B checkpoints)
BOS, IM_END = 151643, 151645
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656

# Public configuration shapes (config.json of Qwen/Qwen2.5-VL-7B-Instruct and -3B-Instruct). The rope settings are
# written as those files write them (rope_scaling "mrope"), which transformers 4.5x and 5.x both read.
CONFIGS = {
    "7b": {
        "text": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                     num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000,
                     rms_norm_eps=1e-6, use_sliding_window=False, sliding_window=32768, max_window_layers=28,
                     rope_theta=1000000.0, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
                     bos_token_id=BOS, eos_token_id=IM_END, tie_word_embeddings=False),
        "vision": dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                       hidden_act="silu", patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                       window_size=112, fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2),
        "tie": False,
    },
    "3b": {
        "text": dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                     num_attention_heads=16, num_key_value_heads=2, max_position_embeddings=128000,
                     rms_norm_eps=1e-6, use_sliding_window=False, sliding_window=32768, max_window_layers=70,
                     rope_theta=1000000.0, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
                     bos_token_id=BOS, eos_token_id=IM_END, tie_word_embeddings=True),
        "vision": dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
                       hidden_act="silu", patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                       window_size=112, fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2),
        "tie": True,
    },
    # same code path, tiny sizes, for the CPU smoke test
    "smoke": {
        "text": dict(vocab_size=152064, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
                     rope_theta=1000000.0, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                     bos_token_id=BOS, eos_token_id=IM_END, tie_word_embeddings=False),
        "vision": dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                       patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                       fullatt_block_indexes=[1]),
        "tie": False,
    },
}

# Picture sizes of the trained renderer (width, height after the tight bounding box; spec_vetting.render.tokens)
FULL_VIEW_PX = (792, 472)
WINDOW_PX = [(447, 312), (551, 352), (632, 392), (712, 432)]

# Text lengths in Qwen2.5 tokens (measured on the real tokenizer's scale: system text with the tools block ~ 300,
# a built-in task prompt ~ 250, tool response wrapper and text ~ 30)
SYSTEM_TOKENS, TASK_TOKENS, TOOL_TEXT_TOKENS = 300, 250, 30
TURNS = (3, 5)
GEN_TOKENS = (150, 300)


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 28 * 28 * 1280) -> tuple[int, int]:
    """The Qwen2.5-VL image processor's resize (to multiples of 28 within the pixel limits)."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


class Image:
    """One picture as the model sees it: its patch grid (t, h, w) in 14 px patches and its token count."""

    def __init__(self, width: int, height: int):
        h, w = smart_resize(height, width)
        self.grid = (1, h // 14, w // 14)
        self.tokens = (h // 28) * (w // 28)
        self.patches = self.grid[1] * self.grid[2]


class Conversation:
    """Token ids of one growing inspection conversation, with its pictures in order."""

    def __init__(self, rng: np.random.Generator, scale: float):
        self.rng, self.scale = rng, scale
        self.ids: list[int] = []
        self.images: list[Image] = []
        self.text(SYSTEM_TOKENS)
        self.image(*FULL_VIEW_PX)
        self.text(TASK_TOKENS)

    def text(self, n: int) -> None:
        n = max(1, int(n * self.scale))
        self.ids += self.rng.integers(1000, 150000, size=n).tolist()

    def image(self, width: int, height: int) -> None:
        img = Image(width, height)
        self.images.append(img)
        self.ids += [VISION_START] + [IMAGE_PAD] * img.tokens + [VISION_END]

    def tool_response(self) -> int:
        before = len(self.ids)
        self.image(*WINDOW_PX[int(self.rng.integers(len(WINDOW_PX)))])
        self.text(TOOL_TEXT_TOKENS)
        return len(self.ids) - before


def build_model(name: str, device: str, dtype):
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    spec = CONFIGS[name]
    config = Qwen2_5_VLConfig(text_config=dict(spec["text"]), vision_config=dict(spec["vision"]),
                              image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD,
                              vision_start_token_id=VISION_START, vision_end_token_id=VISION_END,
                              tie_word_embeddings=spec["tie"])
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):  # parameters are created (and randomly initialised) on the device itself
        try:
            model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=dtype, attn_implementation="sdpa")
        except TypeError:  # transformers before 4.56 names it torch_dtype
            model = Qwen2_5_VLForConditionalGeneration._from_config(config, torch_dtype=dtype,
                                                                     attn_implementation="sdpa")
    model.eval()
    model.generation_config = GenerationConfig()  # explicit sampling only, as the engine does
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    n_params = sum(p.numel() for p in model.parameters())
    return model, n_params, time.perf_counter() - t0


class _FirstLogits:
    """Logits processor marking the end of the prefill (the first time logits reach it)."""

    def __init__(self, sync):
        self.sync, self.t = sync, None

    def __call__(self, input_ids, scores):
        if self.t is None:
            self.sync()
            self.t = time.perf_counter()
        return scores


def batch_inputs(convs: list[Conversation], device: str, dtype):
    import torch

    width = max(len(c.ids) for c in convs)
    ids = torch.full((len(convs), width), BOS, dtype=torch.long)
    mask = torch.zeros((len(convs), width), dtype=torch.long)
    for i, c in enumerate(convs):  # left padding, as the engine pads
        ids[i, width - len(c.ids):] = torch.tensor(c.ids)
        mask[i, width - len(c.ids):] = 1
    images = [img for c in convs for img in c.images]
    patches = sum(img.patches for img in images)
    gen = torch.Generator().manual_seed(len(images))
    pixel_values = torch.randn((patches, 3 * 2 * 14 * 14), generator=gen).to(device=device, dtype=dtype)
    grid = torch.tensor([img.grid for img in images], dtype=torch.long, device=device)
    return ids.to(device), mask.to(device), pixel_values, grid, int(mask.sum())


def run_batch(model, batch: int, *, turns: int, gen_tokens: list[int], device: str, dtype, scale: float,
              seed: int) -> dict:
    """``batch`` inspections of ``turns`` assistant turns each, generated together; timings and token counts."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rng = np.random.default_rng(seed)
    convs = [Conversation(np.random.default_rng(rng.integers(1 << 31)), scale) for _ in range(batch)]
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    out = {"batch": batch, "turns": turns, "gen_tokens_per_turn": gen_tokens, "prefill_s": 0.0, "decode_s": 0.0,
           "prefill_tokens": 0, "padded_prefill_tokens": 0, "decode_tokens": 0, "new_prompt_tokens": 0,
           "image_tokens": 0, "max_context": 0}
    new_tokens = [len(c.ids) for c in convs]  # what a prefix-caching server would prefill this turn
    t_start = time.perf_counter()
    for turn in range(turns):
        n = max(2, int(gen_tokens[turn] * scale)) if scale < 1 else gen_tokens[turn]
        ids, mask, pixels, grid, real = batch_inputs(convs, device, dtype)
        marker = _FirstLogits(sync)
        cfg = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, temperature=1.0, top_p=1.0,
                               top_k=50, repetition_penalty=1.0, eos_token_id=IM_END, pad_token_id=BOS)
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            seqs = model.generate(input_ids=ids, attention_mask=mask, pixel_values=pixels, image_grid_thw=grid,
                                  generation_config=cfg, logits_processor=LogitsProcessorList([marker]))
        sync()
        t1 = time.perf_counter()
        out["prefill_s"] += marker.t - t0
        out["decode_s"] += t1 - marker.t
        out["prefill_tokens"] += real
        out["padded_prefill_tokens"] += int(ids.numel())
        out["decode_tokens"] += batch * (seqs.shape[1] - ids.shape[1])
        out["new_prompt_tokens"] += sum(new_tokens)
        out["max_context"] = max(out["max_context"], int(seqs.shape[1]))
        generated = seqs[:, ids.shape[1]:].tolist()
        for i, c in enumerate(convs):  # the turn is replayed, then the tool answers with a zoom picture
            c.ids += generated[i] + [IM_END]
            new_tokens[i] = len(generated[i]) + 1
            if turn + 1 < turns:
                new_tokens[i] += c.tool_response()
    out["wall_s"] = time.perf_counter() - t_start
    out["image_tokens"] = sum(img.tokens for c in convs for img in c.images)
    out["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    out["gpu_s_per_inspection"] = out["wall_s"] / batch
    out["prefill_tok_s"] = out["prefill_tokens"] / out["prefill_s"] if out["prefill_s"] else None
    out["decode_tok_s"] = out["decode_tokens"] / out["decode_s"] if out["decode_s"] else None
    # a server with a prefix cache prefills only each turn's new tokens (same measured rates)
    if out["prefill_tok_s"] and out["decode_tok_s"]:
        est = out["new_prompt_tokens"] / out["prefill_tok_s"] + out["decode_tokens"] / out["decode_tok_s"]
        out["gpu_s_per_inspection_prefix_cached_est"] = est / batch
    out["vs_paper"] = out["gpu_s_per_inspection"] / PAPER_GPU_S_PER_SPECTRUM
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["7b", "3b"], default="7b")
    p.add_argument("--batch", default="8,32", help="comma-separated batch sizes (inspections generated together)")
    p.add_argument("--turns", type=int, default=None,
                   help=f"assistant turns per inspection (default: drawn in {TURNS})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=240.0,
                   help="start no new batch size after this many seconds (the run must fit a short GPU slot)")
    p.add_argument("--smoke", action="store_true", help="tiny config on the CPU: checks the code path in seconds")
    p.add_argument("--out", default=None, help="write the results as JSON here too")
    args = p.parse_args(argv)

    import torch
    import transformers

    t_begin = time.perf_counter()
    if args.smoke:
        name, device, dtype, scale = "smoke", "cpu", torch.float32, 0.05
        batches = [2]
    else:
        if not torch.cuda.is_available():
            p.error("no CUDA GPU visible; use --smoke to check the code path on the CPU")
        name, device, dtype, scale = args.model, "cuda", torch.bfloat16, 1.0
        batches = [int(b) for b in args.batch.split(",") if b.strip()]
    rng = np.random.default_rng(args.seed)
    turns = args.turns or int(rng.integers(TURNS[0], TURNS[1] + 1))
    gen_tokens = [int(x) for x in rng.integers(GEN_TOKENS[0], GEN_TOKENS[1] + 1, size=turns)]

    model, n_params, init_s = build_model(name, device, dtype)
    report = {
        "model": f"Qwen2.5-VL-{name.upper()} shape, random weights" if name != "smoke" else "tiny smoke config",
        "params": n_params, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "dtype": str(dtype).replace("torch.", ""), "torch": torch.__version__,
        "transformers": transformers.__version__, "init_s": init_s,
        "paper_gpu_s_per_spectrum": PAPER_GPU_S_PER_SPECTRUM, "runs": [],
    }
    print(f"# {report['model']}: {n_params / 1e9:.2f} B params on {report['device']} ({report['dtype']}), "
          f"built in {init_s:.1f} s; {turns} turns, generated tokens per turn {gen_tokens}", flush=True)
    # warm-up: kernels, allocator, cuBLAS heuristics; not timed
    run_batch(model, 1, turns=1, gen_tokens=[4], device=device, dtype=dtype, scale=min(scale, 0.1), seed=99)
    for b in batches:
        if time.perf_counter() - t_begin > args.max_seconds:
            print(f"# skipped batch {b}: past --max-seconds {args.max_seconds:.0f}", flush=True)
            continue
        r = run_batch(model, b, turns=turns, gen_tokens=gen_tokens, device=device, dtype=dtype, scale=scale,
                      seed=args.seed + b)
        report["runs"].append(r)
        mem = f"{r['peak_memory_gib']:.1f} GiB" if r["peak_memory_gib"] is not None else "n/a"
        print(f"batch {b:3d}: {r['gpu_s_per_inspection']:.2f} GPU-s/inspection "
              f"(prefix-cached est. {r.get('gpu_s_per_inspection_prefix_cached_est', float('nan')):.2f}; "
              f"paper {PAPER_GPU_S_PER_SPECTRUM:.1f}) | prefill {r['prefill_tok_s']:.0f} tok/s over "
              f"{r['prefill_tokens']} tokens | decode {r['decode_tok_s']:.0f} tok/s over {r['decode_tokens']} "
              f"tokens | max context {r['max_context']} | peak {mem} | wall {r['wall_s']:.1f} s", flush=True)
    report["total_s"] = time.perf_counter() - t_begin
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
