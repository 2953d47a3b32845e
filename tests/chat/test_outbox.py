"""A serving process's commits hand their events to its event loop's outbox and carry on;
each group gets its events in commit order, and one slow group holds no other
(chat.events.Outbox)."""

import asyncio
import logging
from collections import defaultdict

import pytest

from chat import events


class Layer:
    """A channel layer that records what it is sent; `hold(group)` keeps the next send to
    that group waiting until `release(group)` (the ones after it are not held here)."""

    def __init__(self, fail_first: bool = False) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.open: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.held: set[str] = set()
        self.fail_first = fail_first

    def hold(self, group: str) -> None:
        self.held.add(group)

    def release(self, group: str) -> None:
        self.open[group].set()

    async def group_send(self, group: str, event: dict) -> None:
        if group in self.held:
            self.held.discard(group)
            await self.open[group].wait()
        if self.fail_first:
            self.fail_first = False
            raise ConnectionError("the channel layer is away")
        self.sent.append((group, event))


@pytest.fixture
async def outbox(monkeypatch):
    box = events.Outbox(asyncio.get_running_loop())
    monkeypatch.setattr(events, "_outbox", box)
    yield box
    for task in box.pending:
        task.cancel()


def change(conversation_id: int, seq: int) -> dict:
    return events.conversation_changed(conversation_id, seq)


async def test_a_commit_does_not_wait_for_the_channel_layer_and_each_group_keeps_its_order(
    outbox, monkeypatch
):
    layer = Layer()
    monkeypatch.setattr(events, "get_channel_layer", lambda alias: layer)
    layer.hold("conversation.7")  # a slow send

    def commit_changes():  # in a thread, as after a request's or a turn's commit
        events._send_batch([(7, change(7, 1))])
        events._send_batch([(8, change(8, 1))])
        events._send_to_group("user.3", events.auth_changed(3))
        events._send_batch([(7, change(7, 2)), (8, change(8, 2))])

    await asyncio.wait_for(asyncio.to_thread(commit_changes), 2)  # returned at once
    await asyncio.sleep(0.05)
    # The other groups' events left; conversation 7's second waits for its first.
    assert layer.sent == [
        ("conversation.8", change(8, 1)),
        ("user.3", events.auth_changed(3)),
        ("conversation.8", change(8, 2)),
    ]
    layer.release("conversation.7")
    await outbox.flush(2)
    assert layer.sent[3:] == [("conversation.7", change(7, 1)), ("conversation.7", change(7, 2))]
    assert outbox.pending == set()
    assert outbox.last == {}


async def test_a_send_that_fails_is_logged_and_the_next_events_still_leave(
    outbox, monkeypatch, caplog
):
    layer = Layer(fail_first=True)
    monkeypatch.setattr(events, "get_channel_layer", lambda alias: layer)
    with caplog.at_level(logging.ERROR, logger="parley.events"):
        await asyncio.to_thread(events._send_batch, [(7, change(7, 1))])
        await asyncio.to_thread(events._send_batch, [(7, change(7, 2))])
        await outbox.flush(2)
    assert "could not send chat.changed to conversation.7" in caplog.text
    assert layer.sent == [("conversation.7", change(7, 2))]


async def test_past_its_bound_the_outbox_drops_new_events_and_says_so_once(
    outbox, monkeypatch, caplog
):
    layer = Layer()
    layer.hold("conversation.7")  # a layer that stopped answering
    monkeypatch.setattr(outbox, "MAX_PENDING", 2)
    with caplog.at_level(logging.WARNING, logger="parley.events"):
        for seq in range(5):
            outbox._put(layer, [("conversation.7", change(7, seq))])
    assert len(outbox.pending) == 2
    assert caplog.text.count("dropping new ones") == 1
    layer.release("conversation.7")
    await outbox.flush(2)
    assert layer.sent == [("conversation.7", change(7, 0)), ("conversation.7", change(7, 1))]


async def test_a_process_that_stops_sends_what_its_commits_handed_over_first(outbox, monkeypatch):
    from chat import runner

    monkeypatch.setattr(runner, "_stopping", False)
    layer = Layer()
    layer.hold("conversation.7")  # still on its way when the process is asked to stop
    monkeypatch.setattr(events, "get_channel_layer", lambda alias: layer)
    await asyncio.to_thread(events._send_batch, [(7, change(7, 1))])
    asyncio.get_running_loop().call_later(0.1, layer.release, "conversation.7")

    await runner.shutdown(grace=2)

    assert layer.sent == [("conversation.7", change(7, 1))]
