"""Per-task scores: for each task a hand-written sum of a few physically motivated terms (documented in each
function) whose sign is meant to say YES (> 0) or NO (< 0), or the reason the data cannot support one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .diagnostics import Measurement


@dataclass
class TaskScore:
    """What a task's scorer concluded: a score, or why the data cannot support one."""

    score: float | None
    abstain_reason: str | None = None
    yes_text: str = ""  # one sentence used as the justification when the verdict is YES
    no_text: str = ""  # ... and when it is NO
    cited: list[str] = field(default_factory=list)  # keys of the measurements the score read


def _v(m: Measurement, default: float = 0.0) -> float:
    return default if m.value is None else float(m.value)


def _usable(m: Measurement, max_error: float) -> bool:
    return m.ok and (m.error is None or m.error <= max_error)


def _clip(x: float, lo: float, hi: float) -> float:
    return float(min(hi, max(lo, x)))


def _abstain_unless_any(
    m: dict[str, Measurement], keys: tuple[str, ...], max_error: float, what: str
) -> TaskScore | None:
    """The data-quality gate every task starts with: at least one of its key diagnostics must be usable (measured
    with an error at most ``max_error``); otherwise no score, and the reason names each window and what failed."""
    if any(_usable(m[k], max_error) for k in keys):
        return None
    parts = []
    for x in (m[k] for k in keys):
        if not x.ok:
            parts.append(f"{x.name}: {x.why}")
        else:
            parts.append(f"{x.name} = {x.value:.2f} ± {x.error:.2f} (error above {max_error:g}: S/N too low)")
    return TaskScore(None, f"{what} cannot be measured: " + "; ".join(parts))


def score_cv(m: dict[str, Measurement]) -> TaskScore:
    """Balmer emission (negative EW) in Hα and Hβ, helped by He I/He II emission, broad or double-peaked profiles.

    Terms: Hα emission per 10 Å, Hβ emission per 5 Å (a CV's decrement is flat, so Hβ weighs more than in an M
    dwarf's chromosphere), He I 5876 and He II 4686 per 2 Å, +1 for FWHM ≥ 15 Å (≥ 700 km/s), +1 for two peaks,
    -1.5 when [S II] is strong against Hα (H II region), -3 when Hβ emission comes without the stronger Hα
    emission of every CV; offset -2 so a normal star sits near -3. A second branch scores a disc in outburst.
    """
    if (abstain := _abstain_unless_any(m, ("ew_ha", "ew_hb"), 4.0, "the Balmer emission diagnostics")) is not None:
        return abstain
    e_ha = -_v(m["ew_ha"]) if _usable(m["ew_ha"], 4.0) else 0.0
    e_hb = -_v(m["ew_hb"]) if _usable(m["ew_hb"], 4.0) else 0.0
    s = 0.5 * _clip(e_ha / 10.0, -1.0, 5.0) + 0.8 * _clip(e_hb / 5.0, -1.0, 5.0)
    cited = [k for k in ("ew_ha", "ew_hb") if _usable(m[k], 4.0)]
    if e_hb > 0 and _usable(m["ew_hg"], 4.0):
        s += 0.2 * _clip(-_v(m["ew_hg"]) / 4.0, 0.0, 4.0)
        cited.append("ew_hg")
    for k in ("ew_hei5876", "ew_heii4686"):
        if _usable(m[k], 2.0):
            s += 0.3 * _clip(-_v(m[k]) / 2.0, -1.0, 3.0)
            cited.append(k)
    widths = [_v(m[k]) for k in ("fwhm_ha", "fwhm_hb") if m[k].ok]
    if widths:
        cited += [k for k in ("fwhm_ha", "fwhm_hb") if m[k].ok]
        if max(widths) >= 15.0:
            s += 1.0
        elif max(widths) < 8.0:
            s -= 0.5
    if m["dp_ha"].ok and _v(m["dp_ha"]) > 300.0:
        s += 1.0
        cited.append("dp_ha")
    if _usable(m["ew_ha"], 4.0) and e_hb > 5.0 and e_ha < 0.3 * e_hb:
        # Hβ emission without the stronger Hα a CV always shows: a redshifted line of something else
        s -= 3.0
        cited.append("ew_ha")
    if _usable(m["ew_sii"], 2.0) and -_v(m["ew_sii"]) > max(2.0, 0.2 * e_ha):
        s -= 1.5
        cited.append("ew_sii")
    s -= 2.0
    outburst, ob_cited = _cv_outburst(m)
    if outburst is not None and outburst > s:
        return TaskScore(
            outburst,
            yes_text="broad, shallow Balmer absorption with merged higher-order lines in a hot continuum, as in a "
                     "dwarf nova in outburst",
            no_text="the Balmer lines lack the strong emission of a cataclysmic variable and their absorption is "
                    "not the broad, shallow kind of a disc in outburst",
            cited=cited + ob_cited,
        )
    return TaskScore(
        s,
        yes_text="strong Balmer emission" + (" with broad profiles" if widths and max(widths) >= 15 else "")
        + " as in an accreting cataclysmic variable",
        no_text="the Balmer lines lack the strong, broad emission of a cataclysmic variable",
        cited=cited,
    )


def _cv_outburst(m: dict[str, Measurement]) -> tuple[float | None, list[str]]:
    """A disc in outburst: Balmer absorption of intermediate width (FWHM 25-65 Å; A stars are narrower, white
    dwarfs broader), shallow (EW(Hβ ±50 Å) below 18 Å; a white dwarf's is deeper), higher-order lines merged
    (H9 contrast below 0.15) and a hot continuum (α below -1.8). Each violated limit costs; 2 when all hold."""
    keys = ("fwhm_hb_abs", "ew_hb_wide", "h9_contrast", "slope")
    if not all(m[k].ok for k in keys) or not _usable(m["ew_hb_wide"], 4.0) or not _usable(m["h9_contrast"], 0.1):
        return None, []
    fwhm, ew, h9, slope = (_v(m[k]) for k in keys)
    s = 1.5
    s -= 0.15 * max(0.0, 25.0 - fwhm) + 0.3 * max(0.0, fwhm - 65.0)
    s -= 0.3 * max(0.0, ew - 18.0) + 0.3 * max(0.0, 4.0 - ew)
    s -= 20.0 * max(0.0, h9 - 0.15)
    s -= 2.0 * max(0.0, slope + 1.8)
    return s, list(keys)


def _weighted(m: dict[str, Measurement], weights: dict[str, float], max_error: float) -> tuple[float | None, list]:
    used = [(k, w) for k, w in weights.items() if _usable(m[k], max_error)]
    if not used:
        return None, []
    total = sum(w for _, w in used)
    return sum(w * _v(m[k]) for k, w in used) / total, [k for k, _ in used]


def score_carbon(m: dict[str, Measurement]) -> TaskScore:
    """Mean C2 Swan band depth (5165 and 5636 weigh 1, 4737 weighs 0.5) above 0.12, ×12; +CN 4216; −TiO 7054.

    The C2 heads absorb blueward; the TiO 5167 head and Mg b absorb redward, so an M or K star gives a negative
    C2 5165 depth.
    """
    if (abstain := _abstain_unless_any(m, ("c2_5165", "c2_5636"), 0.08, "the C2 Swan band heads")) is not None:
        return abstain
    c2, cited = _weighted(m, {"c2_5165": 1.0, "c2_5636": 1.0, "c2_4737": 0.5}, 0.08)
    s = 12.0 * (c2 - 0.12)
    if _usable(m["cn_4216"], 0.1):
        s += 2.0 * _clip(_v(m["cn_4216"]), -0.2, 0.5)
        cited.append("cn_4216")
    if _usable(m["tio_7054"], 0.05) and _v(m["tio_7054"]) > 0.15 and c2 < 0.1:
        s -= 2.0
        cited.append("tio_7054")
    return TaskScore(
        s,
        yes_text="deep C2 Swan bands absorbing blueward of their heads, the signature of a carbon star",
        no_text="the C2 Swan band heads at 4737/5165/5636 Å show little or reversed absorption",
        cited=cited,
    )


def score_ss(m: dict[str, Measurement]) -> TaskScore:
    """Mean ZrO band depth (6474 and 5551 weigh 1, 4640 weighs 0.5) above 0.08, ×10; a cool (red) continuum.

    Hot stars' Hα wings depress 6478-6520 Å a little, so a blue continuum (α < 1) costs up to 1.5; C2 bands
    (a carbon star, not an S star) cost 4 per 0.1 of depth above 0.1.
    """
    if (abstain := _abstain_unless_any(m, ("zro_6474", "zro_5551"), 0.08, "the ZrO bands")) is not None:
        return abstain
    zro, cited = _weighted(m, {"zro_6474": 1.0, "zro_5551": 1.0, "zro_4640": 0.5}, 0.08)
    s = 10.0 * (zro - 0.08)
    if m["slope"].ok:
        s += 0.5 * _clip(_v(m["slope"]) - 1.0, -3.0, 2.0)
        cited.append("slope")
    if _usable(m["tio_6159"], 0.05):
        cited.append("tio_6159")
    if _usable(m["c2_5165"], 0.08) and _v(m["c2_5165"]) > 0.1:
        s -= 4.0 * (_v(m["c2_5165"]) - 0.1) * 10
        cited.append("c2_5165")
    return TaskScore(
        s,
        yes_text="ZrO bands absorbing redward of their 5551/6474 Å heads in a cool star, the mark of an S star",
        no_text="the ZrO bands at 5551/6474 Å are absent or weaker than an S star's",
        cited=cited,
    )


def score_gm(m: dict[str, Measurement]) -> TaskScore:
    """Mean TiO depth (7054, 6159, 8432 bands) above 0.1, ×8, −2 more when below 0.08 (not an M star); a red
    continuum (α above 1) adds up to 2.25; gravity: Na I 8183/8195 EW above 2.5 Å costs 1.2 per Å and CaH 6830
    depth above 0.25 costs 10 per unit (dwarfs), Ca II 8542 EW adds 0.4 per Å around 2 Å (giants); C2 bands
    (carbon star) cost 20 per unit depth above 0.1, ZrO bands (S star) 30 per unit mean depth above 0.03.
    """
    if (abstain := _abstain_unless_any(m, ("tio_7054", "tio_6159"), 0.05, "the TiO bands")) is not None:
        return abstain
    tio, cited = _weighted(m, {"tio_7054": 1.0, "tio_6159": 1.0, "tio_8432": 1.0}, 0.05)
    s = 8.0 * (tio - 0.1)
    if tio < 0.08:
        s -= 2.0
    if m["slope"].ok:  # cool: M giants are red (α > 1 between 5400 and 8130 Å); K stars bluer
        s += 1.5 * _clip(_v(m["slope"]) - 1.0, -2.0, 1.5)
        cited.append("slope")
    if _usable(m["ew_nai"], 1.0):
        s -= 1.2 * max(0.0, _v(m["ew_nai"]) - 2.5)
        cited.append("ew_nai")
    if _usable(m["ew_cat"], 1.0):
        s += 0.4 * _clip(_v(m["ew_cat"]) - 2.0, -2.0, 2.0)
        cited.append("ew_cat")
    if _usable(m["cah_6830"], 0.05):
        s -= 10.0 * max(0.0, _v(m["cah_6830"]) - 0.25)
        cited.append("cah_6830")
    if _usable(m["c2_5165"], 0.08) and _v(m["c2_5165"]) > 0.1:
        s -= 20.0 * (_v(m["c2_5165"]) - 0.1)
        cited.append("c2_5165")
    zro, zro_keys = _weighted(m, {"zro_6474": 1.0, "zro_5551": 1.0}, 0.08)
    if zro is not None and zro > 0.03:
        s -= 30.0 * (zro - 0.03)
        cited += zro_keys
    return TaskScore(
        s,
        yes_text="strong TiO bands with weak gravity-sensitive Na I, as in an M giant",
        no_text="not an M giant: " + ("TiO bands too weak for an M star" if tio < 0.08 else
                                      "the gravity-sensitive features point to a dwarf or the TiO bands are weak"),
        cited=cited,
    )


def score_wd(m: dict[str, Measurement]) -> TaskScore:
    """DA: Balmer FWHM above 30 Å (0.08 per Å), EW above 22 Å (0.1 per Å), merged higher-order lines (H9 contrast
    below 0.3), a hot continuum (α < -1.5). DB: He I 4471/5876 absorption in a hot star without Balmer lines.
    The score is the larger of the two.
    """
    if (abstain := _abstain_unless_any(m, ("ew_hb", "ew_hg"), 5.0, "the Balmer line profiles")) is not None:
        return abstain
    cited = [k for k in ("ew_hb", "ew_hg") if _usable(m[k], 5.0)]
    ew = float(np.mean([_v(m[k]) for k in cited]))
    widths = [k for k in ("fwhm_hb", "fwhm_hg", "fwhm_hd") if m[k].ok]
    cited += widths
    fwhm = float(np.mean([_v(m[k]) for k in widths])) if widths else None
    hot = hot_db = 0.0
    if m["slope"].ok:
        hot = 0.5 * _clip(-_v(m["slope"]) - 1.5, -2.0, 2.0)
        # a DB is hot (12-30 kK): a red continuum rules out the He I reading of cool stars' metal lines
        hot_db = _clip(-_v(m["slope"]) - 1.5, -3.0, 1.0)
        cited.append("slope")
    sa = (0.08 * (fwhm - 30.0) if fwhm is not None else -1.0) + 0.1 * (ew - 22.0) + hot
    if _usable(m["ew_ha_core"], 3.0) and _v(m["ew_ha_core"]) < -3.0:
        # Balmer emission: an accreting system (CV) or a chromosphere, not a bare white dwarf
        sa -= 0.3 * (-_v(m["ew_ha_core"]) - 3.0)
        cited.append("ew_ha_core")
    if _usable(m["h9_contrast"], 0.15):
        sa += 2.0 * _clip(0.3 - _v(m["h9_contrast"]), -0.5, 0.3)
        cited.append("h9_contrast")
    sb = hot_db - 0.2 * max(ew, 0.0)
    for k, w in (("ew_hei4471", 0.8), ("ew_hei5876", 0.5)):
        if _usable(m[k], 1.5):
            sb += w * _clip(_v(m[k]) - 1.0, -2.0, 4.0)
    if sb > sa:
        cited += [k for k in ("ew_hei4471", "ew_hei5876") if _usable(m[k], 1.5)]
    return TaskScore(
        max(sa, sb),
        yes_text=("very broad, deep Balmer lines with merged higher-order members in a hot continuum, as in a DA "
                  "white dwarf") if sa >= sb else "He I absorption in a hot continuum without hydrogen, as in a DB "
                                                   "white dwarf",
        no_text="the Balmer lines are too narrow or too weak for a white dwarf's pressure-broadened profiles",
        cited=cited,
    )
