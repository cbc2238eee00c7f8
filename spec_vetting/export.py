"""Turn vetted runs into training data for the two Spec-o3 training stages (protocol section 7).

- SFT (LLaMA-Factory, ShareGPT format): one record per trajectory whose verdict is confirmed, i.e. a YES/NO verdict
  that equals the label (from the candidate list, a label file, or a reviewer's agree/disagree decision). The
  conversation is rebuilt with the inspection layer's own message builders, so it holds exactly the text the model
  saw and wrote: the system text with the tools block, ``<image>`` + newline + task text, each assistant turn as raw
  text, each tool answer as a human turn ``<tool_response>\\n<image>text\\n</tool_response>``. Images are written
  to ``DIR/images/`` and a ``dataset_info.json`` entry points LLaMA-Factory at the records.
- verl (GRPO): SpecVI-Bench-like Parquet rows, one per labelled (candidate, task): ``data_source`` (task),
  ``prompt`` (system + user messages, ``<image>`` placeholder), ``images`` (the full view), ``ability``,
  ``reward_model`` {style, ground_truth}, ``agent_name`` and ``extra_info`` with ``index``, ``name``,
  ``candidate_id`` and ``tools_kwargs.spectral_visualization_tool.create_kwargs`` = {wavelength, flux, redshift}.
  The arrays are NOT in the catalog: they come from re-reading each candidate's file with
  ``spec_vetting.io.read_spectrum(path, target)``, whole (observed frame, every pixel, as the published data), with
  the redshift the run used; SpecVI-Bench rows (inline spectra) get their arrays and their own prompt back from
  the candidate parquet the catalog's ``path`` names. Rows whose file no longer reads, or whose prompt text cannot
  be recovered exactly (checked against the recorded ``prompt_version``), are skipped and counted.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from .catalog.labels import attach_labels
from .catalog.read import RunData, run_manifest
from .errors import ConfigError, SpectrumReadError
from .inspect.conversation import assistant_message, build_initial_messages, tool_response_message
from .inspect.tasks import Task, get_task
from .types import ImagePart, Message, TextPart

log = logging.getLogger(__name__)

SFT_DATASET_NAME = "spec_vetting_sft"
SFT_RECORDS_FILE = "spec_vetting_sft.json"
SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt"}
IMAGE_TOKEN = "<image>"  # LLaMA-Factory's and verl's image placeholder
VERL_AGENT_NAME = "tool_agent"
VERL_ABILITY = "spectral_inspection"


@dataclass
class ExportSummary:
    written: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows
    files: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def text(self) -> str:
        lines = [f"{self.written} records written"]
        lines += [f"  skipped {n}: {reason}" for reason, n in sorted(self.skipped.items())]
        lines += [f"  {f}" for f in self.files]
        return "\n".join(lines)


def _manifest_tasks(data: RunData) -> dict:
    tasks = run_manifest(data.root, data.run_id).get("tasks")
    return tasks if isinstance(tasks, dict) else {}


class _Sources:
    """The task as it was asked and the spectrum arrays of a verdict row, from what the catalog points at.

    The catalog keeps the prompt's version id, not its text: a row asked with the built-in prompt, or with a task
    of the run's tasks file (``--tasks-file`` of ``spec-vet run``, recorded in the run manifest), gets it back from
    ``get_task``; a row whose candidate list carried its own prompt (SpecVI-Bench parquet) gets it back from that
    list. Either way the text must hash to the recorded version. Inline spectra (SpecVI-Bench rows) come from the
    same list.
    """

    def __init__(self, read_spectrum=None, tasks_file=None, manifest_tasks: dict | None = None):
        self._read_spectrum = read_spectrum
        self._tasks_file = tasks_file
        #: task -> {"class_name", "prompt_version", "prompt"} as the run manifest recorded them
        self._manifest_tasks = manifest_tasks or {}
        self._lists: dict[str, dict] = {}
        self._tasks: dict[str, Task | None] = {}

    def _candidate(self, row: dict):
        path = row.get("path")
        if not path or not str(path).lower().endswith((".parquet", ".pq")):
            return None
        if path not in self._lists:
            from .io.candidates import load_candidates

            try:
                self._lists[path] = {str(c.candidate_id): c for c in load_candidates(path)}
            except Exception as exc:  # noqa: BLE001 - any unreadable list just means "cannot rebuild this row"
                log.warning("export: cannot reread candidate list %s (%s)", path, exc)
                self._lists[path] = {}
        return self._lists[path].get(row["candidate_id"])

    def _from_manifest(self, row: dict):
        """The task as the run manifest recorded it, when its prompt has the row's version."""
        entry = self._manifest_tasks.get(row["task"]) or {}
        if entry.get("prompt") and entry.get("prompt_version") == row.get("prompt_version"):
            return Task(key=row["task"], class_name=entry.get("class_name") or row["task"], prompt=entry["prompt"],
                        version=entry["prompt_version"], source="user")
        return None

    def _defined_task(self, key: str) -> Task | None:
        """The task as defined here (built in or in the tasks file), None when unknown; parsed once per key."""
        if key not in self._tasks:
            try:
                self._tasks[key] = get_task(key, self._tasks_file)
            except ConfigError:
                self._tasks[key] = None
        return self._tasks[key]

    def task(self, row: dict):
        """The Task exactly as asked, or the reason (text) why its prompt cannot be recovered."""
        task = self._defined_task(row["task"])
        if task is None:
            recorded_task = self._from_manifest(row)
            if recorded_task is not None:
                return recorded_task
            return (f"task not defined here (a task of the run's tasks file: pass --tasks-file; "
                    f"tasks file used: {self._tasks_file or 'none'})")
        recorded = row.get("prompt_version")
        if not recorded or recorded == task.version:
            return task
        cand = self._candidate(row)
        if cand is not None and cand.prompt:
            asked = task.with_prompt(cand.prompt)
            if asked.version == recorded:
                return asked
        recorded_task = self._from_manifest(row)
        if recorded_task is not None:
            return recorded_task
        return "prompt text not recoverable (prompt changed since the run, or its candidate list is gone or changed)"

    def arrays(self, row: dict):
        """(wavelength, flux, redshift) as the zoom tool held them; raises SpectrumReadError when unreadable."""
        cand = self._candidate(row)
        if cand is not None and cand.inline is not None:
            inline = cand.inline
            return inline.wavelength, inline.flux, inline.redshift
        reader = self._read_spectrum
        if reader is None:
            from .io import read_spectrum as reader
        from .io import parse_target
        spectrum = reader(row["path"], parse_target(row.get("target")))
        return spectrum.wavelength, spectrum.flux, _finite_or_none(row.get("redshift"))


def message_to_sharegpt(message: Message) -> tuple[dict, list[bytes]]:
    """One ShareGPT turn: text parts as is, each image part as ``<image>``; returns the turn and its images."""
    value, images = [], []
    for part in message.parts:
        if isinstance(part, ImagePart):
            value.append(IMAGE_TOKEN)
            images.append(part.png)
        elif isinstance(part, TextPart):
            value.append(part.text)
    return {"from": SHAREGPT_ROLES[message.role], "value": "".join(value)}, images


def trajectory_messages(data: RunData, row: dict, task) -> list[Message] | None:
    """The whole conversation of one inspection, or None when the catalog lacks a piece of it."""
    cid = row["candidate_id"]
    first_image = data.initial_image(cid, row["task"])
    turns = data.assistant_turns(cid, row["task"])
    if first_image is None or not turns:
        return None
    messages = build_initial_messages(task, first_image)
    for i, turn in enumerate(turns):
        if not turn.get("assistant_text"):
            return None
        messages.append(assistant_message(turn["assistant_text"]))
        last = i == len(turns) - 1
        if not last:
            if turn.get("tool_response_text") is None:
                return None  # a middle turn without a tool answer: the catalog is incomplete
            messages.append(tool_response_message(turn["tool_response_text"], turn.get("image_png")))
    return messages


def confirmed(row: dict) -> bool:
    return row.get("verdict") in ("YES", "NO") and row.get("label") == row.get("verdict")


def labelled_rows(data: RunData, labels, summary: ExportSummary):
    """The run's verdict rows that have a label (file or reviewer labels first), in a stable order; counts the rest."""
    rows = attach_labels([dict(r) for r in data.verdicts], labels)
    for row in sorted(rows, key=lambda r: (r["task"], r["candidate_id"])):
        if row.get("label") is None:
            summary.skip("no label or reviewer decision")
            continue
        yield row


def non_model_engines(data: RunData) -> list[str]:
    """Engines of the run's decided rows that ran no model (``model`` null: the rules engine, a scripted one)."""
    return sorted({str(r.get("engine") or "unknown") for r in data.verdicts
                   if not r.get("model") and r.get("verdict") in ("YES", "NO")})


def export_sft(data: RunData, out_dir, *, labels=None, include_recovered: bool = False,
               tasks_file=None, allow_non_model: bool = False) -> ExportSummary:
    """Write confirmed trajectories as LLaMA-Factory ShareGPT records into ``out_dir``.

    Traces of an engine that ran no model (the rules engine) are a classical inspector's text, not model output:
    they are refused (:class:`ConfigError`) unless ``allow_non_model``. Every record names its engine and model.
    """
    engines = non_model_engines(data)
    if engines and not allow_non_model:
        raise ConfigError(
            f"run {data.run_id} was vetted by engine {', '.join(engines)}, which runs no model: its traces are a "
            "classical inspector's, not model output, and would teach a model to imitate it. Export a model's run, "
            "or pass --allow-non-model-traces to export them anyway (each record names its engine)")
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    summary = ExportSummary()
    sources = _Sources(tasks_file=tasks_file, manifest_tasks=_manifest_tasks(data))
    records = []
    for row in labelled_rows(data, labels, summary):
        if not confirmed(row):
            summary.skip("verdict not confirmed by the label")
            continue
        if row.get("status") != "well_formed" and not include_recovered:
            summary.skip("answer format recovered, not well formed (--include-recovered to keep)")
            continue
        task = sources.task(row)
        if isinstance(task, str):
            summary.skip(task)
            continue
        messages = trajectory_messages(data, row, task)
        if messages is None:
            summary.skip("trajectory incomplete in the catalog (missing image or turn text)")
            continue
        index = len(records)
        conversation, image_paths = [], []
        for message in messages:
            turn, images = message_to_sharegpt(message)
            conversation.append(turn)
            for png in images:
                name = f"images/lf_{row['task']}_{index}_{len(image_paths)}.png"
                (out / name).write_bytes(png)
                image_paths.append(name)
        records.append({
            "conversations": conversation,
            "images": image_paths,
            "sample_index": index,
            "source_name": row.get("path") or row["candidate_id"],
            "candidate_id": row["candidate_id"],
            "task": row["task"],
            "ground_truth": row["label"],
            "total_iterations": sum(1 for m in messages if m.role == "assistant"),
            "total_tool_calls": sum(1 for m in messages[2:] if m.role == "user"),
            "run_id": data.run_id,
            "engine": row.get("engine"),
            "engine_version": row.get("engine_version"),
            "model": row.get("model"),
        })
    records_path = out / SFT_RECORDS_FILE
    records_path.write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    info_path = out / "dataset_info.json"
    info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.is_file() else {}
    info[SFT_DATASET_NAME] = {
        "file_name": SFT_RECORDS_FILE,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "images": "images"},
        "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                 "system_tag": "system"},
    }
    info_path.write_text(json.dumps(info, indent=2), encoding="utf-8")
    summary.written = len(records)
    summary.files = [str(records_path), str(info_path), str(out / "images")]
    return summary



def _finite_or_none(value):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def verl_rows(data: RunData, *, labels=None, read_spectrum=None, tasks_file=None) -> tuple[list[dict], ExportSummary]:
    """SpecVI-Bench-like rows for every labelled verdict whose spectrum file still reads."""
    summary = ExportSummary()
    sources = _Sources(read_spectrum, tasks_file, _manifest_tasks(data))
    out = []
    for row in labelled_rows(data, labels, summary):
        if not row.get("path"):
            summary.skip("no spectrum file to re-read (inline candidate)")
            continue
        image = data.initial_image(row["candidate_id"], row["task"])
        if image is None:
            summary.skip("no full-view image in the catalog")
            continue
        task = sources.task(row)
        if isinstance(task, str):
            summary.skip(task)
            continue
        try:
            wavelength, flux, redshift = sources.arrays(row)
        except SpectrumReadError as exc:
            log.warning("verl export: skipping %s (%s)", row["candidate_id"], exc)
            summary.skip("spectrum file no longer readable (a relative path resolves against the current folder)")
            continue
        out.append({
            "data_source": row["task"],
            "prompt": [
                {"role": "system", "content": build_initial_messages(task, image)[0].text},
                {"role": "user", "content": IMAGE_TOKEN + "\n" + task.prompt},
            ],
            "images": [{"bytes": image}],
            "ability": VERL_ABILITY,
            "reward_model": {"style": "rule", "ground_truth": row["label"]},
            "agent_name": VERL_AGENT_NAME,
            "extra_info": {
                "index": len(out),
                "name": Path(row["path"]).name,
                "candidate_id": row["candidate_id"],
                "engine": row.get("engine"),  # the engine whose run labelled and pictured this row
                "model": row.get("model"),
                "tools_kwargs": {"spectral_visualization_tool": {"create_kwargs": {
                    "wavelength": [float(x) for x in wavelength],
                    "flux": [float(x) for x in flux],
                    "redshift": redshift,
                }}},
            },
        })
    summary.written = len(out)
    return out, summary


def export_verl(data: RunData, out_file, *, labels=None, read_spectrum=None, tasks_file=None) -> ExportSummary:
    """Write :func:`verl_rows` to one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, summary = verl_rows(data, labels=labels, read_spectrum=read_spectrum, tasks_file=tasks_file)
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(out)
    summary.files = [str(out)]
    return summary
