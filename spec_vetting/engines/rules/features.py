"""What the rules engine measures for each Spec-o3 task: the lines and bands an expert reads, and where.

Wavelengths are rest-frame **vacuum** Å (LAMOST, SDSS and DESI all store vacuum wavelengths). Band heads of
molecules that "degrade to the red" (TiO, ZrO, CaH) absorb redward of the head; C2 Swan and CN violet bands degrade
to the violet and absorb blueward of it. That opposite direction is what separates C2 at 5165 Å from the TiO head at
5167 Å, so band windows below sit on the absorbing side and the pseudo-continuum on the other.

``measure_<task>`` reads a task's measurements; ``tasks.py`` pairs them with the zoom windows the engine shows
(what a model would look at), the task's score and its calibration.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...lines import rest
from .diagnostics import (
    Measurement,
    RestSpectrum,
    band_depth,
    continuum_slope,
    double_peak_separation,
    emission_line_ratio,
    equivalent_width,
    line_fwhm,
    snr_per_angstrom,
)

# Vacuum rest wavelengths (Å), from the one line table.
H_ALPHA = rest("H\u03b1")
H_BETA = rest("H\u03b2")
H_GAMMA = rest("H\u03b3")
H_DELTA = rest("H\u03b4")


@dataclass(frozen=True)
class ZoomWindow:
    """A window the engine zooms on, with the label it types into the tool call."""

    label: str
    lo: float
    hi: float


def _balmer_absorption(rs: RestSpectrum) -> dict[str, Measurement]:
    """Broad Balmer absorption profiles (white dwarfs, CVs in outburst, A stars), against far pseudo-continua."""
    hb_c = ((4720.0, 4750.0), (5010.0, 5050.0))
    return {
        "ew_hb_wide": equivalent_width(rs, (4812.0, 4912.0), hb_c, "EW(Hβ ±50 Å)"),
        "fwhm_hb_abs": line_fwhm(rs, H_BETA, 120.0, hb_c, emission=False, name="FWHM(Hβ absorption)"),
        # higher-order Balmer lines: in an A/B star H9 (3836) stands apart from H10 (3798); in a DA they merge
        "h9_contrast": band_depth(rs, (3832.0, 3840.0), ((3816.0, 3824.0), (3852.0, 3860.0)), "H9 contrast"),
    }


def measure_cv(rs: RestSpectrum) -> dict[str, Measurement]:
    ha_c = ((6480.0, 6525.0), (6610.0, 6650.0))
    hb_c = ((4800.0, 4830.0), (4895.0, 4925.0))
    hg_c = ((4285.0, 4312.0), (4370.0, 4395.0))
    ha, hb = (6540.0, 6590.0), (4842.0, 4884.0)
    return {
        "ew_ha": equivalent_width(rs, ha, ha_c, "EW(Hα)"),
        "ew_hb": equivalent_width(rs, hb, hb_c, "EW(Hβ)"),
        "ew_hg": equivalent_width(rs, (4322.0, 4362.0), hg_c, "EW(Hγ)"),
        # a CV's optically thick disc gives a flat decrement (about 1-2); chromospheres and H II regions about 3+
        "balmer_decrement": emission_line_ratio(rs, (ha, ha_c), (hb, hb_c), "Balmer decrement F(Hα)/F(Hβ)"),
        "ew_hei5876": equivalent_width(rs, (5867.0, 5887.0), ((5835.0, 5860.0), (5905.0, 5930.0)), "EW(He I 5876)"),
        "ew_heii4686": equivalent_width(rs, (4677.0, 4697.0), ((4645.0, 4670.0), (4705.0, 4730.0)), "EW(He II 4686)"),
        "ew_sii": equivalent_width(rs, (6712.0, 6740.0), ((6680.0, 6705.0), (6750.0, 6775.0)), "EW([S II] 6718+6733)"),
        "fwhm_ha": line_fwhm(rs, H_ALPHA, 60.0, ha_c, emission=True, name="FWHM(Hα)"),
        "fwhm_hb": line_fwhm(rs, H_BETA, 45.0, hb_c, emission=True, name="FWHM(Hβ)"),
        "fwhm_hg": line_fwhm(rs, H_GAMMA, 40.0, hg_c, emission=True, name="FWHM(Hγ)"),
        "dp_ha": double_peak_separation(rs, H_ALPHA, 40.0, ha_c, name="Hα peak separation"),
        "slope": continuum_slope(rs, (4560.0, 4640.0), (7450.0, 7550.0), "continuum slope α"),
        "snr_ha": snr_per_angstrom(rs, 6480.0, 6650.0, "S/N(Hα region)"),
        **_balmer_absorption(rs),
    }


def measure_carbon(rs: RestSpectrum) -> dict[str, Measurement]:
    return {
        "c2_4737": band_depth(rs, (4705.0, 4736.0), ((4742.0, 4758.0),), "C2 4737 depth"),
        "c2_5165": band_depth(rs, (5125.0, 5163.0), ((5170.0, 5200.0),), "C2 5165 depth"),
        "c2_5636": band_depth(rs, (5600.0, 5634.0), ((5642.0, 5680.0),), "C2 5636 depth"),
        "cn_4216": band_depth(rs, (4150.0, 4213.0), ((4222.0, 4260.0),), "CN 4216 depth"),
        "tio_7054": band_depth(rs, (7080.0, 7140.0), ((7040.0, 7052.0),), "TiO 7054 depth"),
        "tio_5167": band_depth(rs, (5170.0, 5200.0), ((5125.0, 5163.0),), "TiO/Mg 5167 depth"),
        "slope": continuum_slope(rs, (4560.0, 4640.0), (7450.0, 7550.0), "continuum slope α"),
        "snr_green": snr_per_angstrom(rs, 5100.0, 5700.0, "S/N(5100-5700 Å)"),
    }


def measure_ss(rs: RestSpectrum) -> dict[str, Measurement]:
    return {
        "zro_4640": band_depth(rs, (4643.0, 4680.0), ((4600.0, 4638.0),), "ZrO 4640 depth"),
        "zro_5551": band_depth(rs, (5553.0, 5590.0), ((5510.0, 5548.0),), "ZrO 5551 depth"),
        "zro_6474": band_depth(rs, (6478.0, 6520.0), ((6420.0, 6470.0),), "ZrO 6474 depth"),
        "tio_7054": band_depth(rs, (7080.0, 7140.0), ((7040.0, 7052.0),), "TiO 7054 depth"),
        "tio_6159": band_depth(rs, (6162.0, 6230.0), ((6090.0, 6150.0),), "TiO 6159 depth"),
        "c2_5165": band_depth(rs, (5125.0, 5163.0), ((5170.0, 5200.0),), "C2 5165 depth"),
        "slope": continuum_slope(rs, (4560.0, 4640.0), (7450.0, 7550.0), "continuum slope α"),
        "snr_red": snr_per_angstrom(rs, 6400.0, 7150.0, "S/N(6400-7150 Å)"),
    }


def measure_gm(rs: RestSpectrum) -> dict[str, Measurement]:
    return {
        "tio_7054": band_depth(rs, (7080.0, 7140.0), ((7040.0, 7052.0),), "TiO 7054 depth"),
        "tio_6159": band_depth(rs, (6162.0, 6230.0), ((6090.0, 6150.0),), "TiO 6159 depth"),
        "cah_6382": band_depth(rs, (6382.0, 6410.0), ((6350.0, 6378.0),), "CaH 6382 depth"),
        # PMSU CaH2 and CaH3 (Reid, Hawley & Gizis 1995): bands 6814-6846 and 6960-6990 Å against 7042-7046 Å
        # (here the wider 7030-7050 Å); they measure gravity against TiO 7054 (TiO5), strong in dwarfs
        "cah_6830": band_depth(rs, (6814.0, 6846.0), ((7030.0, 7050.0),), "CaH 6830 depth"),
        "cah_6975": band_depth(rs, (6960.0, 6990.0), ((7030.0, 7050.0),), "CaH 6975 depth"),
        "ew_nai": equivalent_width(rs, (8176.0, 8204.0), ((8140.0, 8170.0), (8212.0, 8236.0)), "EW(Na I 8183/8195)"),
        "ew_cat": equivalent_width(
            rs, (8532.0, 8556.0), ((8510.0, 8528.0), (8560.0, 8580.0)), "EW(Ca II 8542)"
        ),
        "ew_cat3": equivalent_width(
            rs, (8652.0, 8677.0), ((8625.0, 8645.0), (8690.0, 8710.0)), "EW(Ca II 8662)"
        ),
        "c2_5165": band_depth(rs, (5125.0, 5163.0), ((5170.0, 5200.0),), "C2 5165 depth"),
        "zro_6474": band_depth(rs, (6478.0, 6520.0), ((6420.0, 6470.0),), "ZrO 6474 depth"),
        "zro_5551": band_depth(rs, (5553.0, 5590.0), ((5510.0, 5548.0),), "ZrO 5551 depth"),
        "tio_8432": band_depth(rs, (8440.0, 8490.0), ((8400.0, 8430.0),), "TiO 8432 depth"),
        # gravity-sensitive atomic lines, stronger in dwarfs (shown; see score_gm for why they are not scored)
        "ew_ki": equivalent_width(rs, (7692.0, 7710.0), ((7680.0, 7690.0), (7715.0, 7725.0)), "EW(K I 7699)"),
        "ew_cai": equivalent_width(rs, (6158.0, 6170.0), ((6150.0, 6156.0), (6172.0, 6178.0)), "EW(Ca I 6162)"),
        "slope": continuum_slope(rs, (5350.0, 5450.0), (8100.0, 8170.0), "continuum slope α"),
        "snr_red": snr_per_angstrom(rs, 6800.0, 8700.0, "S/N(6800-8700 Å)"),
    }


def measure_wd(rs: RestSpectrum) -> dict[str, Measurement]:
    hg_c = ((4200.0, 4225.0), (4460.0, 4490.0))
    hd_c = ((4030.0, 4045.0), (4200.0, 4225.0))
    balmer = _balmer_absorption(rs)
    return {
        "ew_hb": balmer["ew_hb_wide"],
        "ew_hg": equivalent_width(rs, (4301.0, 4381.0), hg_c, "EW(Hγ ±40 Å)"),
        "fwhm_hb": balmer["fwhm_hb_abs"],
        "fwhm_hg": line_fwhm(rs, H_GAMMA, 110.0, hg_c, emission=False, name="FWHM(Hγ absorption)"),
        "fwhm_hd": line_fwhm(rs, H_DELTA, 70.0, hd_c, emission=False, name="FWHM(Hδ absorption)"),
        "h9_contrast": balmer["h9_contrast"],
        "ew_ha_core": equivalent_width(rs, (6550.0, 6580.0), ((6480.0, 6525.0), (6610.0, 6650.0)), "EW(Hα core)"),
        "ew_hei4471": equivalent_width(rs, (4460.0, 4486.0), ((4425.0, 4450.0), (4495.0, 4520.0)), "EW(He I 4471)"),
        "ew_hei5876": equivalent_width(rs, (5866.0, 5886.0), ((5830.0, 5855.0), (5905.0, 5930.0)), "EW(He I 5876)"),
        "ca_k": band_depth(rs, (3927.0, 3940.0), ((3910.0, 3922.0), (3950.0, 3960.0)), "Ca II K depth"),
        "slope": continuum_slope(rs, (4560.0, 4640.0), (6020.0, 6120.0), "continuum slope α"),
        "snr_blue": snr_per_angstrom(rs, 4200.0, 5050.0, "S/N(4200-5050 Å)"),
    }


def nebular_lines(rs: RestSpectrum) -> dict[str, Measurement]:
    """Checks made for every task: narrow forbidden [O III] 5007 emission marks a galaxy, QSO or nebula, not a star."""
    return {
        "ew_oiii5007": equivalent_width(rs, (5002.0, 5015.0), ((4975.0, 4995.0), (5030.0, 5050.0)), "EW([O III] 5007)"),
        "ew_hb_core": equivalent_width(rs, (4852.0, 4873.0), ((4800.0, 4830.0), (4895.0, 4925.0)), "EW(Hβ core)"),
    }
