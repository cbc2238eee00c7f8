"""A turn's picture, by reference: stored bytes when the run kept them, else re-rendered and checked by hash.

A turn row names its picture by ``picture_sha256``, ``picture_title``, ``renderer_version`` and the window
(``zoom_min``/``zoom_max``; null on turn -1, the full view); the verdict row gives the source (``path``, ``target``)
and the ``redshift`` the zoom tool used. The renderer is deterministic, so drawing it again with the same version
gives the same bytes; :func:`turn_picture` checks that and says exactly what differs otherwise.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow.compute as pc

from ..errors import CatalogReadError, NotInCatalogError
from .read import dataset, read_turns, read_verdicts, readable_files
from .schema import PICTURES_DIR


class PictureMismatchError(CatalogReadError):
    """A re-rendered picture does not have the hash the catalog recorded."""

    kind = "picture_mismatch"


def picture_files(root) -> list[str]:
    """ROOT/pictures/'s files, without damaged ones (a picture missing from them is drawn again and hash-checked)."""
    return readable_files(root, PICTURES_DIR)[0]


def stored_picture(root, sha256: str) -> bytes | None:
    """PNG bytes kept in ROOT/pictures/ (runs with store_pictures) for this hash, or None."""
    import pyarrow.dataset as ds

    files = picture_files(root)
    if not files:
        return None
    t = ds.dataset(files, format="parquet").to_table(columns=["image_png"], filter=pc.field("picture_sha256") == sha256)
    return t.column("image_png")[0].as_py() if t.num_rows else None



def render_picture(verdict: dict, turn: dict) -> bytes:
    """Draw the picture of ``turn`` again from the verdict row's source (no hash check)."""
    from ..inspect.zoom import ZoomTool
    from ..io import parse_target, read_spectrum
    from ..render import RENDERER_VERSION, SAME_PICTURES_EXCEPT

    drawn_by = turn.get("renderer_version")
    if drawn_by and drawn_by != RENDERER_VERSION and drawn_by not in SAME_PICTURES_EXCEPT:
        raise PictureMismatchError(
            f"the picture was drawn by renderer {drawn_by}, this installation has {RENDERER_VERSION}: "
            "install the version the run used (its manifest lists it) or store pictures with store_pictures: true"
        )
    path = verdict.get("path")
    if not path:
        raise CatalogReadError(
            f"candidate {verdict.get('candidate_id')}: the verdict row names no spectrum file (an inline spectrum), so "
            "its pictures cannot be drawn again; runs that need them should set store_pictures: true"
        )
    spectrum = read_spectrum(path, parse_target(verdict.get("target")))
    tool = ZoomTool(spectrum.wavelength, spectrum.flux, verdict.get("redshift"),
                    turn.get("picture_title") or "Spectrum")
    if turn.get("zoom_min") is None or turn.get("turn") == -1:
        return tool.full_view()
    return tool._render((turn["zoom_min"], turn["zoom_max"]))


def turn_picture(root, candidate_id: str, task: str, turn: int, run_id: str | None = None, *, check: bool = True
                 ) -> tuple[bytes, dict]:
    """(PNG bytes, turn row) of one turn's picture. ``run_id`` None: the run of the current view's verdict for the
    pair (else the latest run that has it). Stored bytes are used when present; otherwise the picture is
    re-rendered and, with ``check``, must match ``picture_sha256`` (:class:`PictureMismatchError`)."""
    import pyarrow.compute as pc

    key = (pc.field("candidate_id") == str(candidate_id)) & (pc.field("task") == task)
    if run_id is None:
        cur = dataset(root, "current")
        rows = cur.to_table(columns=["run_id"], filter=key).column("run_id").to_pylist() if cur is not None else []
        if not rows:
            v = dataset(root, "verdicts")
            t = v.to_table(columns=["run_id", "run_date"], filter=key) if v is not None else None
            if t is None or t.num_rows == 0:
                raise NotInCatalogError(f"{root}: no verdict for candidate {candidate_id!r} task {task!r}")
            rows = [max(zip(t.column("run_date").to_pylist(), t.column("run_id").to_pylist(), strict=True))[1]]
        run_id = rows[0]
    verdicts = read_verdicts(root, run_id=run_id).filter(key).to_pylist()
    if not verdicts:
        raise NotInCatalogError(f"{root}: run {run_id} has no verdict for candidate {candidate_id!r} task {task!r}")
    turns = [r for r in read_turns(root, run_id=run_id, candidate_ids=[str(candidate_id)]).to_pylist()
             if r["task"] == task and r["turn"] == int(turn)]
    if not turns:
        raise NotInCatalogError(f"{root}: run {run_id}, candidate {candidate_id!r} task {task!r} has no turn {turn}")
    row = turns[0]
    sha = row.get("picture_sha256")
    if row.get("image_png"):
        return row["image_png"], row
    if not sha:
        raise CatalogReadError(f"turn {turn} of candidate {candidate_id!r} task {task!r} showed no picture")
    stored = stored_picture(root, sha)
    if stored is not None:
        return stored, row
    png = render_picture(verdicts[0], row)
    got = hashlib.sha256(png).hexdigest()
    if check and got != sha:
        raise PictureMismatchError(_mismatch_reason(candidate_id, task, turn, got, sha, row.get("renderer_version")))
    return png, row


def _mismatch_reason(candidate_id, task, turn, got: str, recorded: str, drawn_by: str | None) -> str:
    from ..render import RENDERER_VERSION, SAME_PICTURES_EXCEPT

    where = f"candidate {candidate_id} task {task} turn {turn}: the re-rendered picture has sha256 {got}, the run " \
            f"recorded {recorded}"
    if drawn_by in SAME_PICTURES_EXCEPT:
        return (f"{where}: the run's renderer {drawn_by} drew {SAME_PICTURES_EXCEPT[drawn_by]} differently from "
                f"{RENDERER_VERSION}, and this installation cannot draw that version's picture; runs that need "
                "their pictures again should set store_pictures: true")
    return f"{where} (different renderer dependencies, e.g. matplotlib, or the spectrum file changed)"


def write_picture(png: bytes, out: str | os.PathLike) -> Path:
    out = Path(out)
    out.write_bytes(png)
    return out


def fill_pictures(root, verdicts: list[dict], turns: dict[tuple[str, str], list[dict]]) -> int:
    """Put the PNG bytes into turn rows that have only a reference (``image_png`` null, ``picture_sha256`` set):
    stored bytes first, else re-rendered (each distinct picture once; a hash mismatch is logged and the picture
    still shown). Returns how many rows were filled. What the review page and training export use."""
    import logging

    import pyarrow as pa
    import pyarrow.dataset as ds

    log = logging.getLogger(__name__)
    want = [r for rows in turns.values() for r in rows if not r.get("image_png") and r.get("picture_sha256")]
    if not want:
        return 0
    found: dict[str, bytes] = {}
    files = picture_files(root)
    if files:
        shas = pa.array(sorted({r["picture_sha256"] for r in want}), pa.string())
        t = ds.dataset(files, format="parquet").to_table(filter=pc.field("picture_sha256").isin(shas))
        found.update(zip(t.column("picture_sha256").to_pylist(), t.column("image_png").to_pylist(), strict=True))
    by_key = {(str(v["candidate_id"]), v["task"]): v for v in verdicts}
    n = 0
    for key, rows in turns.items():
        for r in rows:
            sha = r.get("picture_sha256")
            if r.get("image_png") or not sha:
                continue
            if sha not in found and key in by_key:
                try:
                    png = render_picture(by_key[key], r)
                except Exception as exc:  # a missing file or another renderer: the page shows no picture
                    log.warning("picture of %s turn %s not available: %s", key, r.get("turn"), exc)
                    found[sha] = None
                    continue
                if hashlib.sha256(png).hexdigest() != sha:
                    log.warning("re-rendered picture of %s turn %s differs from the recorded hash", key, r.get("turn"))
                found[sha] = png
            if found.get(sha):
                r["image_png"] = found[sha]
                n += 1
    return n
