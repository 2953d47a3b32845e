"""docs/developers/decisions/0002-consumer-dispatch.md: what SignedInConsumer.dispatch relies
on in Channels. Each check names the part that changed."""

import inspect

from channels.consumer import AsyncConsumer, get_handler_name

from chat.live.consumers import SignedInConsumer


def test_every_message_goes_through_dispatch():
    source = inspect.getsource(AsyncConsumer.__call__)
    assert "self.dispatch" in source, (
        "Channels' AsyncConsumer.__call__ no longer hands messages to self.dispatch: "
        "SignedInConsumer.dispatch (unknown events ignored) would not run"
    )
    assert SignedInConsumer.dispatch is not AsyncConsumer.dispatch


def test_channels_dispatch_does_only_the_lookup_the_clean_up_and_the_call():
    """What our override replaces, line for line; anything new there is ours to take on."""
    body = [
        line.strip()
        for line in inspect.getsource(AsyncConsumer.dispatch).splitlines()[1:]
        if line.strip() and not line.strip().startswith(('"""', "Works out"))
    ]
    assert body == [
        "handler = getattr(self, get_handler_name(message), None)",
        "if handler:",
        "await aclose_old_connections()",
        "await handler(message)",
        "else:",
        'raise ValueError("No handler for message type %s" % message["type"])',
    ], "Channels' AsyncConsumer.dispatch changed: compare it with SignedInConsumer.dispatch"


def test_a_type_maps_to_its_handler_name():
    assert get_handler_name({"type": "chat.append"}) == "chat_append"
    assert get_handler_name({"type": "websocket.receive"}) == "websocket_receive"
