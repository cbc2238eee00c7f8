"""Build the static review page: one self-contained HTML file that works from disk, offline, without a server.

The data (verdicts, trajectories) go in a ``<script type="application/json">`` block; ``<``, ``>`` and ``&`` are
written as ``\\u003c``-style escapes so no text in a trace can close the block (``</script>``) or open a comment.
Images go in one ``<script type="text/plain">`` block each (base64, deduplicated by content) and are turned into
``data:`` URLs only when a candidate is shown, so a page with thousands of candidates opens quickly. The browser code
lives in ``review.js`` / ``review.css`` beside this module and is inlined at build time; a Content-Security-Policy
with their hashes allows exactly that code and nothing else (no network, no other script).

Real renders weigh about 40 kB each, some 200 kB of page per candidate: one file for thousands of candidates would
be hundreds of MB. So the trajectories are split over files of ``per_file`` candidates (``index.html``,
``part-002.html``, ...). Every file carries the light index of ALL candidates (id, task, verdict, p_yes, review
reasons, which file): the list, the filters and the CSV export cover the whole run from any file, and choosing a
candidate of another file opens that file at that candidate.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from pathlib import Path

from ..catalog.read import RunData
from ..catalog.review_schema import DECISIONS, REVIEW_CSV_COLUMNS
from ..confidence import DEFAULT_REVIEW_THRESHOLD, review_reasons
from ..evaluate import ABSTAIN_NOTE

#: verdict-row columns shown as the candidate's identifiers, in this order, when present and not null
ID_COLUMNS = ("survey", "variant", "obsid", "designation", "plate", "mjd", "fiberid", "specobjid", "targetid",
              "tileid", "healpix", "ra", "dec", "redshift", "path", "target")

#: keyboard shortcut per decision (catalog.review_schema.DECISIONS) on the page
DECISION_KEYS = {"agree": "a", "disagree": "d", "unsure": "u"}

#: list rows per page; the list of one page is plain text rows, cheap even at this size
PAGE_SIZE = 1000

#: candidates whose trajectories (and images) go in one HTML file; about 45 MB with real renders
DEFAULT_PER_FILE = 200

FIRST_FILE = "index.html"


def part_file_name(part: int) -> str:
    """File of the 0-based ``part``: index.html, part-002.html, part-003.html, ..."""
    return FIRST_FILE if part == 0 else f"part-{part + 1:03d}.html"


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


def _index_entry(record: dict, part: int) -> dict:
    keys = ("candidate_id", "task", "verdict", "p_yes", "review_reasons")
    return {**{k: record[k] for k in keys}, "part": part}


def _image_refs(record: dict) -> list[str]:
    refs = [record["initial_image"]] + [t["image"] for t in record["turns"]]
    return [r for r in refs if r]


def build_pages(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False,
                per_file: int = DEFAULT_PER_FILE) -> list[tuple[str, str]]:
    """(file name, HTML text) of every file of the review page of one run; the first is ``index.html``."""
    if per_file < 1:
        raise ValueError(f"per_file must be at least 1, got {per_file}")
    records, images = candidate_records(data, threshold=threshold, only_queue=only_queue)
    chunks = [records[i:i + per_file] for i in range(0, len(records), per_file)] or [[]]
    index = [_index_entry(r, n) for n, chunk in enumerate(chunks) for r in chunk]
    parts = [{"file": part_file_name(n), "n": len(chunk)} for n, chunk in enumerate(chunks)]
    js, css = _asset("review.js"), _asset("review.css")
    title = f"spec-vet review: run {data.run_id}" + (" (review queue)" if only_queue else "")
    note = f"{len(records)} verdicts from {data.root}. {ABSTAIN_NOTE} Decisions stay in this browser until exported."
    if len(chunks) > 1:
        note += (f" Trajectories are split over {len(chunks)} files of up to {per_file} candidates; the list and"
                 " the export cover them all.")
    pages = []
    for n, chunk in enumerate(chunks):
        payload = {
            "run_id": data.run_id, "root": data.root, "threshold": threshold, "page_size": PAGE_SIZE,
            "only_queue": only_queue, "part": n, "parts": parts, "index": index, "candidates": chunk,
            "schema": {"decisions": list(DECISIONS), "decision_keys": DECISION_KEYS,
                       "columns": list(REVIEW_CSV_COLUMNS)},
        }
        refs = dict.fromkeys(ref for record in chunk for ref in _image_refs(record))
        image_blocks = "\n".join(
            f'<script type="text/plain" id="img-{ref}">{images.blobs[ref]}</script>' for ref in refs
        )
        part_title = title + (f" (file {n + 1} of {len(chunks)})" if len(chunks) > 1 else "")
        values = {
            "STYLE_HASH": _csp_hash(css), "SCRIPT_HASH": _csp_hash(js), "CSS": css, "JS": js,
            "TITLE": html.escape(part_title), "NOTE": html.escape(note), "IMAGES": image_blocks,
            "DATA": json_for_script(payload),
        }
        # one pass over the template only: text coming from the data is never searched for placeholders
        pages.append((part_file_name(n), re.sub(r"__([A-Z_]+?)__", lambda m: values[m.group(1)], _asset("page.html"))))
    return pages


def build_page(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False) -> str:
    """The HTML text of the review page of one run, all in one file (for runs small enough to fit one)."""
    return build_pages(data, threshold=threshold, only_queue=only_queue, per_file=max(1, len(data.verdicts)))[0][1]


def write_pages(data: RunData, out_dir, **options) -> list[Path]:
    """Write DIR/index.html (and DIR/part-NNN.html when the run needs several files); returns the paths.

    Part files of an earlier, larger page in the same folder are removed so that no stale file is linked.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in build_pages(data, **options):
        path = out / name
        tmp = path.with_suffix(".html.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    keep = {p.name for p in written}
    for stale in out.glob("part-[0-9][0-9][0-9]*.html"):
        if stale.name not in keep:
            stale.unlink()
    return written


def write_page(data: RunData, out_dir, **options) -> Path:
    """Write the review page; returns the path of DIR/index.html (the file to open)."""
    return write_pages(data, out_dir, **options)[0]
