"""The Gaia cross-match on a catalog shaped like the public Gaia DR3 HATS one (DR3 columns, a 10" margin, written
by lsdb), with default settings: a dense field around a star with Barnard's star's motion whose path crosses a
partition border, fast movers crossing borders by both poles and RA 0/360, 1-2" pairs, negative and missing
parallaxes and proper motions, candidates at SDSS and LAMOST epochs.

The oracle is astropy, independent of the code under test: each catalog source moved to each spectrum's epoch by
``SkyCoord.apply_space_motion``, then ``match_to_catalog_sky`` (the nearest) and ``search_around_sky`` (how many)
within 1 arcsec. Every oracle match must be found, with no wrong and no false match.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("lsdb")

from spec_vetting.evidence.crossmatch import match, open_catalog  # noqa: E402
from spec_vetting.evidence.motion import mjd_to_jyear  # noqa: E402
from spec_vetting.evidence.sources import EvidenceSource  # noqa: E402
from spec_vetting.synthetic.hard_field import EPOCH, MARGIN_ARCSEC, hard_field  # noqa: E402
from spec_vetting.synthetic.hats import write_hats  # noqa: E402

RADIUS = 1.0


def astropy_oracle(catalog: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """Per candidate: the nearest source's source_id within 1" at the spectrum's epoch (or None), its separation
    and how many sources were within, by astropy alone."""
    from astropy import units as u
    from astropy.coordinates import Distance, SkyCoord, search_around_sky
    from astropy.time import Time

    pmra = np.nan_to_num(catalog["pmra"].to_numpy(dtype=np.float64))
    pmdec = np.nan_to_num(catalog["pmdec"].to_numpy(dtype=np.float64))
    stars = SkyCoord(ra=catalog["ra"].to_numpy() * u.deg, dec=catalog["dec"].to_numpy() * u.deg,
                     pm_ra_cosdec=pmra * u.mas / u.yr, pm_dec=pmdec * u.mas / u.yr,
                     distance=Distance(10.0, u.pc), radial_velocity=0 * u.km / u.s,
                     obstime=Time(EPOCH, format="jyear"))
    out = pd.DataFrame(index=candidates.index, columns=["source_id", "sep", "n"], dtype=object)
    for mjd, group in candidates.groupby("mjd"):
        moved = stars.apply_space_motion(new_obstime=Time(mjd, format="mjd"))
        moved = SkyCoord(moved.ra, moved.dec)
        here = SkyCoord(group["ra"].to_numpy() * u.deg, group["dec"].to_numpy() * u.deg)
        idx, sep, _ = here.match_to_catalog_sky(moved)
        ci, _, _, _ = search_around_sky(here, moved, RADIUS * u.arcsec)
        n = np.bincount(ci, minlength=len(group))
        for pos, row in enumerate(group.index):
            within = sep[pos].arcsec <= RADIUS
            out.loc[row] = [int(catalog["source_id"].iloc[idx[pos]]) if within else None,
                            sep[pos].arcsec if within else None, int(n[pos])]
    return out


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    catalog, candidates = hard_field(0)
    folder = tmp_path_factory.mktemp("dr3") / "gaia_dr3"
    write_hats(catalog, folder, "gaia", margin_arcsec=MARGIN_ARCSEC, partition_rows=1500, highest_order=9)
    return folder, catalog, candidates, astropy_oracle(catalog, candidates)


def _frame(candidates):
    return pd.DataFrame({"key": np.arange(len(candidates)), "ra": candidates["ra"].to_numpy(),
                         "dec": candidates["dec"].to_numpy(), "jyear": mjd_to_jyear(candidates["mjd"].to_numpy())})


def test_the_catalog_is_shaped_like_the_public_one(field):
    folder, catalog, candidates, oracle = field
    opened = open_catalog(EvidenceSource(name="gaia", catalog=str(folder)))
    assert opened.margin_arcsec == MARGIN_ARCSEC and opened.epoch == 2016.0 and opened.has_pm
    assert len(opened.catalog.get_healpix_pixels()) > 10
    assert {"designation", "ref_epoch", "parallax_over_error", "phot_bp_mean_mag"} <= set(opened.catalog.all_columns)
    # the hard cases are there: negative and missing parallaxes, missing motions, crowding
    assert (catalog["parallax"] < 0).sum() > 100 and catalog["parallax"].isna().sum() > 100
    assert catalog["pmra"].isna().sum() > 100
    barnard = candidates[candidates["kind"] == "barnard"]
    assert set(barnard["mjd"]) & {51630, 52800, 54500} and set(barnard["mjd"]) & {56000, 57200, 58300}
    assert (oracle["n"] >= 2).sum() >= 5  # pairs within the radius


def test_default_settings_find_every_oracle_match_and_nothing_else(field):
    folder, catalog, candidates, oracle = field
    opened = open_catalog(EvidenceSource(name="gaia", catalog=str(folder)))
    result = match(opened, _frame(candidates))
    got = result.frame
    expected = oracle[oracle["source_id"].notna()]
    assert len(expected) > 1000
    # every oracle match found, the same source; no match where the oracle has none
    assert sorted(got.index) == sorted(expected.index)
    assert (got.loc[expected.index, "source_id"].to_numpy() == expected["source_id"].to_numpy().astype(np.int64)).all()
    assert np.allclose(got.loc[expected.index, "sep_arcsec"].to_numpy(), expected["sep"].to_numpy(dtype=float),
                       atol=1e-3)
    assert (got.loc[expected.index, "n_within"].to_numpy() == expected["n"].to_numpy(dtype=int)).all()
    # the fast movers at all six epochs, Barnard's twin among them
    for kind in ("barnard", "north", "south", "dec-30", "ra0"):
        keys = candidates.index[candidates["kind"] == kind]
        assert len(keys) == 6 and set(keys) <= set(got.index), kind
    assert result.beyond_margin > 0 and result.epoch_unknown == []


def test_without_the_search_beyond_the_margin_the_fast_movers_are_lost(field, monkeypatch):
    """The test sees the borders: the partition-and-margin pass alone misses fast movers whose path crosses one."""
    from spec_vetting.evidence import beyond_margin, crossmatch

    folder, catalog, candidates, oracle = field
    movers = candidates[candidates["kind"].isin(["barnard", "north", "south", "dec-30", "ra0"])]
    empty = beyond_margin.BeyondMargin(pd.DataFrame(), 0)
    monkeypatch.setattr(beyond_margin, "search_beyond_margin", lambda *a, **k: empty)
    opened = crossmatch.open_catalog(EvidenceSource(name="gaia", catalog=str(folder)))
    got = crossmatch.match(opened, _frame(movers).assign(key=movers.index.to_numpy())).frame
    assert len(got) < len(movers)
    assert not set(candidates.index[candidates["kind"] == "barnard"]) <= set(got.index)


def test_a_run_with_default_settings_exits_0_and_its_rows_agree_with_the_oracle(field, tmp_path):
    """`spec-vet run --evidence gaia=DIR` as the README gives it, on a list of the hard candidates (the movers at
    SDSS and LAMOST epochs, pairs, field stars with negative or missing parallaxes): exit 0, every row's Gaia
    source the oracle's."""
    from click.testing import CliRunner

    from spec_vetting.catalog.read import read_verdicts
    from spec_vetting.cli import main

    folder, catalog, candidates, oracle = field
    ex = tmp_path / "ex"
    r = CliRunner().invoke(main, ["make-examples", str(ex), "--n", "1", "--seed", "1"])
    assert r.exit_code == 0, r.output
    spectrum = pd.read_csv(ex / "candidates.csv")["path"].iloc[0]
    spectrum = str(ex / spectrum) if not spectrum.startswith("/") else spectrum
    by_id = catalog.set_index("source_id")
    matched_field = oracle[(candidates["kind"] == "field") & oracle["source_id"].notna()]
    plx = by_id.loc[matched_field["source_id"].astype(np.int64), "parallax"].to_numpy()
    picked = [*candidates.index[~candidates["kind"].isin(["field", "empty"])][:40],
              *matched_field.index[plx < 0][:3], *matched_field.index[np.isnan(plx)][:3],
              *candidates.index[candidates["kind"] == "empty"][:3]]
    listed = candidates.loc[picked, ["candidate_id", "ra", "dec", "mjd"]].assign(path=spectrum, task="wd")
    listed.to_csv(tmp_path / "list.csv", index=False)
    r = CliRunner().invoke(main, ["run", "--candidates", str(tmp_path / "list.csv"), "--out", str(tmp_path / "c"),
                                  "--engine", "rules", "--threads", "--workers", "1", "--no-dashboard",
                                  "--no-progress", "--evidence", f"gaia={folder}"])
    assert r.exit_code == 0, r.output
    rows = read_verdicts(tmp_path / "c").to_pandas().set_index("candidate_id")
    assert len(rows) == len(picked)
    for i in picked:
        row, want = rows.loc[candidates.loc[i, "candidate_id"]], oracle.loc[i]
        if want["source_id"] is None:
            assert pd.isna(row["gaia_source_id"]) and row["gaia_n_within"] == 0
            continue
        assert row["gaia_source_id"] == want["source_id"] and row["gaia_n_within"] == want["n"]
        plx = by_id.loc[want["source_id"], "parallax"]
        if not plx > 0:
            assert pd.isna(row["gaia_abs_g"]) and row["gaia_reason"].startswith(
                "no M_G: parallax not positive" if plx < 0 else "no M_G: no parallax")


def test_hats_pixel_trees_run_as_python_only_inside_a_match():
    """The match swaps hats' numba pixel-tree functions for their Python (numba compiles them, uncached, in every
    process); outside the match they are hats' own again. That the answers stay the same is the test above."""
    import hats.pixel_tree.pixel_alignment as alignment

    from spec_vetting.evidence.crossmatch import interpreted_pixel_trees

    compiled = alignment.perform_inner_align_trees
    with interpreted_pixel_trees():
        assert alignment.perform_inner_align_trees is compiled.py_func
    assert alignment.perform_inner_align_trees is compiled
