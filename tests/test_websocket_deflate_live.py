"""permessage-deflate on the conversation websocket, against real daphne through
`config.serve`: a client that offers it as Chromium does gets it with the server's small
windows, its pushes inflate to the same HTML a client without it gets, a client that does not
offer it still works, and a compressed message that inflates past the server's bound closes
that socket only. nginx (deploy/) passes the offer and its answer through."""

import asyncio
import json
import re
import zlib

import pytest

from tests.live_clients import DEFLATE_TAIL, SignedIn, WebSocket, eventually, run
from tests.live_server import LiveServer, Nginx

pytestmark = pytest.mark.live

# What config.serve answers Chromium's offer: the client is asked for the smallest window
# (its own window, config.serve.WINDOW_BITS, is not announced: a receiver takes any smaller).
ACCEPTED = "permessage-deflate; client_no_context_takeover; client_max_window_bits=9"
# Matches no rule of the demo script: the scripted agent echoes it, word by word.
SAID = (
    "Tell me about seas and rivers and lakes, the long way round, with every bend of every "
    "river and every island of every lake, as slowly as you like"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("deflate"), SCRIPTED_AGENT_DELAY="0.02")
    server.set_up_database()
    server.start()
    yield server
    server.stop()


def final_render(socket: WebSocket, message_id: str) -> str:
    """The newest rendering of a finished message that the socket got."""
    found = re.findall(
        rf'<li id="message-{message_id}" class="message message-assistant" '
        r'data-version="\d+" hx-swap-oob="true">.*?</li>',
        "".join(socket.messages),
        re.DOTALL,
    )
    assert found, f"no final rendering of message {message_id}"
    return found[-1]


def draft(socket: WebSocket) -> tuple[str, str]:
    """The streamed draft as the page would have it before its final rendering: its id, and
    its text from the whole draft and the appends after it."""
    text = "".join(socket.messages)
    [(draft_id, first)] = re.findall(r'id="draft-(\d+)">(.*?)</div>', text, re.DOTALL)
    appends = re.findall(rf'<div hx-swap-oob="beforeend:#draft-{draft_id}">(.*?)</div>', text)
    return draft_id, first + "".join(appends)


@pytest.mark.parametrize(
    ("offer", "answer"),
    [
        ("permessage-deflate; client_max_window_bits", ACCEPTED),  # Chromium, Safari
        # No smaller client window on offer.
        ("permessage-deflate", "permessage-deflate; client_no_context_takeover"),
        (
            "permessage-deflate; server_max_window_bits=9; client_max_window_bits",
            "permessage-deflate; server_max_window_bits=9; client_no_context_takeover; "
            "client_max_window_bits=9",
        ),
        (
            "permessage-deflate; server_no_context_takeover; client_max_window_bits",
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
            "client_max_window_bits=9",
        ),
        ("x-webkit-deflate-frame", None),  # not an extension the server knows
    ],
)
def test_the_handshake_settles_the_offer(server, offer, answer):
    async def scenario():
        async with SignedIn(server.url) as browser:
            conversation = await browser.new_conversation()
            await browser.say(conversation, SAID)
            await eventually(lambda: idle(server, conversation), 30, "the reply")
            socket = await browser.open_socket(conversation, deflate=offer)
            try:
                assert socket.extensions == answer
                await eventually(lambda: socket.messages, 10, "the sync's answer")
                assert socket.compressed == [answer is not None]
                assert "You said: “Tell me about seas" in socket.messages[0]
                assert socket.close_code is None
            finally:
                await socket.close()

    run(scenario())


def idle(server, conversation: int) -> bool:
    rows = server.query("SELECT agent_state FROM chat_conversation WHERE id = %s", conversation)
    return rows == [("idle",)]


def test_pushes_inflate_to_what_an_uncompressed_socket_gets(server):
    async def scenario():
        async with SignedIn(server.url) as browser:
            conversation = await browser.new_conversation()
            deflated = await browser.open_socket(conversation, deflate=True)
            plain = await browser.open_socket(conversation, deflate=False)
            try:
                assert deflated.extensions == ACCEPTED
                assert plain.extensions is None
                # Both syncs read before the turn starts, so that both sockets see it stream. A
                # sync of a conversation with nothing in it sends nothing back: there is no
                # answer to wait for, only this moment (each sync was sent already).
                await asyncio.sleep(0.3)
                await browser.say(conversation, SAID)
                await eventually(lambda: idle(server, conversation), 30, "the reply")

                def done(socket: WebSocket) -> bool:
                    return any('data-state="idle"' in m for m in socket.messages[1:])

                await eventually(lambda: done(deflated) and done(plain), 10, "the last pushes")
                assert deflated.close_code is None and plain.close_code is None

                # Every push came compressed, each in context of the ones before it, and
                # together much smaller than their text; the plain socket's are as sent.
                assert len(deflated.messages) >= 10, deflated.messages
                assert all(deflated.compressed) and not any(plain.compressed)
                text = sum(len(m.encode()) for m in deflated.messages)
                assert sum(deflated.wire_sizes) < text / 2
                sizes = [len(m.encode()) for m in plain.messages]
                assert plain.wire_sizes == [size + 2 + 2 * (size >= 126) for size in sizes]

                # The same HTML: the draft as it streamed (a socket may have had its last
                # push a word earlier than the other), then the same finished message.
                draft_id, streamed = draft(deflated)
                plain_id, plain_streamed = draft(plain)
                assert draft_id == plain_id
                assert streamed.startswith("You said: “Tell me about seas")
                assert streamed.startswith(plain_streamed) or plain_streamed.startswith(streamed)
                finished = final_render(deflated, draft_id)
                assert finished == final_render(plain, draft_id)
                assert "as slowly as you like" in finished

                # A catch-up from the start is one push, the same either way.
                late = await browser.open_socket(conversation, deflate=True)
                late_plain = await browser.open_socket(conversation, deflate=False)
                await eventually(lambda: late.messages and late_plain.messages, 10, "catch-ups")
                assert late.messages[0] == late_plain.messages[0]
                assert late.compressed == [True]
                await late.close()
                await late_plain.close()
            finally:
                await deflated.close()
                await plain.close()

    run(scenario())


def test_a_message_that_inflates_too_far_closes_that_socket_only(server):
    async def scenario():
        async with SignedIn(server.url) as browser:
            conversation = await browser.new_conversation()
            bystander = await browser.open_socket(conversation, deflate=True)
            socket = await browser.open_socket(conversation, deflate=True, after=None)
            try:
                # A sync padded to 200 KB deflates to ~200 bytes: within daphne's bound of any
                # message (1 MB), past config.serve's of an inflated one (4 KB).
                compressor = zlib.compressobj(wbits=-9)
                bomb = json.dumps({"type": "sync", "after": 0, "pad": "a" * 200_000})
                data = compressor.compress(bomb.encode()) + compressor.flush(zlib.Z_SYNC_FLUSH)
                socket.send_frame(0x1, data.removesuffix(DEFLATE_TAIL), rsv1=True)
                await eventually(lambda: socket.close_code is not None, 10, "the close")
                assert socket.close_code == 1006  # dropped (autobahn fails a connection so)
                assert not socket.messages

                # The other socket and the server carry on.
                await browser.say(conversation, SAID)
                await eventually(
                    lambda: any("as slowly as you like" in m for m in bystander.messages),
                    30,
                    "the bystander's pushes",
                )
                assert bystander.close_code is None
                assert server.process.poll() is None
            finally:
                await socket.close()
                await bystander.close()

    run(scenario())


def test_nginx_passes_the_offer_and_its_answer(server, tmp_path):
    address = server.url.removeprefix("http://")
    nginx = Nginx(tmp_path / "nginx", web=[address, address], static_root=tmp_path)
    nginx.start()

    async def scenario():
        async with SignedIn(server.url) as browser:
            conversation = await browser.new_conversation()
            await browser.say(conversation, SAID)
            await eventually(lambda: idle(server, conversation), 30, "the reply")
            socket = await browser.open_socket(conversation, deflate=True, url=nginx.url)
            try:
                assert socket.extensions == ACCEPTED
                await eventually(lambda: socket.messages, 10, "the sync's answer")
                assert socket.compressed == [True]
                assert "You said: “Tell me about seas" in socket.messages[0]
            finally:
                await socket.close()

    try:
        run(scenario())
    finally:
        nginx.stop()
