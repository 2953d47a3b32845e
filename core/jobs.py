"""Background jobs: work an app wants done on every sweep of every server and worker process
(question deadlines, the outbox, purging deleted conversations), and at once after a commit
that made some of it due.

Apps register a job from `AppConfig.ready()` with `every_sweep`. Whatever runs the sweeps
(chat.engine.runner: each job on a thread of its own) runs `registered()` and, on `jobs_due`,
runs them at once rather than at the next sweep. Every process runs every job, so a job must be
safe to run concurrently (the outbox claims its rows by conditional updates). Why not
`django.tasks`: docs/developers/decisions/0003-background-jobs.md.
"""

from collections.abc import Callable

from django.db import transaction
from django.dispatch import Signal

from core.registry import Registry

_jobs: Registry[Callable[[], None]] = Registry("background jobs")

# Sent after a commit that made jobs due (`run_soon_on_commit`).
jobs_due = Signal()


def every_sweep(job: Callable[[], None]) -> None:
    """Run the sync `job` (it may use the database) on every sweep of every process."""
    _jobs.add(job)


def registered() -> list[Callable[[], None]]:
    return list(_jobs)


def run_soon_on_commit() -> None:
    """After commit, have the jobs run now rather than at the next sweep (in a process that
    runs them: others leave them to their sweep)."""
    transaction.on_commit(lambda: jobs_due.send(sender=None), robust=True)
