"""`manage.py chat`'s run: list the conversations, or open one and start a session in it."""

import httpx
from django.core.management.base import CommandError

from terminal.api import Api
from terminal.conversation import Conversation
from terminal.render import Screen, listing_line
from terminal.session import Session


def run(
    screen: Screen,
    *,
    server: str,
    token: str,
    conversation: int | None,
    new: bool,
    list_only: bool,
    title: str,
) -> None:
    """Talk to `server` under `token` until the session ends; a server that cannot be reached
    ends it with a CommandError."""
    api = Api(server, token)
    try:
        if list_only:
            list_conversations(api, screen)
        else:
            detail = open_conversation(api, conversation=conversation, new=new, title=title)
            Session(Conversation(api, screen, detail["id"])).run(detail)
    except httpx.HTTPError as error:
        raise CommandError(f"Cannot reach the server: {error}") from None
    finally:
        api.close()


def list_conversations(api: Api, screen: Screen) -> None:
    conversations = api.call("GET", "/conversations")
    waiting = {q["conversationId"] for q in api.call("GET", "/questions")}
    if not conversations:
        screen.out.write("No conversations yet: start one with --new.")
        return
    for conversation in conversations:
        screen.out.write(listing_line(conversation, conversation["id"] in waiting))


def open_conversation(api: Api, *, conversation: int | None, new: bool, title: str) -> dict:
    """--conversation, --new, or else the most recent conversation (a new one only when
    there is none)."""
    if conversation is not None:
        return api.call("GET", f"/conversations/{conversation}")
    if not new:
        recent = api.call("GET", "/conversations")
        if recent:
            return api.call("GET", f"/conversations/{recent[0]['id']}")
    return api.call("POST", "/conversations", {"title": title})
