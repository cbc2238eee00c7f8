"""The batch pipeline: job files, sharding, Dask submission, resume, run manifests and catalog writing.

Entry points: :func:`load_job` / :func:`job_from_dict` for a :class:`JobConfig`, and :func:`run_job` to run it
(what `spec-vet run` does). Dask is imported only when shards are submitted.
"""

from ..errors import RunFailedError
from .config import JobConfig, job_from_dict, load_job
from .runner import RunOutcome, run_job

__all__ = ["JobConfig", "RunFailedError", "RunOutcome", "job_from_dict", "load_job", "run_job"]
