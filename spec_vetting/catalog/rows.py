"""Turn an inspection result (plus its candidate and spectrum) into catalog rows, and rows into Arrow tables.

The column meanings live in :mod:`spec_vetting.catalog.schema`; this module only fills them. Native survey ids go
into their own columns (LAMOST obsid, SDSS plate/mjd/fiberid, DESI targetid) so catalog builders can join on them.
:func:`rows_to_table` checks each row against the schema, so a column added on one side only fails loudly.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pyarrow as pa

from ..types import InspectionResult
from .healpix import healpix_or_none
from .schema import table_schema


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
    }


def verdict_row(
    result: InspectionResult, candidate, spectrum, *, run_id: str, shard_id: str, redshift: float | None
) -> dict[str, Any]:
    usage = result.usage_totals()
    windows = [list(t.zoom_window) for t in result.turns if t.zoom_window is not None]
    started = None
    if result.started_at is not None:
        started = dt.datetime.fromtimestamp(result.started_at, tz=dt.timezone.utc)
    target = getattr(candidate, "target", None)
    row = {
        "run_id": run_id,
        "candidate_id": str(candidate.candidate_id),
        "verdict": result.verdict,
        "status": result.status,
        "fallback": result.fallback,
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
    }
    row.update(survey_columns(spectrum, candidate))
    return row


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
    bytes only with ``store_pictures``.
    """
    rows = []
    base = {"run_id": run_id, "candidate_id": str(result.candidate_id), "shard_id": shard_id}

    def picture(png: bytes | None) -> dict[str, Any]:
        return {
            "image_png": png if (store_pictures and png) else None,
            "picture_sha256": picture_sha256(png),
            "picture_title": title if png else None,
            "renderer_version": result.renderer_version if png else None,
        }

    if result.initial_image_png:
        rows.append({**empty_row("turns"), **base, "turn": -1, **picture(result.initial_image_png)})
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
