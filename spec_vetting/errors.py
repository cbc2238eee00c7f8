"""Typed exceptions. Every message names what failed (file, row, target) and what to do about it."""

from __future__ import annotations


def _rebuild(cls, args: tuple, kwargs: dict, state: dict):
    """Unpickle an error built with keyword arguments (Exception's default pickling passes only the message)."""
    error = cls(*args, **kwargs)
    error.__dict__.update(state)
    return error


def one_line(exc: BaseException) -> str:
    """``exc`` as one line for a log or a message: its type, then its text with every run of white space made one
    space (a multi-line message from a library stays one line); the type alone when it says nothing."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SpecVettingError(Exception):
    """Base class of every error this package raises on purpose.

    Errors cross process boundaries (a Dask worker's shard, a pool's task), so each one pickles: a subclass whose
    constructor takes more than the message sets ``_init`` to its constructor's (args, kwargs).
    """

    #: a short machine-readable kind, recorded as ``error_kind`` in catalogs
    kind = "error"

    def __reduce__(self):
        init = self.__dict__.get("_init")
        if init is None:
            return super().__reduce__()
        args, kwargs = init
        state = {k: v for k, v in self.__dict__.items() if k != "_init"}
        return (_rebuild, (type(self), args, kwargs, state))


class SpectrumReadError(SpecVettingError):
    """A spectrum could not be read: not FITS, truncated, unknown layout, missing HDU or column, no good pixel..."""

    kind = "read_error"

    def __init__(self, path, reason: str, *, target=None, hint: str | None = None):
        self._init = ((path, reason), {"target": target, "hint": hint})
        self.path = str(path)
        self.reason = reason
        self.target = target
        self.hint = hint
        where = self.path if target is None else f"{self.path} (target {target})"
        msg = f"{where}: {reason}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class ReadTimeoutError(SpectrumReadError):
    """Reading the spectrum took longer than the read timeout (a stale network mount, a blocking device)."""

    kind = "read_timeout"


class ReadMemoryError(SpectrumReadError):
    """Reading the spectrum needed more memory than a reader process may use (a damaged or hostile file)."""

    kind = "read_memory"


class CandidateRowError(SpectrumReadError):
    """A row of a candidate list that cannot be vetted as given (an empty id, an id with a control character, a
    pair listed again): its ERROR row names the cause and the rest of the list runs."""

    kind = "bad_candidate"


class UnsupportedFormatError(SpectrumReadError):
    """The file is FITS but no reader recognises its layout (or it is a layout we refuse, like LAMOST MRS)."""

    kind = "unsupported_format"


class TargetNotFoundError(SpectrumReadError):
    """A target asked for (e.g. a DESI TARGETID) is missing from the file or unusable."""

    kind = "target_not_found"


class TargetNeededError(TargetNotFoundError):
    """A file of several usable spectra was read without saying which one (the caller must pass a target)."""


class _RowError(SpecVettingError):
    """An error located in a table file: ``path, row N: reason. hint``."""

    def __init__(self, path, reason: str, *, row: int | None = None, hint: str | None = None):
        self._init = ((path, reason), {"row": row, "hint": hint})
        self.path = str(path)
        self.row = row
        self.reason = reason
        self.hint = hint
        where = self.path if row is None else f"{self.path}, row {row}"
        msg = f"{where}: {reason}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class CandidateListError(_RowError):
    """A candidate list is malformed: missing column, bad value in a row, unreadable table."""

    kind = "candidate_list_error"


class ImageReadError(_RowError):
    """A picture a candidate list carries (a SpecVI-Bench row's ``images`` cell) is unreadable or not a PNG."""

    kind = "image_error"


class RenderError(SpecVettingError):
    """A picture could not be drawn (e.g. no point falls inside the requested window)."""

    kind = "render_error"


class PlottingEnvironmentError(SpecVettingError, ImportError):
    """The installed plotting stack (matplotlib, its FreeType) is not the one the model's pictures were drawn with.

    An installation problem, not a spectrum's: commands stop on it before the first candidate (exit 2), and the
    zoom tool never turns it into an error text for the model."""

    kind = "plotting_environment"


class ConfigError(SpecVettingError):
    """A job file, task file or option is invalid."""

    kind = "config_error"


class EngineError(SpecVettingError):
    """The engine could not produce the next assistant turn (after its own retries)."""

    kind = "engine_error"

    def __init__(self, message: str, *, kind: str | None = None, endpoint: str | None = None):
        self._init = ((message,), {"kind": kind, "endpoint": endpoint})
        if kind:
            self.kind = kind
        self.endpoint = endpoint
        super().__init__(message)


class EndpointUnavailableError(EngineError):
    """The endpoint an inspection was pinned to died; the inspection should be rerun on another one."""

    kind = "endpoint_unavailable"


class CatalogReadError(SpecVettingError):
    """ROOT holds no readable verdict catalog, or not the run asked for."""

    kind = "catalog_read_error"


class NotInCatalogError(CatalogReadError):
    """The catalog has no such candidate, task or turn: the request names what is not there (no rerun fixes it)."""


class RunLockedError(SpecVettingError):
    """Another `spec-vet run` holds the catalog root."""

    kind = "run_locked"


class ShardFailedError(SpecVettingError):
    """A whole shard could not run (engine start failed, output not writable ...); rerun to retry it."""

    kind = "shard_failed"


class RunFailedError(SpecVettingError):
    """The run could not finish; what is done is kept and the same command resumes it."""

    kind = "run_failed"


class RunNotStartedError(SpecVettingError):
    """The run did not start (the engine did not answer, ...): it has no run id and nothing was written; fix the
    cause, then run the same command again."""

    kind = "run_not_started"
