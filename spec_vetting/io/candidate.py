"""One candidate: an id, an optional task, a spectrum source (a file and target, or an inline spectrum) and an
optional label; what :func:`.candidates.load_candidates` returns and the pipeline vets."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import CandidateRowError, SpectrumReadError
from ..spectrum import Spectrum, SpectrumMeta

FITS_SUFFIXES = (".fits", ".fit", ".fts", ".fits.gz", ".fit.gz", ".fts.gz")


_LAMOST_NAME = re.compile(r"spec-(?P<lmjd>\d+)-(?P<planid>[^_]+)_sp(?P<spid>\d+)-(?P<fiberid>\d+)")


class InlineSpectrum(BaseModel):
    """A spectrum carried in the list itself (SpecVI-Bench rows): observed-frame wavelength (Å) and flux."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    wavelength: np.ndarray
    flux: np.ndarray
    redshift: float | None = None  # None means 0, as in SpecVI-Bench
    name: str | None = None  # e.g. the LAMOST file name the row was made from


class Candidate(BaseModel):
    """One candidate of a list. ``source`` says where it was listed (file and row) for messages."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    candidate_id: str
    path: str | None = None
    target: int | str | None = None
    task: str | None = None
    label: Literal["YES", "NO"] | None = None
    ra: float | None = None
    dec: float | None = None
    inline: InlineSpectrum | None = None
    prompt: str | None = None  # SpecVI's exact task text (the user text after the image), when the list has one
    system_prompt: str | None = None  # SpecVI's system message text (before the tools block), when the row has one
    #: data row (0-based) of the SpecVI-Bench file at ``path`` whose ``images`` cell holds the full view the model
    #: saw in training; read only when the inspection runs (:meth:`load_initial_image`)
    image_row: int | None = None
    redrock: str | None = None
    #: when the spectrum was taken (MJD), for moving catalog sources to its epoch; from the list's mjd column
    mjd: float | None = None
    #: evidence columns the list already carries (``gaia_parallax`` ...), as given
    given_evidence: dict[str, Any] = {}
    #: evidence values of this run's cross-matches (``gaia_*``, ``NAME_*``), filled before inspection
    evidence: dict[str, Any] = {}
    source: str | None = None
    #: why this row cannot be vetted as listed (its id empty or not printable, or its pair listed again): reading it
    #: raises :class:`CandidateRowError`, so the pair is one ERROR row naming the cause and the list goes on
    refused: str | None = None

    def load_initial_image(self) -> bytes | None:
        """The list's own full-view PNG for this candidate (a SpecVI-Bench row's ``images``), None when it has none.

        A cell that is not a readable PNG raises :class:`~spec_vetting.errors.ImageReadError` naming file and row.
        """
        if self.image_row is None or not self.path:
            return None
        from .specvi import read_specvi_image

        return read_specvi_image(self.path, self.image_row)

    def load_spectrum(self) -> Spectrum:
        """Read this candidate's spectrum; every failure is a :class:`SpectrumReadError` naming file and target."""
        if self.refused is not None:
            raise CandidateRowError(self.source or self.candidate_id, self.refused)
        if self.inline is not None:
            return _inline_spectrum(self)
        if not self.path:
            raise SpectrumReadError(
                self.source or self.candidate_id,
                f"candidate {self.candidate_id} has neither a path nor an inline spectrum",
                hint="give a path column in the candidate list",
            )
        return read_candidate_file(self.path, self.target, self.redrock)

    def file_read(self) -> tuple[Callable[..., Spectrum], tuple] | None:
        """``(function, args)`` whose call reads this candidate's spectrum from its file, for a reader process
        (:mod:`.read_pool`); None when :meth:`load_spectrum` reads no file (an inline spectrum, a refused row)."""
        if self.refused is not None or self.inline is not None or not self.path:
            return None
        return read_candidate_file, (self.path, self.target, self.redrock)


def read_candidate_file(path: str, target: Any = None, redrock: str | None = None) -> Spectrum:
    """The spectrum of ``path`` (and ``target``); every failure is a :class:`SpectrumReadError` naming them."""
    from .reader import read_spectrum

    try:
        if redrock:
            return read_spectrum(path, target, redrock=redrock)
        return read_spectrum(path, target)
    except SpectrumReadError:
        raise
    except (OSError, ValueError, TypeError, KeyError, IndexError) as exc:  # a reader bug must not kill a run
        raise SpectrumReadError(
            path, f"{type(exc).__name__}: {exc}", target=target, hint="report this file to the developers"
        ) from exc


def _inline_spectrum(c: Candidate) -> Spectrum:
    inline = c.inline
    where = c.source or c.candidate_id
    wave = np.asarray(inline.wavelength, dtype=np.float64)
    flux = np.asarray(inline.flux, dtype=np.float64)
    if wave.shape != flux.shape or wave.ndim != 1:
        raise SpectrumReadError(where, f"inline wavelength has shape {wave.shape} but flux {flux.shape}")
    keep = np.isfinite(wave)
    wave, flux = wave[keep], flux[keep]
    if wave.size < 2:
        raise SpectrumReadError(where, "inline spectrum has fewer than 2 finite wavelengths")
    if not np.all(np.diff(wave) > 0):
        order = np.argsort(wave, kind="stable")
        wave, flux = wave[order], flux[order]
        if not np.all(np.diff(wave) > 0):
            raise SpectrumReadError(where, "inline wavelengths repeat; expected a strictly increasing grid")
    bad = ~np.isfinite(flux)
    if bad.all():
        raise SpectrumReadError(where, "inline spectrum has no finite flux")
    # SpecVI rows carry no errors: use one noise level from the pixel-to-pixel scatter (robust, via the MAD)
    diffs = np.diff(flux[~bad])
    sigma = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2.0) if diffs.size else 0.0
    ivar = np.where(bad, 0.0, 1.0 / sigma**2 if sigma > 0 else 1.0)
    ids: dict[str, Any] = {}
    if inline.name:
        m = _LAMOST_NAME.search(inline.name)
        if m:
            ids = {"lmjd": int(m["lmjd"]), "planid": m["planid"], "spid": int(m["spid"]), "fiberid": int(m["fiberid"])}
    meta = SpectrumMeta(
        survey="lamost",
        variant="specvi-inline",
        path=c.path or "",
        row=None,
        ids=ids,
        ra=c.ra,
        dec=c.dec,
        redshift=0.0 if inline.redshift is None else float(inline.redshift),
    )
    return Spectrum(wave, flux, ivar, bad, "", meta)


def fits_stem(path: str | Path) -> str:
    """The file name without FITS/gzip suffixes: ``spec-0266-51602-0013.fits.gz`` -> ``spec-0266-51602-0013``."""
    name = Path(path).name
    for suffix in sorted(FITS_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem


def default_candidate_id(path: str, target: Any) -> str:
    """The id of a spectrum without a given candidate_id: the file name without FITS suffixes, plus ``-<target>`` in
    a multi-target file (`spec-vet run` and `spec-vet inspect` name a spectrum the same way)."""
    stem = fits_stem(path)
    return stem if target is None else f"{stem}-{target}"
