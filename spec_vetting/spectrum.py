"""The one spectrum type every survey reader returns.

Wavelengths are vacuum Ångström in the frame the survey stores (heliocentric for LAMOST and SDSS, barycentric for
DESI); :meth:`Spectrum.rest_frame` divides by (1 + z) as the Spec-o3 zoom tool does. Masks are True where a pixel is
bad, as astropy/specutils users expect.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SURVEYS = ("lamost", "sdss", "desi")


@dataclass
class SpectrumMeta:
    """Where a spectrum came from and what the survey pipeline said about it."""

    survey: str  # "lamost" | "sdss" | "desi"
    variant: str  # layout variant, e.g. "lamost-lrs-dr1-image", "sdss-spec-lite", "desi-coadd"
    path: str = ""
    data_release: str | None = None  # e.g. "LAMOST DR7", "DR17"
    pipeline_version: str | None = None  # e.g. "v2.9.8", run2d "v5_13_2", redrock version
    hdu: str | int | None = None
    row: int | None = None
    #: native identifiers under their survey names: LAMOST obsid/designation/planid/lmjd/spid/fiberid;
    #: SDSS plate/mjd/fiberid/specobjid (SDSS-V field/mjd/catalogid); DESI targetid/tileid or healpix/survey/program
    ids: dict[str, Any] = field(default_factory=dict)
    ra: float | None = None  # degrees
    dec: float | None = None  # degrees
    #: when it was taken (MJD): LAMOST MJD (else LMJD), SDSS plate MJD, DESI the middle of its exposures' span
    mjd: float | None = None
    #: a coadd's first and last exposure MJD (DESI), None for a single night
    mjd_range: tuple[float, float] | None = None
    pipeline_class: str | None = None
    pipeline_subclass: str | None = None
    redshift: float | None = None
    redshift_err: float | None = None
    redshift_warning: int | None = None
    snr: float | None = None  # a single representative S/N (median per pixel where the survey gives bands)
    snr_bands: dict[str, float] = field(default_factory=dict)
    #: what the reader noticed but read through: a survey's "no redshift" sentinel, a DESI arm missing, a redrock
    #: file without this target ... (each a sentence; logged, and kept with the spectrum)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Spectrum:
    """A 1-D spectrum on a strictly increasing vacuum wavelength grid in Å.

    ``flux`` and ``ivar`` are float64 arrays of the same length as ``wavelength``; ``mask`` is boolean, True = bad.
    ``flux_unit`` is an astropy-parseable unit string, or ``""`` for relative (uncalibrated) flux as in LAMOST.
    """

    wavelength: np.ndarray
    flux: np.ndarray
    ivar: np.ndarray
    mask: np.ndarray
    flux_unit: str
    meta: SpectrumMeta

    def __post_init__(self) -> None:
        self.wavelength = np.asarray(self.wavelength, dtype=np.float64)
        self.flux = np.asarray(self.flux, dtype=np.float64)
        self.ivar = np.asarray(self.ivar, dtype=np.float64)
        self.mask = np.asarray(self.mask, dtype=bool)
        n = self.wavelength.shape
        for name in ("flux", "ivar", "mask"):
            if getattr(self, name).shape != n:
                raise ValueError(
                    f"{self.meta.path or 'spectrum'}: {name} has shape {getattr(self, name).shape}, "
                    f"wavelength has {n}"
                )
        if self.wavelength.ndim != 1:
            raise ValueError(f"{self.meta.path or 'spectrum'}: arrays must be 1-D, got {self.wavelength.ndim}-D")
        if self.wavelength.size > 1 and not np.all(np.diff(self.wavelength) > 0):
            raise ValueError(f"{self.meta.path or 'spectrum'}: wavelength is not strictly increasing")

    def __len__(self) -> int:
        return int(self.wavelength.size)

    @property
    def good(self) -> np.ndarray:
        """Pixels usable for measurement: not masked, positive inverse variance, finite flux."""
        return ~self.mask & (self.ivar > 0) & np.isfinite(self.flux)

    @property
    def n_good(self) -> int:
        return int(np.count_nonzero(self.good))

    def rest_frame(self, redshift: float | None = None) -> Spectrum:
        """A copy with wavelength divided by (1 + z); ``z`` defaults to the survey pipeline's redshift (None = 0).

        Flux is left as it is, as the trained zoom tool plots it (no (1+z) flux scaling).
        """
        z = self.meta.redshift if redshift is None else redshift
        z = 0.0 if z is None or not np.isfinite(z) else float(z)
        if z <= -1.0:
            raise ValueError(f"{self.meta.path or 'spectrum'}: redshift {z:g} is not physical (1 + z must be > 0)")
        # a real copy: arrays and the metadata's dicts are not shared, so editing one spectrum never edits the other
        return dataclasses.replace(
            self,
            wavelength=self.wavelength / (1.0 + z),
            flux=self.flux.copy(),
            ivar=self.ivar.copy(),
            mask=self.mask.copy(),
            meta=dataclasses.replace(self.meta, ids=dict(self.meta.ids), snr_bands=dict(self.meta.snr_bands),
                                     warnings=list(self.meta.warnings)),
        )

    def to_specutils(self):
        """Hand the spectrum to specutils (an optional dependency): Spectrum with units, ivar uncertainty, mask."""
        import astropy.units as u
        from astropy.nddata import InverseVariance

        try:
            from specutils import Spectrum as SUSpectrum  # specutils >= 2
        except ImportError:  # pragma: no cover - depends on the installed specutils
            from specutils import Spectrum1D as SUSpectrum
        unit = u.Unit(self.flux_unit) if self.flux_unit else u.dimensionless_unscaled
        return SUSpectrum(
            flux=self.flux * unit,
            spectral_axis=self.wavelength * u.AA,
            uncertainty=InverseVariance(self.ivar / unit**2),
            mask=self.mask,
            meta=self.meta.to_dict(),
        )
