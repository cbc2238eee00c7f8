"""Where and when a spectrum was taken, from its own file, for candidates whose list gives no ra/dec or epoch.

The survey readers (:mod:`spec_vetting.io`) already know each layout: LAMOST's ``RA``/``DEC``/``MJD`` header
cards, SDSS's ``PLUG_RA``/``PLUG_DEC`` and plate ``MJD``, DESI's FIBERMAP ``TARGET_RA``/``TARGET_DEC`` and the
span of the target's exposures (a coadd's epoch is the middle of it). Reading a file costs milliseconds; it is
done only for the candidates that need it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``position_source`` values: the candidate list's ra/dec, or the spectrum file's
FROM_LIST, FROM_FILE = "list", "file"


@dataclass(frozen=True)
class FilePosition:
    """A spectrum file's position (deg) and epoch (MJD, and a coadd's span), or why there is none."""

    ra: float | None = None
    dec: float | None = None
    mjd: float | None = None
    mjd_range: tuple[float, float] | None = None
    error: str | None = None


def position_from_file(cand) -> FilePosition:
    """The position and epoch ``cand``'s spectrum file records (its ``path``, ``target`` and ``redrock``); a file
    that cannot be read gives the reason instead (the inspection reports it in full)."""
    path = getattr(cand, "path", None)
    if not path or getattr(cand, "inline", None) is not None:
        return FilePosition(error="no spectrum file")
    from ..io.reader import read_spectrum

    try:
        if getattr(cand, "redrock", None):
            meta = read_spectrum(path, cand.target, redrock=cand.redrock).meta
        else:
            meta = read_spectrum(path, getattr(cand, "target", None)).meta
    except Exception as exc:  # noqa: BLE001 - whatever the file's fault, the inspection reports it; here: no position
        return FilePosition(error=f"spectrum file unreadable ({type(exc).__name__})")
    return FilePosition(meta.ra, meta.dec, meta.mjd, meta.mjd_range)
