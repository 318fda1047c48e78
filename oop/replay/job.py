"""Compatibility alias: the job loop lives in :mod:`oop.plan.job` (used by the CLI and
:meth:`oop.Stream.sink` alike)."""

from oop.plan.job import Job, JobOptions, JobOutcome, ensure_parent

__all__ = ["Job", "JobOptions", "JobOutcome", "ensure_parent"]
