"""Seeded, physically motivated synthetic spectra for the five Spec-o3 tasks and their usual confusers.

Why: examples, tests and benchmarks need labelled spectra of every class without shipping survey data, and the
rules engine and the pipeline must be exercised on cases that are hard in the same way as the real SpecVI-Bench
negatives (which a deep classifier scored above 0.8 for the class). So every kind here:

- starts from a blackbody continuum at a plausible temperature (temperature ranges of confusers overlap),
- adds the lines and molecular bands that define the class, with strengths and widths drawn per seed,
- is broadened to a spectral resolution R (LAMOST LRS ~1800) on a fine log grid, then sampled onto the output grid,
- gets random interstellar reddening and a smooth flux-calibration distortion (so the continuum slope alone is a
  weak cue), a random flux scale, S/N-set Gaussian noise (worse at the blue end and at the dichroic, as in LAMOST),
  an inverse variance consistent with that noise, and a few bad pixels (mask True, ivar 0, flux 0).

Wavelengths are vacuum Å. Molecular band heads: TiO and ZrO bands degrade to the red (sharp blue edge, absorption
fading redward); C2 Swan bands degrade to the violet (sharp red edge, absorption fading blueward); CN red-system
bands degrade to the red.

Public API: :func:`make_spectrum`, :data:`KINDS`, :data:`TASK_POSITIVES`, :data:`TASK_CONFUSERS`,
:func:`lamost_grid`, :data:`SYNTHETIC_VERSION`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from ..spectrum import Spectrum, SpectrumMeta
from .build import median_snr

#: bump when a generator changes what it draws for a given seed (examples and caches key on it)
SYNTHETIC_VERSION = "1"

KINDS: tuple[str, ...] = (
    "cv",
    "cv_outburst",
    "carbon",
    "s_star",
    "m_giant",
    "m_dwarf",
    "wd_da",
    "wd_db",
    "a_star",
    "f_star",
    "g_star",
    "k_star",
    "qso",
    "galaxy",
)

#: task key -> kinds that are a YES for that task
TASK_POSITIVES: dict[str, list[str]] = {
    "cv": ["cv", "cv_outburst"],
    "carbon": ["carbon"],
    "ss": ["s_star"],
    "gm": ["m_giant"],
    "wd": ["wd_da", "wd_db"],
}

#: task key -> hard-negative kinds (look alike at a glance; a NO for that task)
TASK_CONFUSERS: dict[str, list[str]] = {
    "cv": ["qso", "galaxy", "a_star", "wd_da"],
    "carbon": ["s_star", "m_giant", "k_star"],
    "ss": ["m_giant", "carbon", "m_dwarf"],
    "gm": ["m_dwarf", "s_star", "k_star"],
    "wd": ["a_star", "f_star", "cv"],
}

# The LAMOST LRS grid: log10-linear, 1e-4 per pixel from 10**3.5682 = 3699.99 Å, 3909 pixels (to ~9100 Å).
LAMOST_COEFF0 = 3.5682
LAMOST_COEFF1 = 1e-4
LAMOST_NPIX = 3909

#: default resolving power (LAMOST LRS at ~5000 Å)
DEFAULT_RESOLUTION = 1800.0

_C_KMS = 299792.458
_HC_OVER_K = 1.438777e8  # Å K


def lamost_grid(n_pixels: int = LAMOST_NPIX) -> np.ndarray:
    """The LAMOST LRS wavelength grid (vacuum Å): 10**(3.5682 + 1e-4 i)."""
    return 10.0 ** (LAMOST_COEFF0 + LAMOST_COEFF1 * np.arange(n_pixels))


# ---------------------------------------------------------------------------------------------------------------
# Line lists (vacuum Å)

BALMER = {
    "Ha": 6564.61,
    "Hb": 4862.68,
    "Hg": 4341.68,
    "Hd": 4102.89,
    "He": 3971.20,
    "H8": 3890.16,
    "H9": 3836.47,
    "H10": 3798.98,
}
HE_I = (4027.33, 4472.73, 4923.30, 5017.08, 5877.25, 6679.99, 7067.14)
HE_II_4686 = 4687.02
CA_K, CA_H = 3934.78, 3969.59
G_BAND = 4305.0
MG_B = (5168.76, 5174.13, 5185.05)
NA_D = (5891.58, 5897.56)
CA_TRIPLET = (8500.36, 8544.44, 8664.52)
NA_I_RED = (8185.51, 8197.08)
K_I = (7667.01, 7701.08)
FE_LINES = (5270.4, 5335.1, 5406.8)
TIO_HEADS = (4955.0, 5167.0, 5448.0, 6159.0, 6651.0, 7054.0, 7589.0, 8432.0)
ZRO_HEADS = (4620.0, 5551.0, 6474.0)
C2_SWAN_HEADS = (4737.0, 5165.0, 5636.0)
CN_RED_HEADS = (7088.0, 7874.0, 7945.0, 8125.0, 8320.0)
CAH_BANDS = (6382.0, 6830.0)


# ---------------------------------------------------------------------------------------------------------------
# Building blocks on the fine rest-frame grid


def _planck(wave: np.ndarray, temperature: float) -> np.ndarray:
    """B_lambda(T) up to a constant, normalised to its value at 5500 Å."""
    x = _HC_OVER_K / (wave * temperature)
    x0 = _HC_OVER_K / (5500.0 * temperature)
    return (5500.0 / wave) ** 5 * np.expm1(x0) / np.expm1(np.minimum(x, 700.0))


def _gauss(wave: np.ndarray, center: float, fwhm: float) -> np.ndarray:
    """Unit-peak Gaussian."""
    sigma = fwhm / 2.3548
    return np.exp(-0.5 * ((wave - center) / sigma) ** 2)


def _lorentz(wave: np.ndarray, center: float, fwhm: float) -> np.ndarray:
    """Unit-peak Lorentzian (pressure-broadened wings)."""
    hw = 0.5 * fwhm
    return hw**2 / ((wave - center) ** 2 + hw**2)


def _pseudo_voigt(wave: np.ndarray, center: float, fwhm: float, eta: float) -> np.ndarray:
    return eta * _lorentz(wave, center, fwhm) + (1.0 - eta) * _gauss(wave, center, fwhm)


def _band(wave: np.ndarray, head: float, scale: float, toward: str) -> np.ndarray:
    """Unit-depth molecular band: sharp at the head, fading exponentially toward ``toward`` ("red" or "blue")."""
    if toward == "red":
        d = wave - head
    else:
        d = head - wave
    out = np.zeros_like(wave)
    inside = d >= 0
    out[inside] = np.exp(-d[inside] / scale)
    return out


class _Model:
    """Accumulates a rest-frame model: continuum x transmission + emission (emission scaled by local continuum)."""

    def __init__(self, wave: np.ndarray, continuum: np.ndarray):
        self.wave = wave
        self.continuum = continuum
        self.transmission = np.ones_like(wave)
        self.emission = np.zeros_like(wave)

    def absorb(self, profile: np.ndarray, depth: float) -> None:
        self.transmission *= 1.0 - np.clip(depth, 0.0, 0.98) * profile

    def line_absorption(self, center: float, fwhm: float, depth: float, eta: float = 0.0) -> None:
        self.absorb(_pseudo_voigt(self.wave, center, fwhm, eta), depth)

    def emission_line(self, center: float, fwhm: float, ew: float) -> None:
        """Gaussian emission of equivalent width ``ew`` Å (positive) against the local continuum."""
        level = float(np.interp(center, self.wave, self.continuum * self.transmission))
        sigma = fwhm / 2.3548
        self.emission += ew * level * _gauss(self.wave, center, fwhm) / (sigma * np.sqrt(2 * np.pi))

    def double_peaked(self, center: float, fwhm: float, ew: float, separation_kms: float) -> None:
        """Disc profile: two peaks separated by ``separation_kms`` (each half the EW, narrower)."""
        dv = center * separation_kms / _C_KMS / 2.0
        peak_fwhm = max(fwhm * 0.6, 2.0)
        self.emission_line(center - dv, peak_fwhm, ew / 2.0)
        self.emission_line(center + dv, peak_fwhm, ew / 2.0)

    def total(self) -> np.ndarray:
        return self.continuum * self.transmission + self.emission


def _kms_to_fwhm(center: float, kms: float) -> float:
    return center * kms / _C_KMS


def _jit(rng: np.random.Generator, low: float = 0.7, high: float = 1.3) -> float:
    return float(rng.uniform(low, high))


# ---------------------------------------------------------------------------------------------------------------
# Class generators. Each takes (rng, rest wavelength) and returns (rest-frame model flux, pipeline class, subclass).


def _tio(m: _Model, rng: np.random.Generator, strength: float) -> None:
    relative = (0.6, 0.8, 0.7, 0.85, 0.75, 1.0, 0.85, 0.6)
    for head, rel in zip(TIO_HEADS, relative, strict=True):
        m.absorb(_band(m.wave, head, rng.uniform(60, 140), "red"), strength * rel * _jit(rng))


_M_GRAVITY_FEATURES = {
    "dwarf": ((CAH_BANDS, (40, 90), (0.25, 0.55)), (NA_I_RED, (5, 9), (0.35, 0.6)), (K_I, (6, 12), (0.35, 0.65)),
              (CA_TRIPLET, (3, 5), (0.1, 0.3))),
    "giant": ((CAH_BANDS, (40, 90), (0.0, 0.1)), (NA_I_RED, (3, 5), (0.05, 0.2)), (K_I, (3, 6), (0.05, 0.2)),
              (CA_TRIPLET, (4, 7), (0.35, 0.6))),
}


def _m_star(rng: np.random.Generator, wave: np.ndarray, dwarf: bool) -> _Model:
    teff = rng.uniform(2900, 3600) if dwarf else rng.uniform(3100, 3900)
    m = _Model(wave, _planck(wave, teff))
    # cooler -> deeper TiO; both luminosity classes share the bands, so TiO alone does not tell them apart
    tio = np.clip((4000 - teff) / 1000.0, 0.1, 0.95) * rng.uniform(0.6, 1.1)
    _tio(m, rng, tio)
    # gravity-sensitive features, (width range Å, depth range): strong CaH, Na I 8183/8195 and K I in dwarfs,
    # a strong Ca II triplet in giants
    for lines, width, depth in _M_GRAVITY_FEATURES["dwarf" if dwarf else "giant"]:
        for line in lines:
            m.line_absorption(line, rng.uniform(*width), rng.uniform(*depth))
    if dwarf and rng.random() < 0.35:  # dMe flare star: narrow Balmer emission (a CV look-alike at a glance)
        ew = rng.uniform(1, 10)
        m.emission_line(BALMER["Ha"], 4.0, ew)
        m.emission_line(BALMER["Hb"], 3.0, ew * 0.5)
    for line in NA_D:
        m.line_absorption(line, rng.uniform(4, 8), rng.uniform(0.3, 0.6))
    m.line_absorption(CA_K, 15, rng.uniform(0.4, 0.8))
    m.line_absorption(CA_H, 15, rng.uniform(0.4, 0.8))
    return m


def _gen_m_giant(rng, wave):
    m = _m_star(rng, wave, dwarf=False)
    return m, "STAR", f"gM{rng.integers(0, 7)}"


def _gen_m_dwarf(rng, wave):
    m = _m_star(rng, wave, dwarf=True)
    return m, "STAR", f"dM{rng.integers(0, 7)}"


def _gen_carbon(rng, wave):
    teff = rng.uniform(2600, 3600)
    m = _Model(wave, _planck(wave, teff))
    # carbon-rich atmospheres: most flux below 4500 Å is eaten by C2 and CN; Swan bands degrade to the violet
    for head in C2_SWAN_HEADS:
        m.absorb(_band(wave, head, rng.uniform(120, 300), "blue"), rng.uniform(0.3, 0.8))
    for head in (6122.0, 6191.0):  # weaker Swan sequence
        m.absorb(_band(wave, head, rng.uniform(40, 80), "blue"), rng.uniform(0.05, 0.25))
    for head in CN_RED_HEADS:
        m.absorb(_band(wave, head, rng.uniform(50, 120), "red"), rng.uniform(0.15, 0.45))
    m.absorb(1.0 / (1.0 + (wave / rng.uniform(4300, 4800)) ** 8), rng.uniform(0.2, 0.6))  # blue suppression
    for line in NA_D:
        m.line_absorption(line, rng.uniform(5, 10), rng.uniform(0.4, 0.7))
    for line in K_I:
        m.line_absorption(line, rng.uniform(4, 8), rng.uniform(0.1, 0.3))
    if rng.random() < 0.15:  # carbon Mira: Balmer emission
        m.emission_line(BALMER["Ha"], 5.0, rng.uniform(2, 15))
    return m, "STAR", "Carbon"


def _gen_s_star(rng, wave):
    teff = rng.uniform(2900, 3600)
    m = _Model(wave, _planck(wave, teff))
    for head in ZRO_HEADS:
        m.absorb(_band(wave, head, rng.uniform(60, 140), "red"), rng.uniform(0.25, 0.6))
    for head in (5718.0, 6345.0):  # secondary ZrO heads
        m.absorb(_band(wave, head, rng.uniform(40, 90), "red"), rng.uniform(0.05, 0.2))
    tio = np.clip((4000 - teff) / 1000.0, 0.1, 0.95) * rng.uniform(0.1, 0.5)  # weaker TiO than an M giant
    _tio(m, rng, tio)
    if rng.random() < 0.4:  # LaO in the reddest S stars
        for head in (7403.0, 7910.0):
            m.absorb(_band(wave, head, rng.uniform(30, 70), "red"), rng.uniform(0.05, 0.2))
    for line in NA_D:
        m.line_absorption(line, rng.uniform(4, 8), rng.uniform(0.3, 0.6))
    for line in CA_TRIPLET:
        m.line_absorption(line, rng.uniform(4, 7), rng.uniform(0.3, 0.5))
    if rng.random() < 0.2:  # S-type Mira
        m.emission_line(BALMER["Ha"], 5.0, rng.uniform(2, 15))
        m.emission_line(BALMER["Hd"], 4.0, rng.uniform(2, 10))
    return m, "STAR", f"M{rng.integers(0, 6)}"


def _wd_balmer(m: _Model, rng: np.random.Generator, depth: float, width_scale: float) -> None:
    """Pressure-broadened Balmer absorption of a DA white dwarf (FWHM ~100-200 Å at Hβ)."""
    widths = {"Ha": 120, "Hb": 150, "Hg": 130, "Hd": 110, "He": 90, "H8": 70, "H9": 55, "H10": 45}
    depths = {"Ha": 0.7, "Hb": 0.9, "Hg": 1.0, "Hd": 1.0, "He": 0.95, "H8": 0.85, "H9": 0.7, "H10": 0.6}
    for name, center in BALMER.items():
        m.line_absorption(center, widths[name] * width_scale * _jit(rng, 0.85, 1.15), depth * depths[name], eta=0.6)


def _gen_wd_da(rng, wave):
    teff = rng.uniform(7000, 40000)
    m = _Model(wave, _planck(wave, teff))
    # Balmer lines are strongest near 12 000 K and fade for hotter and cooler DAs
    depth = rng.uniform(0.35, 0.7) * np.exp(-0.5 * (np.log(teff / 12500.0) / 0.6) ** 2)
    _wd_balmer(m, rng, max(depth, 0.12), rng.uniform(0.75, 1.35))
    return m, "STAR", "WD"


def _gen_wd_db(rng, wave):
    teff = rng.uniform(12000, 30000)
    m = _Model(wave, _planck(wave, teff))
    base = rng.uniform(0.12, 0.35)
    for line in HE_I:
        m.line_absorption(line, rng.uniform(20, 60), base * _jit(rng, 0.6, 1.2), eta=0.5)
    return m, "STAR", "WD"


def _balmer_star(m: _Model, rng: np.random.Generator, fwhm: tuple[float, float], depth: tuple[float, float]):
    base_fwhm = rng.uniform(*fwhm)
    base_depth = rng.uniform(*depth)
    for name, center in BALMER.items():
        scale = 0.8 if name in ("Ha",) else 1.0
        m.line_absorption(center, base_fwhm * _jit(rng, 0.85, 1.15), base_depth * scale * _jit(rng, 0.9, 1.1), 0.4)


def _metals(m: _Model, rng: np.random.Generator, strength: float) -> None:
    """Metal lines of FGK stars, all scaled by one ``strength`` in [0, 1]."""
    m.line_absorption(CA_K, rng.uniform(12, 22), min(0.9, 0.2 + 0.7 * strength) * _jit(rng, 0.9, 1.1))
    m.line_absorption(CA_H, rng.uniform(12, 22), min(0.9, 0.15 + 0.7 * strength) * _jit(rng, 0.9, 1.1))
    m.line_absorption(G_BAND, rng.uniform(12, 20), 0.45 * strength * _jit(rng))
    for line in MG_B:
        m.line_absorption(line, rng.uniform(3, 5), 0.5 * strength * _jit(rng))
    for line in NA_D:
        m.line_absorption(line, rng.uniform(3, 5), 0.55 * strength * _jit(rng))
    for line in FE_LINES:
        m.line_absorption(line, rng.uniform(2, 4), 0.2 * strength * _jit(rng))
    for line in CA_TRIPLET:
        m.line_absorption(line, rng.uniform(3, 5), 0.35 * strength * _jit(rng))


def _normal_star(rng, wave, teff: tuple, balmer_fwhm: tuple, balmer_depth: tuple, metals: tuple):
    """An A-K star: blackbody continuum, Balmer absorption and metal lines; the types differ only in the ranges
    drawn from (hotter: broader, deeper Balmer lines and weaker metals). Returns the model and its temperature."""
    t = rng.uniform(*teff)
    m = _Model(wave, _planck(wave, t))
    _balmer_star(m, rng, balmer_fwhm, balmer_depth)
    _metals(m, rng, rng.uniform(*metals))
    return m, t


def _gen_a_star(rng, wave):
    m, _ = _normal_star(rng, wave, (7500, 10000), (10, 30), (0.35, 0.65), (0.0, 0.15))
    return m, "STAR", f"A{rng.integers(0, 8)}V"


def _gen_f_star(rng, wave):
    m, _ = _normal_star(rng, wave, (6000, 7500), (6, 15), (0.2, 0.45), (0.2, 0.45))
    return m, "STAR", f"F{rng.integers(0, 10)}"


def _gen_g_star(rng, wave):
    m, _ = _normal_star(rng, wave, (5200, 6000), (4, 8), (0.1, 0.25), (0.45, 0.7))
    return m, "STAR", f"G{rng.integers(0, 10)}"


def _gen_k_star(rng, wave):
    m, teff = _normal_star(rng, wave, (3900, 5200), (3, 6), (0.05, 0.15), (0.65, 0.95))
    m.line_absorption(5110.0, rng.uniform(150, 250), rng.uniform(0.05, 0.2))  # MgH depression
    if teff < 4400:  # late K: first, weak TiO (why K stars confuse the M-giant and carbon tasks)
        _tio(m, rng, rng.uniform(0.03, 0.15))
    return m, "STAR", f"K{rng.integers(0, 8)}"


def _gen_cv(rng, wave):
    teff = rng.uniform(9000, 25000)
    cont = _planck(wave, teff)
    m = _Model(wave, cont)
    if rng.random() < 0.5:  # the red donor shows through in the red: M-dwarf continuum with TiO
        donor = _m_star(rng, wave, dwarf=True)
        frac = rng.uniform(0.1, 0.6) * float(np.interp(7500, wave, cont))
        donor_flux = donor.total() / float(np.interp(7500, wave, donor.total())) * frac
        m.continuum = cont + donor_flux
    if rng.random() < 0.3:  # low-state CV: the white dwarf's broad Balmer troughs around the emission
        _wd_balmer(m, rng, rng.uniform(0.1, 0.3), 1.0)
    ew_ha = rng.uniform(20, 150)
    fwhm_kms = rng.uniform(800, 2500)
    double = rng.random() < 0.5
    separation = rng.uniform(400, 1200)
    decrement = {"Ha": 1.0, "Hb": rng.uniform(0.4, 0.8), "Hg": 0.0, "Hd": 0.0, "He": 0.0, "H8": 0.0}
    decrement["Hg"] = decrement["Hb"] * rng.uniform(0.5, 0.8)
    decrement["Hd"] = decrement["Hg"] * rng.uniform(0.6, 0.9)
    decrement["He"] = decrement["Hd"] * 0.7
    decrement["H8"] = decrement["He"] * 0.7
    for name, rel in decrement.items():
        center = BALMER[name]
        fwhm = _kms_to_fwhm(center, fwhm_kms)
        if double:
            m.double_peaked(center, fwhm, ew_ha * rel, separation)
        else:
            m.emission_line(center, fwhm, ew_ha * rel)
    ew_hb = ew_ha * decrement["Hb"]
    for line in HE_I:
        m.emission_line(line, _kms_to_fwhm(line, fwhm_kms), ew_hb * rng.uniform(0.08, 0.3))
    if rng.random() < 0.4:  # magnetic / high-excitation CVs: He II 4686 and the Bowen blend
        m.emission_line(HE_II_4686, _kms_to_fwhm(HE_II_4686, fwhm_kms), ew_hb * rng.uniform(0.1, 0.8))
        m.emission_line(4645.0, 15.0, ew_hb * rng.uniform(0.0, 0.3))
    return m, "STAR", "CV"


def _gen_cv_outburst(rng, wave):
    teff = rng.uniform(15000, 35000)
    m = _Model(wave, _planck(wave, teff))
    # optically thick disc: broad, shallow Balmer absorption, sometimes with narrow emission cores
    for name, center in BALMER.items():
        m.line_absorption(center, rng.uniform(30, 80), rng.uniform(0.08, 0.3), eta=0.4)
    if rng.random() < 0.6:
        for name in ("Ha", "Hb", "Hg"):
            m.emission_line(BALMER[name], rng.uniform(8, 20), rng.uniform(1, 10))
    if rng.random() < 0.3:
        m.emission_line(HE_II_4686, rng.uniform(10, 25), rng.uniform(1, 5))
    for line in HE_I[:3]:
        m.line_absorption(line, rng.uniform(15, 40), rng.uniform(0.0, 0.1))
    return m, "STAR", "A0"


def _gen_qso(rng, wave):
    alpha = rng.uniform(-2.0, -1.0)  # f_lambda ~ lambda**alpha in the rest frame
    cont = (wave / 3000.0) ** alpha
    cont = cont + rng.uniform(0.0, 0.2) * cont * _gauss(wave, 2700.0, 1200.0)  # Fe II + Balmer continuum bump
    m = _Model(wave, cont)
    fwhm_kms = rng.uniform(2500, 8000)
    broad = {
        1215.67: (50, 100),
        1240.81: (5, 20),
        1399.8: (5, 10),
        1549.06: (20, 60),
        1640.42: (2, 5),
        1908.73: (10, 25),
        2799.12: (20, 50),
        4102.89: (2, 8),
        4341.68: (5, 20),
        4862.68: (30, 100),
        6564.61: (150, 400),
    }
    for center, (lo, hi) in broad.items():
        m.emission_line(center, _kms_to_fwhm(center, fwhm_kms), rng.uniform(lo, hi))
    ew_o3 = rng.uniform(3, 30)
    m.emission_line(5008.24, _kms_to_fwhm(5008.24, 500), ew_o3)
    m.emission_line(4960.29, _kms_to_fwhm(4960.29, 500), ew_o3 / 3.0)
    m.emission_line(3728.5, _kms_to_fwhm(3728.5, 500), rng.uniform(1, 6))
    m.emission_line(3426.9, _kms_to_fwhm(3426.9, 500), rng.uniform(0.5, 3))
    forest = wave < 1215.67
    if forest.any():  # Lyman-alpha forest: many narrow absorbers blueward of Lyman alpha
        for center in rng.uniform(wave[0], 1215.0, size=60):
            m.line_absorption(float(center), rng.uniform(0.5, 2.0), rng.uniform(0.2, 0.9))
    return m, "QSO", ""


def _gen_galaxy(rng, wave):
    young = rng.uniform(0.0, 0.6)
    cont = (1 - young) * _planck(wave, rng.uniform(4000, 5000)) + young * _planck(wave, rng.uniform(8000, 15000))
    m = _Model(wave, cont)
    m.absorb(1.0 / (1.0 + np.exp((wave - 4000.0) / 25.0)), rng.uniform(0.1, 0.4) * (1 - young))  # 4000 Å break
    _metals(m, rng, rng.uniform(0.2, 0.6) * (1 - young))
    _balmer_star(m, rng, (8, 20), (0.03, 0.25))
    if rng.random() < 0.7:  # star formation (or AGN): narrow nebular lines
        fwhm = rng.uniform(100, 300)
        ew_ha = rng.uniform(5, 80)
        lines = {
            6564.61: 1.0,
            6585.27: rng.uniform(0.1, 0.6),
            4862.68: rng.uniform(0.2, 0.4),
            4341.68: rng.uniform(0.08, 0.15),
            5008.24: rng.uniform(0.1, 1.0),
            3728.48: rng.uniform(0.3, 1.5),
            6718.29: rng.uniform(0.1, 0.3),
            6732.68: rng.uniform(0.08, 0.25),
        }
        lines[6549.86] = lines[6585.27] / 3.0
        lines[4960.29] = lines[5008.24] / 3.0
        for center, rel in lines.items():
            m.emission_line(center, _kms_to_fwhm(center, fwhm), ew_ha * rel)
    return m, "GALAXY", "STARFORMING" if m.emission.any() else ""


_GENERATORS: dict[str, Callable] = {
    "cv": _gen_cv,
    "cv_outburst": _gen_cv_outburst,
    "carbon": _gen_carbon,
    "s_star": _gen_s_star,
    "m_giant": _gen_m_giant,
    "m_dwarf": _gen_m_dwarf,
    "wd_da": _gen_wd_da,
    "wd_db": _gen_wd_db,
    "a_star": _gen_a_star,
    "f_star": _gen_f_star,
    "g_star": _gen_g_star,
    "k_star": _gen_k_star,
    "qso": _gen_qso,
    "galaxy": _gen_galaxy,
}
assert set(_GENERATORS) == set(KINDS)


def _draw_redshift(kind: str, rng: np.random.Generator) -> float:
    if kind == "qso":
        return float(rng.uniform(0.3, 2.0))
    if kind == "galaxy":
        return float(rng.uniform(0.05, 0.3))
    sigma_kms = 150.0 if kind.startswith("cv") else 60.0
    return float(rng.normal(0.0, sigma_kms) / _C_KMS)


# ---------------------------------------------------------------------------------------------------------------
# Observation: broadening, reddening, calibration, noise, bad pixels


def _broaden(fine_loglam_step: float, flux: np.ndarray, resolution: float) -> np.ndarray:
    """Gaussian instrumental profile of resolving power R on a uniform log10 grid (constant width in pixels)."""
    sigma_log10 = 1.0 / resolution / 2.3548 / np.log(10.0)
    sigma_pix = sigma_log10 / fine_loglam_step
    half = int(np.ceil(4 * sigma_pix))
    x = np.arange(-half, half + 1)
    kernel = np.exp(-0.5 * (x / sigma_pix) ** 2)
    kernel /= kernel.sum()
    padded = np.pad(flux, half, mode="edge")
    return np.convolve(padded, kernel, mode="valid")


def _noise_shape(wave: np.ndarray) -> np.ndarray:
    """Relative noise per pixel: LAMOST-like low throughput at the blue end, the dichroic near 5800 Å, far red."""
    shape = 1.0 + 2.5 * np.exp(-(wave - 3700.0) / 250.0).clip(max=50)
    shape += 0.6 * np.exp(-0.5 * ((wave - 5800.0) / 40.0) ** 2)
    shape += 1.0 * np.exp((wave - 9000.0) / 300.0).clip(max=50)
    return shape


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


def _designation(ra: float, dec: float) -> str:
    h = ra / 15.0
    hh = int(h)
    mm = int((h - hh) * 60)
    ss = ((h - hh) * 60 - mm) * 60
    sign = "+" if dec >= 0 else "-"
    ad = abs(dec)
    dd = int(ad)
    dm = int((ad - dd) * 60)
    ds = ((ad - dd) * 60 - dm) * 60
    return f"LAMOST J{hh:02d}{mm:02d}{ss:05.2f}{sign}{dd:02d}{dm:02d}{ds:04.1f}"


def make_spectrum(
    kind: str,
    *,
    seed: int,
    snr: float = 30.0,
    redshift: float | None = None,
    wavelength: np.ndarray | None = None,
    resolution: float = DEFAULT_RESOLUTION,
) -> Spectrum:
    """A synthetic spectrum of ``kind`` (one of :data:`KINDS`), the same for the same arguments.

    ``snr`` is the median per-pixel S/N of the result; ``redshift`` overrides the drawn one (stars get a small radial
    velocity, QSOs z 0.3-2, galaxies z 0.05-0.3); ``wavelength`` (vacuum Å, increasing) defaults to the LAMOST LRS
    grid, pass a survey's native grid to write that survey's layout without resampling. The metadata looks like a
    LAMOST file's (ids, class, subclass, redshift, S/N per band); ``meta.variant`` is ``"synthetic"``.
    """
    if kind not in _GENERATORS:
        raise ValueError(f"unknown synthetic kind {kind!r}; choose one of {', '.join(KINDS)}")
    if not snr > 0:
        raise ValueError(f"snr must be positive, got {snr}")
    wave = lamost_grid() if wavelength is None else np.asarray(wavelength, dtype=np.float64)
    if wave.ndim != 1 or wave.size < 10 or not np.all(np.diff(wave) > 0):
        raise ValueError("wavelength must be a 1-D strictly increasing array of at least 10 values")

    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, KINDS.index(kind), 20240601])
    z = _draw_redshift(kind, rng) if redshift is None else float(redshift)

    # model on a fine log grid in the rest frame, 4x finer than LAMOST, padded for the broadening kernel
    step = 2.5e-5
    lo = np.log10(wave[0] / (1 + z)) - 0.004
    hi = np.log10(wave[-1] / (1 + z)) + 0.004
    fine_rest = 10.0 ** np.arange(lo, hi + step, step)
    model, pclass, psub = _GENERATORS[kind](rng, fine_rest)
    fine_flux = _broaden(step, model.total(), resolution)
    fine_obs = fine_rest * (1 + z)
    flux_model = np.interp(wave, fine_obs, fine_flux)

    # interstellar reddening (A_lambda ~ 1/lambda, normalised at 5500 Å) and a smooth calibration distortion
    ebv = rng.uniform(0.0, 0.4)
    flux_model = flux_model * 10.0 ** (-0.4 * 3.1 * ebv * (5500.0 / wave - 1.0))
    x = (wave - wave.mean()) / (np.ptp(wave) / 2.0)
    flux_model = flux_model * (1.0 + rng.uniform(-0.15, 0.15) * x + rng.uniform(-0.1, 0.1) * (x**2 - 1 / 3))
    flux_model = np.clip(flux_model, 0.0, None)
    flux_model *= 10.0 ** rng.uniform(1.5, 3.5) / max(float(np.median(flux_model)), 1e-30)

    # noise: photon-like term + floor, shaped by throughput, scaled so the median S/N is ``snr``
    sigma = np.sqrt(np.abs(flux_model) + 0.05 * np.median(flux_model)) * _noise_shape(wave)
    sigma *= np.median(flux_model / sigma) / snr
    flux = flux_model + rng.normal(size=wave.size) * sigma
    ivar = 1.0 / sigma**2
    mask = np.zeros(wave.size, dtype=bool)
    mask[rng.choice(wave.size, size=int(rng.integers(2, 8)), replace=False)] = True
    if rng.random() < 0.3:
        start = int(rng.integers(0, wave.size - 10))
        mask[start : start + int(rng.integers(3, 10))] = True
    flux[mask] = 0.0
    ivar[mask] = 0.0

    key = _crc(f"{kind}:{seed}")
    ra = float(rng.uniform(0, 360))
    dec = float(rng.uniform(-10, 70))
    z_err = 1e-5 if kind not in ("qso", "galaxy") else 1e-4
    z_pipe = z if redshift is not None else z + float(rng.normal(0, z_err))
    bands = {"u": (3700, 4000), "g": (4000, 5500), "r": (5500, 7000), "i": (7000, 8500), "z": (8500, 9200)}
    # 0.0 for a band the grid does not cover: the LAMOST header keywords need a number
    snr_bands = {b: median_snr(flux, ivar, mask | (wave < a) | (wave >= c)) or 0.0 for b, (a, c) in bands.items()}
    lmjd = 56000 + key % 4000
    meta = SpectrumMeta(
        survey="lamost",
        variant="synthetic",
        data_release="synthetic",
        pipeline_version=f"spec_vetting.synthetic v{SYNTHETIC_VERSION}",
        ids={
            "obsid": 800_000_000 + key % 100_000_000,
            "designation": _designation(ra, dec),
            "planid": f"SYN{key % 100000:05d}",
            "lmjd": lmjd,
            "spid": 1 + key % 16,
            "fiberid": 1 + (key >> 8) % 250,
        },
        ra=ra,
        dec=dec,
        pipeline_class=pclass,
        pipeline_subclass=psub,
        redshift=z_pipe,
        redshift_err=z_err,
        snr=median_snr(flux, ivar, mask) or 0.0,
        snr_bands=snr_bands,
    )
    return Spectrum(wavelength=wave.copy(), flux=flux, ivar=ivar, mask=mask, flux_unit="", meta=meta)
