"""Build the static review page: one self-contained HTML file that works from disk, offline, without a server.

The data (verdicts, trajectories) go in a ``<script type="application/json">`` block; ``<``, ``>`` and ``&`` are
written as ``\\u003c``-style escapes so no text in a trace can close the block (``</script>``) or open a comment.
Images go in one ``<script type="text/plain">`` block each (base64, deduplicated by content) and are turned into
``data:`` URLs only when a candidate is shown, so a page with thousands of candidates opens quickly. The browser code
lives in ``review.js`` / ``review.css`` beside this module and is inlined at build time; a Content-Security-Policy
with their hashes allows exactly that code and nothing else (no network, no other script).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from pathlib import Path

from ..confidence import DEFAULT_REVIEW_THRESHOLD, review_reasons
from ..evaluate import ABSTAIN_NOTE
from .review_schema import DECISION_KEYS, DECISIONS, REVIEW_CSV_COLUMNS
from .run_data import RunData

#: verdict-row columns shown as the candidate's identifiers, in this order, when present and not null
ID_COLUMNS = ("survey", "variant", "obsid", "designation", "plate", "mjd", "fiberid", "specobjid", "targetid",
              "tileid", "healpix", "ra", "dec", "redshift", "path", "target")

#: list rows per page; the list of one page is plain text rows, cheap even at this size
PAGE_SIZE = 1000


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def json_for_script(obj) -> str:
    """JSON that is safe inside an HTML <script> element: no '<', '>' or '&' characters at all."""
    text = json.dumps(obj, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _clean_number(value):
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


class _Images:
    """Deduplicated PNG store: content hash -> base64."""

    def __init__(self):
        self.blobs: dict[str, str] = {}

    def add(self, png: bytes | None) -> str | None:
        if not png:
            return None
        ref = hashlib.sha1(png).hexdigest()[:16]
        if ref not in self.blobs:
            self.blobs[ref] = base64.b64encode(png).decode("ascii")
        return ref


def candidate_records(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False):
    """Records for the page (images replaced by references) and the image store."""
    images = _Images()
    records = []
    for row in data.verdicts:
        reasons = review_reasons(row, threshold=threshold)
        if only_queue and not reasons:
            continue
        cid, task = row["candidate_id"], row["task"]
        turns = []
        for t in data.assistant_turns(cid, task):
            zmin, zmax = t.get("zoom_min"), t.get("zoom_max")
            turns.append({
                "turn": int(t.get("turn") or 0),
                "assistant_text": t.get("assistant_text"),
                "tool_call": t.get("tool_call"),
                "tool_response_text": t.get("tool_response_text"),
                "zoom": [zmin, zmax] if zmin is not None and zmax is not None else None,
                "image": images.add(t.get("image_png")),
            })
        records.append({
            "candidate_id": cid, "task": task, "verdict": row.get("verdict"), "status": row.get("status"),
            "fallback": row.get("fallback"), "p_yes": _clean_number(row.get("p_yes")),
            "p_yes_source": row.get("p_yes_source"), "justification": row.get("justification"),
            "reason": row.get("reason"), "error_kind": row.get("error_kind"),
            "error_message": row.get("error_message"), "label": row.get("label"), "engine": row.get("engine"),
            "model": row.get("model"), "review_reasons": reasons,
            "ids": {k: _clean_number(row[k]) for k in ID_COLUMNS if row.get(k) is not None},
            "initial_image": images.add(data.initial_image(cid, task)), "turns": turns,
        })
    records.sort(key=lambda r: (r["task"], r["candidate_id"]))
    return records, images


def build_page(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False) -> str:
    """The whole HTML text of the review page for one run."""
    records, images = candidate_records(data, threshold=threshold, only_queue=only_queue)
    payload = {
        "run_id": data.run_id, "root": data.root, "threshold": threshold, "page_size": PAGE_SIZE,
        "only_queue": only_queue, "candidates": records,
        "schema": {"decisions": list(DECISIONS), "decision_keys": DECISION_KEYS, "columns": list(REVIEW_CSV_COLUMNS)},
    }
    js, css = _asset("review.js"), _asset("review.css")
    title = f"spec-vet review: run {data.run_id}" + (" (review queue)" if only_queue else "")
    note = f"{len(records)} verdicts from {data.root}. {ABSTAIN_NOTE} Decisions stay in this browser until exported."
    image_blocks = "\n".join(
        f'<script type="text/plain" id="img-{ref}">{b64}</script>' for ref, b64 in images.blobs.items()
    )
    values = {
        "STYLE_HASH": _csp_hash(css), "SCRIPT_HASH": _csp_hash(js), "CSS": css, "JS": js,
        "TITLE": html.escape(title), "NOTE": html.escape(note), "IMAGES": image_blocks,
        "DATA": json_for_script(payload),
    }
    # one pass over the template only: text coming from the data is never searched for placeholders
    page = re.sub(r"__([A-Z_]+?)__", lambda m: values[m.group(1)], _asset("page.html"))
    return page


def write_page(data: RunData, out_dir, **options) -> Path:
    """Write DIR/index.html; returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(build_page(data, **options), encoding="utf-8")
    tmp.replace(path)
    return path
