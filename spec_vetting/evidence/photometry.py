"""Absolute G magnitude from the parallax, with its error, or the reason it is not given.

M_G = G + 5 log10(parallax / 100 mas) (parallax in mas; 100 mas is 10 pc). Its error from the parallax alone:
sigma(M_G) = (5 / ln 10) * sigma(parallax) / parallax; G's own error (millimagnitudes in Gaia DR3) is left out.
Extinction is not corrected. Given only when the parallax is significant: parallax / parallax_error >= 5 (then
1/parallax is a fair distance and sigma(M_G) <= 0.43 mag), and when the astrometric solution is reliable: RUWE <= 1.4
(above it, usually an unresolved binary, CVs among them, the parallax and its error are not to be trusted);
otherwise null with the reason.
"""

from __future__ import annotations

import math

#: parallax_over_error below this: no M_G (documented in docs/guide/evidence.md and the schema)
PARALLAX_OVER_ERROR_MIN = 5.0
#: RUWE above this: the astrometric solution is doubtful, no M_G (Gaia DR3's documented limit)
RUWE_MAX = 1.4
_FIVE_OVER_LN10 = 5.0 / math.log(10.0)


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def absolute_g(g_mag, parallax_mas, parallax_error_mas, ruwe=None) -> tuple[float | None, float | None, str | None]:
    """(M_G, its error, None), or (None, None, the reason) when the inputs do not support one."""
    if _finite(ruwe) and ruwe > RUWE_MAX:
        return None, None, f"astrometric solution unreliable (RUWE {ruwe:.2f} > {RUWE_MAX:g})"
    if not _finite(g_mag):
        return None, None, "no G magnitude"
    if not _finite(parallax_mas) or not _finite(parallax_error_mas) or parallax_error_mas <= 0:
        return None, None, "no parallax with an error"
    poe = parallax_mas / parallax_error_mas
    if parallax_mas <= 0:
        return None, None, f"parallax not positive ({parallax_mas:.3f} ± {parallax_error_mas:.3f} mas)"
    if poe < PARALLAX_OVER_ERROR_MIN:
        return None, None, (f"parallax not significant (parallax/error = {poe:.1f} < "
                            f"{PARALLAX_OVER_ERROR_MIN:g})")
    m = g_mag + 5.0 * math.log10(parallax_mas / 100.0)
    return m, _FIVE_OVER_LN10 * parallax_error_mas / parallax_mas, None
