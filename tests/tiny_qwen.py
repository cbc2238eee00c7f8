"""A tiny Qwen2.5-VL built offline: real transformers model code, a real (PIL) image processor, Qwen's special tokens.

Nothing comes from a model hub. The tokenizer is a byte-level BPE trained in milliseconds on protocol-like text (so
the system prompt and tool calls take few tokens), wrapped as a transformers fast tokenizer carrying the shipped
chat template. The model config keeps what matters to the input pipeline (patch size 14, spatial merge 2, so one
28x28 block is one token; multimodal rope; Qwen's special-token roles) and shrinks everything else.

``build_tiny_qwen(folder)`` writes a folder laid out like a real checkpoint (config.json, model.safetensors,
tokenizer files, preprocessor_config.json, chat_template.jinja); ``train_tiny_qwen`` fine-tunes such a folder on
given conversations so that greedy decoding reproduces them. Both are cached by the fixtures in
``tests/test_local_engine*.py`` under pytest's cache directory, keyed by :data:`TINY_QWEN_VERSION`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from pathlib import Path

from spec_vetting import protocol

REPO = Path(__file__).resolve().parents[1]
DEPLOY_TEMPLATE = REPO / "deploy" / "chat_template.jinja"

#: bump when anything below changes what is written; cached folders are keyed by it
TINY_QWEN_VERSION = "tiny-qwen-3"

#: Qwen2.5's added tokens, in Qwen's id order. ``special`` as Qwen marks them: the tool-call tags are plain added
#: tokens, so a server decoding with skip_special_tokens keeps them in the assistant text.
QWEN_ADDED_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
]

#: pixels allowed per test image: 16 blocks of 28x28, i.e. at most 16 image tokens (the real default is 1280)
TINY_MAX_PIXELS = 28 * 28 * 16
TINY_MIN_PIXELS = 28 * 28 * 4


def _corpus() -> list[str]:
    """Protocol-like text the BPE merges are learnt from: the strings the tiny model reads and writes most."""
    texts = [protocol.SYSTEM_TEXT, protocol.TOOL_LINE]
    for lo, hi, label in [(6500, 6600, "H-alpha"), (4800, 4920, "H-beta"), (4300, 4400, "H-gamma"),
                          (5100, 5200, "C2 Swan band"), (7000, 7200, "TiO band"), (3900, 4000, "Ca II H and K")]:
        call = {"name": protocol.TOOL_NAME, "arguments": {"label": f"Zoom on the {label} region",
                                                             "wavelength_range": [lo, hi]}}
        texts.append(f"<think>Check the {label} region.</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>")
        texts.append(protocol.zoom_success_text((lo, hi), f"Zoom on the {label} region"))
        texts.append(protocol.zoom_success_text((lo, hi), None))
    texts += [
        "Analyze the provided spectrum to determine if it is a **Cataclysmic Variables (CV)**.",
        "Analyze the provided spectrum to determine if it is a **Carbon Star (C-type)**.",
        "<think>Broad Balmer emission lines are present.</think>\n<answer>\\boxed{YES} Broad Balmer emission.</answer>",
        "<think>No emission lines are visible.</think>\n<answer>\\boxed{NO} An ordinary star.</answer>",
        "Error: The specified wavelength range [1, 2] is invalid or outside the available data range [3700.0, 9100.0].",
    ]
    try:  # the built-in task prompts, so the user turn is a few hundred tokens, not a thousand
        from spec_vetting.inspect.tasks import builtin_tasks

        texts += [t.prompt for t in builtin_tasks()]
    except ImportError:  # pragma: no cover - before the tasks module exists
        pass
    # repeat so frequent protocol phrases win merges over one-off words
    return texts * 4


def build_tokenizer(chat_template: str):
    """Byte-level BPE with Qwen's added tokens, as a transformers fast tokenizer (eos <|im_end|>, pad <|endoftext|>)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, min_frequency=2, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)

    from tokenizers import AddedToken

    tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in QWEN_ADDED_TOKENS if not s])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, s in QWEN_ADDED_TOKENS if s])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    fast.chat_template = chat_template
    return fast


def tiny_config(tokenizer):
    """Qwen2_5_VLConfig with tiny sizes; the ids of the vision tokens are the tiny tokenizer's."""
    from transformers import Qwen2_5_VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t, _ in QWEN_ADDED_TOKENS}
    vocab = ((len(tokenizer) + 63) // 64) * 64
    text = dict(
        vocab_size=vocab,
        # head_dim 128 / 4 = 32: the smallest head vLLM's CPU attention kernels take (32..512), so the same
        # checkpoint runs in process and under a real vLLM server (tests/test_vllm_server.py)
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        rms_norm_eps=1e-6,
        # the three multimodal rope sections (time, height, width) must sum to head_dim / 2 = 16; Qwen2.5-VL's own
        # [16, 24, 24] (head_dim 128) scaled by a quarter
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [4, 6, 6]},
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    vision = dict(
        depth=2,
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,  # head_dim 32 in the vision tower too
        out_hidden_size=128,  # the text hidden size
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[1],
    )
    return Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def build_tiny_qwen(folder: Path, *, seed: int = 0, chat_template_path: Path = DEPLOY_TEMPLATE) -> Path:
    """Write a random tiny Qwen2.5-VL checkpoint folder (weights, tokenizer, image processor, chat template)."""
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    template = Path(chat_template_path).read_text()
    tokenizer = build_tokenizer(template)
    config = tiny_config(tokenizer)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.text_config.bos_token_id,
        eos_token_id=[config.text_config.eos_token_id, config.text_config.bos_token_id],
        pad_token_id=config.text_config.pad_token_id,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    Qwen2VLImageProcessorPil(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS).save_pretrained(folder)
    return folder


def cached_folder(cache_root: Path, name: str, key: dict, build) -> Path:
    """``cache_root/name-<hash of key>``, built by ``build(tmp_folder)`` once and renamed into place atomically."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
    final = Path(cache_root) / f"{name}-{digest}"
    if (final / "config.json").exists():
        return final
    tmp = Path(cache_root) / f".{name}-{digest}.building"
    shutil.rmtree(tmp, ignore_errors=True)
    build(tmp)
    try:
        tmp.rename(final)
    except OSError:  # another process won the race; its copy is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
    return final


@contextlib.contextmanager
def torch_threads(n: int = 1):
    """Run torch on ``n`` intra-op threads for a while.

    On a small shared CI machine the default thread pool spins against other processes: the tiny model's steps
    go from ~30 ms to over a second. One thread is faster for models this small.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def assistant_spans(builder, conversation: list[dict]) -> tuple[object, list[tuple[int, int]]]:
    """The whole conversation's inputs and, per assistant message, the token span the model must write.

    A span runs from the end of the prompt the server would send for that turn through the turn's ``<|im_end|>``
    (the newline after it is template markup, never generated).
    """
    full = builder.build([conversation], add_generation_prompt=False)
    ids = full.input_ids[0].tolist()
    im_end = builder.tokenizer.convert_tokens_to_ids("<|im_end|>")
    spans = []
    for a, m in enumerate(conversation):
        if m["role"] != "assistant":
            continue
        prompt = builder.build([conversation[:a]], add_generation_prompt=True).input_ids[0].tolist()
        if ids[: len(prompt)] != prompt:
            raise AssertionError(f"the prompt of assistant message {a} is not a prefix of the whole conversation")
        end = ids.index(im_end, len(prompt))
        spans.append((len(prompt), end + 1))
    return full, spans


def train_tiny_qwen(base: Path, out: Path, conversations: list[list[dict]], *, max_steps: int = 400,
                    lr: float = 3e-3, margin: float = 3.0, seed: int = 0) -> dict:
    """Teacher-force ``base`` on the assistant turns of ``conversations`` until greedy decoding reproduces them.

    Stops once every target token beats the runner-up logit by ``margin`` (so incremental decoding with a KV
    cache, batching and padding cannot flip a choice), or after ``max_steps``. Writes a checkpoint folder to ``out``
    and returns {"steps", "loss", "min_margin"}.
    """
    import torch
    from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from spec_vetting.engines.local.inputs import QwenInputBuilder

    base, out = Path(base), Path(out)
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    processor = Qwen2VLImageProcessorPil.from_pretrained(base, local_files_only=True)
    builder = QwenInputBuilder(tokenizer, processor, tokenizer.chat_template)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(base, local_files_only=True, dtype=torch.float32)
    model.train()
    torch.manual_seed(seed)
    examples = []
    for conv in conversations:
        full, spans = assistant_spans(builder, conv)
        labels = torch.full_like(full.input_ids, -100)
        for lo, hi in spans:
            labels[0, lo:hi] = full.input_ids[0, lo:hi]
        examples.append((full, labels))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    stats = {"steps": 0, "loss": float("nan"), "min_margin": float("-inf")}
    for step in range(1, max_steps + 1):
        opt.zero_grad()
        total, worst, losses = 0.0, float("inf"), []
        for full, labels in examples:
            # mm_token_type_ids in the inputs: trained with the 3-D image positions a real server uses
            res = model(**full.model_kwargs(), labels=labels)
            losses.append(res.loss)
            total += float(res.loss.detach())
            with torch.no_grad():  # logits at t predict token t+1
                logits = res.logits[0, :-1].float()
                target = labels[0, 1:]
                sel = target != -100
                lg, tg = logits[sel], target[sel]
                right = lg.gather(1, tg[:, None])[:, 0]
                lg = lg.scatter(1, tg[:, None], float("-inf"))
                worst = min(worst, float((right - lg.max(dim=1).values).min()))
        stats = {"steps": step, "loss": total / len(examples), "min_margin": worst}
        if worst > margin:  # judged on the weights that are saved: stop before stepping away from them
            break
        sum(losses).backward()
        opt.step()
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json",
                 "generation_config.json"):
        if (base / name).exists():
            shutil.copy2(base / name, out / name)
    (out / "training.json").write_text(json.dumps(stats))
    return stats


# ---- the trajectory the trained tiny model memorises, and the fixtures that cache both folders ------------------

TRAJ_TURN1 = (
    "<think>Check the H-alpha region.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"label": "Zoom on the H-alpha region", '
    '"wavelength_range": [6500, 6600]}}\n</tool_call>'
)
TRAJ_FINAL = ("<think>Broad Balmer emission lines are present.</think>\n"
              "<answer>\\boxed{YES} Broad Balmer emission.</answer>")


def fixed_spectrum():
    """A fixed CV-like spectrum (blue continuum, broad Balmer emission) on LAMOST's own grid, z = 0.

    Flux values are float32 numbers, so a LAMOST file holds the spectrum exactly (:func:`write_fixed_spectrum`):
    the CLI reading that file renders the same pictures the model was trained on.
    """
    import numpy as np

    from spec_vetting.spectrum import Spectrum, SpectrumMeta
    from spec_vetting.synthetic.grids import lamost_grid

    wl = lamost_grid()
    flux = 2.0 - wl / 9100.0
    for center, amp in [(6563.0, 3.0), (4861.0, 2.0), (4340.0, 1.5), (4102.0, 1.0)]:
        flux = flux + amp * np.exp(-0.5 * ((wl - center) / 12.0) ** 2)
    flux = flux.astype(np.float32).astype(np.float64)
    n = wl.size
    meta = SpectrumMeta(survey="lamost", variant="synthetic", path="fixed-cv", redshift=0.0)
    return Spectrum(wl, flux, np.ones(n), np.zeros(n, dtype=bool), "1e-17 erg/s/cm2/A", meta)


def write_fixed_spectrum(path: Path) -> Path:
    """:func:`fixed_spectrum` as a LAMOST DR1 file (a pure log10 grid and float32 flux: read back unchanged)."""
    from spec_vetting.synthetic.writers import write_spectrum

    return write_spectrum(fixed_spectrum(), path, "lamost-lrs-dr1-image")


def spectrum_renderer():
    """The project's renderer when it is importable, else a small deterministic line plot (PIL only)."""
    try:
        from spec_vetting.render import render_spectrum

        return render_spectrum
    except ImportError:
        return _simple_render


def _simple_render(wavelength, flux, wavelength_range=None, title="Spectrum") -> bytes:
    import io

    import numpy as np
    from PIL import Image, ImageDraw

    from spec_vetting.errors import RenderError

    wl, fx = np.asarray(wavelength, float), np.asarray(flux, float)
    keep = np.isfinite(wl) & np.isfinite(fx)
    if wavelength_range is not None:
        keep &= (wl >= wavelength_range[0]) & (wl <= wavelength_range[1])
    if not keep.any():
        raise RenderError(f"No data points in specified wavelength range {tuple(wavelength_range)!r}")
    wl, fx = wl[keep], fx[keep]
    w, h = (560, 336) if wavelength_range else (792, 472)
    x = (wl - wl.min()) / max(np.ptp(wl), 1e-9) * (w - 1)
    y = (1 - (fx - fx.min()) / max(np.ptp(fx), 1e-9)) * (h - 1)
    img = Image.new("RGB", (w, h), "white")
    ImageDraw.Draw(img).line(list(zip(x.tolist(), y.tolist(), strict=True)), fill="blue", width=1)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def inspection_context(candidate_id: str):
    from spec_vetting.types import InspectionContext

    return InspectionContext(candidate_id=candidate_id, task="cv", spectrum=fixed_spectrum(), redshift=0.0)


def trajectory_conversation() -> list[dict]:
    """The whole trajectory as a server receives it: the client's messages of the last turn + the final answer.

    Made by the real loop with a scripted engine replying the two target texts, so the images and tool texts are
    byte for byte those the loop will send when the trained model drives it.
    """
    import asyncio

    from spec_vetting.engines.local.inputs import openai_messages
    from spec_vetting.engines.scripted import ScriptedEngine
    from spec_vetting.inspect.loop import run_inspection
    from spec_vetting.inspect.tasks import get_task

    engine = ScriptedEngine([TRAJ_TURN1, TRAJ_FINAL])
    result = asyncio.run(run_inspection(inspection_context("traj"), get_task("cv"), engine,
                                        renderer=spectrum_renderer()))
    if result.verdict != "YES":
        raise AssertionError(f"the scripted trajectory did not end YES: {result}")
    messages = openai_messages(engine.calls[-1].messages)
    return messages + [{"role": "assistant", "content": TRAJ_FINAL}]


def _cache_root(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is not None:  # kept between sessions, keyed by content hashes below
        return Path(cache.mkdir("spec_vetting_tiny_qwen"))
    root = tmp_path_factory.getbasetemp() / "tiny_qwen"  # one per session, shared by every module
    root.mkdir(exist_ok=True)
    return root


def _build_key() -> dict:
    import tokenizers
    import torch
    import transformers

    return {
        "version": TINY_QWEN_VERSION,
        "source": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "template": hashlib.sha256(DEPLOY_TEMPLATE.read_bytes()).hexdigest(),
        "libs": [transformers.__version__, torch.__version__, tokenizers.__version__],
    }


def _tiny_model_dir(request, tmp_path_factory) -> Path:
    return cached_folder(_cache_root(request, tmp_path_factory), "tiny-qwen", _build_key(), build_tiny_qwen)


def _trained_model_dir(tiny: Path, request, tmp_path_factory) -> Path:
    return trained_folder(tiny, _cache_root(request, tmp_path_factory))


def trained_model_folder(cache_root: Path) -> Path:
    """The trained tiny model under ``cache_root`` (built there once), for scripts outside pytest (benchmarks)."""
    tiny = cached_folder(cache_root, "tiny-qwen", _build_key(), build_tiny_qwen)
    return trained_folder(tiny, cache_root)


def trained_folder(tiny: Path, cache_root: Path) -> Path:
    """``tiny`` after memorising the trajectory (:func:`train_tiny_qwen`), cached under ``cache_root``."""
    conversation = trajectory_conversation()
    key = {**_build_key(), "base": tiny.name, "conversation": hashlib.sha256(
        json.dumps(conversation, sort_keys=True).encode()).hexdigest()}

    def build(folder: Path) -> None:
        with torch_threads(1):
            stats = train_tiny_qwen(tiny, folder, [conversation])
        if stats["min_margin"] <= 0:
            raise AssertionError(f"the tiny model did not memorise the trajectory: {stats}")

    return cached_folder(cache_root, "tiny-qwen-trained", key, build)


try:  # fixtures for the test modules that import them (tests/test_local_engine*.py)
    import pytest

    @pytest.fixture(scope="session")
    def tiny_model_dir(request, tmp_path_factory) -> Path:
        """A random tiny Qwen2.5-VL checkpoint folder (cached between sessions)."""
        return _tiny_model_dir(request, tmp_path_factory)

    @pytest.fixture(scope="session")
    def trained_model_dir(tiny_model_dir, request, tmp_path_factory) -> Path:
        """The tiny model after memorising :data:`TRAJ_TURN1` then :data:`TRAJ_FINAL` (cached between sessions)."""
        return _trained_model_dir(tiny_model_dir, request, tmp_path_factory)

    @pytest.fixture(autouse=True, scope="module")
    def one_torch_thread():
        """Torch on one thread for a whole test module that imports this fixture (see :func:`torch_threads`)."""
        with torch_threads(1):
            yield

except ImportError:  # pragma: no cover - used outside pytest (benchmarks, notebooks)
    pass
