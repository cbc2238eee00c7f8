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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.labels import attach_labels_table
from ..catalog.read import read_run_table, run_manifest
from ..catalog.run_data import RunData
from ..catalog.walk import walk_data, walk_run
from ..errors import ConfigError, SpectrumReadError
from ..inspect.conversation import assistant_message, build_initial_messages, tool_response_message
from ..inspect.tasks import Task, get_task
from ..types import ImagePart, Message, TextPart

log = logging.getLogger(__name__)

SFT_DATASET_NAME = "spec_vetting_sft"
SFT_RECORDS_FILE = "spec_vetting_sft.json"
SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt"}
IMAGE_TOKEN = "<image>"  # LLaMA-Factory's and verl's image placeholder
VERL_AGENT_NAME = "tool_agent"
VERL_ABILITY = "spectral_inspection"

#: labelled verdicts loaded at a time, with their turns and pictures: memory follows this, not the run
SLICE_ROWS = 256

#: verdict columns that choose what is exported (the rest of a row is loaded a slice at a time)
_CHOICE_COLUMNS = ["verdict", "label", "engine", "model"]


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


@dataclass
class RunSlices:
    """One run's labelled verdicts in export order (task, candidate_id) as a light Arrow table (candidate_id,
    task, label), and how to walk their whole rows and turns a slice at a time (``walk(keys, slice_rows)``, as
    :func:`spec_vetting.catalog.walk.walk_run`)."""

    root: str
    run_id: str
    labelled: pa.Table
    unlabelled: int
    #: engines of the run's decided rows that ran no model (``model`` null: the rules engine, a scripted one)
    engines_without_model: list[str]
    walk: Callable[[pa.Table, int], Iterator[tuple[list[tuple[str, str]], RunData]]]


def _slices(root, run_id: str, table: pa.Table, labels, walk) -> RunSlices:
    table = attach_labels_table(table, labels)
    decided = pc.is_in(table.column("verdict"), value_set=pa.array(["YES", "NO"]))
    no_model = pc.fill_null(pc.equal(pc.fill_null(table.column("model"), ""), ""), True)
    engines = pc.fill_null(pc.if_else(pc.equal(table.column("engine"), ""), None, table.column("engine")), "unknown")
    without = sorted(set(pc.unique(pc.filter(engines, pc.and_(pc.fill_null(decided, False), no_model))).to_pylist()))
    has_label = pc.is_valid(table.column("label"))
    labelled = table.filter(has_label).select(["candidate_id", "task", "label"])
    labelled = labelled.sort_by([("task", "ascending"), ("candidate_id", "ascending")])
    return RunSlices(root=str(root), run_id=str(run_id), labelled=labelled,
                     unlabelled=table.num_rows - labelled.num_rows, engines_without_model=without, walk=walk)


def slices_from_catalog(root, run_id: str | None = None, labels=None) -> RunSlices:
    """The run (latest when None) as :class:`RunSlices`; only the choosing columns are read whole."""
    run_id, table = read_run_table(root, run_id, columns=_CHOICE_COLUMNS)
    table = table.set_column(table.schema.get_field_index("candidate_id"), "candidate_id",
                             pc.cast(table.column("candidate_id"), pa.string()))
    return _slices(root, run_id, table, labels,
                   lambda keys, n: walk_run(root, run_id, keys, n, replace=("label",)))


def slices_from_data(data: RunData, labels=None) -> RunSlices:
    """A run already in memory as :class:`RunSlices`."""
    names = ["candidate_id", "task", *_CHOICE_COLUMNS]
    table = pa.table({n: pa.array([None if r.get(n) is None else str(r[n]) for r in data.verdicts], pa.string())
                      for n in names})
    return _slices(data.root, data.run_id, table, labels,
                   lambda keys, n: walk_data(data, keys, n, replace=("label",)))


def _as_slices(source: RunData | RunSlices, labels) -> RunSlices:
    if isinstance(source, RunSlices):
        if labels is not None:
            raise ValueError("labels go into slices_from_catalog / slices_from_data, not beside RunSlices")
        return source
    return slices_from_data(source, labels)


def _manifest_tasks(source: RunData | RunSlices) -> dict:
    tasks = run_manifest(source.root, source.run_id).get("tasks")
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
            from ..io.candidates import load_candidates

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
            asked = task.with_prompt(cand.prompt, system=getattr(cand, "system_prompt", None))
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
            from ..io import read_spectrum as reader
        from ..io import parse_target
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


def labelled_slices(slices: RunSlices, summary: ExportSummary) -> Iterator[RunData]:
    """The verdict rows that have a label (file or reviewer labels first), in (task, candidate_id) order,
    ``SLICE_ROWS`` at a time with their turns (pictures by reference: see :func:`with_pictures`); counts the rest."""
    if slices.unlabelled:
        summary.skipped["no label or reviewer decision"] = (summary.skipped.get("no label or reviewer decision", 0)
                                                            + slices.unlabelled)
    for _, data in slices.walk(slices.labelled, SLICE_ROWS):
        yield data


def with_pictures(data: RunData, rows: list[dict]) -> list[dict]:
    """``rows`` (of ``data``), their turns' pictures filled (stored bytes, else re-rendered) in one pass."""
    from ..catalog.pictures import fill_pictures

    keys = {(str(r["candidate_id"]), r["task"]) for r in rows}
    if rows:
        fill_pictures(data.root, rows, {k: v for k, v in data.turns.items() if k in keys})
    return rows


def _sft_candidates(slices: RunSlices, summary: ExportSummary, sources: _Sources, include_recovered: bool):
    """(slice, row, task) of each confirmed verdict whose prompt is recoverable, pictures filled per slice."""
    for data in labelled_slices(slices, summary):
        kept = []
        for row in data.verdicts:
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
            kept.append((row, task))
        with_pictures(data, [row for row, _ in kept])
        for row, task in kept:
            yield data, row, task


class _JsonArrayFile:
    """A JSON array written one element at a time, byte for byte what ``json.dumps(items, ensure_ascii=False,
    indent=1)`` writes for the whole list (JSON text has no raw newline inside a string, so lines can be
    indented one by one)."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, path.with_name(path.name + ".tmp")
        self.fh = open(self.tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.n = 0

    def add(self, item) -> None:
        text = json.dumps(item, ensure_ascii=False, indent=1)
        self.fh.write(("[\n" if self.n == 0 else ",\n") + "\n".join(" " + line for line in text.split("\n")))
        self.n += 1

    def close(self) -> None:
        self.fh.write("\n]" if self.n else "[]")
        self.fh.close()
        self.tmp.replace(self.path)


def export_sft(source: RunData | RunSlices, out_dir, *, labels=None, include_recovered: bool = False,
               tasks_file=None, allow_non_model: bool = False) -> ExportSummary:
    """Write confirmed trajectories as LLaMA-Factory ShareGPT records into ``out_dir``, a slice of the run at a
    time (records stream into the JSON file).

    Traces of an engine that ran no model (the rules engine) are a classical inspector's text, not model output:
    they are refused (:class:`ConfigError`) unless ``allow_non_model``. Every record names its engine and model.
    """
    slices = _as_slices(source, labels)
    engines = slices.engines_without_model
    if engines and not allow_non_model:
        raise ConfigError(
            f"run {slices.run_id} was vetted by engine {', '.join(engines)}, which runs no model: its traces are a "
            "classical inspector's, not model output, and would teach a model to imitate it. Export a model's run, "
            "or pass --allow-non-model-traces to export them anyway (each record names its engine)")
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    summary = ExportSummary()
    sources = _Sources(tasks_file=tasks_file, manifest_tasks=_manifest_tasks(slices))
    records_path = out / SFT_RECORDS_FILE
    records = _JsonArrayFile(records_path)
    for data, row, task in _sft_candidates(slices, summary, sources, include_recovered):
        messages = trajectory_messages(data, row, task)
        if messages is None:
            summary.skip("trajectory incomplete in the catalog (missing image or turn text)")
            continue
        index = records.n
        conversation, image_paths = [], []
        for message in messages:
            turn, images = message_to_sharegpt(message)
            conversation.append(turn)
            for png in images:
                name = f"images/lf_{row['task']}_{index}_{len(image_paths)}.png"
                (out / name).write_bytes(png)
                image_paths.append(name)
        records.add({
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
    records.close()
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
    summary.written = records.n
    summary.files = [str(records_path), str(info_path), str(out / "images")]
    return summary



def _finite_or_none(value):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


#: the Parquet schema of the verl rows (fixed, so that slices with nulls in different places write one file)
VERL_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("images", pa.list_(pa.struct([("bytes", pa.binary())]))),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("agent_name", pa.string()),
    ("extra_info", pa.struct([
        ("index", pa.int64()), ("name", pa.string()), ("candidate_id", pa.string()), ("engine", pa.string()),
        ("model", pa.string()),
        ("tools_kwargs", pa.struct([("spectral_visualization_tool", pa.struct([("create_kwargs", pa.struct([
            ("wavelength", pa.list_(pa.float64())), ("flux", pa.list_(pa.float64())), ("redshift", pa.float64()),
        ]))]))])),
    ])),
])


def _verl_candidates(slices: RunSlices, summary: ExportSummary):
    """(slice, row) of each labelled verdict with a spectrum file, pictures filled per slice."""
    for data in labelled_slices(slices, summary):
        kept = []
        for row in data.verdicts:
            if not row.get("path"):
                summary.skip("no spectrum file to re-read (inline candidate)")
                continue
            kept.append(row)
        for row in with_pictures(data, kept):
            yield data, row


def iter_verl_rows(source: RunData | RunSlices, summary: ExportSummary, *, labels=None, read_spectrum=None,
                   tasks_file=None) -> Iterator[dict]:
    """SpecVI-Bench-like rows for every labelled verdict whose spectrum file still reads, one at a time."""
    slices = _as_slices(source, labels)
    sources = _Sources(read_spectrum, tasks_file, _manifest_tasks(slices))
    n = 0
    for data, row in _verl_candidates(slices, summary):
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
        yield {
            "data_source": row["task"],
            "prompt": [
                # the system message's own text: verl's agent loop passes tools= and its template appends the
                # tools block, so writing the block here too would show it twice in training
                {"role": "system", "content": task.system},
                {"role": "user", "content": IMAGE_TOKEN + "\n" + task.prompt},
            ],
            "images": [{"bytes": image}],
            "ability": VERL_ABILITY,
            "reward_model": {"style": "rule", "ground_truth": row["label"]},
            "agent_name": VERL_AGENT_NAME,
            "extra_info": {
                "index": n,
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
        }
        n += 1
        summary.written = n


def verl_rows(source: RunData | RunSlices, *, labels=None, read_spectrum=None, tasks_file=None
              ) -> tuple[list[dict], ExportSummary]:
    """:func:`iter_verl_rows` as a list (for runs that fit in memory)."""
    summary = ExportSummary()
    rows = list(iter_verl_rows(source, summary, labels=labels, read_spectrum=read_spectrum, tasks_file=tasks_file))
    return rows, summary


def export_verl(source: RunData | RunSlices, out_file, *, labels=None, read_spectrum=None, tasks_file=None
                ) -> ExportSummary:
    """Write :func:`iter_verl_rows` to one Parquet file, ``SLICE_ROWS`` rows per row group."""
    import pyarrow.parquet as pq

    summary = ExportSummary()
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    buffer: list[dict] = []
    with pq.ParquetWriter(tmp, VERL_SCHEMA) as writer:
        for row in iter_verl_rows(source, summary, labels=labels, read_spectrum=read_spectrum,
                                  tasks_file=tasks_file):
            buffer.append(row)
            if len(buffer) >= SLICE_ROWS:
                writer.write_table(pa.Table.from_pylist(buffer, schema=VERL_SCHEMA))
                buffer = []
        writer.write_table(pa.Table.from_pylist(buffer, schema=VERL_SCHEMA))
    tmp.replace(out)
    summary.files = [str(out)]
    return summary
