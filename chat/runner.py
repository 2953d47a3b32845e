"""Where agent turns run: as tasks on the server's own event loop, started after commit.

`make run` serves one daphne process, whose event loop runs the turns; a sync caller (a view, a
service) reaches that loop through asgiref. With PARLEY_RUN_INLINE (tests), the turn runs to
the end inside the commit hook, which makes service tests deterministic.
"""

import asyncio
import contextvars
import logging
from functools import partial

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction

logger = logging.getLogger("parley.runner")

_tasks: set[asyncio.Task] = set()


def start_turn_on_commit(conversation_id: int) -> None:
    transaction.on_commit(partial(start_turn, conversation_id))


def start_turn(conversation_id: int) -> None:
    from chat.runtime import run_turn

    if getattr(settings, "PARLEY_RUN_INLINE", False):
        async_to_sync(run_turn)(conversation_id)
    else:
        async_to_sync(_spawn)(conversation_id)


async def _spawn(conversation_id: int) -> None:
    from chat.runtime import run_turn

    # A fresh context: the turn must not inherit the request's asgiref executor, which is
    # gone once the response is sent.
    task = asyncio.get_running_loop().create_task(
        run_turn(conversation_id), context=contextvars.Context()
    )
    # The loop keeps only weak references to tasks; hold a strong one until it is done.
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def wait_for_turns() -> None:
    """Wait until every turn started in this process has finished (used by tests)."""
    while _tasks:
        await asyncio.gather(*list(_tasks), return_exceptions=True)
