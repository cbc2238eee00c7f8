"""HEALPix pixel indices (NESTED scheme) of sky positions, for the catalog's ``healpix`` and ``_healpix_29`` columns.

Every index comes from cdshealpix (the library hats and lsdb use), so the catalog's columns are the cells those tools
compute: ``healpix`` at order 6 (nside 64), ``_healpix_29`` at order 29, HATS's spatial index. A position that is
missing, not finite or off the sphere has no cell: -1 in the arrays, null in the columns.
"""

from __future__ import annotations

import numpy as np

#: the ``healpix`` column's resolution: 49 152 pixels of about 0.84 square degrees
CATALOG_NSIDE = 64
#: HATS / LSDB's spatial index: order 29 (nside 2**29), NESTED, in a column named ``_healpix_29``
HATS_ORDER = 29


def _order(nside: int) -> int:
    if nside < 1 or nside > 2**HATS_ORDER or nside & (nside - 1):
        raise ValueError(f"nside must be a power of two between 1 and 2**{HATS_ORDER}, got {nside}")
    return nside.bit_length() - 1


def ang2pix_nest(nside: int, ra_deg, dec_deg) -> np.ndarray:
    """NESTED pixel index of each (ra, dec) in degrees; -1 where ra or dec is missing, not finite or |dec| > 90."""
    from astropy import units as u
    from cdshealpix.nested import lonlat_to_healpix

    order = _order(nside)
    ra = np.atleast_1d(np.asarray(ra_deg, dtype=np.float64))
    dec = np.atleast_1d(np.asarray(dec_deg, dtype=np.float64))
    ra, dec = np.broadcast_arrays(ra, dec)
    out = np.full(ra.shape, -1, dtype=np.int64)
    ok = np.isfinite(ra) & np.isfinite(dec) & (np.abs(dec) <= 90.0)
    if ok.any():
        out[ok] = np.ravel(lonlat_to_healpix(np.mod(ra[ok], 360.0) * u.deg, dec[ok] * u.deg, order))
    return out


def healpix_or_none(ra: float | None, dec: float | None, nside: int = CATALOG_NSIDE) -> int | None:
    """One position's NESTED index, or None when the position is unknown."""
    if ra is None or dec is None:
        return None
    pix = int(ang2pix_nest(nside, ra, dec)[0])
    return None if pix < 0 else pix


def healpix29_array(ra, dec):
    """The ``_healpix_29`` column for Arrow (or numpy) ra/dec in degrees, null where the position has no cell."""
    import pyarrow as pa

    def values(col):
        if isinstance(col, (pa.ChunkedArray, pa.Array)):
            return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        return np.asarray(col, dtype=np.float64)

    pix = ang2pix_nest(2**HATS_ORDER, values(ra), values(dec))
    return pa.array(np.maximum(pix, 0), pa.int64(), mask=pix < 0)
