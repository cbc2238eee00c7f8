"""In-process engine: Qwen2.5-VL (Spec-o3) from a local folder with transformers, on CPU or GPU.

The conversation is turned into model inputs exactly as an OpenAI-compatible server would (see
:mod:`.inputs`): the same message dicts the HTTP client sends, the checkpoint's chat template (or the shipped
one), the PIL image processor, placeholders widened per image. Sampling is explicit on every request (greedy by
default); the checkpoint's ``generation_config.json`` defaults (Qwen ships a repetition penalty and top-k) are
deliberately not applied, as a server given explicit parameters would not either.

Generation runs in one worker thread so the event loop keeps serving other inspections; requests that arrive
within a few milliseconds of each other with the same sampling are generated together in one left-padded batch.

Checked with transformers 5.24 and torch 2.13 (pyproject pins transformers >=5.0,<6).

Why one file of about 500 lines: loading, generation with its log-probability recorder and the reading of
P(YES) share the model's tokenizer state; apart, each would need the others' internals.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import struct
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...answers import locate_verdict, verdict_probability
from ...engine_interface import Engine, EngineSession
from ...errors import ConfigError, EngineError
from ...protocol import RESPONSE_TOKENS
from ...types import EngineIdentity, EngineReply, EngineSettings, InspectionContext, Message, Sampling, Usage
from .inputs import QwenInputBuilder, load_chat_template, openai_messages

log = logging.getLogger(__name__)

ENGINE_VERSION = "local-transformers/1"
#: how many top log-probabilities are kept per generated token when p_yes is asked for (as top_logprobs=20)
TOP_LOGPROBS = 20


@dataclass
class GenerationRequest:
    """One assistant turn to generate: OpenAI-style messages (as a server receives them) and explicit sampling."""

    messages: list[dict[str, Any]]
    sampling: Sampling


def _sampling_key(s: Sampling) -> tuple:
    # only requests that decode the same way share a batch
    # max_tokens is left out: under training's rule it differs turn by turn; a batch takes the largest asked
    return (s.temperature, s.top_p, s.seed, bool(s.logprobs), s.top_logprobs)


DTYPE_NAMES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
               "float32": "float32", "fp32": "float32"}


def dtype_name(dtype, device: str) -> str:
    """The weights' dtype by name: "auto"/None is bf16 on a GPU and fp32 on the CPU (fp16 is slow on CPUs)."""
    if dtype is None or dtype == "auto":
        return "bfloat16" if str(device).startswith("cuda") else "float32"
    name = str(dtype).replace("torch.", "")
    if name not in DTYPE_NAMES:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of {sorted(DTYPE_NAMES)} or 'auto'")
    return DTYPE_NAMES[name]


def model_checksum(folder: Path) -> str:
    """sha256 over config.json and the weights' index (the safetensors index, else each shard's header).

    Cheap (no weight bytes are read) yet changes with the architecture, the tensor names, shapes and dtypes, and
    the shard sizes; the full weights hash is left to deployment tooling.
    """
    h = hashlib.sha256()
    h.update((folder / "config.json").read_bytes())
    index = folder / "model.safetensors.index.json"
    if index.exists():
        h.update(index.read_bytes())
    for shard in sorted(folder.glob("*.safetensors")):
        with open(shard, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            h.update(shard.name.encode())
            h.update(str(shard.stat().st_size).encode())
            h.update(fh.read(min(n, 64 * 1024 * 1024)))
    return h.hexdigest()


class _TopLogprobRecorder:
    """A logits processor that records log-probabilities of every step and changes nothing.

    Per step it keeps the top-k (values, ids) and, one step later (when the chosen token shows up in
    ``input_ids``), the chosen token's log-probability; :meth:`finish` reads the last one from the output.
    Custom processors run before the sampling warpers, so what is recorded is the model's own distribution
    (what a server returns as logprobs), not the temperature-scaled one.
    """

    def __init__(self, k: int):
        self.k = k
        self.steps: list[tuple[Any, Any]] = []  # per step: (values (B, k), indices (B, k)) on CPU
        self.chosen: list[Any] = []  # per step: (B,) log-probability of the token generated there
        self._prev = None

    def __call__(self, input_ids, scores):
        import torch

        logp = torch.log_softmax(scores.float(), dim=-1)
        if self._prev is not None:
            self.chosen.append(self._prev.gather(1, input_ids[:, -1:])[:, 0].cpu())
        vals, idx = torch.topk(logp, k=min(self.k, logp.shape[-1]), dim=-1)
        self.steps.append((vals.cpu(), idx.cpu()))
        self._prev = logp
        return scores

    def finish(self, sequences) -> None:
        if self._prev is not None and len(self.chosen) < len(self.steps):
            self.chosen.append(self._prev.gather(1, sequences[:, -1:].to(self._prev.device))[:, 0].cpu())
        self._prev = None


class _LoopQueue:
    """The turns waiting on one event loop, and the task that feeds them to the worker thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, work):
        self.pending: list[tuple[GenerationRequest, asyncio.Future]] = []
        self.wakeup = asyncio.Event()
        self.worker = loop.create_task(work(self), name="spec-vet-local-batcher")


class _MicroBatcher:
    """Collects concurrent requests for a few milliseconds and runs them as one batch in the worker thread.

    Each event loop that submits gets its own queue (a shard's loop, a test's ``asyncio.run``); all share the one
    worker thread, so generation stays serial on the model.
    """

    def __init__(self, run_batch, executor: ThreadPoolExecutor, max_batch: int, wait_s: float):
        self._run_batch = run_batch
        self._executor = executor
        self._max_batch = max(1, int(max_batch))
        self._wait_s = wait_s
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = weakref.WeakKeyDictionary()

    async def submit(self, request: GenerationRequest) -> EngineReply:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None or queue.worker.done():
            queue = self._queues[loop] = _LoopQueue(loop, self._work)
        fut = loop.create_future()
        queue.pending.append((request, fut))
        queue.wakeup.set()
        return await fut

    async def _work(self, q: _LoopQueue) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await q.wakeup.wait()
            q.wakeup.clear()
            if len(q.pending) < self._max_batch and self._wait_s > 0:
                await asyncio.sleep(self._wait_s)  # let the other sessions' turns arrive
            while q.pending:
                key = _sampling_key(q.pending[0][0].sampling)
                batch = [(r, f) for r, f in q.pending if _sampling_key(r.sampling) == key][: self._max_batch]
                taken = {id(f) for _, f in batch}
                q.pending = [(r, f) for r, f in q.pending if id(f) not in taken]
                batch = [(r, f) for r, f in batch if not f.done()]  # drop turns whose inspection was cancelled
                if not batch:
                    continue
                try:
                    replies = await loop.run_in_executor(self._executor, self._run_batch, [r for r, _ in batch])
                except Exception as exc:  # every waiting turn gets the failure; the batcher lives on
                    for _, f in batch:
                        if not f.done():
                            f.set_exception(exc)
                else:
                    for (_, f), reply in zip(batch, replies, strict=True):
                        if not f.done():
                            f.set_result(reply)

    def cancel(self) -> None:
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, queue in list(self._queues.items()):
            if queue.worker.done():
                continue
            if loop is current:
                queue.worker.cancel()
            elif not loop.is_closed():  # another thread's loop: ask it to cancel its own task
                loop.call_soon_threadsafe(queue.worker.cancel)
        self._queues.clear()


class LocalEngine(Engine):
    """Qwen2.5-VL in process. ``model_path`` is a local checkpoint folder; nothing is ever fetched from a hub.

    ``device``: "cpu", "cuda", "cuda:1", ...; ``dtype``: None/"auto" (bf16 on a GPU that has it, else fp32),
    "bfloat16", "float16", "float32"; ``min_pixels``/``max_pixels``: override the checkpoint's image size limits
    (None keeps what the model was trained with); ``chat_template``: None (the checkpoint's), "deploy" (the shipped
    Spec-o3 template) or a file path; ``batch``: most turns generated together; ``batch_wait_ms``: how long the
    first waiting turn waits for others.
    """

    name = "local"
    p_yes_source = "logprobs"
    costly_start = True

    @classmethod
    def options_from_settings(cls, settings: EngineSettings) -> dict[str, Any]:
        if not settings.model:
            raise ConfigError("the local engine needs engine.model (--model FOLDER): a Qwen2.5-VL model folder")
        device = {"device": settings.device} if settings.device else {}
        return {"model_path": settings.model, **device, **settings.options}

    @classmethod
    def ignored_settings(cls, settings: EngineSettings) -> list[str]:
        return ["endpoints"] if settings.endpoints else []

    def __init__(
        self,
        model_path,
        device: str = "cpu",
        dtype=None,
        *,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        chat_template: str | None = None,
        batch: int = 8,
        batch_wait_ms: float = 5.0,
        attn_implementation: str | None = "sdpa",
    ):
        self.model_path = Path(model_path).expanduser()
        self.device = device
        self.dtype_option = dtype
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.chat_template_option = chat_template
        self.batch = batch
        self.batch_wait_s = batch_wait_ms / 1000.0
        self.attn_implementation = attn_implementation
        self.model = None
        self.tokenizer = None
        self.inputs: QwenInputBuilder | None = None
        self._identity: EngineIdentity | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._batcher: _MicroBatcher | None = None
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()  # one generate at a time, whichever thread asks (server threads)
        self._token_strings: list[str] | None = None

    # ---- loading -------------------------------------------------------------------------------------------

    def _check_folder(self) -> None:
        folder = self.model_path
        if not folder.is_dir():
            raise ConfigError(
                f"model folder {folder} does not exist; download the Spec-o3 weights (e.g. Maxwell-Jia/spec-o3-7b) "
                "to a local folder and pass its path"
            )
        missing = [n for n in ("config.json", "preprocessor_config.json") if not (folder / n).exists()]
        if not (folder / "tokenizer.json").exists() and not (folder / "vocab.json").exists():
            missing.append("tokenizer.json")
        if missing:
            raise ConfigError(f"model folder {folder} lacks {', '.join(missing)}: not a complete Qwen2.5-VL checkpoint")
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
        if model_type != "qwen2_5_vl":
            raise ConfigError(
                f"model folder {folder} holds model_type {model_type!r}; the local engine runs Qwen2.5-VL "
                "(model_type 'qwen2_5_vl') checkpoints such as Spec-o3"
            )

    def load(self) -> None:
        """Load tokenizer, image processor and weights (blocking; :meth:`start` runs it in a thread)."""
        with self._load_lock:
            if self.model is not None:
                return
            self._check_folder()
            import torch
            from transformers import AutoTokenizer, GenerationConfig, Qwen2_5_VLForConditionalGeneration
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

            if self.device.startswith("cuda") and not torch.cuda.is_available():
                raise ConfigError(f"device {self.device!r} asked for but torch sees no CUDA GPU; use device='cpu'")
            identity = self.identity()  # checks the folder and the template before any weight is read
            dtype = getattr(torch, identity.model_info["dtype"])
            folder = self.model_path
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            image_processor = Qwen2VLImageProcessorPil.from_pretrained(folder, local_files_only=True)
            template, _ = load_chat_template(folder, self.chat_template_option)
            t0 = time.perf_counter()
            kwargs = {"dtype": dtype, "local_files_only": True}
            if self.attn_implementation:
                kwargs["attn_implementation"] = self.attn_implementation
            model = Qwen2_5_VLForConditionalGeneration.from_pretrained(folder, **kwargs).to(self.device).eval()
            # explicit sampling only: nothing inherited from the checkpoint's generation_config.json
            model.generation_config = GenerationConfig()
            log.info("loaded %s on %s (%s) in %.1f s", folder, self.device, dtype, time.perf_counter() - t0)
            self.inputs = QwenInputBuilder(
                tokenizer, image_processor, template, min_pixels=self.min_pixels, max_pixels=self.max_pixels
            )
            stop_ids = {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
            self._stop_ids = sorted(i for i in stop_ids if i is not None)
            self.tokenizer = tokenizer
            self.model = model

    async def start(self) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spec-vet-local")
        await asyncio.get_running_loop().run_in_executor(self._executor, self.load)
        if self._batcher is None:
            self._batcher = _MicroBatcher(self.generate_batch, self._executor, self.batch, self.batch_wait_s)

    async def close(self) -> None:
        if self._batcher is not None:
            self._batcher.cancel()
            self._batcher = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def identity(self) -> EngineIdentity:
        """Engine and model identity, from the folder's files alone: valid before the weights are loaded."""
        if self._identity is None:
            from importlib.metadata import PackageNotFoundError, version

            self._check_folder()
            template, source = load_chat_template(self.model_path, self.chat_template_option)
            try:
                libs = f"transformers/{version('transformers')} torch/{version('torch')}"
            except PackageNotFoundError:
                libs = "transformers/missing"
            self._identity = EngineIdentity(
                engine=self.name,
                engine_version=f"{ENGINE_VERSION} {libs}",
                model=self.model_path.name,
                model_info={
                    "path": str(self.model_path),
                    "checksum": model_checksum(self.model_path),
                    "chat_template": source,
                    "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest(),
                    "device": self.device,
                    "dtype": dtype_name(self.dtype_option, self.device),
                    # None: the checkpoint's own limits (what the model was trained with)
                    "min_pixels": self.min_pixels,
                    "max_pixels": self.max_pixels,
                },
            )
        return self._identity

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _LocalSession(self, ctx)

    async def complete_async(self, request: GenerationRequest) -> EngineReply:
        if self._batcher is None:
            await self.start()
        return await self._batcher.submit(request)

    # ---- generation (blocking; runs in the worker thread) ---------------------------------------------------

    def complete_openai(self, messages: list[dict[str, Any]], sampling: Sampling | None = None) -> EngineReply:
        """One assistant turn for OpenAI-style messages: what a server does with one chat request (blocking)."""
        return self.generate_batch([GenerationRequest(messages, sampling or Sampling())])[0]

    def generate_batch(self, requests: list[GenerationRequest]) -> list[EngineReply]:
        """Generate one assistant turn for each request in one left-padded batch (same sampling for all)."""
        return [reply for reply, _ in self._generate(requests)]

    def _generate(self, requests: list[GenerationRequest]) -> list[tuple[EngineReply, dict | None]]:
        """Replies, each with its OpenAI-format ``logprobs`` (None unless the sampling asked for them)."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        self.load()
        s = requests[0].sampling
        if any(_sampling_key(r.sampling) != _sampling_key(s) for r in requests):
            raise ValueError("generate_batch needs requests with identical sampling; the batcher groups them")
        t0 = time.perf_counter()
        batch = self.inputs.build([r.messages for r in requests])
        limit = self.model.config.text_config.max_position_embeddings
        longest = max(batch.prompt_tokens)
        # as verl's rollout: max_new_tokens = min(asked, context left - 1); no room left is an error
        asked = max(r.sampling.max_tokens if r.sampling.max_tokens is not None else RESPONSE_TOKENS for r in requests)
        max_new = min(asked, limit - longest - 1)
        if max_new < 1:
            raise EngineError(
                f"prompt of {longest} tokens leaves no room in the model's context of {limit}; "
                "lower max_pixels",
                kind="context_length",
            )
        sampled = s.temperature > 0
        config = GenerationConfig(
            max_new_tokens=max_new,
            do_sample=sampled,
            temperature=s.temperature if sampled else 1.0,
            top_p=s.top_p if sampled else 1.0,
            top_k=0 if sampled else 50,  # 50 is the library default, ignored by greedy decoding
            repetition_penalty=1.0,
            eos_token_id=self._stop_ids,
            pad_token_id=self.inputs.pad_token_id,
        )
        recorder = _TopLogprobRecorder(TOP_LOGPROBS) if s.logprobs else None
        kwargs = batch.model_kwargs(self.device, self.model.dtype)  # mm_token_type_ids included: 3-D positions
        with self._generate_lock, torch.inference_mode():
            if s.seed is not None:
                torch.manual_seed(s.seed)
            out = self.model.generate(
                **kwargs,
                generation_config=config,
                logits_processor=LogitsProcessorList([recorder]) if recorder else None,
            )
        if recorder is not None:
            recorder.finish(out)
        elapsed = time.perf_counter() - t0
        width = batch.input_ids.shape[1]
        replies = []
        for i in range(len(requests)):
            gen = out[i, width:].tolist()
            stop_at = next((j for j, t in enumerate(gen) if t in self._stop_ids), None)
            body = gen if stop_at is None else gen[:stop_at]
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            p_yes = self._p_yes(body, text, recorder, i) if recorder else None
            logprobs = self._openai_logprobs(body, recorder, i, s.top_logprobs) if recorder else None
            replies.append((
                EngineReply(
                    text=text,
                    usage=Usage(
                        prompt_tokens=batch.prompt_tokens[i],
                        completion_tokens=len(gen) if stop_at is None else stop_at + 1,
                        cached_tokens=0,  # no prefix cache in process
                    ),
                    latency_s=elapsed,
                    endpoint=f"local:{self.device}",
                    finish_reason="length" if stop_at is None else "stop",
                    p_yes=p_yes,
                ),
                logprobs,
            ))
        return replies

    def _openai_logprobs(self, body: list[int], recorder: _TopLogprobRecorder, row: int, top: int) -> dict:
        """``choices[0].logprobs`` in the OpenAI format for the generated tokens of batch row ``row``."""
        strings = self._strings()
        content = []
        for j, tid in enumerate(body):
            vals, idx = recorder.steps[j]
            chosen = float(recorder.chosen[j][row]) if j < len(recorder.chosen) else float(vals[row, 0])
            alts = [{"token": strings[t] if t < len(strings) else "", "logprob": float(v)}
                    for v, t in zip(vals[row, :top].tolist(), idx[row, :top].tolist(), strict=True)]
            content.append({"token": strings[tid] if tid < len(strings) else "", "logprob": chosen,
                            "top_logprobs": alts})
        return {"content": content}

    # ---- p_yes from the answer token ------------------------------------------------------------------------

    def _strings(self) -> list[str]:
        if self._token_strings is None:
            tok = self.tokenizer
            self._token_strings = [
                tok.convert_tokens_to_string([t]) for t in tok.convert_ids_to_tokens(range(len(tok)))
            ]
        return self._token_strings

    def _p_yes(self, body: list[int], text: str, recorder: _TopLogprobRecorder, row: int) -> float | None:
        """P(YES) / (P(YES) + P(NO)) at the token that wrote the boxed verdict; None when there is no boxed verdict.

        The token that starts the verdict word may also carry text before it (``{YES`` is one token in some
        vocabularies), so every top candidate at that step is read against the text still to be written.
        """
        pos = verdict_position(text)
        if pos is None:
            return None
        decode = lambda n: self.tokenizer.decode(body[:n], skip_special_tokens=True)  # noqa: E731
        lo, hi = 0, len(body) - 1  # smallest k whose decoded prefix through token k reaches past pos
        while lo < hi:
            mid = (lo + hi) // 2
            if len(decode(mid + 1)) > pos:
                hi = mid
            else:
                lo = mid + 1
        k = lo
        if k >= len(recorder.steps):
            return None
        before = decode(k)
        if not text.startswith(before) or len(before) > pos:
            return None
        lead = text[len(before) : pos]  # text the step-k token writes before the verdict letter
        strings = self._strings()
        vals, idx = recorder.steps[k]
        return verdict_probability(((strings[tid] if tid < len(strings) else "", lp)
                                    for lp, tid in zip(vals[row].tolist(), idx[row].tolist(), strict=True)), lead)


def verdict_position(text: str) -> int | None:
    """Index of the first letter of the verdict the answer reader takes (the one locator of the package)."""
    return locate_verdict(text)


class _LocalSession(EngineSession):
    def __init__(self, engine: LocalEngine, ctx: InspectionContext):
        self.engine = engine
        self.ctx = ctx

    async def count_tokens(self, text: str) -> int | None:
        tok = self.engine.tokenizer
        return None if tok is None else len(tok(text, add_special_tokens=False)["input_ids"])

    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        request = GenerationRequest(openai_messages(messages), sampling)
        try:
            return await self.engine.complete_async(request)
        except (EngineError, ConfigError):
            raise
        except Exception as exc:  # a failure inside torch/transformers: the inspection ends as ERROR with it
            raise EngineError(
                f"local generation failed for candidate {self.ctx.candidate_id} turn {turn}: "
                f"{type(exc).__name__}: {exc}",
                kind="local_generation_error",
            ) from exc
