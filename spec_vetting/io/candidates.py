"""Candidate lists: what a survey team hands the service, turned into :class:`Candidate` rows.

A candidate is (candidate id, optional task, a spectrum source, optional label). :func:`load_candidates` accepts:

- a table, CSV / Parquet / FITS binary table, with a ``path`` column (also ``file`` or ``filename``; relative paths
  resolve against the table's folder) and optional ``candidate_id``, ``target`` or ``targetid``, ``task``,
  ``label`` (YES/NO in the spellings of :mod:`spec_vetting.label_values`), ``ra``, ``dec`` (degrees) and ``redrock``
  (a DESI redshift file to join; by default the reader looks for ``redrock-X.fits`` next to ``coadd-X.fits``).
  Column names are matched case-insensitively, other columns are ignored;
- a directory (searched recursively) or a glob of FITS files: one candidate per file, except DESI coadd/spectra
  files, which give one candidate per usable science target (the only case where listing reads a file beyond its
  first header); DESI redrock/zbest files are skipped; a file that cannot be opened is still one candidate (its
  error comes later, per candidate, from :meth:`Candidate.load_spectrum`), and so is a FITS-named dangling
  symbolic link, link loop, FIFO or device (never opened while listing). An existing folder without any FITS
  file gives no candidate (an empty incoming folder is a normal night);
- a single FITS spectrum file (one candidate, or one per target of a DESI file);
- a SpecVI-Bench parquet file (spectrum inline, label from ``reward_model.ground_truth``, task from
  ``data_source`` with ``cc`` = ``carbon``, null redshift = 0, the row's own prompt text);
- a list of any of these.

Candidate ids are strings, stable across runs: the given ``candidate_id``, else the file name without its FITS
suffixes plus ``-<target>`` for multi-target files; ids that would collide get a short hash of the full path.
Listing never aborts on one bad file, but a malformed list fails at once with a :class:`CandidateListError` naming
the file, the row (1-based data row, the header not counted) and what to fix.
"""

from __future__ import annotations

import csv
import glob
import logging
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ..errors import CandidateListError, SpectrumReadError
from .candidate import FITS_SUFFIXES, Candidate, InlineSpectrum, default_candidate_id, fits_stem
from .candidate_cells import (
    COLUMN_ALIASES,
    as_angle,
    as_label,
    as_number,
    as_target,
    as_text,
    control_character_refusal,
    find_columns,
    given_evidence,
)

log = logging.getLogger(__name__)

_GLOB_CHARS = re.compile(r"[*?\[]")


# ---------------------------------------------------------------------------------------------------------------
# value parsing


def _resolve(path_text: str, base: Path) -> str:
    """An absolute path: the catalog records it, and exports and reviews re-read spectra from other folders."""
    p = Path(os.path.expanduser(path_text))
    if not p.is_absolute():
        p = base / p
    return os.path.abspath(str(p))


def _dedupe_generated(cands: list[Candidate], generated: list[bool]) -> None:
    """Generated ids that collide (same file name in two folders) get a short hash of the full path."""
    counts = Counter(c.candidate_id for c in cands)
    for c, gen in zip(cands, generated, strict=True):
        if gen and counts[c.candidate_id] > 1 and c.path:
            c.candidate_id = f"{c.candidate_id}-{zlib.crc32(c.path.encode()):08x}"


# ---------------------------------------------------------------------------------------------------------------
# tables


def _rows_to_candidates(path: Path, names: list[str], rows: Iterable[dict], kind: str) -> list[Candidate]:
    cols = find_columns(names, path)
    base = path.parent
    cands: list[Candidate] = []
    generated: list[bool] = []
    for i, r in enumerate(rows, start=1):
        raw_path = as_text(r.get(cols["path"]))
        if raw_path is None:
            raise CandidateListError(path, f"empty {cols['path']}", row=i, hint="every row needs a spectrum file")
        spec_path = _resolve(raw_path, base)
        target = as_target(r.get(cols["target"])) if "target" in cols else None
        cid = as_text(r.get(cols["candidate_id"])) if "candidate_id" in cols else None
        task = as_text(r.get(cols["task"])) if "task" in cols else None
        redrock = as_text(r.get(cols["redrock"])) if "redrock" in cols else None
        refused = None
        if cid is None and "candidate_id" in cols:
            # the list has ids: an empty one is this row's error, not an id guessed from the file name
            cid = f"(no id) {path.name} row {i}"
            refused = (f"its {cols['candidate_id']} cell is empty: give the row an id (with an id column the id is "
                       "not made from the file name)")
        generated.append(cid is None)
        cid = cid if cid is not None else default_candidate_id(spec_path, target)
        cid, refused = (cid, refused) if refused else control_character_refusal(cid)
        cands.append(
            Candidate(
                candidate_id=cid,
                path=spec_path,
                target=target,
                task=task.lower() if task else None,
                label=as_label(r.get(cols["label"]), path, i) if "label" in cols else None,
                ra=as_angle(r.get(cols["ra"]), "ra", 0.0, 360.0, path, i) if "ra" in cols else None,
                dec=as_angle(r.get(cols["dec"]), "dec", -90.0, 90.0, path, i) if "dec" in cols else None,
                redrock=_resolve(redrock, base) if redrock else None,
                mjd=as_number(r.get(cols["mjd"]), "mjd", path, i) if "mjd" in cols else None,
                given_evidence=given_evidence(names, r, path, i),
                source=f"{path} ({kind} row {i})",
                refused=refused,
            )
        )
    _dedupe_generated(cands, generated)
    return cands


def _load_csv(path: Path) -> list[Candidate]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            sample = fh.read(4096)
            fh.seek(0)
            delimiter = "\t" if path.suffix.lower() == ".tsv" or ("\t" in sample and "," not in sample) else ","
            reader = csv.DictReader((line for line in fh if not line.startswith("#")), delimiter=delimiter)
            names = [n for n in (reader.fieldnames or []) if n is not None]
            rows = list(reader)
    except UnicodeDecodeError as exc:
        raise CandidateListError(path, f"not UTF-8 text ({exc})", hint="save the list as UTF-8 CSV") from exc
    except csv.Error as exc:
        raise CandidateListError(path, f"malformed CSV ({exc})") from exc
    for i, r in enumerate(rows, start=1):
        if None in r:  # more cells than header names
            raise CandidateListError(path, f"{len(names) + len(r[None])} cells but {len(names)} columns", row=i)
    return _rows_to_candidates(path, names, rows, "csv")


def _load_parquet_table(path: Path) -> list[Candidate]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise CandidateListError(path, f"not a readable parquet file ({exc})") from exc
    return _rows_to_candidates(path, table.column_names, table.to_pylist(), "parquet")


def _fits_table_rows(hdu) -> tuple[list[str], list[dict]]:
    data = hdu.data
    names = list(hdu.columns.names)
    if data is None:
        return names, []
    columns = {}
    for n in names:
        col = data[n]
        if col.dtype.kind in "SU":
            columns[n] = [str(v).strip() for v in col]
        else:
            columns[n] = [v.item() if hasattr(v, "item") and np.ndim(v) == 0 else v for v in col]
    return names, [{n: columns[n][i] for n in names} for i in range(len(data))]


def _fits_candidate_table(path: Path):
    """(names, rows) of the first binary table HDU with a path column; else None (the file is then a spectrum, or a
    table missing its path column: see :func:`_check_not_a_pathless_list`)."""
    from astropy.io import fits

    try:
        with fits.open(path, memmap=False) as hdul:
            for hdu in hdul[1:]:
                if isinstance(hdu, fits.BinTableHDU):
                    lower = [n.lower() for n in hdu.columns.names]
                    if any(a in lower for a in COLUMN_ALIASES["path"]):
                        return _fits_table_rows(hdu)
    except (OSError, ValueError, TypeError, EOFError):
        return None
    return None


def _check_not_a_pathless_list(path: Path) -> None:
    """A FITS file no spectrum reader recognises but that holds a binary table is a candidate list that lacks its
    path column: fail now with the columns found, as for CSV and Parquet lists, rather than list it as a spectrum."""
    from astropy.io import fits

    from ..errors import UnsupportedFormatError
    from .reader import sniff_layout

    try:
        sniff_layout(path)
        return
    except UnsupportedFormatError:
        pass
    except SpectrumReadError:
        return  # unreadable: one candidate that fails later with the reader's message
    try:
        with fits.open(path, memmap=False) as hdul:
            names = next((list(h.columns.names) for h in hdul[1:] if isinstance(h, fits.BinTableHDU)), None)
    except (OSError, ValueError, TypeError, EOFError):
        return
    if names is not None:
        find_columns(names, path)


# ---------------------------------------------------------------------------------------------------------------
# spectrum files


def _primary_telescope(path: Path) -> str | None:
    """TELESCOP of the primary header, read from the first header blocks only (gzip-aware); None if absent."""
    import gzip

    from .fits_open import BLOCK, CARD, GZIP_MAGIC, card_value

    try:
        with open(path, "rb") as raw:
            magic = raw.read(len(GZIP_MAGIC))
        opener = gzip.open if magic == GZIP_MAGIC else open
        with opener(path, "rb") as fh:
            for _ in range(36):  # up to 36 blocks = 1296 cards
                block = fh.read(BLOCK)
                if len(block) < BLOCK:
                    return None
                for k in range(0, BLOCK, CARD):
                    card = block[k : k + CARD]
                    if card.startswith(b"TELESCOP="):
                        return card_value(card).strip("'").strip()
                    if card.startswith(b"END") and card[3:].strip() == b"":
                        return None
    except (OSError, EOFError, zlib.error):  # corrupt gzip: listed anyway, it fails later with the reader's message
        return None
    return None


def _file_candidates(path: Path, *, in_listing: bool) -> list[Candidate]:
    """Candidates of one spectrum file: one, or one per usable target of a DESI file. Never raises for the file."""
    spath = os.path.normpath(str(path))
    single = [Candidate(candidate_id=default_candidate_id(spath, None), path=spath, source=spath)]
    from .fits_open import check_regular_file

    try:
        check_regular_file(spath)  # a FIFO would block the first open for ever: never opened, listed as is
    except SpectrumReadError as exc:
        log.warning("%s: listed as one candidate although it cannot be read (%s)", spath, exc)
        return single
    # LAMOST and SDSS files say who they are in the first header cards: one candidate, no further reading
    if _primary_telescope(path) in ("LAMOST", "SDSS 2.5-M"):
        return single
    from .fits_open import open_fits
    from .redrock import RedrockCatalogue
    from .registry import identify_reader

    try:
        with open_fits(spath) as f:  # one open for the layout and the targets
            reader = identify_reader(f)
            if isinstance(reader, RedrockCatalogue):
                if in_listing:
                    log.info("%s: DESI redshift file, not a spectrum; skipped in the listing", spath)
                    return []
                return single  # asked for explicitly: it will fail per candidate with the reader's message
            if not reader.multi_target:
                return single
            targets = reader.targets(f)
    except SpectrumReadError as exc:
        log.info("%s: listed as one candidate although it cannot be read (%s)", spath, exc)
        return single
    return [
        Candidate(candidate_id=default_candidate_id(spath, t), path=spath, target=t, source=f"{spath} (target {t})")
        for t in targets
    ]


def _is_fits_name(name: str) -> bool:
    return name.lower().endswith(FITS_SUFFIXES)


def _directory_files(root: Path) -> list[Path]:
    """Every entry with a FITS name that is not a folder: regular files, and also dangling symbolic links, link
    loops, FIFOs and devices, so that each becomes a candidate whose ERROR row says what it is instead of vanishing
    from the listing without a message."""
    return sorted(p for p in root.rglob("*") if _is_fits_name(p.name) and not p.is_dir())


def _specvi_candidates(path: Path) -> list[Candidate]:
    from .specvi import has_specvi_images, read_specvi_rows

    cands = []
    rows = read_specvi_rows(path)
    with_images = has_specvi_images(path)
    for r in rows:
        if r.wavelength is None or r.flux is None:
            raise CandidateListError(
                path, "no inline spectrum in extra_info.tools_kwargs.spectral_visualization_tool.create_kwargs",
                row=r.row + 1,
            )  # fmt: skip
        if r.name:
            cid = fits_stem(r.name)
        elif r.index is not None:
            cid = f"specvi-{r.data_source}-{r.index}"
        else:
            cid = f"specvi-{r.data_source}-row{r.row}"
        cands.append(
            Candidate(
                candidate_id=cid,
                path=str(path),
                task=r.task,
                label=r.label,
                inline=InlineSpectrum(wavelength=r.wavelength, flux=r.flux, redshift=r.redshift, name=r.name),
                prompt=r.prompt_text,
                system_prompt=r.system_text,
                image_row=r.row if with_images else None,
                source=f"{path} (parquet row {r.row + 1})",
            )
        )
    # the same file name twice for one task (should not happen): keep both, told apart by the row index
    counts = Counter((c.candidate_id, c.task) for c in cands)
    for c, r in zip(cands, rows, strict=True):
        idx = r.index if r.index is not None else r.row
        if counts[(c.candidate_id, c.task)] > 1:
            c.candidate_id = f"{c.candidate_id}-{idx}"
    return cands


# ---------------------------------------------------------------------------------------------------------------


def _load_one(source: str | Path) -> list[Candidate]:
    text = str(source)
    # absolute paths: the catalog records them, and exports and reviews re-read spectra from other folders
    path = Path(os.path.abspath(os.path.expanduser(text)))
    if not path.exists() and _GLOB_CHARS.search(text):
        matches = sorted(glob.glob(os.path.expanduser(text), recursive=True))
        files: list[Path] = []
        for m in matches:
            p = Path(os.path.abspath(m))
            files.extend(_directory_files(p) if p.is_dir() else [p] if _is_fits_name(p.name) else [])
        if not files:
            raise CandidateListError(text, "the pattern matches no FITS file", hint="check the folder and pattern")
        return _listing(files)
    if not path.exists():
        raise CandidateListError(path, "no such file or directory")
    if path.is_dir():
        files = _directory_files(path)
        if not files:
            # an empty incoming folder is a normal night, not a configuration error: zero candidates
            log.warning("%s: the folder holds no FITS file (.fits, .fit, .fts, optionally .gz): no candidate", path)
            return []
        return _listing(files)
    suffix = path.name.lower()
    if suffix.endswith((".csv", ".tsv", ".txt")):
        return _load_csv(path)
    if suffix.endswith((".parquet", ".pq")):
        from .specvi import is_specvi_parquet

        return _specvi_candidates(path) if is_specvi_parquet(path) else _load_parquet_table(path)
    if _is_fits_name(path.name):
        table = _fits_candidate_table(path)
        if table is not None:
            names, rows = table
            return _rows_to_candidates(path, names, rows, "fits")
        _check_not_a_pathless_list(path)
        return _file_candidates(path, in_listing=False)
    raise CandidateListError(
        path, "unknown candidate list format",
        hint="use .csv/.tsv, .parquet, a FITS table or spectrum (.fits/.fit[.gz]), a folder or a glob",
    )  # fmt: skip


def _listing(files: list[Path]) -> list[Candidate]:
    cands = [c for f in files for c in _file_candidates(f, in_listing=True)]
    _dedupe_generated(cands, [True] * len(cands))
    return cands


def iter_sources(source: str | Path | Iterable[str | Path]) -> Iterator[str | Path]:
    if isinstance(source, (str, Path, os.PathLike)):
        yield source
    else:
        yield from source


def load_candidates(source: str | Path | Iterable[str | Path]) -> list[Candidate]:
    """All candidates of ``source`` (a list file, folder, glob, spectrum file, SpecVI parquet, or several).

    Raises :class:`CandidateListError` for a malformed or missing list; never for an unreadable spectrum file.
    """
    out: list[Candidate] = []
    for s in iter_sources(source):
        out.extend(_load_one(s))
    return out
