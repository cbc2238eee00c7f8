"""The cells of a candidate table read one by one: the column names a list may use, and each value turned into the
type it stands for (or a :class:`~spec_vetting.errors.CandidateListError` naming the file, the row and the fix)."""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CandidateListError
from ..label_values import LABEL_HINT, LabelValueError, parse_label

#: accepted column names (lower case) for each field, first match wins
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "path": ("path", "file", "filename"),
    "candidate_id": ("candidate_id",),
    "target": ("target", "targetid"),
    "task": ("task",),
    "label": ("label",),
    "ra": ("ra",),
    "dec": ("dec",),
    "redrock": ("redrock",),
    "mjd": ("mjd", "epoch_mjd"),
}


#: columns a list may carry already cross-matched (``gaia_parallax`` ...): kept as given, no match is made for them
GIVEN_EVIDENCE_PREFIXES = ("gaia_",)


def blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def as_text(value: Any) -> str | None:
    if blank(value):
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def as_target(value: Any) -> int | str | None:
    text = as_text(value)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def as_label(value: Any, path: Path, row: int) -> str | None:
    try:
        return parse_label(value)
    except LabelValueError as exc:
        raise CandidateListError(path, str(exc), row=row, hint=LABEL_HINT) from None


def as_angle(value: Any, name: str, lo: float, hi: float, path: Path, row: int) -> float | None:
    if blank(value):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CandidateListError(path, f"{name} {value!r} is not a number (degrees)", row=row) from None
    if not math.isfinite(x):
        raise CandidateListError(path, f"{name} {value!r} is not a finite number (degrees)", row=row,
                                 hint=f"leave {name} empty when it is unknown")
    if not (lo <= x <= hi):
        raise CandidateListError(path, f"{name} {x} is outside [{lo:g}, {hi:g}] degrees", row=row)
    return x


def as_number(value: Any, name: str, path: Path, row: int) -> float | None:
    if blank(value):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CandidateListError(path, f"{name} {value!r} is not a number", row=row) from None
    return x if math.isfinite(x) else None


def given_evidence(names: list[str], r: dict, path: Path, row: int) -> dict[str, Any]:
    """The row's evidence columns (``gaia_*``) by lower-case name; empty cells as None, numbers as numbers."""
    out: dict[str, Any] = {}
    for n in names:
        key = n.lower().strip()
        if not key.startswith(GIVEN_EVIDENCE_PREFIXES):
            continue
        v = r.get(n)
        if blank(v):
            out[key] = None
        elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            out[key] = v.item() if hasattr(v, "item") else v
        else:
            try:
                out[key] = int(v) if key.endswith(("source_id", "n_within")) else float(v)
            except (TypeError, ValueError):
                out[key] = str(v)
    return out


def find_columns(names: list[str], path: Path) -> dict[str, str]:
    lower = {n.lower().strip(): n for n in names}
    found = {}
    for field, aliases in COLUMN_ALIASES.items():
        for alias in aliases:
            if alias in lower:
                found[field] = lower[alias]
                break
    if "path" not in found:
        raise CandidateListError(
            path,
            f"no path column; columns found: {', '.join(names) if names else '(none)'}",
            hint="add a column 'path' with each spectrum file (relative paths resolve against the list's folder)",
        )
    return found


def control_character_refusal(cid: str) -> tuple[str, str | None]:
    """(the id to record, why the row is refused or None). An id with a control character (NUL, newline, escape
    ...) cannot be vetted as given: export formats disagree on them (VOTable drops NUL, FITS/ECSV/CSV keep it), so
    the same id would not be the same id everywhere. Its row is recorded under the id with each control character
    written as ``\\uXXXX`` (printable everywhere), as an ERROR row saying so."""
    bad = next((c for c in cid if unicodedata.category(c) == "Cc"), None)
    if bad is None:
        return cid, None
    shown = "".join(f"\\u{ord(c):04X}" if unicodedata.category(c) == "Cc" else c for c in cid)
    return shown, (f"candidate_id {shown} holds the control character U+{ord(bad):04X}; candidate ids must be "
                   "printable text: fix the id (or the file name it is made from) in the list")
