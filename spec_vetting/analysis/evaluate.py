"""Metrics of a run against labels, as the Spec-o3 paper reports them (protocol sections 5 and 6).

Per task: accuracy, and precision, recall and F1 of the YES class; macro-F1 is the unweighted mean of the per-task
F1 over every task evaluated. UNDECIDED and ERROR verdicts count as "not YES": wrong in accuracy, a false negative
when the label is YES, never a false positive (a screener that abstained has not found the object). F1 is 0.0 when
there is no true positive among a task's positive labels; a task with no positive label has no F1 (recall and F1
of YES are undefined there: reported as n/a, ``None`` in JSON) and is left out of macro-F1, and the output says so.
Precision is 0.0 when nothing was called YES. Rows without a label are left out and counted.

Why one file of about 500 lines: the metrics, the published reward's reading of the same rows and the tables
and plots that report them must agree number for number; they are tested together.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from typing import get_args

from ..catalog.labels import canonical_task
from ..types import Verdict
from .confidence import Calibration, calibration

#: every verdict word, in the order tables show them
VERDICT_COLUMNS: tuple[str, ...] = get_args(Verdict)

ABSTAIN_NOTE = (
    "UNDECIDED and ERROR count as 'not YES': wrong in accuracy, a false negative when the label is YES, "
    "never a false positive. F1 is 0 when there is no true positive."
)

#: why a task with no positive label has F1 n/a and stays out of macro-F1
NO_POSITIVE_NOTE = (
    "F1 n/a: no row labelled YES, so recall and F1 of YES are undefined (0/0); left out of macro-F1"
)

#: Published SpecVI-Bench test results (protocol section 6): F1 of the YES class, percent.
PUBLISHED_TABLE1 = {
    "Spec-o3-7B": {"cv": 81.0, "carbon": 80.2, "ss": 84.5, "gm": 83.4, "wd": 53.6, "mean_f1": 76.5, "mean_acc": 88.7},
    "Spec-o3-3B": {"cv": 80.7, "carbon": 75.9, "ss": 84.0, "gm": 82.7, "wd": 43.2, "mean_f1": 73.3, "mean_acc": 88.8},
    "GaiaNet": {"cv": 67.2, "carbon": 87.1, "ss": 70.3, "gm": 51.8, "wd": 48.2, "mean_f1": 64.9, "mean_acc": 89.0},
    "AstroCLIP": {"cv": 74.7, "carbon": 84.1, "ss": 62.4, "gm": 52.3, "wd": 48.8, "mean_f1": 64.5, "mean_acc": 87.3},
    "CarbonNet": {"cv": 76.6, "carbon": 87.5, "ss": 64.4, "gm": 52.0, "wd": 40.8, "mean_f1": 64.3, "mean_acc": 83.7},
    "o3": {"cv": 57.1, "carbon": 53.1, "ss": 53.3, "gm": 60.0, "wd": 37.8, "mean_f1": 52.3, "mean_acc": 85.5},
    "Qwen2.5-VL-7B": {
        "cv": 25.4, "carbon": 31.5, "ss": 27.3, "gm": 29.0, "wd": 28.1, "mean_f1": 28.3, "mean_acc": 30.6,
    },
}
SPECVI_TASKS = ("cv", "carbon", "ss", "gm", "wd")
SPECVI_COLUMN_NAMES = {"cv": "CV", "carbon": "CS", "ss": "SS", "gm": "MG", "wd": "WD"}

#: Spectrum.meta.variant of a candidate read from a SpecVI-Bench parquet row (spectrum inline)
SPECVI_VARIANT = "specvi-inline"


@dataclass
class TaskMetrics:
    task: str
    n: int
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: float
    precision: float
    recall: float | None  # None: no positive label (0/0)
    f1: float | None  # None: no positive label; such a task is left out of macro-F1
    undecided: float  # fraction of the task's labelled rows
    errors: float
    #: label -> verdict -> count; label in YES/NO, verdict in YES/NO/UNDECIDED/ERROR
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Evaluation:
    run_id: str | None
    per_task: dict[str, TaskMetrics]
    macro_f1: float | None  # None when no task had a positive label
    unlabelled: int
    calibration: Calibration
    #: what produced the evaluated rows: "engine model" -> rows, and where their spectra came from -> rows
    engines: dict[str, int] = field(default_factory=dict)
    data: dict[str, int] = field(default_factory=dict)
    #: every evaluated row of a SpecVI task comes from a SpecVI-Bench test file: Table 1 is a fair comparison
    table1_comparable: bool = False
    #: per-task metrics as the published reward scores answers (Table-1 mode, see :func:`reward_verdict`)
    reward_per_task: dict[str, TaskMetrics] = field(default_factory=dict)

    @property
    def macro_tasks(self) -> list[str]:
        """The tasks macro-F1 averages: those with at least one positive label."""
        return [key for key, m in self.per_task.items() if m.f1 is not None]

    @property
    def no_positive_tasks(self) -> list[str]:
        """Tasks without a positive label: F1 n/a, left out of macro-F1."""
        return [key for key, m in self.per_task.items() if m.f1 is None]

    def to_json(self) -> dict:
        per_task = {}
        for key, m in self.per_task.items():
            d = asdict(m)
            d.pop("task")
            per_task[key] = d
        cal = self.calibration
        return {
            "run_id": self.run_id,
            "per_task": per_task,
            "macro_f1": self.macro_f1,
            "macro_f1_tasks": self.macro_tasks,
            "f1_not_applicable": self.no_positive_tasks,
            "mean_accuracy": _mean([m.accuracy for m in self.per_task.values()]),
            "unlabelled": self.unlabelled,
            "engines": self.engines,
            "data": self.data,
            "table1_comparable": self.table1_comparable,
            "reward_scored": {k: {"f1": m.f1, "accuracy": m.accuracy, "tp": m.tp, "fp": m.fp, "fn": m.fn,
                                  "tn": m.tn} for k, m in self.reward_per_task.items()},
            "reward_scored_macro_f1": _mean([m.f1 for m in self.reward_per_task.values() if m.f1 is not None]),
            "calibration": {"n": cal.n, "ece": cal.ece, "brier": cal.brier, "sources": cal.sources,
                            "bins": [asdict(b) for b in cal.bins]},
            "note": ABSTAIN_NOTE,
        }


#: the verdict columns evaluation reads (the CLI reads only these: memory follows rows x these columns)
EVAL_COLUMNS = ["verdict", "recovered_verdict", "label", "p_yes", "p_yes_source", "engine", "model", "path", "survey",
                "variant", "status"]


def _mean(values):
    return sum(values) / len(values) if values else None


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def task_metrics(task: str, rows: list[dict]) -> TaskMetrics:
    """Metrics of one task over its labelled rows (each with ``verdict`` and ``label`` in YES/NO)."""
    confusion = _empty_confusion()
    for row in rows:
        verdict = row.get("verdict")
        if verdict not in VERDICT_COLUMNS:
            verdict = "ERROR"  # an unknown verdict word is a failure, not a YES
        confusion[row["label"]][verdict] += 1
    return metrics_of(task, confusion)


def _empty_confusion() -> dict[str, dict[str, int]]:
    return {lab: {v: 0 for v in VERDICT_COLUMNS} for lab in ("YES", "NO")}


def metrics_of(task: str, confusion: dict[str, dict[str, int]]) -> TaskMetrics:
    """Metrics of one task from its confusion counts (label -> verdict -> rows)."""
    tp = confusion["YES"]["YES"]
    fp = confusion["NO"]["YES"]
    tn = confusion["NO"]["NO"]
    fn = sum(confusion["YES"][v] for v in ("NO", "UNDECIDED", "ERROR"))
    n = sum(sum(by_verdict.values()) for by_verdict in confusion.values())
    positives = tp + fn
    undecided = confusion["YES"]["UNDECIDED"] + confusion["NO"]["UNDECIDED"]
    errors = confusion["YES"]["ERROR"] + confusion["NO"]["ERROR"]
    return TaskMetrics(
        task=task, n=n, tp=tp, fp=fp, fn=fn, tn=tn,
        accuracy=_ratio(tp + tn, n),
        precision=_ratio(tp, tp + fp),
        recall=_ratio(tp, positives) if positives else None,
        f1=(_ratio(2 * tp, 2 * tp + fp + fn) if tp else 0.0) if positives else None,
        undecided=_ratio(undecided, n),
        errors=_ratio(errors, n),
        confusion=confusion,
    )


def reward_verdict(row: dict) -> str:
    """The class the published reward (``spec_vetting.analysis.reward``, upstream ``spec_o3.py``) predicts for a row.

    The loop reads the whole trajectory with the reward's reader, so the reward's prediction is the verdict, or,
    when the YES/NO came from a fallback outside every ``<answer>`` block, ``recovered_verdict`` (which the
    production verdict column leaves out). Anything else is not YES.
    """
    verdict = row.get("verdict")
    if verdict in ("YES", "NO"):
        return verdict
    if row.get("recovered_verdict") in ("YES", "NO"):
        return row["recovered_verdict"]
    return verdict if verdict in VERDICT_COLUMNS else "ERROR"


def evaluate(verdicts: list[dict], *, run_id: str | None = None) -> Evaluation:
    """Evaluate verdict rows whose ``label`` is already set (see :func:`spec_vetting.catalog.labels.attach_labels`).
    :func:`evaluate_table` gives the same from an Arrow table without a Python object per row."""
    by_task: dict[str, list[dict]] = {}
    unlabelled = 0
    for row in verdicts:
        if row.get("label") not in ("YES", "NO"):
            unlabelled += 1
            continue
        by_task.setdefault(canonical_task(row["task"]), []).append(row)
    per_task = {task: task_metrics(task, rows) for task, rows in sorted(by_task.items())}
    reward_per_task = {task: task_metrics(task, [{**r, "verdict": reward_verdict(r)} for r in rows])
                       for task, rows in sorted(by_task.items())}
    labelled = [r for rows in by_task.values() for r in rows]
    specvi_rows = [r for task, rows in by_task.items() if task in SPECVI_TASKS for r in rows]
    return _evaluation(
        run_id, per_task, reward_per_task, unlabelled, calibration(labelled),
        engines=_count(engine_of(r) for r in labelled),
        data=_count(data_source_of(r) for r in labelled),
        table1_comparable=bool(specvi_rows) and all(is_specvi_test_row(r) for r in specvi_rows),
    )


def _evaluation(run_id, per_task, reward_per_task, unlabelled, cal, *, engines, data, table1_comparable) -> Evaluation:
    """The one place both evaluation paths (dict rows, Arrow table) turn their aggregated counts into a result."""
    macro = _mean([m.f1 for m in per_task.values() if m.f1 is not None])
    return Evaluation(run_id, per_task, macro, unlabelled, cal, engines=engines, data=data,
                      table1_comparable=table1_comparable, reward_per_task=reward_per_task)


def evaluate_table(table, *, run_id: str | None = None) -> Evaluation:
    """:func:`evaluate` of an Arrow table of verdict rows (:data:`EVAL_COLUMNS` plus ``task``; ``label`` already
    attached, see :func:`spec_vetting.catalog.labels.attach_labels_table`), with the same result.

    Confusion counts, engine and data-source counts come from ``pyarrow.compute`` group-bys over a handful of
    distinct values; calibration reads numpy arrays of the labelled rows' (p_yes, label, p_yes_source). Memory
    follows the table's columns, not a Python dict per row.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..catalog.labels import canonical_task_column
    from .confidence import calibration_of

    def col(t, name):
        if name in t.column_names:
            return pc.cast(t.column(name), pa.string()).combine_chunks()
        return pa.nulls(t.num_rows, pa.string())

    label_all = col(table, "label")
    is_labelled = pc.fill_null(pc.is_in(label_all, value_set=pa.array(["YES", "NO"])), False)
    unlabelled = table.num_rows - pc.sum(is_labelled).as_py() if table.num_rows else 0
    t = table.filter(is_labelled)
    label = col(t, "label")
    # canonical task of each row; tasks in the order they first appear (the dict path's row order by task)
    raw = pc.dictionary_encode(col(t, "task"))
    task_order: dict = {}
    for value in raw.dictionary.to_pylist():
        task_order.setdefault(canonical_task(value), len(task_order))
    task = canonical_task_column(col(t, "task"))
    known = pa.array(list(VERDICT_COLUMNS), pa.string())
    verdict = col(t, "verdict")
    verdict_word = pc.if_else(pc.fill_null(pc.is_in(verdict, value_set=known), False), verdict, "ERROR")
    recovered = col(t, "recovered_verdict")
    yes_no = pa.array(["YES", "NO"], pa.string())
    reward = pc.if_else(pc.fill_null(pc.is_in(verdict, value_set=yes_no), False), verdict,
                        pc.if_else(pc.fill_null(pc.is_in(recovered, value_set=yes_no), False), recovered,
                                   verdict_word))

    def confusions(words) -> dict[str, TaskMetrics]:
        grouped = pa.table({"task": task, "label": label, "verdict": words}).group_by(
            ["task", "label", "verdict"], use_threads=False).aggregate([([], "count_all")])
        out: dict[str, dict[str, dict[str, int]]] = {}
        for k, lab, v, n in zip(*(grouped.column(c).to_pylist() for c in ("task", "label", "verdict", "count_all")),
                                strict=True):
            out.setdefault(k, _empty_confusion())[lab][v] += n
        return {k: metrics_of(k, conf) for k, conf in sorted(out.items())}

    per_task = confusions(verdict_word)
    reward_per_task = confusions(reward)

    # engines: "engine model" per distinct (engine, model)
    engines: dict[str, int] = {}
    for key, n in _group_counts({"engine": col(t, "engine"), "model": col(t, "model")}):
        name = engine_of(dict(key))
        engines[name] = engines.get(name, 0) + n
    # data sources: SpecVI rows by file name, the others by variant or survey
    variant = col(t, "variant")
    is_specvi = pc.fill_null(pc.equal(variant, SPECVI_VARIANT), False)
    data: dict[str, int] = {}
    path = col(t, "path")
    for key, n in _group_counts({"path": pc.filter(path, is_specvi)}):
        name = data_source_of({"variant": SPECVI_VARIANT, **dict(key)})
        data[name] = data.get(name, 0) + n
    others = pc.invert(is_specvi)
    for key, n in _group_counts({"variant": pc.filter(variant, others), "survey": pc.filter(col(t, "survey"), others)}):
        name = data_source_of(dict(key))
        data[name] = data.get(name, 0) + n
    # Table 1: every row of a SpecVI task is a SpecVI-Bench test row
    in_specvi_task = pc.fill_null(pc.is_in(task, value_set=pa.array(list(SPECVI_TASKS), pa.string())), False)
    n_specvi_task = pc.sum(in_specvi_task).as_py() or 0
    comparable = False
    if n_specvi_task and (pc.sum(pc.and_(in_specvi_task, is_specvi)).as_py() or 0) == n_specvi_task:
        paths = pc.unique(pc.filter(path, in_specvi_task)).to_pylist()
        comparable = all(is_specvi_test_row({"variant": SPECVI_VARIANT, "path": p}) for p in paths)

    # calibration over labelled rows with a usable p_yes, in the dict path's order (by task, then row)
    p = col_float(t, "p_yes")
    usable = np.isfinite(p) & (p >= 0.0) & (p <= 1.0)
    rank = np.asarray(pc.take(pa.array(list(task_order.values()), pa.int64()),
                              pc.index_in(task, value_set=pa.array(list(task_order), pa.string()))).fill_null(-1)
                      if len(task_order) else pa.array([], pa.int64()), dtype=np.int64)
    order = np.flatnonzero(usable)
    order = order[np.argsort(rank[order], kind="stable")]
    y = np.asarray(pc.equal(label, "YES").to_numpy(zero_copy_only=False), dtype=np.float64)[order]
    src = pc.take(pc.if_else(pc.fill_null(pc.not_equal(col(t, "p_yes_source"), ""), False), col(t, "p_yes_source"),
                             "unknown"), pa.array(order, pa.int64()))
    enc = pc.dictionary_encode(src)
    counts = np.bincount(np.asarray(enc.indices, dtype=np.int64), minlength=len(enc.dictionary)) if len(src) else []
    sources = {name: int(c) for name, c in zip(enc.dictionary.to_pylist(), counts, strict=True)}
    cal = calibration_of(p[order], y, sources)
    return _evaluation(run_id, per_task, reward_per_task, unlabelled, cal, engines=dict(sorted(engines.items())),
                       data=dict(sorted(data.items())), table1_comparable=comparable)


def col_float(table, name: str):
    """A numeric column as a float64 numpy array, null as NaN (an absent column: all NaN)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if name not in table.column_names:
        return np.full(table.num_rows, np.nan)
    values = pc.cast(table.column(name), pa.float64()).combine_chunks()
    return np.asarray(values.fill_null(float("nan")).to_numpy(zero_copy_only=False), dtype=np.float64)


def _group_counts(columns: dict) -> list[tuple[tuple[tuple[str, object], ...], int]]:
    """(((name, value), ...), rows) per distinct combination of the given equal-length Arrow columns."""
    import pyarrow as pa

    names = list(columns)
    table = pa.table(columns)
    if table.num_rows == 0:
        return []
    grouped = table.group_by(names, use_threads=False).aggregate([([], "count_all")])
    keys = zip(*(grouped.column(c).to_pylist() for c in names), strict=True)
    return [(tuple(zip(names, key, strict=True)), n) for key, n in zip(keys, grouped.column("count_all").to_pylist(),
                                                                     strict=True)]


def _count(keys) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in keys:
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def engine_of(row: dict) -> str:
    """The engine (and served model) that produced a verdict row, as one label."""
    engine = row.get("engine") or "unknown engine"
    return f"{engine} {row['model']}" if row.get("model") else str(engine)


def _file_name(row: dict) -> str:
    return PurePath(str(row.get("path") or "")).name


def is_specvi_test_row(row: dict) -> bool:
    """A row whose spectrum is a SpecVI-Bench test row (``test_<task>.parquet``), the set Table 1 was measured on."""
    return row.get("variant") == SPECVI_VARIANT and _file_name(row).lower().startswith("test_")


def data_source_of(row: dict) -> str:
    """Where a row's spectrum came from: the SpecVI-Bench file name, else the survey file layout (variant)."""
    if row.get("variant") == SPECVI_VARIANT:
        return f"SpecVI-Bench {_file_name(row) or 'parquet'}"
    return str(row.get("variant") or row.get("survey") or "unknown data")


def _counts_text(counts: dict[str, int]) -> str:
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{key} ({n})" for key, n in counts.items())


def format_text(ev: Evaluation) -> str:
    """The human-readable report printed by ``spec-vet eval``."""
    lines = [f"run {ev.run_id}" if ev.run_id else "evaluation"]
    if ev.engines:
        lines.append(f"engine: {_counts_text(ev.engines)}")
        lines.append(f"data: {_counts_text(ev.data)}")
    if not ev.per_task:
        lines.append("no labelled verdicts: pass --labels FILE or give the candidate list a label column")
        return "\n".join(lines)
    head = f"{'task':<10}{'n':>6}{'acc':>8}{'prec':>8}{'recall':>8}{'F1':>8}{'undec':>8}{'error':>8}"
    lines += ["", head, "-" * len(head)]
    for key, m in ev.per_task.items():
        lines.append(
            f"{key:<10}{m.n:>6}{m.accuracy:>8.3f}{m.precision:>8.3f}{_num(m.recall):>8}{_num(m.f1):>8}"
            f"{m.undecided:>8.3f}{m.errors:>8.3f}"
        )
    kept, left_out = ev.macro_tasks, ev.no_positive_tasks
    if ev.macro_f1 is None:
        lines.append("macro-F1: n/a (no task has a row labelled YES)")
    else:
        lines.append(f"macro-F1 (mean over {len(kept)} task{'s' if len(kept) != 1 else ''}"
                     f"{': ' + ', '.join(kept) if left_out else ''}): {ev.macro_f1:.3f}")
    if left_out:
        lines.append(f"note: {', '.join(left_out)}: {NO_POSITIVE_NOTE}")
    lines.append(f"note: {ABSTAIN_NOTE}")
    if ev.unlabelled:
        lines.append(f"{ev.unlabelled} verdict rows had no label and were left out")
    lines += ["", "confusion (rows: label, columns: verdict)"]
    for key, m in ev.per_task.items():
        lines.append(f"  {key}: " + "  ".join(
            f"{lab}->[" + " ".join(f"{v}:{m.confusion[lab][v]}" for v in VERDICT_COLUMNS) + "]" for lab in ("YES", "NO")
        ))
    cal = ev.calibration
    if cal.n:
        srcs = ", ".join(f"{k}: {v}" for k, v in sorted(cal.sources.items()))
        lines.append(f"\ncalibration of p_yes over {cal.n} rows ({srcs}): ECE {cal.ece:.3f}, Brier {cal.brier:.3f}")
    else:
        lines.append("\ncalibration: no labelled row has a p_yes")
    lines += table1_lines(ev)
    return "\n".join(lines)


def table1_lines(ev: Evaluation) -> list[str]:
    """The published Table 1 for the SpecVI tasks of the run; this run's row only when the data are the same.

    Published numbers are on the SpecVI-Bench test split. Putting a run on other spectra (synthetic examples, a
    survey's own candidates, the train split) in the same table would read as a comparison it is not.
    """
    cols = [t for t in SPECVI_TASKS if t in ev.per_task]
    if not cols:
        return []
    subset = len(cols) < len(SPECVI_TASKS)
    mean_head = "mean*" if subset else "meanF1"
    lines = [""]
    if ev.table1_comparable:
        lines.append(f"published SpecVI-Bench test F1 (protocol section 6) beside this run "
                     f"({_counts_text(ev.engines)} on {_counts_text(ev.data)}), percent:")
    else:
        lines.append("published SpecVI-Bench test F1 (protocol section 6), percent, for reference only:")
        lines.append(f"  NOT comparable with this run: it vetted {_counts_text(ev.data)} with "
                     f"{_counts_text(ev.engines)}, not the SpecVI-Bench test split (test_<task>.parquet); "
                     "run `spec-vet bench specvi DIR` on those files for a comparison")
    lines.append(f"{'model':<16}" + "".join(f"{SPECVI_COLUMN_NAMES[t]:>7}" for t in cols) + f"{mean_head:>8}")
    for model, row in PUBLISHED_TABLE1.items():
        mean = _mean([row[t] for t in cols]) if subset else row["mean_f1"]
        lines.append(f"{model:<16}" + "".join(f"{row[t]:>7.1f}" for t in cols) + f"{mean:>8.1f}")
    if ev.table1_comparable:
        # Table-1 mode: scored as the published reward reads answers (spec_vetting.analysis.reward), the way the paper's
        # numbers were measured; the production verdicts above leave out YES/NO found outside an answer block
        scored = ev.reward_per_task or ev.per_task
        f1s = [scored[t].f1 for t in cols]
        ours = _mean([f for f in f1s if f is not None])
        lines.append(f"{'this run':<16}" + "".join(f"{'n/a':>7}" if f is None else f"{f * 100:>7.1f}" for f in f1s)
                     + (f"{'n/a':>8}" if ours is None else f"{ours * 100:>8.1f}"))
        lines.append("  this run scored with the published reward's reading (recovered_verdict counted); "
                     "the per-task table above is the production verdicts")
    if subset:
        lines.append("  * mean over the tasks shown (the published means are over all five)")
    return lines

def write_plots(ev: Evaluation, out_dir) -> list[Path]:
    """PNG confusion matrices (one panel per task) and a reliability diagram; returns the files written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    tasks = list(ev.per_task.values())
    if tasks:
        fig = Figure(figsize=(3.6 * len(tasks), 3.2), dpi=100)
        FigureCanvasAgg(fig)
        for i, m in enumerate(tasks):
            ax = fig.add_subplot(1, len(tasks), i + 1)
            grid = [[m.confusion[lab][v] for v in VERDICT_COLUMNS] for lab in ("YES", "NO")]
            ax.imshow(grid, cmap="Blues", aspect="auto")
            for r, line in enumerate(grid):
                for c, value in enumerate(line):
                    ax.text(c, r, str(value), ha="center", va="center")
            ax.set_xticks(range(len(VERDICT_COLUMNS)), ["YES", "NO", "UND", "ERR"])
            ax.set_yticks([0, 1], ["YES", "NO"])
            ax.set_xlabel("verdict")
            ax.set_ylabel("label")
            ax.set_title(f"{m.task}  F1 {'n/a' if m.f1 is None else format(m.f1, '.2f')}")
        fig.tight_layout()
        path = out / "confusion.png"
        fig.savefig(path)
        written.append(path)
    cal = ev.calibration
    fig = Figure(figsize=(4.5, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
    pts = [(b.mean_p_yes, b.fraction_yes) for b in cal.bins if b.n]
    if pts:
        ax.plot([p for p, _ in pts], [f for _, f in pts], marker="o", color="tab:blue", label="this run")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean p_yes in bin")
    ax.set_ylabel("fraction labelled YES")
    ece = "n/a" if cal.ece is None else f"{cal.ece:.3f}"
    ax.set_title(f"reliability (n={cal.n}, ECE {ece})")
    ax.legend(loc="upper left")
    fig.tight_layout()
    path = out / "calibration.png"
    fig.savefig(path)
    written.append(path)
    return written
