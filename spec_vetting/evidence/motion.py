"""Epochs and proper motion: where a catalog source was when the spectrum was taken.

A catalog gives positions at its reference epoch (Gaia DR3: 2016.0) and proper motions ``pmra`` (with the
cos(dec) factor, as Gaia's) and ``pmdec`` in mas/yr. A spectrum was taken at its MJD. The source is moved along
its motion in space, without parallax or radial velocity (their effect over a decade is far below an arcsecond for
any star a survey targets): unit vector plus the motion vector in the tangent plane times the time difference,
normalised. This is the model of astropy's ``SkyCoord.apply_space_motion`` with zero radial velocity.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

MAS_TO_RAD = np.pi / (180.0 * 3600.0 * 1000.0)
#: MJD of J2000.0 and days per Julian year
MJD_J2000, JULIAN_YEAR_DAYS = 51544.5, 365.25

# LAMOST: spec-LMJD-PLANID_spSPID-FIBER; SDSS: spec-PLATE-MJD-FIBER (the local MJD of LAMOST is within a day)
_LAMOST_NAME = re.compile(r"spec-(?P<mjd>\d{5})-[^_/]+_sp\d+-\d+")
_SDSS_NAME = re.compile(r"spec-\d{4,6}-(?P<mjd>\d{5})-\d{3,4}")


def mjd_to_jyear(mjd):
    """Julian year of a Modified Julian Date (scalar or array)."""
    return 2000.0 + (np.asarray(mjd, dtype=np.float64) - MJD_J2000) / JULIAN_YEAR_DAYS


def mjd_from_name(path: str | None) -> int | None:
    """The MJD a LAMOST or SDSS file name carries (``spec-55859-F5902_sp01-001.fits``, ``spec-0266-51602-0013``),
    None for other names (DESI coadds span several nights)."""
    if not path:
        return None
    name = Path(path).name
    m = _LAMOST_NAME.search(name) or _SDSS_NAME.search(name)
    return int(m["mjd"]) if m else None


def propagate(ra_deg, dec_deg, pmra_mas_yr, pmdec_mas_yr, years):
    """Positions (deg) after ``years`` of proper motion (arrays broadcast); a null motion counts as none."""
    ra = np.radians(np.asarray(ra_deg, dtype=np.float64))
    dec = np.radians(np.asarray(dec_deg, dtype=np.float64))
    mu_a = np.nan_to_num(np.asarray(pmra_mas_yr, dtype=np.float64)) * MAS_TO_RAD
    mu_d = np.nan_to_num(np.asarray(pmdec_mas_yr, dtype=np.float64)) * MAS_TO_RAD
    t = np.nan_to_num(np.asarray(years, dtype=np.float64))
    ca, sa, cd, sd = np.cos(ra), np.sin(ra), np.cos(dec), np.sin(dec)
    # position, and the tangent-plane unit vectors towards east (p) and north (q)
    x, y, z = cd * ca, cd * sa, sd
    px, py = -sa, ca
    qx, qy, qz = -sd * ca, -sd * sa, cd
    x = x + t * (mu_a * px + mu_d * qx)
    y = y + t * (mu_a * py + mu_d * qy)
    z = z + t * (mu_d * qz)
    new_ra = np.degrees(np.arctan2(y, x)) % 360.0
    new_dec = np.degrees(np.arctan2(z, np.hypot(x, y)))
    return new_ra, new_dec


def separation_arcsec(ra1, dec1, ra2, dec2):
    """Angular separation in arcseconds (haversine form: exact at small angles)."""
    ra1, dec1, ra2, dec2 = (np.radians(np.asarray(a, dtype=np.float64)) for a in (ra1, dec1, ra2, dec2))
    h = np.sin((dec2 - dec1) / 2) ** 2 + np.cos(dec1) * np.cos(dec2) * np.sin((ra2 - ra1) / 2) ** 2
    return np.degrees(2 * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))) * 3600.0
