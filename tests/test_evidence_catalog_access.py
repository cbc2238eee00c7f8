"""An evidence catalog's errors name their cause, its cache follows its content, and a night whose matches are all
cached opens no catalog and imports no lsdb.

Oracles: the causes are made here (a missing path, a plain folder, a refused port, an HTTP server serving a folder
without HATS files, a protocol whose package is not installed); the changed catalog is rewritten with a source
moved by a known amount.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("lsdb")

from spec_vetting.errors import ConfigError  # noqa: E402
from spec_vetting.evidence.crossmatch import open_catalog  # noqa: E402
from spec_vetting.evidence.sources import EvidenceSource  # noqa: E402
from spec_vetting.synthetic.hats import write_hats  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _gaia(source_id, ra, dec):
    return {"source_id": source_id, "ra": ra, "dec": dec, "parallax": 5.0, "parallax_error": 0.1, "pmra": 0.0,
            "pmdec": 0.0, "phot_g_mean_mag": 15.0, "bp_rp": 1.0, "ruwe": 1.0}


def _open(catalog):
    return open_catalog(EvidenceSource(name="gaia", catalog=str(catalog)))


@pytest.fixture
def http_folder(tmp_path):
    """An HTTP server on localhost serving ``tmp_path/www``."""
    www = tmp_path / "www"
    www.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(www)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_each_failure_names_its_cause(tmp_path, http_folder):
    with pytest.raises(ConfigError, match=r"no such path \(.*nothing\)"):
        _open(tmp_path / "nothing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="not a HATS catalog: the folder has no collection.properties"):
        _open(tmp_path / "plain")
    (tmp_path / "file.csv").write_text("ra,dec\n")
    with pytest.raises(ConfigError, match="is a file, not a HATS catalog folder"):
        _open(tmp_path / "file.csv")
    # port 9 (discard) on this machine: nothing listens, the connection is refused at once
    with pytest.raises(ConfigError, match=r"not reachable: http://127\.0\.0\.1:9/gaia_dr3"):
        _open("http://127.0.0.1:9/gaia_dr3")
    www, url = http_folder
    (www / "empty").mkdir()
    with pytest.raises(ConfigError, match="not a HATS catalog: the URL answers but has no"):
        _open(f"{url}/empty")
    for protocol, package in (("s3", "s3fs"), ("abfs", "adlfs")):
        if importlib.util.find_spec(package) is None:
            with pytest.raises(ConfigError, match=f"needs a filesystem package that is not installed: pip install "
                                                  f"{package}"):
                _open(f"{protocol}://bucket/gaia_dr3")


def test_a_catalog_over_http_is_described_like_the_same_folder(tmp_path, http_folder):
    www, url = http_folder
    write_hats(pd.DataFrame([_gaia(1, 10.0, 5.0)]), www / "gaia", margin_arcsec=10.0)
    local, remote = _open(www / "gaia"), _open(f"{url}/gaia")
    # the same properties and partitions; the data file's stamp is the server's Last-Modified instead of an mtime
    footer = "gaia/dataset/_metadata\n"
    assert remote.identity.split(footer)[0] == local.identity.split(footer)[0] and "hats_nrows=1" in remote.identity
    assert '"Last-Modified"' in remote.identity.split(footer)[1] and '"mtime"' in local.identity.split(footer)[1]
    assert (remote.ra_column, remote.dec_column, remote.margin_arcsec, remote.has_pm) == ("ra", "dec", 10.0, True)


@dataclass
class Cand:
    candidate_id: str
    ra: float | None
    dec: float | None
    mjd: float | None = 59580.5
    path: str | None = None
    evidence: dict = field(default_factory=dict)


def test_a_rewritten_catalog_is_matched_again(tmp_path):
    from spec_vetting.pipeline.evidence import attach_evidence, open_sources

    catalog, root = tmp_path / "gaia", tmp_path / "root"
    write_hats(pd.DataFrame([_gaia(1, 10.0, 5.0), _gaia(2, 20.0, 5.0)]), catalog, margin_arcsec=10.0)
    cands = [Cand("a", 10.0, 5.0), Cand("b", 20.0, 5.0)]
    first = attach_evidence(root, "n1", open_sources([EvidenceSource(name="gaia", catalog=str(catalog))]), cands)
    assert first["gaia"]["matched_now"] == 2 and cands[0].evidence["gaia_source_id"] == 1
    # the same path, republished: source 1 replaced by source 7, 0.5" away (same row count)
    write_hats(pd.DataFrame([_gaia(7, 10.0 + 0.5 / 3600, 5.0), _gaia(2, 20.0, 5.0)]), catalog, margin_arcsec=10.0)
    cands = [Cand("a", 10.0, 5.0), Cand("b", 20.0, 5.0)]
    second = attach_evidence(root, "n2", open_sources([EvidenceSource(name="gaia", catalog=str(catalog))]), cands)
    assert second["gaia"]["matched_now"] == 2 and second["gaia"]["cached"] == 0
    assert cands[0].evidence["gaia_source_id"] == 7


def test_an_all_cached_night_opens_no_catalog_and_imports_no_lsdb(tmp_path):
    from spec_vetting.pipeline.evidence import attach_evidence, open_sources

    catalog, root = tmp_path / "gaia", tmp_path / "root"
    write_hats(pd.DataFrame([_gaia(1, 10.0, 5.0)]), catalog, margin_arcsec=10.0)
    attach_evidence(root, "n1", open_sources([EvidenceSource(name="gaia", catalog=str(catalog))]),
                    [Cand("a", 10.0, 5.0)])
    script = textwrap.dedent(f"""
        import json, sys
        from dataclasses import dataclass, field
        from pathlib import Path
        from spec_vetting.evidence.sources import EvidenceSource
        from spec_vetting.pipeline.evidence import attach_evidence, open_sources

        @dataclass
        class Cand:
            candidate_id: str
            ra: float
            dec: float
            mjd: float = 59580.5
            path: str = None
            evidence: dict = field(default_factory=dict)

        cand = Cand("a", 10.0, 5.0)
        opened = open_sources([EvidenceSource(name="gaia", catalog={str(catalog)!r})])
        summary = attach_evidence(Path({str(root)!r}), "n2", opened, [cand])
        print(json.dumps({{"cached": summary["gaia"]["cached"], "source": cand.evidence["gaia_source_id"],
                          "lsdb": "lsdb" in sys.modules, "opened": opened[0]._catalog is not None}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"cached": 1, "source": 1, "lsdb": False, "opened": False}


def test_a_candidate_without_any_epoch_is_named_in_the_summary(tmp_path):
    """No mjd in the list, none in the file name, no file: compared at the catalog's epoch, counted and named."""
    from spec_vetting.pipeline.evidence import attach_evidence, open_sources

    catalog = tmp_path / "gaia"
    write_hats(pd.DataFrame([_gaia(1, 10.0, 5.0)]), catalog, margin_arcsec=10.0)
    cands = [Cand("dated", 10.0, 5.0), Cand("undated", 10.0, 5.0, mjd=None), Cand("nowhere", None, None, mjd=None)]
    summary = attach_evidence(tmp_path / "root", "n1", open_sources([EvidenceSource(name="gaia",
                                                                                    catalog=str(catalog))]), cands)
    assert summary["gaia"]["epoch_unknown"] == {"count": 1, "candidates": ["undated"]}
    assert cands[1].evidence["gaia_source_id"] == 1 and cands[1].evidence["position_source"] == "list"
    assert cands[2].evidence["gaia_reason"].startswith("no ra/dec for the candidate")
