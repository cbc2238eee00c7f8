"""Capacity planning: what N inspections cost on G GPUs.

The model (stated, so it can be argued with):

* An inspection has ``turns`` assistant turns; all but the last call the zoom tool, which answers one picture.
* Prompt side. Turn 1 reads the system text, the task prompt and the full-view picture. Each later turn adds the
  previous assistant text, the tool response text and one zoom picture. With the server's prefix cache (one replica
  per conversation) only those new tokens are prefilled; without it every turn re-reads the whole history. Both
  totals are reported: ``prompt_tokens`` (what servers bill in ``usage``) and ``prefill_tokens`` (what the GPU
  computes with the cache warm).
* Decode side: ``gen_tokens_per_turn`` generated tokens per turn.
* GPU time per inspection = prefill_tokens / prefill_rate + decode_tokens / decode_rate, where the rates are the
  aggregate tokens per second of one GPU under continuous batching. Defaults are conservative figures for a 7B
  model in bf16 on one H100/H200 with SGLang; measure yours with ``benchmarks/gpu/bench_gpu.py`` and pass them.
* Wall time = GPU time / GPUs, assuming the client keeps every replica busy (enough in-flight inspections).

Picture sizes come from the renderer's size classes; tokens per picture from Qwen2.5-VL's 28x28 blocks.
When a catalog is given, measured averages (turns, prompt/completion/cached tokens per inspection) replace the
defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: tokens of the system text with the tools block, and of a built-in task prompt (Qwen2.5 tokenizer, measured
#: roughly as characters / 3.6 on the texts of protocol.py and the built-in tasks)
SYSTEM_TOKENS = 190
TASK_PROMPT_TOKENS = 260
#: chat markup per turn (<|im_start|>role\n ... <|im_end|>\n) and the tool response wrapper text
MARKUP_TOKENS_PER_TURN = 10
TOOL_RESPONSE_TEXT_TOKENS = 30

#: the paper's throughput claim: 0.2 s per spectrum on one 8xH100 server
PAPER_GPU_SECONDS_PER_SPECTRUM = 1.6

#: the renderer's size classes (view, span) priced by default: a full view of a survey spectrum, and the 8x5 in
#: class (windows of 200-1000 Å), the most common zoom
FULL_VIEW_CLASS = ("full", "> 3000")
ZOOM_CLASS = ("window", "200 - 1000")


def size_class_tokens(view: str, span: str) -> int:
    """Image tokens of the typical picture of one of the renderer's size classes."""
    from ..render import SIZE_CLASSES  # imported on use: the render package pulls in matplotlib

    return next(sc.tokens for sc in SIZE_CLASSES if (sc.view, sc.span) == (view, span))


@dataclass
class Workload:
    """Per-inspection token counts."""

    turns: float = 4.0  # 3 zooms and the answer: the published trajectories average 3-5 turns
    gen_tokens_per_turn: float = 250.0
    full_view_tokens: int = 0  # filled from the renderer when 0
    zoom_tokens: int = 0
    source: str = "defaults"
    #: why the catalog's numbers were not used (e.g. only rules-engine rows: no model was measured); None otherwise
    note: str | None = None

    def __post_init__(self) -> None:
        if not self.full_view_tokens:
            self.full_view_tokens = size_class_tokens(*FULL_VIEW_CLASS)
        if not self.zoom_tokens:
            self.zoom_tokens = size_class_tokens(*ZOOM_CLASS)

    def per_inspection(self) -> dict[str, float]:
        first = SYSTEM_TOKENS + TASK_PROMPT_TOKENS + self.full_view_tokens + 2 * MARKUP_TOKENS_PER_TURN
        step = self.gen_tokens_per_turn + TOOL_RESPONSE_TEXT_TOKENS + self.zoom_tokens + 2 * MARKUP_TOKENS_PER_TURN
        n_later = max(self.turns - 1.0, 0.0)
        prefill = first + n_later * step
        # without the cache, turn k re-reads first + (k-1) steps: sum over k = turns * first + steps * T(T-1)/2
        prompt = self.turns * first + step * n_later * self.turns / 2.0
        return {
            "prompt_tokens": prompt,
            "prefill_tokens": prefill,
            "decode_tokens": self.turns * self.gen_tokens_per_turn,
        }


@dataclass
class Throughput:
    prefill_tokens_per_s: float = 8000.0  # per GPU, batched prefill of a 7B VLM incl. the vision tower
    decode_tokens_per_s: float = 2000.0  # per GPU, aggregate over the running batch


@dataclass
class Plan:
    candidates: int
    gpus: int
    workload: Workload
    throughput: Throughput
    per_inspection: dict[str, float] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def plan_capacity(candidates: int, gpus: int, workload: Workload | None = None,
                  throughput: Throughput | None = None) -> Plan:
    if candidates < 0:
        raise ValueError(f"candidates must be >= 0, got {candidates}")
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    workload = workload or Workload()
    throughput = throughput or Throughput()
    per = workload.per_inspection()
    gpu_s = (per["prefill_tokens"] / throughput.prefill_tokens_per_s
             + per["decode_tokens"] / throughput.decode_tokens_per_s)
    per["gpu_seconds"] = gpu_s
    total_gpu_h = candidates * gpu_s / 3600.0
    totals = {
        "prompt_tokens": candidates * per["prompt_tokens"],
        "prefill_tokens": candidates * per["prefill_tokens"],
        "decode_tokens": candidates * per["decode_tokens"],
        "gpu_hours": total_gpu_h,
        "wall_hours": total_gpu_h / gpus,
        "paper_gpu_hours": candidates * PAPER_GPU_SECONDS_PER_SPECTRUM / 3600.0,
    }
    return Plan(candidates, gpus, workload, throughput, per, totals)


def workload_from_catalog(root, run_id: str | None = None) -> Workload:
    """Measured averages from a catalog's verdict rows that ran a model (YES/NO/UNDECIDED with a ``model``).

    Rows without a model (the rules engine, a scripted engine) measure no model: their turns are a classical
    inspector's and they report no tokens. When only such rows exist the defaults are used and ``note`` says so.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..catalog.read import read_verdicts

    table = read_verdicts(root, run_id=run_id)
    table = table.filter(pc.is_in(table["verdict"], value_set=pa.array(["YES", "NO", "UNDECIDED"])))
    if table.num_rows == 0:
        raise ValueError(f"{root}: no inspected verdict rows to measure (run spec-vet run first, or omit --catalog)")
    has_model = pc.invert(pc.is_null(table["model"]))
    no_model = table.filter(pc.invert(has_model))
    table = table.filter(has_model)
    engines = sorted({str(e) for e in no_model["engine"].to_pylist()})
    skipped = (f"{no_model.num_rows} inspections by engine {', '.join(engines)} (no model) measure no model and "
               "were left out") if no_model.num_rows else None
    if table.num_rows == 0:
        return Workload(source="defaults", note=f"catalog {root}: {skipped}; the plan uses the stated defaults")
    turns = pc.mean(table["n_turns"]).as_py() or Workload.turns
    completion = pc.mean(table["completion_tokens"]).as_py()
    gen = (completion / turns) if completion else Workload.gen_tokens_per_turn
    return Workload(turns=float(turns), gen_tokens_per_turn=float(gen),
                    source=f"catalog {root} ({table.num_rows} inspections)", note=skipped)
