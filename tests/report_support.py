"""A small catalog whose verdict rows point at real (synthetic) survey files, for the review page's spectrum plot:
LAMOST, SDSS and a DESI coadd target whose TARGETID exceeds 2**53."""

from __future__ import annotations

import json
from pathlib import Path

from test_eval_support import turn_rows, verdict_row, write_catalog


def spectrum_catalog(tmp: Path, n: int = 6):
    """(catalog root, example rows with absolute paths); every candidate gets a cv verdict, the DESI one YES."""
    from spec_vetting.synthetic.examples import write_examples

    items = write_examples(tmp / "examples", n=n, seed=1)
    verdicts, turns = [], []
    for i, item in enumerate(items):
        path = str((tmp / "examples" / item["path"]).resolve())
        target = str(item["target"]) if item["target"] != "" else None
        desi = target is not None
        verdict = "YES" if desi else ("NO" if i % 2 else "UNDECIDED")
        extra = {"survey": "desi" if desi else None, "targetid": int(target) if desi else None,
                 "ra": 126.50239999999997, "dec": -0.0001450149058217, "redshift": -0.0001450149058217}
        verdicts.append(verdict_row(item["candidate_id"], "cv", verdict, label="YES", p_yes=0.6 if desi else None,
                                    path=path, target=target, **extra))
        rows = turn_rows(item["candidate_id"], "cv", "YES" if verdict == "UNDECIDED" else verdict)
        call = {"name": "spectral_visualization_tool",
                "arguments": {"label": "H\u03b1", "wavelength_range": [6500, 6600]}}
        rows[1]["tool_call"] = json.dumps(call)  # as the pipeline stores it: ensure_ascii, "H\\u03b1"
        turns += rows
    return write_catalog(tmp / "cat", verdicts, turns), items
