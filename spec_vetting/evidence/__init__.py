"""Evidence beyond the spectrum: each candidate cross-matched once with external HATS catalogs (Gaia DR3 first)
through lsdb, positions carried between epochs with the catalog's proper motions, and derived quantities (M_G)
with their errors, or the reason when they are absent.

Layer: below the engines, above the spectra. What it finds travels with the candidate
(``Candidate.evidence``) and reaches an engine only through ``InspectionContext.evidence``.

- :mod:`.gaia_columns`: the names of the Gaia columns of a verdict row, the one place they are spelled;
- :mod:`.sources`: what a run asks for (``--evidence NAME=CATALOG``; the job file's ``evidence:``) and the columns
  each source gives;
- :mod:`.motion`: epochs (a spectrum's MJD, a catalog's reference epoch) and proper-motion propagation;
- :mod:`.photometry`: M_G and its error, null with the reason when the parallax is not significant;
- :mod:`.loci`: the white-dwarf and main sequences of the Gaia colour-magnitude diagram, and when a verdict
  contradicts significant astrometry;
- :mod:`.crossmatch`: opening and checking a HATS catalog, and the lsdb cross-match itself.
"""
