"""Where turns run, and how crashed ones are found again.

- Single process (default): turns run as tasks on the server's own event loop.
- REDIS_URL set: turns are sent over the channel layer to `manage.py worker`
  processes, any number of them, on any machine.

Either way a turn is dispatched after the commit that created it, and its runner must first
claim the turn's lease (chat.turns.claim), so a duplicate dispatch is harmless. A process that
runs its turns itself takes the lease in that very commit instead (chat.turns._set_running)
and starts the turn's task with it (run_claimed_on_commit). Channel layers
deliver at most once and processes die, so every server and worker process also sweeps, every
PARLEY_SWEEP_SECONDS, for running turns whose lease has lapsed and dispatches them again.

Apps add background jobs of their own to the sweep (`every_sweep`, from AppConfig.ready()):
question deadlines, webhook deliveries. They run on a loop of their own beside the turn
sweep, so a slow job never delays finding a lost turn, and `run_jobs_soon_on_commit` runs them
at once after a commit instead of at the next sweep.
"""

import asyncio
import contextlib
import contextvars
import gc
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from asgiref.sync import async_to_sync
from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from chat import events
from config.threads import sync_threads

if TYPE_CHECKING:
    from chat.turns import Claim

logger = logging.getLogger("parley.runner")

_loop: asyncio.AbstractEventLoop | None = None  # the serving process's event loop
_tasks: dict[int, asyncio.Task] = {}
# Dispatched while this process's task was still finishing: run again after it, with the
# lease already taken for it, if any (run_claimed_on_commit).
_again: dict[int, "Claim | None"] = {}
_sweeper: asyncio.Task | None = None
_jobs: list[Callable[[], None]] = []  # every_sweep
_jobs_task: asyncio.Task | None = None
_jobs_wake: asyncio.Event | None = None
_stopping = False  # shutting down: no new turns start here


def dispatch_on_commit(conversation_id: int) -> None:
    # robust: a dispatch that fails is logged; the sweep dispatches the turn again.
    transaction.on_commit(partial(dispatch, conversation_id), robust=True)


def runs_turns_here() -> bool:
    """Whether this process runs its turns itself (a server without Redis, not stopping): a
    transaction that starts a turn may then take its lease for this process's runner
    (chat.turns._set_running) and have it run on commit (run_claimed_on_commit)."""
    return _loop is not None and not settings.REDIS_URL and not _stopping


def run_claimed_on_commit(claim: "Claim") -> None:
    """After commit, run the turn whose lease this transaction took for this process, with
    its first request's history read now, in the transaction (chat.runtime.with_history)."""
    from chat.runtime import with_history

    claim = with_history(claim)
    conversation_id = claim.lease.conversation_id
    transaction.on_commit(
        partial(_loop.call_soon_threadsafe, partial(spawn, conversation_id, claim)), robust=True
    )


def cancel_local_on_commit(conversation_id: int) -> None:
    """Stop the turn's task at once if it runs in this process (the lease fences it anyway)."""
    if _loop is not None:
        transaction.on_commit(
            partial(_loop.call_soon_threadsafe, _cancel, conversation_id), robust=True
        )


def dispatch(conversation_id: int) -> None:
    """Get a runner for the turn. Called from sync code, after commit."""
    if settings.REDIS_URL:
        async_to_sync(_send_to_workers)(conversation_id)
    elif _loop is not None:
        _loop.call_soon_threadsafe(spawn, conversation_id)
    else:
        # No server in this process (a management command): a server's sweep will run it.
        logger.info("conversation %s will be picked up by a server's sweep", conversation_id)


async def _send_to_workers(conversation_id: int) -> None:
    await get_channel_layer().send(
        settings.PARLEY_RUN_CHANNEL, {"type": "run.turn", "conversation_id": conversation_id}
    )


def spawn(conversation_id: int, claim: "Claim | None" = None) -> None:
    """Start the turn as a task on this loop, unless this process already runs it. `claim`:
    the lease this process already took for it (run_claimed_on_commit); else the task
    claims the turn itself."""
    from chat.runtime import hand_back, run_turn

    if conversation_id in _tasks:
        # The running task may be past its last check: run once more when it is done (with
        # the newest lease taken for it, if any).
        _again[conversation_id] = claim or _again.get(conversation_id)
        return
    if _stopping:
        # The sweep of another process (or a worker after this one) will take it; a lease
        # taken for this process is given back so that it need not lapse first.
        if claim is None:
            return
        work = hand_back(claim)
    else:
        work = run_turn(conversation_id, claim=claim)
    # A fresh context: the turn must not inherit a request's asgiref executor, which is gone
    # once the response is sent.
    task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
    _tasks[conversation_id] = task
    task.add_done_callback(lambda _: _finished(conversation_id))


def _finished(conversation_id: int) -> None:
    _tasks.pop(conversation_id, None)
    if conversation_id in _again:
        spawn(conversation_id, _again.pop(conversation_id))


def _cancel(conversation_id: int) -> None:
    task = _tasks.get(conversation_id)
    if task is not None:
        task.cancel()


async def sweep_once() -> int:
    from chat.turns import stale_runs

    stale = await database_sync_to_async(stale_runs)()
    for conversation_id in stale:
        if settings.REDIS_URL:
            await _send_to_workers(conversation_id)
        else:
            spawn(conversation_id)
    return len(stale)


async def _sweep_forever() -> None:
    while True:
        try:
            found = await sweep_once()
            if found:
                logger.info("sweep dispatched %s unheld turn(s)", found)
        except Exception:
            logger.exception("sweep failed")
        await asyncio.sleep(settings.PARLEY_SWEEP_SECONDS)


def every_sweep(job: Callable[[], None]) -> None:
    """Run the sync `job` (it may use the database) on every sweep of every server and worker
    process. Each process runs it, so a job must be safe to run concurrently."""
    if job not in _jobs:
        _jobs.append(job)


def run_jobs_soon_on_commit() -> None:
    """After commit, run the sweep's jobs in this process now rather than at the next sweep
    (a process without a runner loop leaves them to the sweep)."""
    if _loop is not None:
        transaction.on_commit(partial(_loop.call_soon_threadsafe, _wake_jobs), robust=True)


def _wake_jobs() -> None:
    if _jobs_wake is not None:
        _jobs_wake.set()


async def run_jobs_once() -> None:
    # On a thread of their own: a job may wait on the network (a webhook delivery, for up to
    # WEBHOOK_TIMEOUT), and on the process's shared sync thread every socket's session read
    # and connect waited for it.
    async with sync_threads.context():
        for job in list(_jobs):
            try:
                await database_sync_to_async(job)()
            except Exception:
                logger.exception("sweep job %s failed", getattr(job, "__qualname__", job))


async def _jobs_forever() -> None:
    while True:
        _jobs_wake.clear()
        await run_jobs_once()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_jobs_wake.wait(), timeout=settings.PARLEY_SWEEP_SECONDS)


def start_in_this_loop() -> None:
    """Adopt the running loop as this process's runner loop and start sweeping (once)."""
    global _loop
    if _loop is not None:
        return
    global _sweeper, _jobs_task, _jobs_wake
    _loop = asyncio.get_running_loop()
    events.start_outbox()
    _sweeper = _loop.create_task(_sweep_forever(), context=contextvars.Context())
    _jobs_wake = asyncio.Event()
    _jobs_task = _loop.create_task(_jobs_forever(), context=contextvars.Context())
    _loop.run_in_executor(None, warm_up)


def warm_up() -> None:
    """Load now what turns and pages need: the provider's SDK and the client this process's
    turns use (a second or more; not on the event loop, where it would stall every request
    and socket meanwhile) and the project's templates. Then move everything loaded so far
    out of the garbage collector's way (gc.freeze): its full passes, every few seconds on a
    busy process, then walk what requests leave behind rather than the ~190,000 objects of
    the code (measured on a 2-core machine: ~5 ms pauses instead of ~100 ms). Called in a
    thread when a process starts serving."""
    from django.template.loader import get_template

    from chat import providers

    providers.preload(_loop)
    for directory in settings.TEMPLATES[0]["DIRS"]:
        for path in sorted(directory.rglob("*.html")):
            get_template(path.relative_to(directory).as_posix())
    gc.collect()
    gc.freeze()


async def shutdown(grace: float = 5.0) -> None:
    """Stop running turns here at once and hand them over: each cancelled turn gives its
    lease back as it ends (chat.runtime.run_turn), so the sweep of any other process, or
    with Redis any other worker (sent the turn again here), takes it over without waiting
    for the lease to lapse. Called when the process is asked to stop (SIGTERM)."""
    global _stopping
    _stopping = True
    if _sweeper is not None:
        _sweeper.cancel()
    if _jobs_task is not None:
        _jobs_task.cancel()
    running = dict(_tasks)
    for task in running.values():
        task.cancel()
    if running:
        await asyncio.wait(running.values(), timeout=grace)
        logger.info("handed back %s running turn(s) on shutdown", len(running))
    if settings.REDIS_URL:
        for conversation_id in running:
            try:
                await _send_to_workers(conversation_id)
            except Exception:
                logger.exception(
                    "could not hand conversation %s to another worker", conversation_id
                )
    # The handed-back turns' last changes, among others, still to reach open pages.
    await events.flush_outbox(grace)


class RunnerLifecycle:
    """ASGI middleware: the first event a process serves starts its runner loop and sweep.

    `python -m config.serve` and `manage.py worker` start both at startup; this is the
    fallback for a plain `daphne config.asgi:application` (daphne implements no ASGI
    lifespan), where the first connection is the earliest moment there is a loop to adopt.
    """

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        start_in_this_loop()
        return await self.application(scope, receive, send)


class RunWorker(events.DirectDispatch, AsyncConsumer):
    """The `parley-runs` channel's consumer in `manage.py worker`: runs the turns sent to it."""

    async def run_turn(self, message: dict) -> None:
        spawn(int(message["conversation_id"]))


async def wait_for_turns() -> None:
    """Wait until every turn started in this process has finished (tests, benchmarks)."""
    while _tasks:
        await asyncio.gather(*list(_tasks.values()), return_exceptions=True)
