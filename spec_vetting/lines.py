"""Spectral lines and molecular band heads a reviewer marks on a spectrum: one table, vacuum wavelengths in Å.

Every spectrum the readers return is on a vacuum wavelength grid (:mod:`spec_vetting.spectrum`), so the table is
vacuum too. Atomic lines are given in vacuum directly (NIST / SDSS line lists); band heads are usually quoted in
air in the literature and are converted here with :func:`air_to_vacuum` (Morton 2000), so both sit on the same scale.

``LINES`` is a tuple of :class:`Line` (name, vacuum wavelength, group); ``GROUPS`` names the groups in display order.
The review page draws them (``report/page.py`` passes the table to the browser); this module imports nothing from
the package and sits at the bottom layer, beside the vocabulary.
"""

from __future__ import annotations

from typing import NamedTuple


class Line(NamedTuple):
    name: str
    wavelength: float  # vacuum, Å, rest frame
    group: str


#: group id -> what the page shows for it, in display order
GROUPS: dict[str, str] = {
    "balmer": "Balmer",
    "helium": "He I / He II",
    "calcium": "Ca II",
    "sodium": "Na I",
    "bands": "TiO / CaH / C2 / ZrO band heads",
    "qso": "QSO / nebular",
}


def air_to_vacuum(air: float) -> float:
    """Vacuum wavelength (Å) of an air wavelength (Å), Morton (2000) as used by the IAU and SDSS."""
    s2 = (1e4 / air) ** 2
    n = 1.0 + 8.34254e-5 + 2.406147e-2 / (130.0 - s2) + 1.5998e-4 / (38.9 - s2)
    return air * n


_VACUUM = [
    # Balmer series
    ("H\u03b1", 6564.61, "balmer"), ("H\u03b2", 4862.68, "balmer"), ("H\u03b3", 4341.68, "balmer"),
    ("H\u03b4", 4102.89, "balmer"), ("H\u03b5", 3971.20, "balmer"), ("H8", 3890.16, "balmer"),
    ("H9", 3836.47, "balmer"), ("H10", 3798.98, "balmer"),
    # helium
    ("He I 3889", 3889.75, "helium"), ("He I 4026", 4027.33, "helium"), ("He I 4471", 4472.73, "helium"),
    ("He I 4922", 4923.30, "helium"), ("He I 5016", 5017.08, "helium"), ("He I 5876", 5877.25, "helium"),
    ("He I 6678", 6679.99, "helium"), ("He I 7065", 7067.14, "helium"),
    ("He II 4686", 4687.02, "helium"), ("He II 5411", 5413.03, "helium"), ("He II 1640", 1640.42, "helium"),
    # calcium: H and K, the near-infrared triplet
    ("Ca II K", 3934.78, "calcium"), ("Ca II H", 3969.59, "calcium"),
    ("Ca II 8498", 8500.36, "calcium"), ("Ca II 8542", 8544.44, "calcium"), ("Ca II 8662", 8664.52, "calcium"),
    # sodium D
    ("Na I D2", 5891.58, "sodium"), ("Na I D1", 5897.56, "sodium"),
    # quasar broad lines and the strong nebular lines of galaxies
    ("Ly\u03b1", 1215.67, "qso"), ("N V", 1240.81, "qso"), ("Si IV", 1397.61, "qso"), ("C IV", 1549.48, "qso"),
    ("C III]", 1908.73, "qso"), ("Mg II", 2799.49, "qso"), ("[O II]", 3728.48, "qso"),
    ("[O III] 4959", 4960.30, "qso"), ("[O III] 5007", 5008.24, "qso"), ("[N II] 6583", 6585.27, "qso"),
    ("[S II] 6716", 6718.29, "qso"), ("[S II] 6731", 6732.67, "qso"),
]

#: band heads, air wavelengths (Å) as usually quoted: M-star TiO and CaH, carbon-star C2 Swan, S-star ZrO
_BAND_HEADS_AIR = [
    ("TiO 4955", 4954.6), ("TiO 5167", 5166.7), ("TiO 5448", 5448.0), ("TiO 5847", 5847.0), ("TiO 6159", 6158.7),
    ("TiO 6651", 6651.0), ("TiO 7054", 7054.2), ("TiO 7589", 7589.0), ("TiO 8432", 8432.0),
    ("CaH 6382", 6382.0), ("CaH 6908", 6908.0),
    ("C2 4737", 4737.1), ("C2 5165", 5165.2), ("C2 5636", 5635.5), ("C2 6191", 6191.2),
    ("ZrO 4620", 4620.6), ("ZrO 5552", 5551.6), ("ZrO 6345", 6345.0), ("ZrO 6474", 6474.0),
]

LINES: tuple[Line, ...] = tuple(
    sorted(
        [Line(n, w, g) for n, w, g in _VACUUM]
        + [Line(n, round(air_to_vacuum(w), 2), "bands") for n, w in _BAND_HEADS_AIR],
        key=lambda line: (list(GROUPS).index(line.group), line.wavelength),
    )
)


_BY_NAME = {line.name: line.wavelength for line in LINES}


def rest(name: str) -> float:
    """The vacuum rest wavelength (Å) of the line called ``name`` in :data:`LINES` (e.g. ``rest("H\u03b1")``)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no line {name!r} in spec_vetting.lines.LINES") from None


def lines_in(group: str) -> list[Line]:
    """The lines of one group (``GROUPS`` key), bluest first."""
    if group not in GROUPS:
        raise KeyError(f"unknown line group {group!r}; groups: {', '.join(GROUPS)}")
    return [line for line in LINES if line.group == group]
