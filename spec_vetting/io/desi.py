"""DESI readers: ``coadd-*`` and ``spectra-*`` files, healpix or tile based, and trimmed coadds.

Data model: desihub/desidatamodel ``doc/DESI_SPECTRO_REDUX/SPECPROD/healpix/SURVEY/PROGRAM/PIXGROUP/PIXNUM/
coadd-SURVEY-PROGRAM-PIXNUM.rst`` and ``tiles/cumulative/TILEID/NIGHT/coadd-SPECTROGRAPH-TILEID-thruNIGHT.rst``;
SPECMASK and FIBERSTATUS bits in ``doc/bitmasks.rst``. HDUs are read by name (their order is not fixed).
File names (for humans; we sniff content): ``coadd-SURVEY-PROGRAM-PIXNUM.fits``,
``coadd-PETAL-TILEID-thruNIGHT.fits``, ``spectra-...`` alike.

Choices:

- The arms (B, R, Z; any ``X_FLUX`` with ``X_WAVELENGTH``) are merged onto one strictly increasing grid. DESI
  arms share the 0.8 Å grid, so overlap pixels coincide and are combined by inverse-variance weighting of the good
  (unmasked, ivar > 0) values; if a future grid does not line up, the redder arm is interpolated onto the bluer
  grid inside the overlap. A merged pixel is bad only when no arm has a good value there.
- Masks are uint32 SPECMASK stored as int32 with BZERO (tile-compressed in spectra files): any bit = bad.
- Usable science targets: OBJTYPE == 'TGT' (when the column exists), TARGETID >= 0, COADD_FIBERSTATUS (coadd) or
  FIBERSTATUS (spectra) == 0, and at least one good pixel. Others are skipped and reported, not errors.
- ``spectra-*`` files hold one row per exposure: the good exposures (FIBERSTATUS == 0) of a target are coadded by
  inverse-variance weighting per pixel on each arm before the arms are merged, so a spectra file and its coadd
  give nearly the same spectrum (the official coadd also rejects outliers; we do not).
- Trimmed files without FIBERMAP are addressed by row: ``target`` is the row index and ``ids = {"row": i}``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SpectrumReadError, TargetNeededError, TargetNotFoundError
from ..spectrum import Spectrum, SpectrumMeta
from .build import as_float, as_int, as_str, finish_spectrum
from .fits_open import FitsFile
from .redrock import Redshift, find_redrock_file, read_redshifts
from .registry import OnSkip, Reader, SkippedTarget, register

ARM_RE = re.compile(r"^([A-Z0-9]+)_FLUX$")
DEFAULT_FLUX_UNIT = "1e-17 erg / (s cm2 Angstrom)"


STANDARD_ARMS = ("B", "R", "Z")


def desi_arms(f: FitsFile) -> list[str]:
    """Arm prefixes that have both FLUX and WAVELENGTH HDUs, ordered by their first wavelength (B, R, Z)."""
    arms = []
    for name in f.names:
        m = ARM_RE.match(name)
        if m and f.has(f"{m.group(1)}_WAVELENGTH"):
            arms.append(m.group(1))
    order = {}
    for a in arms:
        wave = np.asarray(f.image(f"{a}_WAVELENGTH")).ravel()
        if wave.size == 0:
            raise SpectrumReadError(f.path, f"{a}_WAVELENGTH is empty", hint="the file is damaged; download it again")
        order[a] = float(wave[0])
    return sorted(arms, key=order.__getitem__)


def _is_desi(f: FitsFile) -> bool:
    return any(ARM_RE.match(n) for n in f.names) and any(n.endswith("_WAVELENGTH") for n in f.names)


def _is_spectra(f: FitsFile) -> bool:
    """Per-exposure file: FIBERMAP has FIBERSTATUS and EXPID but no COADD_FIBERSTATUS, and no EXP_FIBERMAP HDU."""
    if not f.has("FIBERMAP") or f.has("EXP_FIBERMAP"):
        return False
    cols = {c.upper() for c in f.columns("FIBERMAP")}
    return "COADD_FIBERSTATUS" not in cols and "EXPID" in cols


def _skip_reason(targetid: int | None, objtype: str | None, status: int | None, status_col: str) -> str | None:
    if targetid is not None and targetid < 0:
        return "unassigned or stuck fibre (negative TARGETID)"
    if objtype is not None and objtype != "TGT":
        if objtype == "SKY":
            return "sky fibre (OBJTYPE=SKY)"
        if objtype == "":
            return "stuck or unassigned fibre (empty OBJTYPE)"
        return f"not a science target (OBJTYPE={objtype})"
    if status:
        return f"{status_col}={status}"
    return None


def _merge_arms(arms: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]):
    """Merge (wave, flux, ivar, good) arms sorted by start wavelength; overlaps combined by ivar weighting."""
    wave, flux, ivar = (np.array(a, dtype=np.float64) for a in arms[0][:3])
    good = np.array(arms[0][3], dtype=bool)
    for w2, f2, i2, g2 in arms[1:]:
        w2, f2, i2 = (np.asarray(a, dtype=np.float64) for a in (w2, f2, i2))
        step = float(np.median(np.diff(w2))) if w2.size > 1 else 1.0
        tol = 1e-3 * step
        in_overlap = wave >= w2[0] - tol
        ow = wave[in_overlap]
        if ow.size:
            j = np.clip(np.searchsorted(w2, ow - tol), 0, w2.size - 1)
            if np.all(np.abs(w2[j] - ow) <= tol):  # coincident grids: the DESI case
                of, oi, og = f2[j], i2[j], g2[j]
            else:
                of = np.interp(ow, w2, np.where(g2, f2, 0.0))
                lo = np.clip(np.searchsorted(w2, ow) - 1, 0, w2.size - 1)
                hi = np.clip(lo + 1, 0, w2.size - 1)
                og = g2[lo] & g2[hi] & (ow >= w2[0]) & (ow <= w2[-1])
                oi = np.where(og, np.minimum(i2[lo], i2[hi]), 0.0)
            w1 = np.where(good[in_overlap], ivar[in_overlap], 0.0)
            w2_ = np.where(og, oi, 0.0)
            wsum = w1 + w2_
            with np.errstate(invalid="ignore", divide="ignore"):
                combined = np.where(wsum > 0, (flux[in_overlap] * w1 + of * w2_) / wsum,
                                    0.5 * (flux[in_overlap] + of))
            flux[in_overlap] = combined
            ivar[in_overlap] = wsum
            good[in_overlap] = wsum > 0
        beyond = w2 > wave[-1] + tol
        wave = np.concatenate([wave, w2[beyond]])
        flux = np.concatenate([flux, f2[beyond]])
        ivar = np.concatenate([ivar, i2[beyond]])
        good = np.concatenate([good, g2[beyond]])
    return wave, flux, ivar, good


def _coadd_rows(flux: np.ndarray, ivar: np.ndarray, good: np.ndarray):
    """Inverse-variance coadd of several exposures (rows) on one arm grid."""
    w = np.where(good, ivar, 0.0)
    wsum = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(wsum > 0, (np.where(good, flux, 0.0) * w).sum(axis=0) / wsum, np.nanmean(flux, axis=0))
    return f, wsum, wsum > 0


@dataclass
class _Fibre:
    row: int
    targetid: int | None
    skip: str | None
    ra: float | None = None
    dec: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _DesiContent:
    """The arrays and fibre table of one open DESI file, read once and shared by every target."""

    def __init__(self, f: FitsFile):
        self.f = f
        self.arms = desi_arms(f)
        if not self.arms:
            raise SpectrumReadError(f.path, "DESI file without any X_FLUX/X_WAVELENGTH pair")
        self.spectra = _is_spectra(f)
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._has_good: np.ndarray | None = None
        nspec = {a: self.arm(a)[1].shape[0] for a in self.arms}
        if len(set(nspec.values())) != 1:
            raise SpectrumReadError(f.path, f"arms disagree on the number of spectra: {nspec}")
        self.nspec = next(iter(nspec.values()))
        self.fibres = self._fibres()
        self.warnings: list[str] = []
        missing = [a for a in STANDARD_ARMS if a not in self.arms]
        if missing and set(self.arms) <= set(STANDARD_ARMS):
            lo = min(float(self.arm(a)[0][0]) for a in self.arms)
            hi = max(float(self.arm(a)[0][-1]) for a in self.arms)
            self.warnings.append(
                f"DESI arm{'s' if len(missing) > 1 else ''} {'/'.join(missing)} missing (no "
                f"{' or '.join(m + '_FLUX/' + m + '_WAVELENGTH' for m in missing)}): the spectrum covers only "
                f"{lo:.0f}-{hi:.0f} Å of B/R/Z"
            )

    def _fibres(self) -> list[_Fibre]:
        f = self.f
        if not f.has("FIBERMAP"):
            return [_Fibre(row=i, targetid=None, skip=None) for i in range(self.nspec)]
        n = f.nrows("FIBERMAP")
        if n != self.nspec:
            raise SpectrumReadError(f.path, f"FIBERMAP has {n} rows but the flux arrays hold {self.nspec} spectra")
        tids = f.column("FIBERMAP", "TARGETID")
        objtype = f.column("FIBERMAP", "OBJTYPE") if f.has_column("FIBERMAP", "OBJTYPE") else None
        status_col = next((c for c in ("COADD_FIBERSTATUS", "FIBERSTATUS") if f.has_column("FIBERMAP", c)), None)
        status = f.column("FIBERMAP", status_col) if status_col else None
        ra = f.column("FIBERMAP", "TARGET_RA") if f.has_column("FIBERMAP", "TARGET_RA") else None
        dec = f.column("FIBERMAP", "TARGET_DEC") if f.has_column("FIBERMAP", "TARGET_DEC") else None
        extra_cols = {k: f.column("FIBERMAP", c) for k, c in (("tileid", "TILEID"), ("petal", "PETAL_LOC"),
                                                              ("survey", "SURVEY"), ("program", "PROGRAM"),
                                                              ("healpix", "HEALPIX"))
                      if f.has_column("FIBERMAP", c)}
        fibres = []
        for i in range(n):
            tid = int(tids[i])
            fibres.append(_Fibre(
                row=i,
                targetid=tid,
                skip=_skip_reason(tid, None if objtype is None else str(objtype[i]),
                                  None if status is None else int(status[i]), status_col or ""),
                ra=None if ra is None else as_float(ra[i]),
                dec=None if dec is None else as_float(dec[i]),
                extra={k: v[i] for k, v in extra_cols.items()},
            ))
        return fibres

    def arm(self, a: str):
        if a not in self._arrays:
            f = self.f
            wave = np.asarray(f.image(f"{a}_WAVELENGTH"), dtype=np.float64).ravel()
            flux = np.atleast_2d(np.asarray(f.image(f"{a}_FLUX"), dtype=np.float64))
            ivar = np.atleast_2d(np.asarray(f.image(f"{a}_IVAR"), dtype=np.float64))
            if f.has(f"{a}_MASK"):
                mask = np.atleast_2d(np.asarray(f.image(f"{a}_MASK")))
                bad = mask.astype(np.int64) != 0
            else:
                bad = np.zeros(flux.shape, dtype=bool)
            if flux.shape != ivar.shape or flux.shape != bad.shape or flux.shape[1] != wave.size:
                raise SpectrumReadError(
                    f.path, f"arm {a}: FLUX {flux.shape}, IVAR {ivar.shape}, MASK {bad.shape} and "
                    f"WAVELENGTH ({wave.size},) do not line up"
                )
            good = ~bad & (ivar > 0) & np.isfinite(flux) & np.isfinite(ivar)
            self._arrays[a] = (wave, flux, ivar, good)
        return self._arrays[a]

    def rows_have_good_pixel(self) -> np.ndarray:
        if self._has_good is None:
            out = np.zeros(self.nspec, dtype=bool)
            for a in self.arms:
                out |= self.arm(a)[3].any(axis=1)
            self._has_good = out
        return self._has_good

    # -- targets ---------------------------------------------------------------------------------------------
    def groups(self) -> list[tuple[Any, list[_Fibre]]]:
        """(target key, fibres) in file order: one fibre per target in coadds, one per exposure in spectra files."""
        if not self.f.has("FIBERMAP"):
            return [(fb.row, [fb]) for fb in self.fibres]
        groups: dict[int, list[_Fibre]] = {}
        for fb in self.fibres:
            groups.setdefault(fb.targetid, []).append(fb)
        return list(groups.items())

    def usable(self, on_skip: OnSkip | None) -> list[Any]:
        has_good = self.rows_have_good_pixel()
        keep, skipped = [], []
        for key, fibres in self.groups():
            reason = self._group_skip(fibres, has_good)
            if reason is None:
                keep.append(key)
            else:
                skipped.append(SkippedTarget(self.f.path, fibres[0].row, fibres[0].targetid, reason))
        if on_skip is not None:
            for s in skipped:
                on_skip(s)
        elif skipped:
            counts: dict[str, int] = {}
            for s in skipped:
                kind = "non-zero " + s.reason.split("=")[0] if "FIBERSTATUS=" in s.reason else s.reason
                counts[kind] = counts.get(kind, 0) + 1
            detail = ", ".join(f"{n} {k}" for k, n in counts.items())
            print(f"{self.f.path}: skipped {len(skipped)} of {len(skipped) + len(keep)} fibres ({detail})",
                  file=sys.stderr)
        return keep

    @staticmethod
    def _group_skip(fibres: list[_Fibre], has_good: np.ndarray | None) -> str | None:
        ok = [fb for fb in fibres if fb.skip is None]
        if not ok:
            return fibres[0].skip
        if has_good is not None and not any(has_good[fb.row] for fb in ok):
            return "no good pixel"
        return None

    def resolve(self, target: Any) -> list[_Fibre]:
        path = self.f.path
        if not self.f.has("FIBERMAP"):
            row = _as_row(target)
            if row is None or not 0 <= row < self.nspec:
                raise TargetNotFoundError(
                    path, f"no row {target!r}: this trimmed file (no FIBERMAP) holds rows 0-{self.nspec - 1}",
                    target=target, hint="address spectra in files without FIBERMAP by row index",
                )
            return [self.fibres[row]]
        tid = _as_targetid(target)
        fibres = [fb for fb in self.fibres if tid is not None and fb.targetid == tid]
        if not fibres:
            raise TargetNotFoundError(
                path, "TARGETID not in the FIBERMAP", target=target,
                hint="`spec-vet info FILE` lists the usable targets",
            )
        # pixel problems (no finite flux, no good pixel) are reported by finish_spectrum, more precisely
        reason = self._group_skip(fibres, None)
        if reason is not None:
            raise TargetNotFoundError(path, f"not a usable science spectrum: {reason}", target=target)
        return [fb for fb in fibres if fb.skip is None]

    def spectrum(self, fibres: list[_Fibre], variant: str, redshifts: dict[int, Redshift] | None) -> Spectrum:
        arms = []
        for a in self.arms:
            wave, flux, ivar, good = self.arm(a)
            rows = [fb.row for fb in fibres]
            if len(rows) == 1:
                arms.append((wave, flux[rows[0]], ivar[rows[0]], good[rows[0]]))
            else:
                arms.append((wave, *_coadd_rows(flux[rows], ivar[rows], good[rows])))
        wave, flux, ivar, good = _merge_arms(arms)
        fb = fibres[0]
        meta = self._meta(fb, variant, n_exposures=len(fibres))
        meta.warnings.extend(self.warnings)
        rr_path = None
        if isinstance(redshifts, _Joined):
            redshifts, rr_path = redshifts.table, redshifts.path
        if redshifts is not None and fb.targetid is not None and fb.targetid in redshifts:
            rr = redshifts[fb.targetid]
            meta.pipeline_class, meta.pipeline_subclass = rr.spectype, rr.subtype
            meta.redshift, meta.redshift_err, meta.redshift_warning = rr.z, rr.zerr, rr.zwarn
        elif redshifts is not None and fb.targetid is not None:
            meta.warnings.append(
                f"redrock file {rr_path or '(given)'} has no row for TARGETID {fb.targetid} "
                f"({len(redshifts)} other targets): no redshift; is it the redrock file of another coadd?"
            )
        target = fb.targetid if fb.targetid is not None else fb.row
        return finish_spectrum(
            wavelength=wave, flux=flux, ivar=ivar, bad=~good, flux_unit=self._flux_unit(), meta=meta,
            wavelength_key="the merged B/R/Z_WAVELENGTH grid", redshift_key="redrock Z",
            target=target,
        )

    def _flux_unit(self) -> str:
        bunit = as_str(self.f.header(f"{self.arms[0]}_FLUX").get("BUNIT"))
        if not bunit:
            return DEFAULT_FLUX_UNIT  # trimmed files drop BUNIT; DESI flux is always in these units
        return bunit

    def _meta(self, fb: _Fibre, variant: str, n_exposures: int) -> SpectrumMeta:
        h = self.f.header(0)
        ids: dict[str, Any] = {}
        if fb.targetid is None:
            ids["row"] = fb.row
        else:
            ids["targetid"] = fb.targetid
            healpix = as_int(h.get("HPXPIXEL"))
            if healpix is None and (as_str(h.get("SPGRP")) or "") == "healpix":
                healpix = as_int(h.get("SPGRPVAL"))
            tileid = as_int(h.get("TILEID")) or as_int(fb.extra.get("tileid"))
            if healpix is not None:
                ids["healpix"] = healpix
            elif tileid is not None:
                ids["tileid"] = tileid
                petal = as_int(h.get("PETAL")) if h.get("PETAL") is not None else as_int(fb.extra.get("petal"))
                if petal is not None:
                    ids["petal"] = petal
            for key in ("survey", "program"):
                value = as_str(h.get(key.upper())) or as_str(fb.extra.get(key))
                if value:
                    ids[key] = value
        return SpectrumMeta(
            survey="desi",
            variant=variant,
            path=self.f.path,
            data_release=as_str(h.get("SPECPROD")),
            pipeline_version=_desispec_version(h),
            hdu="FIBERMAP" if fb.targetid is not None else None,
            row=fb.row,
            ids=ids,
            ra=fb.ra,
            dec=fb.dec,
            **self._epoch(fb),
        )

    def _epoch(self, fb: _Fibre) -> dict[str, Any]:
        """The target's exposures' MJD span: a coadd's EXP_FIBERMAP rows of its TARGETID (or the FIBERMAP's
        MIN_MJD/MAX_MJD), a spectra file's FIBERMAP rows of it; ``mjd`` the middle. Empty when the file has none."""
        f = self.f
        mjds: list[float] = []
        if fb.targetid is not None:
            for hdu in ("EXP_FIBERMAP", "FIBERMAP"):
                if f.has(hdu) and f.has_column(hdu, "MJD") and f.has_column(hdu, "TARGETID"):
                    tids = np.asarray(f.column(hdu, "TARGETID"))
                    values = np.asarray(f.column(hdu, "MJD"), dtype=np.float64)[tids == fb.targetid]
                    mjds = [float(v) for v in values if np.isfinite(v) and v > 0]
                    if mjds:
                        break
            if not mjds and f.has("FIBERMAP") and all(f.has_column("FIBERMAP", c) for c in ("MIN_MJD", "MAX_MJD")):
                lo = as_float(f.column("FIBERMAP", "MIN_MJD")[fb.row])
                hi = as_float(f.column("FIBERMAP", "MAX_MJD")[fb.row])
                mjds = [v for v in (lo, hi) if v is not None and v > 0]
        if not mjds:
            return {}
        lo, hi = min(mjds), max(mjds)
        return {"mjd": (lo + hi) / 2.0, "mjd_range": (lo, hi) if hi > lo else None}


def _desispec_version(h: dict[str, Any]) -> str | None:
    for key, value in h.items():
        if key.startswith("DEPNAM") and as_str(value) == "desispec":
            return as_str(h.get("DEPVER" + key[len("DEPNAM"):]))
    return None


def _as_row(target: Any) -> int | None:
    if isinstance(target, dict):
        target = target.get("row")
    if isinstance(target, str) and target.lower().startswith("row"):
        target = target[3:].lstrip(":= ")
    return as_int(target)


def _as_targetid(target: Any) -> int | None:
    if isinstance(target, dict):
        target = target.get("targetid", target.get("TARGETID"))
    return as_int(target)


class _Joined:
    """The redshift table joined to a DESI file and the redrock file it came from (for the warnings)."""

    def __init__(self, table: dict, path: Any):
        self.table, self.path = table, path


def _redshifts(f: FitsFile, redrock: Any):
    """redrock: a path, None (look next to the file), or False (do not join)."""
    if redrock is False or not f.has("FIBERMAP"):
        return None
    path = redrock if redrock not in (None, True) else find_redrock_file(f.path)
    if path is None:
        return None
    return _Joined(read_redshifts(path)[0], path)


class _DesiReader(Reader):
    survey = "desi"
    multi_target = True
    priority = 10
    spectra: bool = False

    def identify(self, f: FitsFile) -> bool:
        return _is_desi(f) and _is_spectra(f) == self.spectra

    def targets(self, f: FitsFile, on_skip: OnSkip | None = None) -> list[Any]:
        return _DesiContent(f).usable(on_skip)

    def read(self, f: FitsFile, target: Any = None, *, redrock: Any = None, **options: Any) -> Spectrum:
        content = _DesiContent(f)
        if target is None:
            skipped: list[SkippedTarget] = []
            usable = content.usable(on_skip=skipped.append)
            if not usable:
                reasons = "; ".join(sorted({s.reason for s in skipped}))
                raise TargetNotFoundError(
                    f.path, f"no usable science spectrum: all {len(skipped)} fibres are skipped ({reasons})"
                    if skipped else "the file holds no spectrum (0 rows)",
                )
            if len(usable) != 1:
                shown = ", ".join(str(t) for t in usable[:10]) + (" ..." if len(usable) > 10 else "")
                raise TargetNeededError(
                    f.path, f"the file holds {len(usable)} usable spectra; say which one",
                    hint=f"pass a target ({'row' if not f.has('FIBERMAP') else 'TARGETID'}): {shown}",
                )
            target = usable[0]
        fibres = content.resolve(target)
        return content.spectrum(fibres, self.variant, _redshifts(f, redrock))

    def iter_spectra(self, f: FitsFile, on_skip: OnSkip | None = None, *, redrock: Any = None, **options: Any):
        content = _DesiContent(f)
        redshifts = _redshifts(f, redrock)
        for target in content.usable(on_skip):
            yield content.spectrum(content.resolve(target), self.variant, redshifts)


@register
class DesiCoadd(_DesiReader):
    variant = "desi-coadd"
    description = "DESI coadd-* (healpix or tile; trimmed coadds without FIBERMAP are read by row)"
    spectra = False


@register
class DesiSpectra(_DesiReader):
    variant = "desi-spectra"
    description = "DESI spectra-* (one row per exposure; a target's exposures are coadded by ivar weighting)"
    spectra = True
