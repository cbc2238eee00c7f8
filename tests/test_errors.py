"""Every error the package raises on purpose survives pickling (it crosses Dask and process-pool boundaries)."""

from __future__ import annotations

import inspect
import pickle

import pytest

from spec_vetting import errors

CASES = [
    errors.SpectrumReadError("/data/a.fits", "no HDU 1", target=39627866878511337, hint="check the file"),
    errors.ReadTimeoutError("/mnt/stale/a.fits", "no answer after 120 s", hint="check the mount"),
    errors.ReadMemoryError("/data/bomb.fits.gz", "needed more than 1024 MB", hint="raise budgets.read_memory_mb"),
    errors.UnsupportedFormatError("/data/mrs.fits", "LAMOST MRS is not supported"),
    errors.CandidateRowError("list.csv (csv row 3)", "its candidate_id cell is empty"),
    errors.TargetNotFoundError("/data/coadd.fits", "TARGETID 7 is not in the file", target=7),
    errors.TargetNeededError("/data/coadd.fits", "the file holds 2 usable spectra; say which one", hint="7, 8"),
    errors.CandidateListError("list.csv", "bad ra", row=12, hint="use degrees"),
    errors.ImageReadError("test_cv.parquet", "images[0].bytes is not a PNG", row=3, hint="or pass --rerender"),
    errors.EngineError("server said 500", kind="http_500", endpoint="http://127.0.0.1:1/v1"),
    errors.EndpointUnavailableError("gone", endpoint="http://127.0.0.1:2/v1"),
    errors.RenderError("no point in window"),
    errors.PlottingEnvironmentError("matplotlib 3.11.2 is installed"),
    errors.ConfigError("bad option"),
    errors.CatalogReadError("no catalog"),
    errors.NotInCatalogError("no verdict for candidate 'x' task 'cv'"),
    errors.RunLockedError("locked"),
    errors.ShardFailedError("shard failed"),
    errors.RunFailedError("run failed"),
    errors.RunNotStartedError("the openai engine did not start"),
]


def test_every_error_class_is_covered():
    # every public error class (a private base such as _RowError is never raised itself)
    classes = {c for name, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.SpecVettingError) and not name.startswith("_")}
    assert classes - {errors.SpecVettingError} == {type(e) for e in CASES}


@pytest.mark.parametrize("error", CASES, ids=lambda e: type(e).__name__)
def test_error_pickles_with_message_kind_and_fields(error):
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.kind == error.kind
    assert vars(back) == vars(error)


def test_engine_error_keeps_its_own_kind_across_pickling():
    back = pickle.loads(pickle.dumps(errors.EngineError("x", kind="timeout")))
    assert back.kind == "timeout" and errors.EngineError("y").kind == "engine_error"


def test_one_line_joins_a_multi_line_message_and_names_a_silent_exception_by_its_type():
    from spec_vetting.errors import one_line

    assert one_line(OSError("disk full\n  while writing\tpart-3")) == "OSError: disk full while writing part-3"
    assert one_line(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert one_line(ValueError("   ")) == "ValueError"
