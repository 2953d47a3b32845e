"""Getting turns a runner, after commit, without knowing which runner: the workers' queue
when REDIS_URL is set, else this process's own runner (chat.engine.runner binds it when the
process starts serving). A process with neither (a management command) leaves the turn to a
server's sweep, which finds every running turn that no runner holds."""

import logging
from dataclasses import dataclass
from functools import partial
from typing import Protocol
from uuid import uuid4

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

logger = logging.getLogger("parley.runner")

RUN_TURN = "run.turn"


@dataclass(frozen=True)
class Next:
    """What a transition of the turn state machine asks for once it has committed."""

    # Conversations whose turn needs a runner.
    run: tuple[int, ...] = ()
    # Conversations whose turn ended: a runner of this process still on it stops at once (the
    # lease fences any other: its next write fails).
    cancel: tuple[int, ...] = ()
    # The turns of `run` already claimed for this process's runner (chat.engine.turns.Claim),
    # when it runs its turns itself (claims_here).
    claimed: tuple = ()

    def __or__(self, other: "Next") -> "Next":
        return Next(
            run=self.run + other.run,
            cancel=self.cancel + other.cancel,
            claimed=self.claimed + other.claimed,
        )


NOTHING = Next()


class LocalRunner(Protocol):
    def start_soon(self, conversation_id: int) -> None:
        """From any thread: run the turn on this process's loop."""

    def start_claimed_on_commit(self, claim) -> None:
        """In the transaction that claimed a turn for this runner (a turns.Claim): run it on
        this process's loop once that commits."""

    def cancel_soon(self, conversation_id: int) -> None:
        """From any thread: stop this process's runner of the turn, if it has one."""


_local: LocalRunner | None = None


def bind(runner: LocalRunner | None) -> None:
    """This process's runner (chat.engine.runner, when the process starts serving; None
    when it stops taking turns)."""
    global _local
    _local = runner


def claims_here() -> bool:
    """Whether turns started in this process are claimed for its own runner by the
    transaction that starts them: a server with a runner and no workers' queue."""
    return _local is not None and not settings.REDIS_URL


def on_commit(next: Next) -> None:
    """Act on `next` once the current transaction commits (at once outside one). Robust: a
    dispatch that fails is logged, and the sweep finds the turn.

    A turn claimed for this process's runner has the history of its first model request read
    now, in the transaction that claimed it: call this after the transaction's last change to
    the turn's transcript."""
    claimed = {claim.lease.conversation_id: claim for claim in next.claimed}
    local = _local
    for conversation_id in next.run:
        if (claim := claimed.get(conversation_id)) is not None and local is not None:
            local.start_claimed_on_commit(claim)
        else:
            transaction.on_commit(partial(start, conversation_id), robust=True)
    for conversation_id in next.cancel:
        transaction.on_commit(partial(cancel, conversation_id), robust=True)


def start(conversation_id: int) -> None:
    """Get the turn a runner now (from sync code)."""
    if settings.REDIS_URL:
        async_to_sync(send_to_workers)(conversation_id)
    elif _local is not None:
        _local.start_soon(conversation_id)
    else:
        logger.info("conversation %s will be picked up by a server's sweep", conversation_id)


async def send_to_workers(conversation_id: int) -> None:
    await get_channel_layer().send(
        settings.PARLEY_RUN_CHANNEL, {"type": RUN_TURN, "conversation_id": conversation_id}
    )


async def queue_answers(layer=None) -> None:
    """The turns' channel layer (`layer`, else the configured one) carries a message: one sent
    on a fresh channel comes back. Raises what the layer raises when it does not (with Redis,
    core.errors.REDIS_UNAVAILABLE); waits as long as the layer does."""
    layer = layer or get_channel_layer()
    if layer is None:
        raise LookupError("no channel layer is configured")
    channel = await layer.new_channel()
    token = uuid4().hex
    await layer.send(channel, {"type": "queue.ping", "token": token})
    message = await layer.receive(channel)
    if message.get("token") != token:
        raise ValueError(f"the channel layer returned another message: {message!r}")


def cancel(conversation_id: int) -> None:
    if _local is not None:
        _local.cancel_soon(conversation_id)
