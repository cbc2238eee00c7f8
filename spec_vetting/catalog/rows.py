"""Turn an inspection result (plus its candidate and spectrum) into catalog rows, and rows into Arrow tables.

The column meanings live in :mod:`spec_vetting.catalog.schema`; this module only fills them. Native survey ids go
into their own columns (LAMOST obsid, SDSS plate/mjd/fiberid, DESI targetid) so catalog builders can join on them.
:func:`rows_to_table` checks each row against the schema, so a column added on one side only fails loudly.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import numbers
import re
from typing import Any

import pyarrow as pa

from ..types import InspectionResult
from .healpix import healpix_or_none
from .schema import GAIA_FIELDS, table_schema


def _int_or_none(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _float_or_none(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None  # NaN -> null


def _text_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def survey_columns(spectrum, candidate) -> dict[str, Any]:
    """Identifier and position columns from the spectrum's metadata, the candidate list filling gaps."""
    meta = getattr(spectrum, "meta", None)
    ids = dict(getattr(meta, "ids", None) or {})
    ra = _float_or_none(getattr(meta, "ra", None))
    dec = _float_or_none(getattr(meta, "dec", None))
    if ra is None or dec is None:
        ra, dec = _float_or_none(getattr(candidate, "ra", None)), _float_or_none(getattr(candidate, "dec", None))
    return {
        "survey": getattr(meta, "survey", None),
        "variant": getattr(meta, "variant", None),
        "obsid": _int_or_none(ids.get("obsid")),
        "designation": _text_or_none(ids.get("designation")),
        "plate": _int_or_none(ids.get("plate", ids.get("field"))),
        "mjd": _int_or_none(ids.get("mjd", ids.get("lmjd"))),
        "fiberid": _int_or_none(ids.get("fiberid")),
        "specobjid": _text_or_none(ids.get("specobjid", ids.get("catalogid"))),
        "targetid": _int_or_none(ids.get("targetid")),
        "ra": ra,
        "dec": dec,
        "healpix": healpix_or_none(ra, dec),
        "pipeline_class": getattr(meta, "pipeline_class", None),
        "read_warnings": "\n".join(getattr(meta, "warnings", None) or []) or None,
    }


def verdict_row(
    result: InspectionResult, candidate, spectrum, *, run_id: str, shard_id: str, redshift: float | None
) -> dict[str, Any]:
    usage = result.usage_totals()
    windows = [list(t.zoom_window) for t in result.turns if t.zoom_window is not None]
    started = None
    if result.started_at is not None:
        started = dt.datetime.fromtimestamp(result.started_at, tz=dt.UTC)
    target = getattr(candidate, "target", None)
    row = {
        "run_id": run_id,
        "candidate_id": str(candidate.candidate_id),
        "verdict": result.verdict,
        "status": result.status,
        "fallback": result.fallback,
        "recovered_verdict": result.recovered_verdict,
        "p_yes": _float_or_none(result.p_yes),
        "p_yes_source": result.p_yes_source,
        "justification": result.justification or None,
        "reason": result.reason,
        "error_kind": result.error_kind,
        "error_message": result.error_message,
        "engine": result.engine,
        "engine_version": result.engine_version,
        "model": result.model,
        "prompt_version": result.prompt_version,
        "renderer_version": result.renderer_version,
        "initial_image_source": result.initial_image_source,
        "path": getattr(candidate, "path", None),
        "target": None if target is None else str(target),
        "redshift": _float_or_none(result.redshift_used if result.redshift_used is not None else redshift),
        "label": getattr(candidate, "label", None),
        "n_turns": len(result.turns),
        "n_tool_calls": result.n_tool_calls,
        "zoom_windows": json.dumps(windows),
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "attempts": result.attempts,
        "started_at": started,
        "elapsed_s": float(result.elapsed_s or 0.0),
        "shard_id": shard_id,
        "value_notes": None,
    }
    row.update(survey_columns(spectrum, candidate))
    row.update(evidence_columns(getattr(candidate, "evidence", None)))
    row["value_notes"] = position_note(spectrum, candidate)
    return row


#: the list's and the file's positions further apart than this (arcsec) are noted in the row
POSITION_DISAGREE_ARCSEC = 2.0


def position_note(spectrum, candidate) -> str | None:
    """A note when the candidate list's ra/dec and the spectrum file's differ by more than 2 arcsec (the row's ra/dec
    are the file's; the evidence was matched at the list's)."""
    meta = getattr(spectrum, "meta", None)
    file_pos = (_float_or_none(getattr(meta, "ra", None)), _float_or_none(getattr(meta, "dec", None)))
    list_pos = (_float_or_none(getattr(candidate, "ra", None)), _float_or_none(getattr(candidate, "dec", None)))
    if None in file_pos or None in list_pos:
        return None
    from ..evidence.motion import separation_arcsec

    sep = float(separation_arcsec(*list_pos, *file_pos))
    if sep <= POSITION_DISAGREE_ARCSEC:
        return None
    return (f"position: the list's ra/dec ({list_pos[0]:.6f}, {list_pos[1]:.6f}) is {sep:.1f} arcsec from the "
            f"spectrum file's ({file_pos[0]:.6f}, {file_pos[1]:.6f}); the row's ra/dec are the file's, evidence used "
            "the list's")


def evidence_columns(evidence: dict[str, Any] | None) -> dict[str, Any]:
    """The gaia_* columns from a candidate's evidence values (null when absent) and every other evidence value in
    ``evidence_extra`` (JSON)."""
    evidence = evidence or {}
    out: dict[str, Any] = {}
    for f in GAIA_FIELDS:
        v = evidence.get(f.name)
        if pa.types.is_integer(f.type):
            v = _int_or_none(v)
        elif pa.types.is_floating(f.type):
            v = _float_or_none(v)
        else:
            v = _text_or_none(v)
        out[f.name] = v
    other = {k: v for k, v in evidence.items() if k not in out}
    out["evidence_extra"] = json.dumps(other, sort_keys=True, default=str) if other else None
    return out


def _tool_call_json(call) -> str | None:
    if call is None:
        return None
    return json.dumps({"name": call.name, "arguments": call.arguments, "error": call.error}, default=str)


def picture_sha256(png: bytes | None) -> str | None:
    """The hex sha256 of a picture's PNG bytes (what ``turns.picture_sha256`` holds), None without a picture."""
    return hashlib.sha256(png).hexdigest() if png else None


def turn_rows(
    result: InspectionResult, *, run_id: str, shard_id: str, title: str | None = None, store_pictures: bool = False
) -> list[dict[str, Any]]:
    """The turn -1 row (full view) when there is one, then one row per assistant turn.

    Pictures are kept by reference (sha256, title, renderer version; the window is zoom_min/zoom_max); their PNG
    bytes only with ``store_pictures``, or when no renderer can make the picture again (a SpecVI-Bench row's own
    full view, which has no renderer version).
    """
    rows = []
    base = {"run_id": run_id, "candidate_id": str(result.candidate_id), "shard_id": shard_id}

    def picture(png: bytes | None, rendered: bool = True) -> dict[str, Any]:
        return {
            "image_png": png if (png and (store_pictures or not rendered)) else None,
            "picture_sha256": picture_sha256(png),
            "picture_title": title if png and rendered else None,
            "renderer_version": result.renderer_version if png and rendered else None,
        }

    if result.initial_image_png:
        rendered = result.initial_image_source != "specvi"
        rows.append({**empty_row("turns"), **base, "turn": -1, **picture(result.initial_image_png, rendered)})
    for t in result.turns:
        lo, hi = (t.zoom_window if t.zoom_window is not None else (None, None))
        rows.append(
            {
                **base,
                "turn": t.index,
                "assistant_text": t.assistant_text,
                "tool_call": _tool_call_json(t.tool_call),
                "tool_response_text": t.tool_response_text,
                "zoom_min": _float_or_none(lo),
                "zoom_max": _float_or_none(hi),
                **picture(t.image_png),
                "prompt_tokens": t.usage.prompt_tokens,
                "completion_tokens": t.usage.completion_tokens,
                "cached_tokens": t.usage.cached_tokens,
                "latency_s": float(t.latency_s or 0.0),
                "endpoint": t.endpoint,
                "finish_reason": t.finish_reason,
                "value_notes": None,
            }
        )
    return rows


def error_result(
    candidate_id: str, task: str, kind: str, message: str, *, identity=None, prompt_version=None, renderer_version=None
) -> InspectionResult:
    """An ERROR verdict for a pair that could not be inspected (unreadable spectrum, internal failure)."""
    return InspectionResult(
        candidate_id=str(candidate_id),
        task=task,
        verdict="ERROR",
        status="none",
        error_kind=kind,
        error_message=message,
        engine=getattr(identity, "engine", "") or "",
        engine_version=getattr(identity, "engine_version", None),
        model=getattr(identity, "model", None),
        prompt_version=prompt_version,
        renderer_version=renderer_version,
        attempts=0,
    )


def empty_row(table: str) -> dict[str, Any]:
    """A row of ``table`` with every column null: the start of a row that fills only some columns on purpose."""
    return dict.fromkeys(table_schema(table).names)


#: the longest text one catalog cell keeps; a longer one (a runaway reply) is cut and the row says so
MAX_TEXT_CHARS = 200_000
#: lone UTF-16 surrogates (a server's broken escape such as "\\ud83d") cannot be written as UTF-8
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT_BOUNDS = {bits: (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for bits in (8, 16, 32, 64)}


def _safe_text(value: Any) -> tuple[str, list[str]]:
    notes = []
    text = value if isinstance(value, str) else str(value)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
        notes.append("invalid UTF-16 surrogates replaced by U+FFFD")
    if len(text) > MAX_TEXT_CHARS:
        notes.append(f"cut from {len(text)} to {MAX_TEXT_CHARS} characters")
        text = text[:MAX_TEXT_CHARS]
    return text, notes


def _safe_int(value: Any, bits: int) -> tuple[int | None, list[str]]:
    lo, hi = _INT_BOUNDS[bits]
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None, [f"{value!r} is not an integer"]
        value = int(value)
    if not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        return None, [f"{value!r} is outside the int{bits} range"]
    return int(value), []


def make_row_safe(row: dict[str, Any], table: str) -> dict[str, Any]:
    """``row`` with every value in a form its column can hold, so one bad value from a server never fails a shard.

    Text becomes valid UTF-8 and is capped at :data:`MAX_TEXT_CHARS`; an integer outside its column's range (a
    server that reports ``prompt_tokens = 1e30``) becomes null. What was changed is listed in ``value_notes``.
    """
    out = dict(row)
    notes: list[str] = []
    for field in table_schema(table):
        value = out.get(field.name)
        if value is None or field.name == "value_notes":
            continue
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            out[field.name], changed = _safe_text(value)
        elif pa.types.is_integer(field.type):
            out[field.name], changed = _safe_int(value, field.type.bit_width)
        else:
            continue
        notes.extend(f"{field.name}: {n}" for n in changed)
    if notes:
        out["value_notes"] = "; ".join(([out["value_notes"]] if out.get("value_notes") else []) + notes)
    return out


def rows_to_table(rows: list[dict[str, Any]], table: str) -> pa.Table:
    """Rows (dicts keyed by column name) as an Arrow table with ``table``'s schema (verdicts or turns).

    Every row must carry exactly the schema's columns: a key the schema lacks (a new column not yet in
    :mod:`.schema`) or a column a row lacks (a row builder that forgot it) is a ValueError naming the key, not a
    column silently dropped or left null. Start from :func:`empty_row` to leave columns null on purpose.
    """
    schema = table_schema(table)
    names = schema.names
    expected = set(names)
    for i, row in enumerate(rows):
        if row.keys() != expected:
            unknown = sorted(k for k in row if k not in expected)
            missing = [n for n in names if n not in row]
            problems = []
            if unknown:
                problems.append(
                    f"unknown column(s) {', '.join(map(repr, unknown))} (add them to the {table} schema in "
                    "spec_vetting/catalog/schema.py)"
                )
            if missing:
                problems.append(f"missing column(s) {', '.join(map(repr, missing))}")
            raise ValueError(f"{table} row {i} (candidate {row.get('candidate_id')!r}): {'; '.join(problems)}")
    return pa.Table.from_pydict({n: [r[n] for r in rows] for n in names}, schema=schema)
