"""Build the static review page: one self-contained HTML file that works from disk, offline, without a server.

The data (verdicts, trajectories) go in a ``<script type="application/json">`` block; ``<``, ``>`` and ``&`` are
written as ``\\u003c``-style escapes so no text in a trace can close the block (``</script>``) or open a comment.
Images go in one ``<script type="text/plain">`` block each (base64, deduplicated by content) and are turned into
``data:`` URLs only when a candidate is shown, so a page with thousands of candidates opens quickly. The browser code
lives in ``review.js`` / ``review.css`` beside this module and is inlined at build time; a Content-Security-Policy
with their hashes allows exactly that code and nothing else (no network, no other script).

A candidate weighs about 40 kB (its spectrum and trajectory; some 300 kB more with the model's pictures): one file
for thousands of candidates would be hundreds of MB. So the trajectories are split over files of ``per_file``
candidates (``index.html``, ``part-002.html``, ...). Every file carries the light index of ALL candidates (id, task,
verdict, p_yes, review reasons, which file): the list, the filters and the CSV export cover the whole run from any
file, and choosing a candidate of another file opens that file at that candidate.

What the reviewer sees of each candidate is an interactive plot of the real spectrum (``spectrum.js``): flux,
noise from ivar and the bad-pixel mask, read again from the file the verdict row points at
(:func:`spectrum_payload`), binned to at most ``MAX_POINTS`` points and packed as 16-bit integers, with the line
table of :mod:`spec_vetting.lines` and the agent's zoom windows drawn on it. The pictures the model saw are not
embedded by default (``images="auto"``): each turn's window is a button that shows it on the plot, and the PNGs go
in only for candidates whose spectrum file no longer reads; ``images="all"`` embeds every picture as before,
``images="none"`` none.

Why one file of about 500 lines: the page is assembled from one run's rows in one pass (verdicts, turns,
pictures, evidence, the review queue); its parts are functions here, its script and styles files of their own.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..analysis.confidence import DEFAULT_REVIEW_THRESHOLD, reason_lists, review_flags, review_table
from ..analysis.evaluate import ABSTAIN_NOTE
from ..catalog.review_schema import (
    DECISIONS,
    REVIEW_CSV_COLUMNS,
    VI_ISSUES,
    VI_QUALITY,
    VI_SPECTYPES,
    VI_STANDARD_COMMENTS,
)
from ..catalog.run_data import RunData
from ..catalog.schema import GAIA_FIELDS
from ..catalog.walk import walk_data
from ..errors import SpecVettingError
from ..evidence.gaia_columns import GAIA_ABS_G, GAIA_BP_RP, GAIA_SOURCE_ID
from ..evidence.lightcurve_points import read_points
from ..evidence.loci import MS_SLOPE, MS_ZERO, WD_SLOPE, WD_ZERO
from ..lines import GROUPS, LINES

#: verdict-row columns shown as the candidate's identifiers, in this order, when present and not null
ID_COLUMNS = ("survey", "variant", "obsid", "designation", "plate", "mjd", "fiberid", "specobjid", "targetid",
              "tileid", "healpix", "ra", "dec", "redshift", "pipeline_class", "path", "target")

#: keyboard shortcut per decision (catalog.review_schema.DECISIONS) on the page
DECISION_KEYS = {"agree": "a", "disagree": "d", "unsure": "u"}

#: list rows per page; the list of one page is plain text rows, cheap even at this size
PAGE_SIZE = 1000

#: candidates whose trajectories (and spectra) go in one HTML file; about 8 MB (60 MB with every picture)
DEFAULT_PER_FILE = 200

FIRST_FILE = "index.html"

#: most points of one candidate's interactive spectrum; LAMOST (~3900 pixels) and SDSS (3800-4650) keep every
#: pixel, DESI coadds (7781) are binned by 2 (about their resolution element)
MAX_POINTS = 5000

#: which of the model's pictures go in the page: "auto" = only where the spectrum cannot be read again
IMAGE_MODES = ("auto", "all", "none")

#: the JavaScript of the page, inlined in this order as one script
SCRIPTS = ("spectrum.js", "review.js")


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
    if isinstance(value, float) and not math.isfinite(value):  # NaN and infinities are not JSON
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


#: decimals per id column shown as a float: ra/dec to 1e-6 deg (4 mas), redshift to 1e-6, S/N to 0.1
_ID_DECIMALS = {"ra": 6, "dec": 6, "redshift": 6, "snr": 1}


def format_id(column: str, value) -> str | None:
    """An identifier as the text the page shows: integers exactly (a DESI TARGETID exceeds 2**53, which a
    JavaScript number would round), floats to a sensible number of decimals, the rest as text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return None
        if value.is_integer() and column not in _ID_DECIMALS:
            return str(int(value))
        text = f"{value:.{_ID_DECIMALS.get(column, 6)}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return "0" if text in ("-0", "") else text
    return str(value)


def readable_tool_call(text: str | None) -> str | None:
    """The tool call as JSON with its characters as characters (``"H\\u03b1"`` -> ``"Hα"``); text that is
    not JSON is returned as it is."""
    if not text:
        return text
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


def _pack(values: np.ndarray) -> dict:
    """Values as 16-bit integers between their min and max (65535 = missing), base64, little-endian."""
    finite = np.isfinite(values)
    if not finite.any():
        return {"lo": 0.0, "hi": 0.0, "q": base64.b64encode(np.full(values.size, 65535, "<u2").tobytes()).decode()}
    lo, hi = float(values[finite].min()), float(values[finite].max())
    span = hi - lo if hi > lo else 1.0
    q = np.full(values.size, 65535, dtype="<u2")
    q[finite] = np.rint((values[finite] - lo) / span * 65534).astype("<u2")
    return {"lo": lo, "hi": hi if hi > lo else lo + 1.0, "q": base64.b64encode(q.tobytes()).decode("ascii")}


def downsample(wavelength, flux, ivar, mask, max_points: int = MAX_POINTS):
    """Bin a spectrum by whole pixels to at most ``max_points`` points: (wavelength, flux, noise, masked, k).

    Each bin averages ``k`` neighbouring pixels: flux weighted by ivar over its good pixels (mask False, ivar > 0;
    plain mean of the finite ones when none is good, and the bin counts as masked), noise = 1/sqrt(sum ivar).
    """
    w = np.asarray(wavelength, dtype=float)
    f = np.asarray(flux, dtype=float)
    iv = np.asarray(ivar, dtype=float)
    bad = np.asarray(mask, dtype=bool) | ~np.isfinite(f) | ~np.isfinite(iv) | (iv <= 0)
    n = w.size
    k = max(1, math.ceil(n / max_points))
    nb = math.ceil(n / k)
    pad = nb * k - n

    def grid(a, fill):
        return np.concatenate([a, np.full(pad, fill, dtype=a.dtype)]).reshape(nb, k)

    wg = grid(w, np.nan)
    fg = grid(np.where(np.isfinite(f), f, np.nan), np.nan)
    good = grid(~bad, False)
    weight = np.where(good, grid(np.where(bad, 0.0, iv), 0.0), 0.0)
    wsum = weight.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        fw = np.where(wsum > 0, np.nansum(np.where(good, fg, 0.0) * weight, axis=1) / wsum, np.nan)
        plain = np.nanmean(np.where(np.isfinite(fg), fg, np.nan), axis=1) if k > 1 else fg[:, 0]
        noise = np.where(wsum > 0, 1.0 / np.sqrt(wsum), np.nan)
        wb = np.nanmean(wg, axis=1) if k > 1 else wg[:, 0]
    fb = np.where(np.isfinite(fw), fw, plain)
    return wb, fb, noise, ~good.any(axis=1), k


def _runs(flags: np.ndarray) -> list[list[int]]:
    """[first, last] index pairs of the runs of True."""
    idx = np.flatnonzero(np.diff(np.concatenate([[0], flags.astype(np.int8), [0]])))
    return [[int(a), int(b) - 1] for a, b in zip(idx[::2], idx[1::2], strict=True)]


def spectrum_payload(spectrum, *, max_points: int = MAX_POINTS) -> dict:
    """What the page's plot needs of one spectrum, small: binned, 16-bit packed, mask as index runs."""
    wb, fb, noise, masked, k = downsample(spectrum.wavelength, spectrum.flux, spectrum.ivar, spectrum.mask,
                                          max_points)
    meta = spectrum.meta
    return {
        "n": int(wb.size), "binned": k, "n_pixels": len(spectrum.wavelength), "unit": spectrum.flux_unit or "",
        "wave": _pack(wb), "flux": _pack(fb), "noise": _pack(noise), "mask": _runs(masked),
        "survey": meta.survey, "snr": format_id("snr", meta.snr),
    }


class _SpectrumSource:
    """Each verdict row's spectrum, read again from the file (or SpecVI candidate list) the row points at; a
    spectrum shared by several tasks is read once."""

    def __init__(self, max_points: int = MAX_POINTS):
        self.max_points = max_points
        self._done: dict[tuple, tuple[dict | None, str | None]] = {}
        self._lists: dict[str, dict] = {}

    def _read(self, path: str, target):
        if path.lower().endswith((".parquet", ".pq")):  # a SpecVI-Bench list: inline spectra
            if path not in self._lists:
                from ..io.candidates import load_candidates

                self._lists[path] = {c.candidate_id: c for c in load_candidates(path)}
            return self._lists[path]

        from ..io import parse_target, read_spectrum

        return read_spectrum(path, parse_target(target))

    def get(self, row: dict) -> tuple[dict | None, str | None]:
        """(payload, None), or (None, why there is no spectrum)."""
        path, target = row.get("path"), row.get("target")
        if not path:
            return None, "no spectrum file recorded for this verdict"
        key = (path, target, row["candidate_id"] if str(path).lower().endswith((".parquet", ".pq")) else None)
        if key not in self._done:
            try:
                got = self._read(str(path), target)
                if isinstance(got, dict):
                    cand = got.get(row["candidate_id"])
                    if cand is None:
                        raise FileNotFoundError(f"{path}: candidate {row['candidate_id']} not in the list")
                    got = cand.load_spectrum()
                self._done[key] = (spectrum_payload(got, max_points=self.max_points), None)
            except (SpecVettingError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                self._done[key] = (None, f"spectrum not readable: {exc}")
        return self._done[key]

    def forget(self) -> None:
        """Drop the payloads read so far (one page file's); the candidate lists stay open."""
        self._done.clear()


#: most candidates on one page by default: the list of every file carries all of them (about 120 bytes each), and a
#: person reviews the most urgent first; a bigger selection keeps the most urgent (the review queue's order)
DEFAULT_MAX_CANDIDATES = 20_000


@dataclass
class PageSelection:
    """The verdicts a page shows and how to load them a file at a time: ``index`` holds the light rows
    (candidate_id, task, verdict, p_yes, review_reasons) in page order (task, candidate_id); ``walk(keys, n)``
    gives the RunData of those keys n at a time (:func:`spec_vetting.catalog.walk.walk_run`). ``total``: the
    run's verdicts considered; ``queued``: how many of them need review; ``left_out``: selected verdicts not on
    the page (``max_candidates``)."""

    run_id: str
    root: str
    index: list[dict]
    walk: Callable[[pa.Table, int], Iterator[tuple[list[tuple[str, str]], RunData]]]
    total: int
    queued: int
    left_out: int = 0


def _light(row: dict, reasons: list[str]) -> dict:
    light = {"candidate_id": str(row["candidate_id"]), "task": row["task"], "verdict": row.get("verdict"),
             "p_yes": _clean_number(row.get("p_yes")), "review_reasons": reasons}
    bp_rp, abs_g = _clean_number(row.get(GAIA_BP_RP)), _clean_number(row.get(GAIA_ABS_G))
    if isinstance(bp_rp, (int, float)) and isinstance(abs_g, (int, float)):
        light["cmd"] = [bp_rp, abs_g]  # the candidate's place in the colour-magnitude diagram of every page file
    return light


#: the evidence columns a candidate's page shows (when not null), in this order
EVIDENCE_SHOWN = tuple(f.name for f in GAIA_FIELDS) + ("evidence_extra",)


def evidence_record(row: dict) -> dict:
    """The candidate's evidence values for the page (null ones left out)."""
    out = {}
    for name in EVIDENCE_SHOWN:
        v = row.get(name)
        if v is None:
            continue
        v = _clean_number(v) if isinstance(v, float) else v
        out[name] = str(v) if name == GAIA_SOURCE_ID else v  # a source_id is 19 digits: exact as text
    return out


def selection_from_data(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False
                        ) -> PageSelection:
    """A page of a run already in memory (every verdict, or the review queue's), sorted by task and candidate."""
    reasons = reason_lists(review_flags(review_table(data.verdicts), threshold=threshold))
    index = [_light(row, r) for row, r in zip(data.verdicts, reasons, strict=True) if r or not only_queue]
    index.sort(key=lambda r: (r["task"], r["candidate_id"]))
    return PageSelection(run_id=data.run_id, root=data.root, index=index,
                         walk=lambda keys, n: walk_data(data, keys, n), total=len(data.verdicts),
                         queued=sum(1 for r in reasons if r))


def selection_from_catalog(root, run_id: str | None = None, *, threshold: float = DEFAULT_REVIEW_THRESHOLD,
                           only_queue: bool = False, tasks: list[str] | None = None,
                           max_candidates: int | None = DEFAULT_MAX_CANDIDATES) -> PageSelection:
    """A page of a run in the catalog, read a batch at a time: the ``max_candidates`` most urgent verdicts (the
    review queue's order; only queued ones with ``only_queue``), then sorted by task and candidate. Memory follows
    ``max_candidates``, not the run."""
    from ..analysis.review_queue import REASONS, queue
    from ..catalog.walk import walk_run

    columns = ["verdict", "p_yes", GAIA_BP_RP, GAIA_ABS_G]
    scan, batches = queue(root, run_id, columns, threshold=threshold, only_queued=only_queue,
                          tasks=tasks, limit=max_candidates)
    index = []
    for batch in batches:
        for row in batch.select(["candidate_id", "task", *columns, REASONS]).to_pylist():
            index.append(_light(row, row[REASONS].split(";") if row[REASONS] else []))
    index.sort(key=lambda r: (r["task"], r["candidate_id"]))

    return PageSelection(run_id=scan.run_id, root=str(root), index=index,
                         walk=lambda keys, n: walk_run(root, scan.run_id, keys, n), total=scan.total,
                         queued=scan.queued, left_out=scan.kept - len(index))


def candidate_records(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False,
                      images: str = "auto", max_points: int = MAX_POINTS, store: _Images | None = None,
                      spectra: _SpectrumSource | None = None):
    """Records for the page of ``data``'s verdict rows, in their order (images replaced by references), and the
    image store. The pictures of a candidate that shows them are filled here (stored bytes, else re-rendered), so
    a page without pictures never draws one."""
    if images not in IMAGE_MODES:
        raise ValueError(f"images must be one of {', '.join(IMAGE_MODES)}, got {images!r}")
    store = _Images() if store is None else store
    spectra = _SpectrumSource(max_points) if spectra is None else spectra
    reasons = reason_lists(review_flags(review_table(data.verdicts), threshold=threshold))
    shown = [(row, r) for row, r in zip(data.verdicts, reasons, strict=True) if r or not only_queue]
    plots = [spectra.get(row) for row, _ in shown]
    pictured = [images == "all" or (images == "auto" and plot is None) for plot, _ in plots]
    _fill_pictures(data, [row for (row, _), yes in zip(shown, pictured, strict=True) if yes])
    # issue 38: the good epochs of each matched light curve, from beside the run's evidence cache
    light_curves = read_points(data.root, [row["candidate_id"] for row, _ in shown]) if data.root else {}
    records = []
    for (row, row_reasons), (spectrum, spectrum_error), with_images in zip(shown, plots, pictured, strict=True):
        cid, task = row["candidate_id"], row["task"]
        turns = []
        for t in data.assistant_turns(cid, task):
            zmin, zmax = t.get("zoom_min"), t.get("zoom_max")
            turns.append({
                "turn": int(t.get("turn") or 0),
                "assistant_text": t.get("assistant_text"),
                "tool_call": readable_tool_call(t.get("tool_call")),
                "tool_response_text": t.get("tool_response_text"),
                "zoom": [zmin, zmax] if zmin is not None and zmax is not None else None,
                "image": store.add(t.get("image_png")) if with_images else None,
                "has_image": bool(t.get("image_png") or t.get("picture_sha256")),
            })
        z = _clean_number(row.get("redshift"))
        records.append({
            "candidate_id": str(cid), "task": task, "verdict": row.get("verdict"), "status": row.get("status"),
            "fallback": row.get("fallback"), "p_yes": _clean_number(row.get("p_yes")),
            "p_yes_source": row.get("p_yes_source"), "justification": row.get("justification"),
            "reason": row.get("reason"), "error_kind": row.get("error_kind"),
            "error_message": row.get("error_message"), "label": row.get("label"), "engine": row.get("engine"),
            "model": row.get("model"), "review_reasons": row_reasons,
            "ids": {k: text for k in ID_COLUMNS if (text := format_id(k, row.get(k))) is not None},
            "z": z if isinstance(z, (int, float)) else None, "evidence": evidence_record(row),
            "light_curves": light_curves.get(str(cid)),
            "spectrum": spectrum, "spectrum_error": spectrum_error,
            "initial_image": store.add(data.initial_image(cid, task)) if with_images else None,
            "turns": turns,
        })
    return records, store


def _fill_pictures(data: RunData, rows: list[dict]) -> None:
    """The PNG bytes of ``rows``' turns that the catalog holds by reference only."""
    if not rows:
        return
    from ..catalog.pictures import fill_pictures

    keys = {(str(r["candidate_id"]), r["task"]) for r in rows}
    fill_pictures(data.root, rows, {k: v for k, v in data.turns.items() if k in keys})


def _index_entry(record: dict, part: int) -> dict:
    keys = ("candidate_id", "task", "verdict", "p_yes", "review_reasons", "cmd")
    return {**{k: record[k] for k in keys if k in record}, "part": part}


def _image_refs(record: dict) -> list[str]:
    refs = [record["initial_image"]] + [t["image"] for t in record["turns"]]
    return [r for r in refs if r]


def iter_pages(source: RunData | PageSelection, *, threshold: float = DEFAULT_REVIEW_THRESHOLD,
               only_queue: bool = False, per_file: int = DEFAULT_PER_FILE, images: str = "auto",
               max_points: int = MAX_POINTS) -> Iterator[tuple[str, str]]:
    """(file name, HTML text) of each file of the review page, the first being ``index.html``; one file's
    candidates are loaded at a time, so memory follows ``per_file``."""
    if per_file < 1:
        raise ValueError(f"per_file must be at least 1, got {per_file}")
    if images not in IMAGE_MODES:
        raise ValueError(f"images must be one of {', '.join(IMAGE_MODES)}, got {images!r}")
    sel = source if isinstance(source, PageSelection) else selection_from_data(source, threshold=threshold,
                                                                               only_queue=only_queue)
    chunks = [sel.index[i:i + per_file] for i in range(0, len(sel.index), per_file)] or [[]]
    index = [_index_entry(r, n) for n, chunk in enumerate(chunks) for r in chunk]
    parts = [{"file": part_file_name(n), "n": len(chunk)} for n, chunk in enumerate(chunks)]
    js, css = "\n".join(_asset(name) for name in SCRIPTS), _asset("review.css")
    title = f"spec-vet review: run {sel.run_id}" + (" (review queue)" if only_queue else "")
    note = f"{len(sel.index)} verdicts from {sel.root}. {ABSTAIN_NOTE} Decisions stay in this browser until exported."
    if sel.left_out:
        note += (f" {sel.left_out} more verdicts of this selection are not on this page (it holds the"
                 f" {len(sel.index)} most urgent, in the review queue's order); narrow it with --only review-queue or"
                 " --task, or raise --max-candidates.")
    if len(chunks) > 1:
        note += (f" Trajectories are split over {len(chunks)} files of up to {per_file} candidates; the list and"
                 " the export cover them all.")
    spectra = _SpectrumSource(max_points)
    keys = pa.table({"candidate_id": pa.array([r["candidate_id"] for r in sel.index], pa.string()),
                     "task": pa.array([r["task"] for r in sel.index], pa.string())})
    slices = sel.walk(keys, per_file) if sel.index else iter([([], RunData(sel.root, sel.run_id, []))])
    for n, (_, data) in enumerate(slices):
        records, store = candidate_records(data, threshold=threshold, images=images, max_points=max_points,
                                           spectra=spectra)
        spectra.forget()
        payload = {
            "run_id": sel.run_id, "root": sel.root, "threshold": threshold, "page_size": PAGE_SIZE,
            "only_queue": only_queue, "part": n, "parts": parts, "index": index, "candidates": records,
            "schema": {"decisions": list(DECISIONS), "decision_keys": DECISION_KEYS,
                       "columns": list(REVIEW_CSV_COLUMNS), "vi_quality": VI_QUALITY, "vi_issues": VI_ISSUES,
                       "vi_spectypes": list(VI_SPECTYPES), "vi_comments": list(VI_STANDARD_COMMENTS)},
            "lines": [[line.name, line.wavelength, line.group] for line in LINES], "line_groups": GROUPS,
            # the colour-magnitude diagram's sequences: M_G = zero + slope * (BP-RP) over [lo, hi]
            "cmd_loci": {"main sequence": [MS_ZERO, MS_SLOPE, 0.0, 3.5],
                         "white dwarfs": [WD_ZERO, WD_SLOPE, -0.4, 1.5]},
        }
        refs = dict.fromkeys(ref for record in records for ref in _image_refs(record))
        image_blocks = "\n".join(
            f'<script type="text/plain" id="img-{ref}">{store.blobs[ref]}</script>' for ref in refs
        )
        part_title = title + (f" (file {n + 1} of {len(chunks)})" if len(chunks) > 1 else "")
        values = {
            "STYLE_HASH": _csp_hash(css), "SCRIPT_HASH": _csp_hash(js), "CSS": css, "JS": js,
            "TITLE": html.escape(part_title), "NOTE": html.escape(note), "IMAGES": image_blocks,
            "DATA": json_for_script(payload),
        }
        # one pass over the template only: text coming from the data is never searched for placeholders
        # (``values`` bound as a default: each file's own, whenever the replacement runs)
        page = re.sub(r"__([A-Z_]+?)__", lambda m, values=values: values[m.group(1)], _asset("page.html"))
        yield part_file_name(n), page


def build_pages(source: RunData | PageSelection, **options) -> list[tuple[str, str]]:
    """Every file of the review page, in memory (see :func:`iter_pages`; for runs that fit)."""
    return list(iter_pages(source, **options))


def build_page(data: RunData, *, threshold: float = DEFAULT_REVIEW_THRESHOLD, only_queue: bool = False,
               **options) -> str:
    """The HTML text of the review page of one run, all in one file (for runs small enough to fit one)."""
    return build_pages(data, threshold=threshold, only_queue=only_queue, per_file=max(1, len(data.verdicts)),
                       **options)[0][1]


def write_pages(source: RunData | PageSelection, out_dir, **options) -> list[Path]:
    """Write DIR/index.html (and DIR/part-NNN.html when the run needs several files), one file at a time;
    returns the paths. Part files of an earlier, larger page in the same folder are removed so that no stale
    file is linked."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in iter_pages(source, **options):
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
