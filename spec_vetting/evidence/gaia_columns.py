"""The names of the Gaia evidence columns of a verdict row: one place, imported wherever a row is built or read.

The catalog's own column names (``parallax``, ``bp_rp`` ...) map to these in :data:`.sources.GAIA_COLUMNS`; the
derived values (M_G, the match's separation and count, the reason) are added by the match.
"""

from __future__ import annotations

GAIA_SOURCE_ID = "gaia_source_id"
GAIA_PARALLAX = "gaia_parallax"
GAIA_PARALLAX_ERROR = "gaia_parallax_error"
GAIA_PMRA = "gaia_pmra"
GAIA_PMDEC = "gaia_pmdec"
GAIA_G_MAG = "gaia_phot_g_mean_mag"
GAIA_BP_RP = "gaia_bp_rp"
GAIA_RUWE = "gaia_ruwe"
GAIA_SEP_ARCSEC = "gaia_sep_arcsec"
GAIA_N_WITHIN = "gaia_n_within"
GAIA_ABS_G = "gaia_abs_g"
GAIA_ABS_G_ERROR = "gaia_abs_g_error"
GAIA_REASON = "gaia_reason"
