"""HEALPix pixel index (NESTED scheme) of sky positions, for the catalog's ``healpix`` column.

astropy-healpix and healpy are not dependencies, and the only thing the catalog needs is ang2pix, so it is written
here from the HEALPix paper (Górski et al. 2005, ApJ 622, 759, section 4) as healpy's ``loc2pix`` does it:
locate the base face and the (x, y) position inside it, then interleave the bits of x and y. Catalog builders use
the column to partition the sky (HATS/LSDB use nside-based NESTED indices the same way).
"""

from __future__ import annotations

import math

import numpy as np

#: the catalog's resolution: 49 152 pixels of about 0.84 square degrees
CATALOG_NSIDE = 64


def _spread_bits(v: np.ndarray) -> np.ndarray:
    """Put bit k of v at bit 2k (v < 2**16)."""
    v = v.astype(np.int64)
    v = (v | (v << 8)) & 0x00FF00FF
    v = (v | (v << 4)) & 0x0F0F0F0F
    v = (v | (v << 2)) & 0x33333333
    v = (v | (v << 1)) & 0x55555555
    return v


def ang2pix_nest(nside: int, ra_deg, dec_deg) -> np.ndarray:
    """NESTED pixel index of each (ra, dec) in degrees; -1 where ra or dec is missing or not finite.

    ``nside`` must be a power of two up to 2**15.
    """
    if nside < 1 or nside > 2**15 or nside & (nside - 1):
        raise ValueError(f"nside must be a power of two between 1 and 32768, got {nside}")
    ra = np.atleast_1d(np.asarray(ra_deg, dtype=np.float64))
    dec = np.atleast_1d(np.asarray(dec_deg, dtype=np.float64))
    ra, dec = np.broadcast_arrays(ra, dec)
    out = np.full(ra.shape, -1, dtype=np.int64)
    ok = np.isfinite(ra) & np.isfinite(dec) & (np.abs(dec) <= 90.0)
    if not ok.any():
        return out
    z = np.sin(np.radians(dec[ok]))
    za = np.abs(z)
    # tt in [0, 4): longitude in units of the 90-degree base-face columns
    tt = np.mod(np.radians(ra[ok]), 2.0 * math.pi) / (0.5 * math.pi)
    tt = np.where(tt >= 4.0, 0.0, tt)

    face = np.empty(z.shape, dtype=np.int64)
    ix = np.empty(z.shape, dtype=np.int64)
    iy = np.empty(z.shape, dtype=np.int64)

    eq = za <= 2.0 / 3.0
    if eq.any():
        # equatorial belt: the two diagonal line families through the pixel
        t1 = nside * (0.5 + tt[eq])
        t2 = nside * z[eq] * 0.75
        jp = (t1 - t2).astype(np.int64)  # index of the ascending edge line
        jm = (t1 + t2).astype(np.int64)  # index of the descending edge line
        ifp = jp // nside
        ifm = jm // nside
        face[eq] = np.where(ifp == ifm, ifp | 4, np.where(ifp < ifm, ifp, ifm + 8))
        ix[eq] = jm & (nside - 1)
        iy[eq] = nside - (jp & (nside - 1)) - 1
    pol = ~eq
    if pol.any():
        # polar caps: distance from the pole scales with sqrt(3 (1 - |z|)) to keep pixel areas equal
        ntt = np.minimum(3, tt[pol].astype(np.int64))
        tp = tt[pol] - ntt
        tmp = nside * np.sqrt(3.0 * (1.0 - za[pol]))
        jp = np.minimum((tp * tmp).astype(np.int64), nside - 1)
        jm = np.minimum(((1.0 - tp) * tmp).astype(np.int64), nside - 1)
        north = z[pol] >= 0
        face[pol] = np.where(north, ntt, ntt + 8)
        ix[pol] = np.where(north, nside - jm - 1, jp)
        iy[pol] = np.where(north, nside - jp - 1, jm)

    out[ok] = face * nside * nside + _spread_bits(ix) + (_spread_bits(iy) << 1)
    return out


def healpix_or_none(ra: float | None, dec: float | None, nside: int = CATALOG_NSIDE) -> int | None:
    """One position's NESTED index, or None when the position is unknown."""
    if ra is None or dec is None:
        return None
    pix = int(ang2pix_nest(nside, ra, dec)[0])
    return None if pix < 0 else pix


#: HATS / LSDB's spatial index: order 29 (nside 2**29), NESTED, in a column named ``_healpix_29``
HATS_ORDER = 29


def healpix29_array(ra, dec):
    """The ``_healpix_29`` column for Arrow (or numpy) ra/dec in degrees: order-29 NESTED indices from cdshealpix
    (the library hats uses), null where ra or dec is missing, not finite or out of range."""
    import pyarrow as pa
    from astropy import units as u
    from cdshealpix.nested import lonlat_to_healpix

    def values(col):
        if isinstance(col, (pa.ChunkedArray, pa.Array)):
            return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        return np.asarray(col, dtype=np.float64)

    ra_v, dec_v = values(ra), values(dec)
    ok = np.isfinite(ra_v) & np.isfinite(dec_v) & (np.abs(dec_v) <= 90.0)
    out = np.zeros(ra_v.shape, dtype=np.int64)
    if ok.any():
        out[ok] = lonlat_to_healpix(np.mod(ra_v[ok], 360.0) * u.deg, dec_v[ok] * u.deg, HATS_ORDER)
    return pa.array(out, pa.int64(), mask=~ok)
