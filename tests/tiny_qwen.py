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

import hashlib
import json
import shutil
from pathlib import Path

from spec_vetting.inspect import protocol

REPO = Path(__file__).resolve().parents[1]
DEPLOY_TEMPLATE = REPO / "deploy" / "chat_template.jinja"

#: bump when anything below changes what is written; cached folders are keyed by it
TINY_QWEN_VERSION = "tiny-qwen-1"

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
        vocab_size=900, min_frequency=2, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
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
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        rms_norm_eps=1e-6,
        # head_dim 16: the three multimodal rope sections (time, height, width) must sum to head_dim / 2
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    vision = dict(
        depth=2,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        out_hidden_size=64,
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
