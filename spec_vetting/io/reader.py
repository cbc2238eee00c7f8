"""The public reading API: sniff a file's layout by content and hand it to the right survey reader.

    read_spectrum(path, target=None, *, redrock=None)   one spectrum (target = DESI TARGETID, or row in trimmed files)
    iter_spectra(path, *, on_skip=None)                 every usable science spectrum of a file
    list_targets(path, *, on_skip=None)                 the targets iter_spectra would yield, cheaply
    sniff_layout(path)                                  the layout variant, e.g. "lamost-lrs-image"
    parse_target(value)                                 a target as typed or stored: integer when it is one

Every failure is a :class:`~spec_vetting.errors.SpectrumReadError` (or a subclass) naming the file and target.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..errors import SpectrumReadError
from ..spectrum import Spectrum
from . import desi, lamost, sdss  # noqa: F401 - importing registers the readers
from . import redrock as redrock_files  # noqa: F401 - registers too; aliased: `redrock` is a parameter below
from .fits_open import open_fits
from .redrock import find_redrock_file
from .registry import OnSkip, Reader, identify_reader
from .target_cache import TARGETS


def parse_target(value) -> int | str | None:
    """A target selector as a user or a catalog row writes it: DESI TARGETIDs and row numbers are integers, anything
    else is passed through as text for the reader to judge; None stays None."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        return text


def _check_redrock_option(reader: Reader, path: str, redrock: Any) -> None:
    if redrock not in (None, False) and reader.survey != "desi":
        raise SpectrumReadError(path, f"a redrock file was given but this is a {reader.survey} file ({reader.variant})",
                                hint="redrock/zbest files only apply to DESI coadd or spectra files")


def read_spectrum(path: str | os.PathLike, target: Any = None, *, redrock: str | os.PathLike | bool | None = None,
                  backend: str | None = None) -> Spectrum:
    """Read one spectrum.

    ``target``: for DESI files a TARGETID (int or numeric string), or a row index for trimmed files without
    FIBERMAP; None for single-spectrum files (and DESI files holding exactly one usable target).
    ``redrock``: DESI only; a redrock/zbest path to join SPECTYPE/SUBTYPE/Z/ZERR/ZWARN, None to look for
    ``redrock-X.fits``/``zbest-X.fits`` next to ``coadd-X.fits``, False not to join.
    """
    path = str(path)
    with open_fits(path, backend=backend) as f:
        reader = identify_reader(f)
        _check_redrock_option(reader, path, redrock)
        if target is not None and not reader.multi_target:
            raise SpectrumReadError(path, f"a target ({target!r}) was given but this {reader.variant} file holds "
                                    "a single spectrum", target=target, hint="leave the target empty")
        if reader.survey != "desi":
            return reader.read(f, target)
        if target is not None:
            cached = TARGETS.get(
                TARGETS.file_key(path, redrock, backend, _redrock_stamp(path, redrock)), target,
                lambda: list(reader.iter_spectra(f, on_skip=lambda _skipped: None, redrock=redrock)),
            )
            if cached is not None:
                return cached
        return reader.read(f, target, redrock=redrock)


def _redrock_stamp(path: str, redrock: Any) -> Any:
    """What identifies the redrock file joined to ``path`` (a new redrock file must not be served stale)."""
    if redrock is False:
        return None
    rr = redrock if redrock not in (None, True) else find_redrock_file(path)
    if rr is None:
        return None
    try:
        st = os.stat(rr)
    except OSError:
        return str(rr)
    return (os.path.realpath(rr), st.st_size, st.st_mtime_ns)


def iter_spectra(path: str | os.PathLike, *, on_skip: OnSkip | None = None,
                 redrock: str | os.PathLike | bool | None = None, backend: str | None = None) -> Iterator[Spectrum]:
    """Every usable science spectrum of a file (one for single-spectrum files).

    Skipped fibres of multi-target files (sky, stuck, unassigned, bad FIBERSTATUS, no good pixel) go to
    ``on_skip(SkippedTarget)``, or are counted on stderr when ``on_skip`` is None.
    """
    path = str(path)
    with open_fits(path, backend=backend) as f:
        reader = identify_reader(f)
        _check_redrock_option(reader, path, redrock)
        if reader.survey == "desi":
            yield from reader.iter_spectra(f, on_skip, redrock=redrock)
        else:
            yield from reader.iter_spectra(f, on_skip)


def list_targets(path: str | os.PathLike, *, on_skip: OnSkip | None = None, backend: str | None = None) -> list[Any]:
    """The targets of a file, for candidate listing: DESI TARGETIDs (or row indices for trimmed files) of the
    usable science spectra; ``[None]`` for a single-spectrum file. Skips are reported as in :func:`iter_spectra`.
    """
    with open_fits(path, backend=backend) as f:
        return identify_reader(f).targets(f, on_skip)


def sniff_layout(path: str | os.PathLike, *, backend: str | None = None) -> str:
    """The layout variant of a file (also for refused layouts such as "lamost-mrs"), without reading spectra."""
    with open_fits(path, backend=backend) as f:
        return identify_reader(f).variant
