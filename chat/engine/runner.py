"""Where turns run, and how lost ones are found again.

- Single process (default): turns run as tasks on the server's own event loop.
- REDIS_URL set: turns are sent over the channel layer to `manage.py worker` processes, any
  number of them, on any machine (chat.engine.dispatch).

Either way a turn is dispatched after the commit that started it, and its runner must first
claim the turn's lease (chat.engine.turns.claim), so a duplicate dispatch is harmless. Channel
layers deliver at most once and processes die, so every server and worker process also
sweeps, every PARLEY_SWEEP_SECONDS, for running turns whose lease has lapsed and dispatches
them again.

The runner also runs the background jobs apps register (core.jobs: question deadlines, the
outbox). Each runs on a loop and a thread of its own beside the turn sweep, so a slow job
delays neither finding a lost turn nor another job (slow webhook receivers never hold up a
deadline); core.jobs.jobs_due runs them at once after a commit instead of at the next sweep.
"""

import asyncio
import contextlib
import contextvars
import gc
import logging
from collections.abc import Callable
from functools import partial

from asgiref.sync import ThreadSensitiveContext
from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction

from chat.engine import dispatch, providers, runtime, turns
from chat.errors import ConversationNotFound
from core import events, jobs

logger = logging.getLogger("parley.runner")


class Runner:
    """This process's runner: the turns it runs, its sweep and its background jobs, all on
    one event loop (the server's, or a worker's)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tasks: dict[int, asyncio.Task] = {}
        # Dispatched again while its task was finishing: run once more after it, with the
        # claim taken for that dispatch, if any.
        self.again: dict[int, runtime.Started | None] = {}
        self.stopping = False
        self.job_wakes: list[asyncio.Event] = []  # one per background job (job_forever)
        self.background: list[asyncio.Task] = []

    # dispatch.LocalRunner: called from any thread.
    def start_soon(self, conversation_id: int) -> None:
        self.loop.call_soon_threadsafe(self.spawn, conversation_id)

    def start_claimed_on_commit(self, claim: turns.Claim) -> None:
        """In the transaction that claimed the turn for this runner: read the history of the
        model request the claim started (in that transaction, so it is the one committed), and
        start the turn here once the transaction commits."""
        history = None
        if claim.draft is not None:  # the claim started a model request: read what it sends
            history = runtime.build_history(claim.lease.conversation_id)
        conversation_id = claim.lease.conversation_id
        transaction.on_commit(
            partial(self.loop.call_soon_threadsafe, self.spawn, conversation_id, (claim, history)),
            robust=True,
        )

    def cancel_soon(self, conversation_id: int) -> None:
        self.loop.call_soon_threadsafe(self.cancel, conversation_id)

    def spawn(self, conversation_id: int, started: runtime.Started | None = None) -> None:
        """Start the turn as a task on this loop, unless this process already runs it.
        `started`: the claim already taken for it (start_claimed_on_commit)."""
        if self.stopping:
            # The sweep of another process (or a worker after this one) takes it; a lease
            # taken for this process is given back first, so that it need not lapse.
            if started is not None:
                self.loop.create_task(give_back(started[0].lease), context=contextvars.Context())
            return
        if conversation_id in self.tasks:
            # The running task may be past its last check: run once more when it is done.
            self.again[conversation_id] = started or self.again.get(conversation_id)
            return
        # A fresh context (no request's): the turn's database work runs where Channels runs
        # every consumer's, on the process's sync thread, with its one kept connection.
        task = self.loop.create_task(
            runtime.run_turn(conversation_id, started), context=contextvars.Context()
        )
        self.tasks[conversation_id] = task
        task.add_done_callback(lambda _: self._finished(conversation_id))

    def _finished(self, conversation_id: int) -> None:
        self.tasks.pop(conversation_id, None)
        if conversation_id in self.again:
            self.spawn(conversation_id, self.again.pop(conversation_id))

    def cancel(self, conversation_id: int) -> None:
        task = self.tasks.get(conversation_id)
        if task is not None:
            task.cancel()

    async def sweep_once(self) -> int:
        stale = await database_sync_to_async(turns.stale_runs)()
        for conversation_id in stale:
            if settings.REDIS_URL:
                await dispatch.send_to_workers(conversation_id)
            else:
                self.spawn(conversation_id)
        return len(stale)

    async def sweep_forever(self) -> None:
        while True:
            try:
                if found := await self.sweep_once():
                    logger.info("sweep dispatched %s unheld turn(s)", found)
            except Exception:
                logger.exception("sweep failed")
            await asyncio.sleep(settings.PARLEY_SWEEP_SECONDS)

    async def job_forever(self, job: Callable[[], None]) -> None:
        """Run `job` on every sweep, and when woken, on a thread of its own (asgiref's
        ThreadSensitiveContext), kept for the process's life: a job may wait on the network
        (a webhook receiver that takes its time), and neither another job (a question's
        deadline), nor a turn or a page's push on the process's sync thread, waits with it."""
        wake = asyncio.Event()
        self.job_wakes.append(wake)
        async with ThreadSensitiveContext():
            while True:
                wake.clear()
                try:
                    await database_sync_to_async(job)()
                except Exception:
                    logger.exception("sweep job %s failed", getattr(job, "__qualname__", job))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=settings.PARLEY_SWEEP_SECONDS)

    def wake_jobs(self) -> None:
        for wake in self.job_wakes:
            self.loop.call_soon_threadsafe(wake.set)

    async def shutdown(self, grace: float) -> None:
        """Stop running turns here at once and hand them over: each cancelled turn gives its
        lease back as it ends (runtime.run_turn), so the sweep of any other process, or with
        Redis any other worker (sent the turn again here), takes it over without waiting for
        the lease to lapse."""
        self.stopping = True
        dispatch.bind(None)
        for task in self.background:
            task.cancel()
        running = dict(self.tasks)
        for task in running.values():
            task.cancel()
        if running:
            await asyncio.wait(running.values(), timeout=grace)
            logger.info("handed back %s running turn(s) on shutdown", len(running))
        if settings.REDIS_URL:
            for conversation_id in running:
                try:
                    await dispatch.send_to_workers(conversation_id)
                except Exception:
                    logger.exception(
                        "could not hand conversation %s to another worker", conversation_id
                    )


async def give_back(lease: turns.Lease) -> None:
    """Free a turn's lease at once (turns.release), for another process's sweep."""
    with contextlib.suppress(ConversationNotFound):
        await database_sync_to_async(turns.release)(lease)


_runner: Runner | None = None


def _wake_jobs(**kwargs) -> None:
    """core.jobs.jobs_due: run the jobs now."""
    if _runner is not None:
        _runner.wake_jobs()


def start_in_this_loop() -> None:
    """Adopt the running loop as this process's runner loop and start sweeping (once)."""
    global _runner
    if _runner is not None:
        return
    loop = asyncio.get_running_loop()
    _runner = Runner(loop)
    events.bind_loop(loop)
    if not settings.REDIS_URL:
        dispatch.bind(_runner)
    jobs.jobs_due.connect(_wake_jobs, weak=False, dispatch_uid="parley.runner")
    for work in (_runner.sweep_forever(), *map(_runner.job_forever, jobs.registered())):
        _runner.background.append(loop.create_task(work, context=contextvars.Context()))
    loop.run_in_executor(None, partial(warm_up, loop))


def warm_up(loop: asyncio.AbstractEventLoop) -> None:
    """Load now what turns and pages need, in a thread: the provider's SDK and the client
    this process's turns use (a second or more, which would otherwise stall the event loop at
    the first turn) and the project's templates. Then move everything loaded so far out of the
    garbage collector's way (gc.freeze): its full passes then walk what requests leave behind,
    not the code's objects (measured on a 2-core machine: ~5 ms pauses instead of ~100 ms)."""
    from django.template.loader import get_template

    providers.preload(loop)
    for directory in settings.TEMPLATES[0]["DIRS"]:
        for path in sorted(directory.rglob("*.html")):
            get_template(path.relative_to(directory).as_posix())
    gc.collect()
    gc.freeze()


async def shutdown(grace: float = 5.0) -> None:
    """Called when the process is asked to stop (SIGTERM)."""
    if _runner is not None:
        await _runner.shutdown(grace)


async def wait_for_turns() -> None:
    """Wait until every turn started in this process has finished (tests, benchmarks)."""
    while _runner is not None and _runner.tasks:
        # asyncio.wait, not gather: a gather of tasks that are all done completes without
        # yielding to the loop, so their done callbacks (which take them out of `tasks`)
        # would never run, and this would spin.
        await asyncio.wait(list(_runner.tasks.values()))


class RunnerLifecycle:
    """ASGI middleware: the first event a process serves starts its runner and sweep.

    `python -m config.serve` and `manage.py worker` start both at startup; this is the
    fallback for a plain `daphne config.asgi:application` (daphne implements no ASGI
    lifespan), where the first connection is the earliest moment there is a loop to adopt.
    """

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        start_in_this_loop()
        return await self.application(scope, receive, send)


class RunWorker(AsyncConsumer):
    """The `parley-runs` channel's consumer in `manage.py worker`: runs the turns sent to it."""

    # No channel of its own (Channels gives a consumer none when its alias names no layer):
    # nothing is sent to it but through `parley-runs`, and a private channel's receive would
    # end the consumer, with an error in the log, at every Redis restart the worker rides out.
    channel_layer_alias = None

    async def run_turn(self, message: dict) -> None:
        start_in_this_loop()
        _runner.spawn(int(message["conversation_id"]))
