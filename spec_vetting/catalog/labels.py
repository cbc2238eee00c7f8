"""Ground-truth labels for a run: from the catalog's ``label`` column, a label file, or a review-page export.

A label file is CSV or Parquet with ``candidate_id`` and ``label`` (YES/NO, in the spellings of
:mod:`spec_vetting.label_values`) and, optionally, ``task`` (without it a label applies to every task of that
candidate).
The review page's export has the same columns plus ``verdict`` and ``decision``; an empty ``label`` there is derived
from the decision (agree/disagree) when it can be. Labels from a file override the catalog's for the rows they name.

``spec-vet review import ROOT decisions.csv`` keeps reviewers' decisions in ROOT/_review/decisions.csv (same
columns); :func:`labels_for` reads them for eval and export, under any ``--labels`` file, over the catalog's.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import CandidateListError
from ..label_values import LABEL_HINT, LabelValueError, parse_label
from ..protocol import TASK_ALIASES
from .review_schema import REVIEW_DECISIONS_FILE, REVIEW_DIR, label_from_decision

LabelKey = tuple[str, str | None]  # (candidate_id, task or None = any task)


def canonical_task(task: str | None) -> str | None:
    return None if task is None else TASK_ALIASES.get(str(task), str(task))


def normalise_label(value, *, path="labels", row: int | None = None) -> str | None:
    """The label as "YES", "NO" or None (spellings: :mod:`spec_vetting.label_values`); else a CandidateListError."""
    try:
        return parse_label(value)
    except LabelValueError as exc:
        raise CandidateListError(path, str(exc), row=row, hint=LABEL_HINT) from None


def read_label_file(path) -> dict[LabelKey, str]:
    """Labels of a CSV/Parquet label list or review export, keyed by (candidate_id, task or None)."""
    path = Path(path)
    if not path.is_file():
        raise CandidateListError(path, "label file not found",
                                 hint="pass a CSV or Parquet file with candidate_id,label")
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise CandidateListError(path, f"not a readable Parquet file ({exc})") from exc
    else:
        try:
            with open(path, newline="", encoding="utf-8-sig") as fh:
                rows = list(csv.DictReader(fh))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise CandidateListError(
                path, f"not a UTF-8 CSV file ({exc})", hint="save the labels as UTF-8 CSV, or pass a Parquet file"
            ) from exc
    if rows and "candidate_id" not in rows[0]:
        raise CandidateListError(
            path, f"no candidate_id column (columns: {', '.join(rows[0])})", hint="name the id column candidate_id"
        )
    if rows and "label" not in rows[0] and "decision" not in rows[0]:
        raise CandidateListError(path, "no label column", hint="add a label column with YES or NO")
    labels: dict[LabelKey, str] = {}
    for i, row in enumerate(rows, start=1):
        label = normalise_label(row.get("label"), path=path, row=i)
        if label is None:
            label = label_from_decision(_clean(row.get("verdict")), _clean(row.get("decision"), lower=True))
        if label is None:
            continue
        cid = row.get("candidate_id")
        if cid is None or str(cid).strip() == "":
            raise CandidateListError(path, "empty candidate_id", row=i)
        labels[(str(cid).strip(), canonical_task(_clean(row.get("task"), lower=True)))] = label
    return labels


def _clean(value, *, lower: bool = False) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    return text.lower() if lower else text.upper()


def label_for(labels: dict[LabelKey, str], candidate_id: str, task: str) -> str | None:
    task = canonical_task(task)
    return labels.get((candidate_id, task), labels.get((candidate_id, None)))


def attach_labels(verdicts: list[dict], labels: dict[LabelKey, str] | None = None) -> list[dict]:
    """Set each verdict row's ``label`` to the file's label when it has one, else the catalog's (normalised)."""
    for row in verdicts:
        from_file = label_for(labels, row["candidate_id"], row["task"]) if labels else None
        row["label"] = from_file if from_file is not None else normalise_label(row.get("label"))
    return verdicts


def attach_labels_table(table, labels: dict[LabelKey, str] | None = None):
    """:func:`attach_labels` on an Arrow table of verdict rows (``candidate_id``, ``task``, ``label``), vectorised:
    the table with its ``label`` column replaced by "YES", "NO" or null. Each distinct catalog label is normalised
    once; the file's labels are looked up with ``pyarrow.compute.index_in`` on (candidate_id, task) and then on
    candidate_id alone, so no Python object is made per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    from_file = pa.nulls(n, pa.string())
    if labels:
        cid = pc.cast(table.column("candidate_id"), pa.string()).combine_chunks()
        by_task = {(c, t): v for (c, t), v in labels.items() if t is not None}
        any_task = {c: v for (c, t), v in labels.items() if t is None}
        if any_task:
            idx = pc.index_in(cid, value_set=pa.array(list(any_task), pa.string()))
            from_file = pc.take(pa.array(list(any_task.values()), pa.string()), idx)
        if by_task:
            keys = pc.binary_join_element_wise(cid, canonical_task_column(table.column("task")), _KEY_SEP)
            idx = pc.index_in(keys, value_set=pa.array([c + _KEY_SEP + t for c, t in by_task], pa.string()))
            from_file = pc.coalesce(pc.take(pa.array(list(by_task.values()), pa.string()), idx), from_file)
    label = from_file
    if "label" in table.column_names:
        # the catalog's label, normalised once per distinct value, for the rows the file does not label
        enc = pc.dictionary_encode(pc.cast(table.column("label"), pa.string()).combine_chunks())
        used = set(pc.unique(pc.filter(enc.indices, pc.is_null(from_file))).to_pylist())
        values = pa.array([normalise_label(v) if i in used else None for i, v in enumerate(enc.dictionary.to_pylist())],
                          pa.string())
        if len(values):
            label = pc.coalesce(from_file, pc.take(values, enc.indices))
    if "label" in table.column_names:
        return table.set_column(table.schema.get_field_index("label"), "label", label)
    return table.append_column("label", label)


#: joins candidate_id and task into one lookup key (a candidate id never holds it)
_KEY_SEP = "\x1f"


def canonical_task_column(column):
    """:func:`canonical_task` of every value of an Arrow text column (each distinct value mapped once)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = pc.cast(column, pa.string())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    enc = pc.dictionary_encode(column)
    values = pa.array([canonical_task(v) for v in enc.dictionary.to_pylist()], pa.string())
    return pc.take(values, enc.indices) if len(values) else pa.nulls(len(column), pa.string())


def reviewed_labels_path(root) -> Path:
    """ROOT/_review/decisions.csv: where `spec-vet review import` keeps the decisions it brought back."""
    return Path(root) / REVIEW_DIR / REVIEW_DECISIONS_FILE


def labels_for(root, labels_file=None) -> tuple[dict[LabelKey, str] | None, int]:
    """Labels for eval and export: imported review decisions, overridden by ``labels_file``; and how many labels
    came from the imported decisions. None when there are neither."""
    reviewed = reviewed_labels_path(root)
    labels: dict[LabelKey, str] = read_label_file(reviewed) if reviewed.is_file() else {}
    n_reviewed = len(labels)
    if labels_file:
        labels.update(read_label_file(labels_file))
    return (labels or None), n_reviewed
