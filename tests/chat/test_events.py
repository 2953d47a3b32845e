"""Events leave sync code without waiting for the event loop."""

import asyncio
import threading

from channels.layers import get_channel_layer

from core import events


async def test_sync_code_hands_its_events_to_the_loop_and_goes_on():
    """A request's or a turn's thread sends an event while the loop is busy: the send returns
    at once, and the event arrives once the loop is free."""
    layer = get_channel_layer(events.EVENTS_LAYER)
    channel = await layer.new_channel()
    await layer.group_add("conversation.1", channel)
    events.bind_loop(asyncio.get_running_loop())
    try:
        sent = threading.Event()

        def commit():
            events.send("conversation.1", {"type": "chat.changed", "seq": 7})
            sent.set()

        thread = threading.Thread(target=commit)
        thread.start()
        # The loop is blocked here: a send that waited for it would not return.
        assert sent.wait(5)
        thread.join()
        event = await asyncio.wait_for(layer.receive(channel), 5)
    finally:
        events.bind_loop(None)
    assert event == {"type": "chat.changed", "seq": 7}


async def test_without_a_bound_loop_an_event_is_sent_before_returning():
    layer = get_channel_layer(events.EVENTS_LAYER)
    channel = await layer.new_channel()
    await layer.group_add("conversation.2", channel)
    await asyncio.to_thread(events.send, "conversation.2", {"type": "chat.changed", "seq": 1})
    assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "chat.changed", "seq": 1}
