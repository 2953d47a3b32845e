"""A session ends everywhere at once, against real daphne with
real websocket and server-sent event clients: logout, a password change, deactivation and
token revocation close every websocket and event stream of that credential within 2 s, and
nothing more arrives once it closed. The websocket Origin is checked exactly."""

import asyncio
import re
import time

import httpx
import pytest

from tests.live_clients import (
    EventStream,
    HandshakeRefused,
    WebSocket,
    eventually,
    log_in,
    run,
)
from tests.live_server import LiveServer

pytestmark = pytest.mark.live

WITHIN = 2.0  # seconds from the change's commit to the close


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("sessions"), SCRIPTED_AGENT_DELAY="0.05")
    server.set_up_database()
    server.start()
    yield server
    server.stop()


def change_user(server, username: str, statement: str) -> float:
    """Run `statement` on the user `u` in a fresh process; the time it committed. (Its own
    process has its own in-memory channel layer: only the streams' re-check notices.)"""
    output = server.manage(
        "shell",
        "-c",
        "import time; from django.contrib.auth.models import User; "
        f"u = User.objects.get(username={username!r}); {statement}; print(time.time())",
    )
    return float(output.split()[-1])


def make_user(server, username: str) -> None:
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        f"User.objects.create_user({username!r}, password='pw-{username}-123')",
    )


async def open_all(server, http: httpx.AsyncClient, session: str, token: str):
    """A conversation with a websocket and an event stream on the session, and an event
    stream on the token."""
    api = {"Authorization": f"Bearer {token}"}
    conversation = (await http.post("/api/v1/conversations", json={}, headers=api)).json()
    socket = await WebSocket.connect(
        server.url,
        f"/ws/conversations/{conversation['id']}/",
        {"Origin": server.url, "Cookie": f"sessionid={session}"},
    )
    socket.send(0x1, f'{{"type": "sync", "after": {conversation["seq"]}}}'.encode())
    events_url = f"/api/v1/conversations/{conversation['id']}/events"
    by_session = EventStream(http, events_url)
    by_token = EventStream(httpx.AsyncClient(base_url=server.url, timeout=30), events_url, api)
    await eventually(lambda: by_session.events and by_token.events, 10, "both streams' first event")
    return conversation, socket, by_session, by_token


def http_without_cookies(server) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=30)


async def token_for(server, http: httpx.AsyncClient) -> tuple[str, int]:
    """A token made on the tokens page, and its id."""
    page = (await http.get("/settings/tokens/")).text
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    created = await http.post(
        "/settings/tokens/", data={"name": "live", "csrfmiddlewaretoken": csrf}
    )
    token = re.search(r'value="(parley_[^"]+)"', created.text).group(1)
    token_id = int(re.findall(r"/settings/tokens/(\d+)/revoke/", created.text)[0])
    return token, token_id


async def csrf_post(http: httpx.AsyncClient, path: str) -> httpx.Response:
    return await http.post(
        path, data={"csrfmiddlewaretoken": http.cookies["csrftoken"]}, headers={"Referer": ""}
    )


async def post_with_token(server, conversation_id: int, token: str, text: str) -> httpx.Response:
    async with http_without_cookies(server) as bare:
        return await bare.post(
            f"/api/v1/conversations/{conversation_id}/messages",
            json={"content": text},
            headers={"Authorization": f"Bearer {token}"},
        )


async def post_with_session(http: httpx.AsyncClient, conversation_id: int, text: str):
    return await http.post(
        f"/api/v1/conversations/{conversation_id}/messages",
        json={"content": text},
        headers={"X-CSRFToken": http.cookies["csrftoken"]},
    )


async def start_streaming_turn(server, conversation_id: int, token: str) -> None:
    """Start a streamed reply, so that frames keep coming until something stops them."""
    response = await post_with_token(server, conversation_id, token, "What time is it?")
    assert response.status_code == 200, response.text


async def assert_closed_in_time(socket: WebSocket, committed: float) -> None:
    """Closed within WITHIN of the commit, and nothing came after the close frame until the
    server ended the connection."""
    await eventually(lambda: socket.reading.done(), 5, "the server to end the connection")
    assert socket.close_code == 4401, socket.close_code
    assert socket.closed_at - committed < WITHIN, socket.closed_at - committed
    late = [at for at in socket.received_at if at > socket.closed_at]
    assert not late


def assert_stream_ended_in_time(stream: EventStream, committed: float) -> None:
    assert stream.names()[-1] == "revoked", stream.names()
    assert stream.ended_at - committed < WITHIN, stream.ended_at - committed


def turn_over(stream: EventStream) -> bool:
    """The stream saw a turn run and end (its first state_change is the snapshot at open)."""
    states = [data["state"] for name, data, _ in stream.events if name == "state_change"]
    return len(states) > 1 and states[-1] == "idle"


async def still_streams(stream: EventStream, post) -> str:
    """The stream goes on after the other credential ended: a message posted now with `post`
    comes through it, in a batch read after a fresh check of the stream's own credential. The
    message's text."""
    text = f"Still there? {time.time()}"
    response = await post(text)
    assert response.status_code == 200, response.text

    def came() -> bool:
        return any(name == "message" and data["text"] == text for name, data, _ in stream.events)

    await eventually(lambda: came() or stream.ended_at, 10, "the message on the stream")
    assert stream.ended_at is None, stream.names()
    assert came()
    return text


@pytest.mark.parametrize("how", ["logout", "password change", "deactivation"])
def test_a_session_that_ends_closes_its_websockets_and_streams_within_2_s(server, how):
    username = how.replace(" ", "-")
    make_user(server, username)

    async def scenario() -> dict:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            session = await log_in(http, username, f"pw-{username}-123")
            token, _ = await token_for(server, http)
            conversation, socket, by_session, by_token = await open_all(
                server, http, session, token
            )
            await start_streaming_turn(server, conversation["id"], token)
            await eventually(lambda: len(socket.messages) >= 2, 10, "the turn's first frames")
            if how == "logout":
                response = await csrf_post(http, "/logout/")
                assert response.status_code == 302
                committed = time.time()
            elif how == "password change":
                committed = await asyncio.to_thread(
                    change_user, server, username, "u.set_password('new-pw-42'); u.save()"
                )
            else:
                committed = await asyncio.to_thread(
                    change_user, server, username, "u.is_active = False; u.save()"
                )
            await eventually(lambda: socket.close_code is not None, 5, "the websocket to close")
            await eventually(lambda: by_session.ended_at, 5, "the session's stream to end")
            await assert_closed_in_time(socket, committed)
            assert_stream_ended_in_time(by_session, committed)
            frames_after = sum(1 for at in socket.received_at if at > committed)
            if how == "deactivation":
                # The token's user is inactive: its stream ends too.
                await eventually(lambda: by_token.ended_at, 5, "the token's stream to end")
                assert_stream_ended_in_time(by_token, committed)
            else:
                # A token is not a session: its stream lives on, and carries the next message.
                await eventually(
                    lambda: turn_over(by_token) or by_token.ended_at, 30, "the turn to end"
                )
                assert by_token.ended_at is None, by_token.names()
                await still_streams(
                    by_token, lambda text: post_with_token(server, conversation["id"], token, text)
                )
                assert by_token.ended_at is None
            await by_token.close()
            await socket.close()
            return {"frames_after_commit": frames_after, "close": socket.closed_at - committed}

    result = run(scenario())
    print(f"\n{how}: {result}")


def test_a_revoked_token_ends_its_streams_within_2_s_and_the_session_lives_on(server):
    username = "revoker"
    make_user(server, username)

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            session = await log_in(http, username, f"pw-{username}-123")
            token, token_id = await token_for(server, http)
            conversation, socket, by_session, by_token = await open_all(
                server, http, session, token
            )
            response = await csrf_post(http, f"/settings/tokens/{token_id}/revoke/")
            assert response.status_code == 302
            committed = time.time()
            await eventually(lambda: by_token.ended_at, 5, "the token's stream to end")
            assert_stream_ended_in_time(by_token, committed)
            # The person who acted keeps their session: its stream and websocket carry the
            # next message. The token is refused from now on.
            text = await still_streams(
                by_session, lambda text: post_with_session(http, conversation["id"], text)
            )
            await eventually(
                lambda: any(text in m for m in socket.messages), 10, "the websocket's push of it"
            )
            assert socket.close_code is None and by_session.ended_at is None
            async with http_without_cookies(server) as bare:
                refused = await bare.get(
                    "/api/v1/conversations", headers={"Authorization": f"Bearer {token}"}
                )
            assert refused.status_code == 401
            await by_session.close()
            await socket.close()

    run(scenario())


def test_the_websocket_origin_must_match_scheme_host_and_port(server):
    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            session = await log_in(http)
            token, _ = await token_for(server, http)
            api = {"Authorization": f"Bearer {token}"}
            conversation = (await http.post("/api/v1/conversations", json={}, headers=api)).json()
            path = f"/ws/conversations/{conversation['id']}/"
            cookie = f"sessionid={session}"
            port = server.url.rsplit(":", 1)[1]
            for origin in [
                "http://127.0.0.1:9999",
                f"https://127.0.0.1:{port}",
                f"http://localhost:{port}",
                "null",
            ]:
                with pytest.raises(HandshakeRefused) as refused:
                    await WebSocket.connect(server.url, path, {"Origin": origin, "Cookie": cookie})
                assert " 403 " in refused.value.status_line, (origin, refused.value.status_line)
            socket = await WebSocket.connect(
                server.url, path, {"Origin": server.url, "Cookie": cookie}
            )
            assert socket.close_code is None
            await socket.close()

    run(scenario())
